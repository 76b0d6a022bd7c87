"""The k-of-t chi-square bound and its inverse (private; public via :mod:`pacpriv.dpsgd.k_of_t`).

Per epoch ``1 + χ²(Q‖P) = Σ_h P(H = h) e^{h/σ²}``, ``H ~ Hypergeometric(t, k, k)`` (derivation
in docs/guide/k_of_t.md, §3); it tensorises over epochs and
``accuracy ≤ ½ + ¼·sqrt((1 + χ²)^E − 1)``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from pacpriv._validation import check_int, check_real

__all__ = ["k_of_t_accuracy", "k_of_t_log1p_chi_square", "k_of_t_noise_multiplier"]

_EPS = float(np.finfo(np.float64).eps)
_U = 2.0**-53


def _log_hypergeom_pmf(t: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``h = 0..k``, ``ln P(H = h)`` and a bound on each value's absolute round-off, for
    H ~ Hypergeometric(t, k, k) with ``2k ≤ t``.

    Without ``gammaln`` differences (which cancel for large t): ``ln P(0) = Σ_{i<k}
    ln(1 − k/(t − i))`` (``log1p``, k terms of one sign) and the exact ratios
    ``P(h + 1)/P(h) = (k − h)²/((h + 1)(t − 2k + h + 1))``, accumulated by ``cumsum``.
    """
    i = np.arange(k, dtype=np.float64)
    terms = np.log1p(-k / (t - i))
    log_p0 = float(np.sum(terms))
    h = np.arange(k + 1, dtype=np.float64)
    j = h[:-1]
    steps = 2.0 * np.log(k - j) - np.log(j + 1.0) - np.log(t - 2.0 * k + j + 1.0)
    log_p = log_p0 + np.concatenate(([0.0], np.cumsum(steps)))
    # recursive sums: |error| <= n·u·Σ|x| (Higham §4.2) plus a few ulps per term
    err0 = (k + 4.0) * _U * abs(log_p0) + 4.0 * _U * float(np.sum(np.abs(terms)))
    step_err = np.concatenate(([0.0], np.cumsum(8.0 * _U * (np.abs(steps) + 1.0))))
    sum_err = (h + 2.0) * _U * (np.abs(log_p) + abs(log_p0))
    return h, log_p, err0 + step_err + sum_err


def _log_expm1(z: np.ndarray) -> np.ndarray:
    """``ln(e^z − 1)`` for z > 0, without overflow."""
    return z + np.log(-np.expm1(-z))


def k_of_t_log1p_chi_square(noise_multiplier: float, *, steps_per_epoch: int, k: int) -> float:
    """Upper bound on ``ln(1 + χ²(Q‖P))`` per epoch for k-of-t allocation (nats).

    ``1 + χ² = E e^{H/σ²}``. For ``2k > t`` the complements of the subsets are uniform
    ``(t − k)``-subsets and ``H = 2k − t + H'``, ``H' ~ Hypergeometric(t, t − k, t − k)``, so
    ``ln(1 + χ²) = (2k − t)/σ² + ln E e^{H'/σ²}``. Then ``χ'² = Σ_{h ≥ 1} P(H' = h)
    (e^{h/σ²} − 1)`` (positive terms, no cancellation) in log space; the result is raised by
    the weighted mean of the terms' round-off bounds (the log of a sum moves by at most that)
    plus a few ulps (checked against mpmath in the tests).

    Parameters
    ----------
    noise_multiplier : float
        σ > 0.
    steps_per_epoch, k : int
        ``t ≥ 1`` and ``1 ≤ k ≤ t``.

    Returns
    -------
    float
        ``ln(1 + χ²)`` per epoch, rounded up; ``k = 1`` gives ``ln(1 + (e^{1/σ²} − 1)/t)``.
    """
    s = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)
    t = check_int(steps_per_epoch, "steps_per_epoch", low=1)
    k = check_int(k, "k", low=1, high=t)
    x = math.inf if s < 1e-154 else 1.0 / (s * s)
    if not math.isfinite(x):
        return math.inf
    shift, kk = (2 * k - t, t - k) if 2 * k > t else (0, k)
    base = shift * x * (1.0 + 2.0 * _EPS)
    if kk == 0:
        return base
    h, log_p, err = _log_hypergeom_pmf(t, kk)
    h, log_p, err = h[1:], log_p[1:], err[1:]
    log_terms = log_p + _log_expm1(h * x)
    log_chi2 = float(special.logsumexp(log_terms))
    weights = np.exp(log_terms - log_chi2)
    margin = float(np.dot(weights, err + (4.0 + 2.0 * h * x) * _EPS)) + 8.0 * _EPS
    return base + float(np.logaddexp(0.0, log_chi2 + margin)) * (1.0 + 4.0 * _EPS)


def k_of_t_accuracy(noise_multiplier: float, *, steps_per_epoch: int, epochs: int,
                    k: int) -> tuple[float, float, bool]:
    """``(accuracy bound, ln(1 + χ²_total), vacuous)`` of the k-of-t chi-square bound."""
    e = check_int(epochs, "epochs", low=1)
    per = k_of_t_log1p_chi_square(noise_multiplier, steps_per_epoch=steps_per_epoch, k=k)
    total = e * per * (1.0 + 2.0 * _EPS)
    if total >= math.log(5.0):
        return 1.0, total, True
    adv = 0.25 * math.sqrt(math.expm1(total)) * (1.0 + 8.0 * _EPS)
    return min(1.0, math.nextafter(0.5 + adv, 2.0)), total, False


def k_of_t_noise_multiplier(target_accuracy: float, *, steps_per_epoch: int, epochs: int,
                            k: int) -> float:
    """Smallest σ (to 1e-12 relative, on the safe side) whose k-of-t chi-square bound is at
    most ``target_accuracy``: a monotone root find in ``ln σ`` (Brent).

    The bracket is ``[σ_J, σ_S]``: Jensen (``E e^{xH} ≥ e^{x E H}``, ``E H = k²/t``) makes
    the bound exceed the target below ``σ_J = sqrt(E k²/(t·ln(1 + 16(a − ½)²)))``, and the
    stratified pair (``(1 + (e^x − 1)/⌊t/k⌋)^k`` per epoch, larger) meets it at its closed
    form ``σ_S``. The root is then nudged up until the bound is at most the target.
    """
    a = check_real(target_accuracy, "target_accuracy", low=0.5, high=1.0,
                   low_inclusive=False, high_inclusive=False)
    t = check_int(steps_per_epoch, "steps_per_epoch", low=1)
    e = check_int(epochs, "epochs", low=1)
    k = check_int(k, "k", low=1, high=t)
    goal = math.log1p(16.0 * (a - 0.5) ** 2)
    # the stratified pair's closed form (bounds.closed_form_noise_multiplier at (⌊t/k⌋, kE))
    hi = 1.0 / math.sqrt(math.log1p((t // k) * math.expm1(goal / (k * e))))
    lo = math.sqrt(e * k * k / (t * goal)) if goal > 0 else hi
    lo = min(lo, hi) * (1.0 - 1e-9)

    def f(ls: float) -> float:
        per = k_of_t_log1p_chi_square(math.exp(ls), steps_per_epoch=t, k=k)
        return e * per - goal

    if f(math.log(hi)) > 0:  # cannot happen (the stratified chi-square is larger); be safe
        while f(math.log(hi)) > 0:
            hi *= 1.01
    if f(math.log(lo)) <= 0:
        root = lo
    else:
        root = math.exp(optimize.brentq(f, math.log(lo), math.log(hi), xtol=1e-14,
                                        rtol=4 * _EPS))
    while k_of_t_accuracy(root, steps_per_epoch=t, epochs=e, k=k)[0] > a:
        root *= 1.0 + 1e-12
    return root
