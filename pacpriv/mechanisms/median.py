"""Clipped median: the coordinate-wise median of features clipped to public bounds.

Output
------
``ndarray`` of shape ``(p,)``, float64: ``median_i clip(x_ij, low_j, high_j)`` per feature
``j`` (the average of the two middle values for an even count, numpy's convention).

Public bounds
-------------
As for :mod:`mechanisms.mean`: the range must be public or computed from the whole pool, never
from the subset. :func:`clipped_median` uses the data-independent box ``[-1, 1]``.

Canonicalisation
----------------
The median is a symmetric, deterministic function of the records; ``rng`` is ignored.

Fallback
--------
An empty subset returns the midpoint ``(low + high) / 2`` of the public range.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._common import split_unsupervised
from .mean import ClippedMean, _tuple

__all__ = ["ClippedMedian", "clipped_median", "make_clipped_median"]


@dataclass(frozen=True)
class ClippedMedian(ClippedMean):
    """Coordinate-wise clipped median with public bounds (picklable callable)."""

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Clipped median of ``subset``, shape ``(p,)``; midpoint of the range if empty."""
        X = split_unsupervised(subset)
        lo, hi = self.bounds(X.shape[1])
        if X.shape[0] == 0:
            return (lo + hi) / 2.0
        return np.median(np.clip(X, lo, hi), axis=0)

    def to_dict(self) -> dict:
        """JSON-serialisable configuration."""
        return {"mechanism": "clipped_median", "low": list(self.low), "high": list(self.high)}


def make_clipped_median(
    *, low: float | Sequence[float], high: float | Sequence[float]
) -> ClippedMedian:
    """Build a clipped-median mechanism with public bounds ``[low, high]``."""
    return ClippedMedian(low=_tuple(low), high=_tuple(high))


def clipped_median(subset, *, rng=None) -> np.ndarray:
    """Clipped median over the data-independent box ``[-1, 1]``; shape ``(p,)``."""
    return _DEFAULT(subset)


_DEFAULT = ClippedMedian()
clipped_median.clip_ranges = _DEFAULT.clip_ranges  # type: ignore[attr-defined]
