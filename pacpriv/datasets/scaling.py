"""Min-max scaling to ``[-1, 1]`` with *public* feature ranges: written once (a leaf).

The built-in mechanisms (:mod:`pacpriv.registry`) and the PAC vs DP-SGD comparison
(:mod:`pacpriv.compare`) scale features with the published (or declared public) ranges of a
dataset, never with statistics of the private pool: the map is a public constant of the
mechanism, so it leaks nothing about which records were used.
"""

from __future__ import annotations

import numpy as np

__all__ = ["scale_to_unit_box", "unit_box"]


def unit_box(low, high) -> tuple[np.ndarray, np.ndarray]:
    """``(center, half_width)`` of the affine map ``x ↦ (x − center)/half_width`` onto [−1, 1].

    Parameters
    ----------
    low, high : array_like of shape (p,)
        Public per-feature ranges, ``low <= high``.

    Returns
    -------
    center, half_width : ndarray of shape (p,), float64
        ``(low + high)/2`` and ``(high − low)/2``; a constant feature gets half-width 1
        (it maps to 0 at its value instead of dividing by zero).
    """
    low = np.asarray(low, dtype=np.float64)
    high = np.asarray(high, dtype=np.float64)
    half = (high - low) / 2.0
    return (low + high) / 2.0, np.where(half > 0, half, 1.0)


def scale_to_unit_box(X, low, high) -> np.ndarray:
    """Min-max scale ``X`` of shape (n, p) to ``[-1, 1]`` with public ranges.

    Values outside the ranges are clipped to ``[-1, 1]``; constant features map to 0.

    Examples
    --------
    >>> scale_to_unit_box([[0.0, 6.0, 1.0], [10.0, 9.0, 3.0]], [0, 5, 1], [10, 7, 1]).tolist()
    [[-1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    """
    X = np.asarray(X, dtype=np.float64)
    center, half = unit_box(low, high)
    constant = np.asarray(high, dtype=np.float64) <= np.asarray(low, dtype=np.float64)
    out = np.where(constant, 0.0, (X - center) / half)
    return np.clip(out, -1.0, 1.0)
