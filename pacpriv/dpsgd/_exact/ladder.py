"""The refinement ladder of one exact evaluation (private helper of :mod:`pacpriv.dpsgd.exact`).

Every attempt is a certified discretisation (``numeric_once``); the ladder only chooses the
resolutions and the precision, so it changes the time and the width, never the soundness:

* the linear lattice's first resolution comes from a width prediction in the public inputs
  (:func:`linear_first_c`), so that one attempt meets the tolerance where the tolerance's
  rule alone (``c = 40·sqrt(1e-4/tol)``) would miss it and need a second;
* a chain that needed long double in one attempt starts there in the next, finer one (its
  float64 round-off grew with the lattice at every point measured): no float64 pass that
  would fail;
* on the geometric grid the first jump from the cheap probe is capped at 4 at tolerance
  1e-4 and above, longer below it (the probe's resolution rises more slowly than the
  needed one).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

#: geometric refinements: aim at this fraction of the tolerance, assuming the width shrinks
#: like c^-GEO_ORDER (measured 1.7–2.0), with at most a factor 4 after the first attempt
#: (a cheap probe far from the tolerance) and GEO_MAX_JUMP after later ones
GEO_AIM = 0.8
GEO_ORDER = 1.7
GEO_MAX_JUMP = 16.0
#: ... the first jump's cap, 4 at tolerance 1e-4, grows like tol^-(1/1.7 − 1/4)
GEO_PROBE_GAP = 1.0 / GEO_ORDER - 0.25
#: no refinement whose predicted CPU time exceeds this (seconds)
MAX_ATTEMPT_S = 120.0


#: linear lattice: predicted width ``K(M)·φ(z)·z·g/c²`` (see :func:`linear_first_c`), with
#: ``K(M) = max(1.2, 0.15 + 0.14·log₂M)`` above every K measured at c = 40 on 28 points
#: (M 10–1e5, E 1–1e4, σ 0.55–63: K from 0.92 at M = 100 to 2.3 at M = 1e5)
_LIN_KMIN, _LIN_K0, _LIN_K1 = 1.2, 0.15, 0.14
#: ... and the first grid aims at this fraction of the tolerance
_LIN_AIM = 0.6


def linear_first_c(sigma: float, steps: int, epochs: int, tol: float, c: float) -> float:
    """First resolution of the linear lattice: ``c`` (the tolerance's rule), raised to where
    the predicted width meets ``_LIN_AIM·tol`` (at most 4x, as one refinement would).

    Each chain's mean-keeping split (upper) or quantisation (lower) changes the variance of
    ``T`` by a fixed fraction of order ``1/c²`` (the step is ``2·sd(W)/c``), i.e. ``ln μ`` of
    the Gaussian limit (``μ² = E·ln(1 + χ²)``, ``χ² = (e^{1/σ²} − 1)/M``) by ``O(g/c²)`` with
    ``g = χ²/((1 + χ²)·ln(1 + χ²))``, and the accuracy ``Φ(μ/2)`` by ``φ(z)·z`` times that
    (``z = μ/2``). The prediction only chooses the first grid (one attempt where the rule's
    grid would miss the tolerance and need a second); every grid is certified.
    """
    s2 = 1.0 / (sigma * sigma)
    if s2 > 700.0:
        return c
    chi2 = math.expm1(s2) / steps
    log1p_chi2 = math.log1p(chi2)
    if not log1p_chi2 > 0.0:
        return c
    z = 0.5 * math.sqrt(epochs * log1p_chi2)
    g = chi2 / ((1.0 + chi2) * log1p_chi2)
    k = max(_LIN_KMIN, _LIN_K0 + _LIN_K1 * math.log2(steps))
    width40 = k * math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi) * z * g
    return float(min(max(c, math.sqrt(width40 / (_LIN_AIM * tol))), 4.0 * c, 4096.0))


def spread(sigma: float, steps: int) -> float:
    """Spread of ln T per epoch, ``sqrt(ln(1 + χ²))`` (wide: the geometric grid)."""
    s2 = 1.0 / (sigma * sigma)
    log1p_chi2 = math.log1p(math.expm1(s2) / steps) if s2 < 700 else s2 - math.log(steps)
    return math.sqrt(max(log1p_chi2, 0.0))


def _factor(method: str, attempt: int, width: float, tol: float) -> float:
    """Resolution factor of the next attempt."""
    if method == "hybrid":  # width ~ 1/c²: jump to the c meeting tol
        return min(4.0, max(1.3, 1.15 * math.sqrt(width / tol)))
    if method == "geometric":
        # width ~ c^-1.7 … c^-2 (measured): one jump to the c that meets GEO_AIM·tol (the
        # first attempt is a cheap probe; intermediate attempts cost ~c^2.2). The probe's
        # resolution rises like tol^-¼ (exact._scalar_once), the needed one like
        # tol^(-1/1.7): below the default tolerance 1e-4 the first jump may be longer
        cap = (min(GEO_MAX_JUMP, 4.0 * max(1.0, 1e-4 / tol) ** GEO_PROBE_GAP)
               if attempt == 0 else GEO_MAX_JUMP)
        return min(cap, max(1.3, (width / (GEO_AIM * tol)) ** (1.0 / GEO_ORDER)))
    return min(4.0, 1.2 * math.sqrt(width / tol))


def refine(numeric_once: Callable[..., dict | None], point: tuple[float, int, int], *,
           tol: float, direction: str, refinements: int, tick, method: str,
           grid: tuple[float, float, float], bounds: tuple[float, float], tail: float,
           fallback: bool, geo_c: float) -> tuple[tuple[float, float, dict], str]:
    """``((lower, upper, details) of the narrowest attempt, method)``.

    ``fallback``: a linear lattice whose first attempt would need long-double FFTs (its float64
    pass says so; ``numeric_once`` returns None) gives way to the geometric grid, starting at
    ``geo_c`` points per unit (both are certified; only the time differs).
    """
    sigma, steps, n_epochs = point
    c, c_epoch, extra = grid
    lower, upper = bounds
    best = None
    extended = (False, False)  # a finer attempt's chains start in long double where needed
    for attempt in range(refinements + 1):
        t_attempt = time.process_time()
        kw = dict(c=c, c_epoch=c_epoch, extra=extra, direction=direction, tail=tail, tol=tol,
                  tick=tick, start_extended=extended)
        res = numeric_once(sigma, steps, n_epochs, method=method, long_fallback=fallback, **kw)
        if res is None:
            method, c = "geometric", geo_c
            kw["c"] = c
            res = numeric_once(sigma, steps, n_epochs, method=method, **kw)
            assert res is not None
        fallback = False
        extended = (bool(res.get("extended_precision_upper")),
                    bool(res.get("extended_precision_lower")))
        res["attempt"] = attempt
        res["extra"] = extra
        lo_a = max(lower, 0.5 + 0.5 * res["tv_lower_numerical"])
        up_a = min(upper, 0.5 + 0.5 * res["tv_upper_numerical"])
        if best is None or up_a - lo_a < best[1] - best[0]:
            best = (lo_a, up_a, res)
        width = up_a - lo_a
        if width <= tol:
            break
        factor = _factor(method, attempt, width, tol)
        # bounded time: the cost of an attempt grows like c² (geometric) or c (linear);
        # measured in CPU time, so that the result does not depend on the machine's load
        # (hybrid: a finer linear lattice also moves the switch up, where the geometric grid
        # must be finer too: about c³)
        power = {"linear": 1.2, "hybrid": 3.0}.get(method, 2.2)
        if (time.process_time() - t_attempt) * factor**power > MAX_ATTEMPT_S:
            break
        c, c_epoch, extra = c * factor, c_epoch * factor, extra + 2.0
    assert best is not None  # the loop runs at least once (refinements >= 0)
    return best, method
