"""Small statistics shared by the attacks and the empirical check (a leaf)."""

from __future__ import annotations

from scipy import stats

__all__ = ["clopper_pearson"]


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
