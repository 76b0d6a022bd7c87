"""Small statistics shared by the attacks, the empirical check and the certified bounds (a leaf)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

__all__ = ["clopper_pearson", "clopper_pearson_upper", "empirical_bernstein"]


def clopper_pearson(k: int, n: int, confidence: float) -> tuple[float, float]:
    """Exact two-sided Clopper–Pearson interval for a binomial proportion ``k / n``.

    Parameters
    ----------
    k, n : int
        Successes and trials, ``0 <= k <= n``, ``n >= 1``.
    confidence : float
        Two-sided confidence level in (0, 1).

    Returns
    -------
    (low, high) : tuple of float
        Bounds in [0, 1] with coverage at least ``confidence`` for every true proportion.

    References
    ----------
    .. [1] C. J. Clopper, E. S. Pearson. The use of confidence or fiducial limits illustrated in
       the case of the binomial. Biometrika 26(4), 1934.

    Examples
    --------
    >>> low, high = clopper_pearson(5, 10, 0.95)
    >>> round(low, 4), round(high, 4)
    (0.1871, 0.8129)
    """
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def clopper_pearson_upper(k: int, n: int, alpha: float) -> float:
    """Exact one-sided Clopper–Pearson upper limit for a binomial proportion ``k / n``.

    ``P(Bin(n, p) <= k) >= alpha`` for every ``p`` above it: the upper end of the two-sided
    interval of :func:`clopper_pearson` at confidence ``1 − 2·alpha``.

    Parameters
    ----------
    k, n : int
        Successes and trials, ``0 <= k <= n``, ``n >= 1``.
    alpha : float
        One-sided error probability in (0, 1).

    Returns
    -------
    float
        ``Beta(1 − alpha; k + 1, n − k)`` quantile, and 1 at ``k = n``.

    References
    ----------
    .. [1] Clopper & Pearson, Biometrika 26(4), 1934.

    Examples
    --------
    >>> round(clopper_pearson_upper(5, 10, 0.025), 4)
    0.8129
    """
    if k >= n:
        return 1.0
    return float(stats.beta.ppf(1.0 - alpha, k + 1, n - k))


def empirical_bernstein(mean: Any, variance: Any, n: int, *, width: float, delta: float) -> Any:
    """Maurer–Pontil one-sided upper confidence bound of a mean (written once for pacpriv).

    For ``n >= 2`` i.i.d. values in an interval of length ``width``, with sample mean ``mean``
    and unbiased sample variance ``variance``, with probability ``>= 1 − delta``

        ``E Z <= mean + sqrt(2 variance ln(2/δ) / n) + 7 width ln(2/δ) / (3(n − 1))``.

    Elementwise for arrays (one bound per column). No validation and no rounding: the callers
    check their inputs and round on the safe side themselves.

    References
    ----------
    .. [1] A. Maurer, M. Pontil. Empirical Bernstein bounds and sample variance penalization.
       COLT 2009, Thm 4.

    Examples
    --------
    >>> z = [0.0, 1.0] * 50  # mean 0.5, unbiased variance 25/99
    >>> round(float(empirical_bernstein(0.5, 25 / 99, len(z), width=1.0, delta=0.05)), 6)
    0.723438
    """
    log_term = math.log(2.0 / delta)
    return (mean + np.sqrt(2.0 * variance * log_term / n)
            + 7.0 * width * log_term / (3.0 * (n - 1)))
