"""Small statistics shared by the attacks, the empirical check and the certified bounds (a leaf)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

__all__ = ["clipping_problem", "clopper_pearson", "empirical_bernstein"]


def clopper_pearson(
    k: int, n: int, confidence: float, *, alternative: str = "two-sided"
) -> tuple[float, float]:
    """Exact Clopper–Pearson interval for a binomial proportion ``k / n``.

    Parameters
    ----------
    k, n : int
        Successes and trials, ``0 <= k <= n``, ``n >= 1``.
    confidence : float
        Confidence level in (0, 1).
    alternative : {"two-sided", "less"}, default "two-sided"
        ``"two-sided"``: the central interval (each tail at most ``(1 − confidence)/2``).
        ``"less"``: the one-sided interval ``(0, high)`` for ``H₁: p < high``, with
        ``high = Beta(confidence; k + 1, n − k)`` quantile (1 at ``k = n``), so that
        ``P(Bin(n, p) <= k) <= 1 − confidence`` for every ``p`` above it.

    Returns
    -------
    (low, high) : tuple of float
        Bounds in [0, 1] with coverage at least ``confidence`` for every true proportion;
        ``low = 0`` for ``alternative="less"``.

    Raises
    ------
    ValueError
        If ``alternative`` is not one of the two values.

    References
    ----------
    .. [1] C. J. Clopper, E. S. Pearson. The use of confidence or fiducial limits illustrated in
       the case of the binomial. Biometrika 26(4), 1934.

    Examples
    --------
    >>> low, high = clopper_pearson(5, 10, 0.95)
    >>> round(low, 4), round(high, 4)
    (0.1871, 0.8129)
    >>> low, high = clopper_pearson(5, 10, 0.975, alternative="less")
    >>> low, round(high, 4)
    (0.0, 0.8129)
    """
    if alternative == "less":
        # the Beta quantile directly (scipy's one-sided binomtest interval is a root-finder)
        return 0.0, (1.0 if k >= n else float(stats.beta.ppf(confidence, k + 1, n - k)))
    if alternative != "two-sided":
        raise ValueError(
            f"`alternative` must be 'two-sided' or 'less'; got {alternative!r}."
        )
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


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


#: Rows read at a time by :func:`clipping_problem` (its memory is one block, not the pool).
_CLIP_BLOCK_ROWS = 65_536


def clipping_problem(X: np.ndarray, low, high, *, what: str,
                     names: tuple[str, ...] | None = None) -> str | None:
    """A coarse sentence when public ranges ``[low, high]`` move most of the pool, else ``None``.

    Flags (a) any column whose every value lies outside its range, and (b) more than half of
    the values of the bounded columns (those with a finite end) lying outside. The sentence
    names the columns and ``what`` (the ranges' public name) only: no count, no value.
    ``X`` has shape ``(n, p)``; ``low``, ``high`` broadcast to ``(p,)``; NaN counts as inside.
    """
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        return None
    p = X.shape[1]
    lo = np.broadcast_to(np.asarray(low, dtype=np.float64), (p,))
    hi = np.broadcast_to(np.asarray(high, dtype=np.float64), (p,))
    bounded = np.isfinite(lo) | np.isfinite(hi)
    if not bounded.any():
        return None
    every = np.ones(p, dtype=bool)
    moved = 0
    for start in range(0, X.shape[0], _CLIP_BLOCK_ROWS):
        block = np.asarray(X[start:start + _CLIP_BLOCK_ROWS], dtype=np.float64)
        out = (block < lo) | (block > hi)
        every &= out.all(axis=0)
        moved += int(out[:, bounded].sum())
    if every.any():
        cols = [repr(names[j]) if names and j < len(names) else str(j)
                for j in np.flatnonzero(every)]
        shown = ", ".join(cols[:3]) + (f" and {len(cols) - 3} more" if len(cols) > 3 else "")
        noun = "column" if len(cols) == 1 else "columns"
        return (f"every value of {noun} {shown} lies outside {what}: clipping moves them all "
                "to a range end, so the release carries little information about "
                f"{'it' if len(cols) == 1 else 'them'} (it stays sound: the ranges are public)")
    if 2 * moved > X.shape[0] * int(bounded.sum()):
        return (f"more than half of the pool's values lie outside {what} and are clipped: "
                "the release carries little information (it stays sound: the ranges are "
                "public)")
    return None
