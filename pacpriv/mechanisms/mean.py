"""Clipped mean: the coordinate-wise mean of features clipped to public bounds.

Output
------
``ndarray`` of shape ``(p,)``, float64: ``mean_i clip(x_ij, low_j, high_j)`` for each feature
``j``. Every coordinate lies in ``[low_j, high_j]``.

Public bounds
-------------
The clipping range ``[low, high]`` must not be computed from the subset: a range that depends on
which records were drawn leaks membership through the range itself. Pass bounds that are public
(a published feature range, a physical limit) or computed from the whole data pool, which is known
to the adversary in the PAC Privacy membership game [1]_ and therefore independent of the secret
subset. The module-level :func:`clipped_mean` uses the data-independent box ``[-1, 1]``;
features outside it are clipped, so rescale data to that box or build a mechanism with
:func:`make_clipped_mean`.

Canonicalisation
----------------
The mean is a symmetric function of the records: row order cannot change it beyond
floating-point summation order, and there is no internal randomness. ``rng`` is accepted and
ignored.

Fallback
--------
An empty subset (``n = 0``) returns the midpoint ``(low + high) / 2`` of the public range.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy: Automatic Privacy Measurement and Control of Data
   Processing. CRYPTO 2023, arXiv:2210.03458.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._common import as_bounds, split_unsupervised

__all__ = ["ClippedMean", "clipped_mean", "make_clipped_mean"]


@dataclass(frozen=True)
class ClippedMean:
    """Clipped mean with public bounds (picklable callable).

    Parameters
    ----------
    low, high : float or tuple of float
        Public clipping range, a scalar (every feature) or one value per feature.
    """

    low: float | tuple[float, ...] = -1.0
    high: float | tuple[float, ...] = 1.0

    def __post_init__(self) -> None:
        lo, hi = as_bounds(self.low, self.high)
        object.__setattr__(self, "low", tuple(float(v) for v in lo))
        object.__setattr__(self, "high", tuple(float(v) for v in hi))

    def bounds(self, n_features: int) -> tuple[np.ndarray, np.ndarray]:
        """Bounds broadcast to ``n_features`` (``ValueError`` on a length mismatch)."""
        lo, hi = as_bounds(self.low, self.high, n_features=n_features)
        return np.broadcast_to(lo, (n_features,)), np.broadcast_to(hi, (n_features,))

    def clip_ranges(self, n_features: int) -> tuple[np.ndarray, np.ndarray]:
        """The public clipping range per feature, ``(low, high)`` of shape ``(p,)`` (checked
        against the pool before a run: a range that moves most of it draws a warning)."""
        return self.bounds(n_features)

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Clipped mean of ``subset``, shape ``(p,)``; midpoint of the range if empty."""
        X = split_unsupervised(subset)
        lo, hi = self.bounds(X.shape[1])
        if X.shape[0] == 0:
            return (lo + hi) / 2.0
        return np.clip(X, lo, hi).mean(axis=0)

    def per_record_differences(self, pool, mask, records=None) -> tuple[np.ndarray, np.ndarray]:
        """``f(S)`` and ``Δᵢ = f(S ∪ {i}) − f(S ∖ {i})`` in closed form, O(n p) a call.

        With ``c_i = clip(x_i)``, ``s`` and ``m`` the sum and count of ``S ∖ {i}``:
        ``Δᵢ = (s + c_i)/(m + 1) − s/m`` (``s/m`` is the midpoint when ``m = 0``), equal to two
        calls of the mechanism up to float64 rounding.

        Parameters
        ----------
        pool : ndarray of shape (n, p) or tuple (X, ...)
        mask : ndarray of bool, shape (n,)
            Membership of ``S``.
        records : ndarray of int, optional
            Records to flip (default every record).

        Returns
        -------
        base : ndarray of shape (p,)
        diffs : ndarray of shape (len(records), p)
        """
        X = split_unsupervised(pool)
        lo, hi = self.bounds(X.shape[1])
        mask = np.asarray(mask, dtype=bool)
        recs = np.arange(X.shape[0]) if records is None else np.asarray(records, np.int64)
        C = np.clip(X, lo, hi)
        total, count = C[mask].sum(axis=0), int(mask.sum())
        base = total / count if count else (lo + hi) / 2.0
        c = C[recs]
        inside = mask[recs]
        rest = np.broadcast_to(total, c.shape) - c * inside[:, None]
        m = (count - inside)[:, None].astype(np.float64)
        down = rest / np.maximum(m, 1.0)
        down[m[:, 0] == 0] = (lo + hi) / 2.0            # S ∖ {i} empty: the midpoint
        return np.array(base, dtype=np.float64), (rest + c) / (m + 1.0) - down

    def to_dict(self) -> dict:
        """JSON-serialisable configuration."""
        return {"mechanism": "clipped_mean", "low": list(self.low), "high": list(self.high)}


def make_clipped_mean(
    *, low: float | Sequence[float], high: float | Sequence[float]
) -> ClippedMean:
    """Build a clipped-mean mechanism with public bounds ``[low, high]`` (per feature or scalar).

    Raises
    ------
    ValueError
        If a bound is not finite, ``low > high`` somewhere, or the lengths differ.
    """
    return ClippedMean(low=_tuple(low), high=_tuple(high))


def clipped_mean(subset, *, rng=None) -> np.ndarray:
    """Clipped mean over the data-independent box ``[-1, 1]``; shape ``(p,)``."""
    return _DEFAULT(subset)


def _tuple(v):
    arr = np.asarray(v, dtype=np.float64)
    return float(arr) if arr.ndim == 0 else tuple(float(x) for x in arr.ravel())


_DEFAULT = ClippedMean()
clipped_mean.clip_ranges = _DEFAULT.clip_ranges  # type: ignore[attr-defined]
