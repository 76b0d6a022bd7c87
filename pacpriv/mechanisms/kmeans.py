"""k-means cluster centres in canonical order.

Output
------
``ndarray`` of shape ``(n_clusters * p,)``, float64: the ``n_clusters`` centres of
:class:`sklearn.cluster.KMeans` (k-means++ init, ``n_init`` restarts, best inertia kept), sorted
into canonical order and flattened row by row.

Canonicalisation (superficial randomness removed)
-------------------------------------------------
1. Record order: the rows are sorted lexicographically before fitting, so the fit depends only on
   the multiset of records (k-means++ picks seeds by row index, so row order would otherwise change
   the local optimum reached).
2. Label permutation: which centre is called "cluster 0" is arbitrary. Centres are sorted
   lexicographically (by the first coordinate, ties by the second, ...), or, when
   ``sort_direction`` is given, by their projection on that fixed public direction (ties broken
   lexicographically). Without this step the output covariance is dominated by label swaps, which
   reveal nothing about membership but cost a lot of noise [1]_.
3. Initialisation: the k-means++ seed is the fixed public ``public_seed``. With
   ``randomized=True`` the seed is drawn from the ``rng`` argument instead (for the study of
   randomized mechanisms: the same ``rng`` seed gives the same output).

Fallback
--------
If the subset has fewer than ``n_clusters`` distinct rows (including ``n = 0``), the k-means
optimum puts one centre on each distinct row and leaves the others empty; empty centres are set
to the public constant ``fallback_center`` (default 0) in every coordinate. The centres are then
sorted as above. No fit is run, so no warning is raised.

Convergence warnings are silenced: the centres after the fixed, public ``max_iter`` are a
deterministic function of the subset either way.

References
----------
.. [1] M. Sridhar, H. Xiao, S. Devadas. PAC-Private Algorithms. IEEE S&P 2025.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._common import (
    canonical_order,
    quiet_convergence,
    split_unsupervised,
)

__all__ = ["KMeansCenters", "canonical_center_order", "kmeans_centers", "make_kmeans"]


def canonical_center_order(
    centers: np.ndarray, *, sort_direction: np.ndarray | None = None
) -> np.ndarray:
    """Sort the rows of ``centers`` (k, p) lexicographically, or by projection on a direction."""
    keys = [centers[:, j] for j in range(centers.shape[1] - 1, -1, -1)]
    if sort_direction is not None:
        keys.append(centers @ np.asarray(sort_direction, dtype=np.float64))
    return centers[np.lexsort(keys)] if keys else centers


@dataclass(frozen=True)
class KMeansCenters:
    """k-means centres in canonical order (picklable callable); see the module docstring.

    Parameters
    ----------
    n_clusters : int
        Number of centres ``k`` (>= 1).
    public_seed : int
        Public seed of the k-means++ initialisation (ignored when ``randomized``).
    n_init : int
        Number of k-means++ restarts; the lowest-inertia run is kept.
    max_iter : int
        Lloyd iterations per restart.
    randomized : bool
        Draw the initialisation seed from ``rng`` (a randomized mechanism).
    sort_direction : tuple of float or None
        Public direction used to order the centres; ``None`` means lexicographic order.
    fallback_center : float
        Public value given to empty centres.
    """

    n_clusters: int = 3
    public_seed: int = 0
    n_init: int = 10
    max_iter: int = 300
    randomized: bool = False
    sort_direction: tuple[float, ...] | None = None
    fallback_center: float = 0.0

    def __post_init__(self) -> None:
        for name in ("n_clusters", "n_init", "max_iter"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"`{name}` must be an integer >= 1; got {v!r}.")
        if self.sort_direction is not None:
            d = np.asarray(self.sort_direction, dtype=np.float64)
            if d.ndim != 1 or not np.all(np.isfinite(d)) or not np.any(d):
                raise ValueError("`sort_direction` must be a finite, non-zero 1-D vector.")
            object.__setattr__(self, "sort_direction", tuple(d.tolist()))
        if not np.isfinite(self.fallback_center):
            raise ValueError(f"`fallback_center` must be finite; got {self.fallback_center!r}.")

    def _seed(self, rng) -> int:
        if not self.randomized:
            return int(self.public_seed)
        return int(np.random.default_rng(rng).integers(0, 2**31 - 1))

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Canonically ordered centres, flattened to shape ``(n_clusters * p,)``."""
        X = split_unsupervised(subset)
        k, p = int(self.n_clusters), X.shape[1]
        if self.sort_direction is not None and len(self.sort_direction) != p:
            raise ValueError(
                f"`sort_direction` has length {len(self.sort_direction)}; the subset has p={p}."
            )
        distinct = np.unique(X, axis=0) if X.shape[0] else np.zeros((0, p))
        if distinct.shape[0] < k:
            pad = np.full((k - distinct.shape[0], p), float(self.fallback_center))
            centers = np.vstack([distinct, pad])
        else:
            from sklearn.cluster import KMeans

            model = KMeans(
                n_clusters=k,
                n_init=int(self.n_init),
                max_iter=int(self.max_iter),
                random_state=self._seed(rng),
            )
            with quiet_convergence():
                model.fit(canonical_order(X))
            centers = model.cluster_centers_
        return canonical_center_order(centers, sort_direction=self.sort_direction).ravel()

    def to_dict(self) -> dict:
        """JSON-serialisable configuration."""
        return {
            "mechanism": "kmeans",
            "n_clusters": int(self.n_clusters),
            "public_seed": int(self.public_seed),
            "n_init": int(self.n_init),
            "max_iter": int(self.max_iter),
            "randomized": bool(self.randomized),
            "sort_direction": None if self.sort_direction is None else list(self.sort_direction),
            "fallback_center": float(self.fallback_center),
        }


def make_kmeans(
    *,
    n_clusters: int = 3,
    public_seed: int = 0,
    n_init: int = 10,
    max_iter: int = 300,
    randomized: bool = False,
    sort_direction: Sequence[float] | None = None,
    fallback_center: float = 0.0,
) -> KMeansCenters:
    """Build a k-means mechanism; see :class:`KMeansCenters` for the parameters."""
    return KMeansCenters(
        n_clusters=n_clusters,
        public_seed=public_seed,
        n_init=n_init,
        max_iter=max_iter,
        randomized=randomized,
        sort_direction=None if sort_direction is None else tuple(sort_direction),
        fallback_center=fallback_center,
    )


def kmeans_centers(subset, *, rng=None) -> np.ndarray:
    """Default k-means: 3 centres, public seed 0, 10 restarts, lexicographic order."""
    return _DEFAULT(subset)


_DEFAULT = KMeansCenters()
