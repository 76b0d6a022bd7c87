"""Root search of the exact noise calibration: few evaluations, coarse far from the root.

Private helper of :mod:`pacpriv.dpsgd.calibration`. With ``x = ln σ`` and
``z(x) = Φ⁻¹(accuracy)``, ``z`` is close to linear in ``x`` near the root (in the Gaussian
limit ``Φ⁻¹(accuracy) = μ(σ)/2`` with ``ln μ`` smooth in ``ln σ``), so

1. *coarse*: secant steps on the interval midpoints ``z(estimate)`` at a tolerance several
   times the final one (cheap grids) locate the root and the slope ``dz/dx``;
2. *certify*: the public evaluation (``certify``) at the located root times ``(1 + rtol/2)``
   is kept when its certified upper accuracy is at most the target and a Newton step from
   its midpoint (with the coarse slope) puts the root at most ``0.8·rtol`` below it: one
   tight evaluation in all. Otherwise the Newton root times ``(1 + rtol/2)`` is certified
   (nudged up by ``rtol/4`` until its upper end is at most the target): two. On the linear
   lattice, whose public evaluation starts at a costly first grid, and for search
   tolerances below 1e-4 (targets near ½), a warm tight evaluation
   ``0.75·rtol`` below the located root and its Newton step come first instead;
3. *bracket*: an evaluation ``1.1·rtol`` below the root, at the coarsest tolerance the
   located slope allows, whose certified lower end is above the target gives the caller's
   ``lower_noise_multiplier`` (otherwise a tight one at the root times ``(1 − rtol/2)``).

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
#: below this search tolerance the warm tight evaluation comes first, as on the linear lattice
_ONE_SHOT_MIN_TOL = 1e-4 * (1.0 - 1e-9)
#: linear lattice: the warm tight evaluation is this many times rtol below the located root
_BELOW = 0.75
#: accept the public evaluation at the located root times (1 + rtol/2) when the Newton step
#: puts the root at most this many times rtol below it
_ACCEPT = 0.8
#: ... and look for the bracket's lower end (an evaluation at the tolerance the slope allows)
#: this many times rtol below the root
_LOWER_STEP = 1.1


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
    last = None
    for _ in range(_COARSE_STEPS):
        last = evaluate(math.exp(x), tol_c)
        z = _z(last)
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
    ctx = (target, rel, tol, x_cap, slope, evaluate, certify)
    # the one-evaluation order pays off where the public evaluation is cheap to start
    # (a geometric probe) and the coarse midpoints locate the root well (tolerance 1e-4:
    # nearer ½ the coarse grids' noise is larger relative to the target's distance from ½)
    if getattr(last, "details", {}).get("method") == "linear" or tol < _ONE_SHOT_MIN_TOL:
        return _below_then_certify(ctx, x)
    return _certify_then_below(ctx, x, tol_c)


def _nudged(sigma: float, target: float, rel: float, certify) -> tuple[float, object] | None:
    """``(σ, certify(σ))`` for the first σ, nudged up by ``rtol/4`` steps, with
    ``upper ≤ target``; None after ``_NUDGES`` tries."""
    for _ in range(_NUDGES):
        res = certify(sigma)
        if float(res.upper) <= target:  # type: ignore[attr-defined]
            return sigma, res
        sigma *= 1.0 + 0.25 * rel
    return None


def _below_then_certify(ctx: tuple, x: float) -> tuple[float, object] | None:
    """Linear lattice (the public evaluation's first grid is the costly one there): a warm
    tight evaluation ``0.75·rtol`` below the located root, its Newton step, then the public
    evaluation at the root times ``(1 + rtol/2)``; the tight one's certified lower end is
    usually above the target (the bracket's lower end), else one more at ``(1 − rtol/2)``."""
    target, rel, tol, x_cap, slope, evaluate, certify = ctx
    z_t = float(special.ndtri(target))
    x = min(x, x_cap) - _BELOW * rel
    res_c = evaluate(math.exp(x), tol)
    z_c = _z(res_c)
    if z_c is None:
        return None
    root = min(x + (z_t - z_c) / slope, x_cap)
    found = _nudged(math.exp(root) * (1.0 + 0.5 * rel), target, rel, certify)
    if found is not None:
        below = float(res_c.lower) > target  # type: ignore[attr-defined]
        if not (below and found[0] / math.exp(x) - 1.0 < 1.5 * rel):
            evaluate(math.exp(root) * (1.0 - 0.5 * rel), tol)
    return found


def _certify_then_below(ctx: tuple, x: float, tol_c: float) -> tuple[float, object] | None:
    """One tight evaluation, the public one, at the located root times ``(1 + rtol/2)``: kept
    when certified and the Newton step from its midpoint puts the root at most
    ``_ACCEPT·rtol`` below it; else the Newton root times ``(1 + rtol/2)``, nudged up until
    certified. Then the bracket's lower end (see the module docstring)."""
    target, rel, tol, x_cap, slope, evaluate, certify = ctx
    z_t = float(special.ndtri(target))
    x1 = min(x + 0.5 * rel, x_cap)
    res = certify(math.exp(x1))
    z1 = _z(res)
    if z1 is None:
        return None
    root = min(x1 + (z_t - z1) / slope, x_cap)
    found: tuple[float, object] | None = (math.exp(x1), res)
    if not (float(res.upper) <= target  # type: ignore[attr-defined]
            and 0.0 <= x1 - root <= _ACCEPT * rel):
        found = _nudged(math.exp(root) * (1.0 + 0.5 * rel), target, rel, certify)
        if found is None:
            return None
    # the bracket's lower end (an evaluation below the root whose certified lower end is
    # above the target shows that no accountant knowing (M, E, σ) certifies a σ that small):
    # one _LOWER_STEP·rtol below the root at the tolerance that the located slope says
    # separates it from the target, else a tight one rtol/2 below
    d_acc = abs(slope) * math.exp(-0.5 * z_t * z_t) / math.sqrt(2.0 * math.pi) * rel
    below = evaluate(math.exp(root - _LOWER_STEP * rel),
                     min(tol_c, max(tol, 1.2 * _LOWER_STEP * d_acc)))
    if float(below.lower) <= target:  # type: ignore[attr-defined]
        evaluate(math.exp(root) * (1.0 - 0.5 * rel), tol)
    return found
