"""Root search of the exact noise calibration: few evaluations, coarse far from the root.

Private helper of :mod:`pacpriv.dpsgd.calibration`. With ``x = ln σ`` and
``z(x) = Φ⁻¹(accuracy)``, ``z`` is close to linear in ``x`` near the root (in the Gaussian
limit ``Φ⁻¹(accuracy) = μ(σ)/2`` with ``ln μ`` smooth in ``ln σ``), so

1. *coarse*: secant steps on the interval midpoints ``z(estimate)`` at a tolerance several
   times the final one (cheap grids) locate the root and the slope ``dz/dx``;
2. *tight*: one evaluation at the located root times ``(1 − 3·rtol/4)`` and one Newton step
   with that slope give the root to about the final tolerance;
3. *certify*: the returned σ is that root times ``(1 + rtol/2)``, accepted only when its
   certified upper accuracy (``certify``: the caller's public evaluation) is at most the
   target (nudged up by ``rtol/4`` otherwise); the tight evaluation of step 2 usually
   certifies a lower end above the target (the caller's ``lower_noise_multiplier``),
   otherwise one more evaluation at the root times ``(1 − rtol/2)`` does.

Every returned σ is certified by an evaluation at that σ; the search only chooses where to
evaluate. It gives up (returns None) when the midpoints leave (½, 1) or it runs out of steps;
the caller then bisects.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy import special

__all__ = ["search_root"]

_COARSE_STEPS = 6
_NUDGES = 8
_COARSE_FACTOR = 8.0  # coarse tolerance: this many times the final one (at most 1e-3)
#: the coarse steps stop once a secant step moves ln σ by less than this times rtol (the
#: tight Newton step then corrects the rest)
_COARSE_STOP = 0.5
#: the tight evaluation is this many times rtol below the located root (in ln σ)
_BELOW = 0.75


def _z(res) -> float | None:
    est = float(res.estimate)
    return float(special.ndtri(est)) if 0.5 < est < 1.0 else None


def search_root(
    target: float, sigma_cf: float, rel: float, tol: float,
    evaluate: Callable[[float, float], object], model_root: Callable[[float, float], float],
    x0: float, certify: Callable[[float], object] | None = None,
) -> tuple[float, object] | None:
    """``(σ, result at σ)`` with ``result.upper ≤ target`` and σ about ``(1 + rtol/2)`` times
    the root, or None. ``evaluate(σ, tol)`` returns an ExactAccuracy-like result; ``certify(σ)``
    (default ``evaluate(σ, tol)``) the one the returned σ is accepted with."""
    if certify is None:
        def certify(s: float) -> object:
            return evaluate(s, tol)

    z_t = float(special.ndtri(target))
    x_cap = math.log(sigma_cf)
    tol_c = min(1e-3, max(tol, _COARSE_FACTOR * tol))
    pts: list[tuple[float, float]] = []
    x = min(x0, x_cap)
    for _ in range(_COARSE_STEPS):
        z = _z(evaluate(math.exp(x), tol_c))
        if z is None:
            return None
        pts.append((x, z))
        if len(pts) == 1:
            nxt = model_root(x, z)
        else:
            (xa, za), (xb, zb) = pts[-2], pts[-1]
            if zb == za:
                return None
            nxt = xb + (z_t - zb) * (xb - xa) / (zb - za)
        nxt = min(nxt, x_cap)
        if abs(nxt - x) < _COARSE_STOP * rel and len(pts) >= 2:
            x = nxt
            break
        x = nxt
    else:
        return None
    (xa, za), (xb, zb) = pts[-2], pts[-1]
    slope = (zb - za) / (xb - xa) if xb != xa else 0.0
    if not slope < 0:
        return None
    # the tight evaluation just below the located root: its Newton step gives the root, and
    # its certified lower end is usually above the target (the lower end of the bracket)
    x = min(x, x_cap) - _BELOW * rel
    res_c = evaluate(math.exp(x), tol)
    z_c = _z(res_c)
    if z_c is None:
        return None
    root = min(x + (z_t - z_c) / slope, x_cap)
    sigma = math.exp(root) * (1.0 + 0.5 * rel)
    for _ in range(_NUDGES):
        res = certify(sigma)
        if float(res.upper) <= target:  # type: ignore[attr-defined]
            # an evaluation just below the root whose certified lower end is above the target
            # shows that no accountant knowing (M, E, σ) certifies a σ that small
            below = float(res_c.lower) > target  # type: ignore[attr-defined]
            if not (below and sigma / math.exp(x) - 1.0 < 1.5 * rel):
                evaluate(math.exp(root) * (1.0 - 0.5 * rel), tol)
            return sigma, res
        sigma *= 1.0 + 0.25 * rel
    return None
