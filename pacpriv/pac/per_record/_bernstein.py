"""The Maurer–Pontil calibration of the per-record noise (``bound="bernstein"``; private).

Kept for comparison with the betting certificate (:mod:`pacpriv.pac.per_record._certificate`),
which needs far fewer trials at the same confidence (``benchmarks/per_record.py``).

For a *fixed* noise the Maurer–Pontil bounds hold with probability ``>= 1 − γ``. The calibrated
scale depends on the trials, so the plan is certified by :func:`uniform_max_upper`, a bound that
holds for **every** scale ``>= s`` at once: the accuracies ``acc(d_{t,i}/s')`` are non-increasing
in ``s'``, so on a box of scales ``[e_j, e_{j+1}]`` every sample lies between its values at the
two ends and :func:`~pacpriv.pac.per_record._math.box_bernstein_upper` dominates the bound of
each sample in the box; boxes cover ``[s, ∞)``. If the true maximum ``Aᵢ(s)`` exceeded the
target, the certified ``Aᵢ <= bound`` would fail at a fixed scale just below the true threshold,
an event of probability ``<= γ`` (union bound over records).

References
----------
.. [1] A. Maurer, M. Pontil. Empirical Bernstein bounds and sample variance penalization.
   COLT 2009, Thm 4.
"""

from __future__ import annotations

import math

import numpy as np

from pacpriv.exceptions import CalibrationError
from pacpriv.pac.per_record._math import bayes_accuracy, bernstein_upper, box_bernstein_upper

__all__ = ["bernstein_scale", "plain_max_upper", "uniform_max_upper"]


# noise-scale boxes for the uniform bound: fine near s, coarser further out, then [edge, ∞)
_BOX_RATIOS = np.concatenate([np.full(50, 1.002), np.full(50, 1.02), np.full(60, 1.2)])


def uniform_max_upper(distance: np.ndarray, scale: float, q: float, delta: float) -> float:
    """Max over records of an empirical-Bernstein bound valid for **every** scale ``>= scale``.

    ``distance`` (n, k) are Mahalanobis norms under ``Σ_shape``; the accuracy at scale ``s`` is
    ``acc(distance / s)``, non-increasing in ``s``. The scales ``[scale, ∞)`` are covered by
    boxes ``[e_j, e_{j+1}]`` and a last box ``[e_last, ∞)`` (accuracies in
    ``[baseline, acc(e_last)]``); :func:`box_bernstein_upper` bounds every sample in each box.
    """
    base = max(q, 1.0 - q)
    if scale <= 0:
        return 1.0 if np.any(distance > 0) else float(
            np.max(bernstein_upper(np.full(distance.shape, base), low=base, high=1.0,
                                   delta=delta)))
    edges = scale * np.concatenate([[1.0], np.cumprod(_BOX_RATIOS)])
    best = -np.inf
    hi = bayes_accuracy(distance / edges[0], q)
    for e in edges[1:]:
        lo = bayes_accuracy(distance / e, q)
        best = max(best, float(np.max(box_bernstein_upper(hi, lo, low=base, high=1.0,
                                                          delta=delta))))
        hi = lo
    tail = box_bernstein_upper(hi, np.full_like(hi, base), low=base, high=1.0, delta=delta)
    return max(best, float(np.max(tail)))


def plain_max_upper(distance: np.ndarray, scale: float, q: float, delta: float) -> float:
    base = max(q, 1.0 - q)
    with np.errstate(divide="ignore"):
        acc = bayes_accuracy(distance / scale, q) if scale > 0 else bayes_accuracy(
            np.where(distance > 0, np.inf, 0.0), q)
    return float(np.max(bernstein_upper(acc, low=base, high=1.0, delta=delta)))


def smallest_passing(crit, start: float, target: float, rtol: float = 1e-10) -> float:
    """Smallest ``s`` (to relative ``rtol``) with ``crit(s) <= target``, non-increasing ``crit``."""
    hi = start
    for _ in range(2200):
        if crit(hi) <= target:
            break
        hi *= 2.0
    else:  # pragma: no cover - the feasibility check rules this out
        raise CalibrationError("no noise scale reaches the target; this is a bug.")
    lo = hi / 2.0
    for _ in range(2200):
        if crit(lo) > target:
            break
        hi, lo = lo, lo / 2.0
        if lo < np.finfo(np.float64).tiny:
            return 0.0 if crit(0.0) <= target else hi
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        if crit(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def bernstein_scale(distance: np.ndarray, q: float, delta: float, target: float) -> float:
    """Smallest scale whose uniform Maurer–Pontil bound is ``<= target`` (0 if no signal).

    Bisection on the plain maximum bound, then the uniform bound (valid for every scale
    ``>= s``) is checked at the candidate and ``s`` is raised until it passes.
    """
    top = float(distance.max())
    if top == 0.0:
        return 0.0
    scale = smallest_passing(lambda s: plain_max_upper(distance, s, q, delta), top, target)
    if uniform_max_upper(distance, scale, q, delta) > target:
        start = scale
        scale = smallest_passing(
            lambda s: uniform_max_upper(distance, max(s, start), q, delta), start, target,
            rtol=1e-4)
        scale = max(scale, start)
    return scale
