"""Decision-tree class probabilities on fixed public query points, with splits on a public grid.

Output
------
``ndarray`` of shape ``(m * K,)``, float64: for each of the ``m`` public query points (rows, in
the order given at construction), the predicted probabilities of the ``K`` public classes (in
the order of ``classes``), flattened row by row. Each block of ``K`` sums to 1.

What it computes
----------------
Every feature is quantised onto public bin edges (values outside the edges go to the end bins),
and a depth-limited :class:`sklearn.tree.DecisionTreeClassifier` is fitted to the bin indices, so
every split threshold is a public grid point: the tree structure can only reveal which grid cell
boundaries separate the classes, never a record's exact value. The query points are quantised the
same way and the tree's leaf class frequencies are returned. A parameter vector of a tree has no
fixed shape; its predictions on fixed public points do.

Canonicalisation
----------------
scikit-learn breaks ties between equally good splits with a random feature order; it is fixed by
the public ``public_seed``, and rows are sorted (label, then features) before fitting so record
order cannot change the tree. ``rng`` is ignored.

Fallback
--------
An empty subset returns the uniform distribution ``1/K`` at every query point. A subset with a
single class (e.g. ``n = 1``) needs no fallback: the tree predicts that class with probability 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._common import (
    canonical_order,
    class_indices,
    split_supervised,
)
from .histogram import _check_edges

__all__ = ["DecisionTreeProbabilities", "make_decision_tree", "quantise"]


def quantise(X: np.ndarray, edges: Sequence[Sequence[float]]) -> np.ndarray:
    """Bin index of every value, feature by feature (end bins absorb out-of-range values)."""
    out = np.empty(X.shape, dtype=np.float64)
    for j in range(X.shape[1]):
        e = np.asarray(edges[0] if len(edges) == 1 else edges[j])
        out[:, j] = np.searchsorted(e[1:-1], X[:, j], side="right")
    return out


@dataclass(frozen=True, eq=False)
class DecisionTreeProbabilities:
    """Grid-restricted decision tree evaluated on public query points (picklable callable).

    Parameters
    ----------
    edges : tuple of tuple of float
        Public bin edges: one list per feature, or one list shared by all features.
    query_points : ndarray of shape (m, p)
        Public points at which the class probabilities are reported (stored read-only).
    classes : tuple
        Public class list (>= 2 distinct labels).
    max_depth : int
        Maximum tree depth (>= 1).
    public_seed : int
        Public seed of scikit-learn's split tie-breaking.
    """

    edges: tuple[tuple[float, ...], ...]
    query_points: np.ndarray
    classes: tuple
    max_depth: int = 3
    public_seed: int = 0

    def __post_init__(self) -> None:
        edges = tuple(_check_edges(e) for e in self.edges)
        if not edges:
            raise ValueError("`edges` must hold at least one edge list.")
        object.__setattr__(self, "edges", edges)
        Q = np.array(self.query_points, dtype=np.float64)
        if Q.ndim != 2 or Q.shape[0] == 0 or not np.all(np.isfinite(Q)):
            raise ValueError(
                f"`query_points` must be a finite 2-D array with >= 1 row; got shape {Q.shape}."
            )
        if len(edges) not in (1, Q.shape[1]):
            raise ValueError(
                f"`edges` must hold 1 or p={Q.shape[1]} edge lists; got {len(edges)}."
            )
        Q.setflags(write=False)
        object.__setattr__(self, "query_points", Q)
        classes = tuple(np.asarray(self.classes).tolist())
        if len(classes) < 2 or len(set(classes)) != len(classes):
            raise ValueError(f"`classes` must list at least 2 distinct labels; got {classes}.")
        object.__setattr__(self, "classes", classes)
        d = self.max_depth
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
            raise ValueError(f"`max_depth` must be an integer >= 1; got {d!r}.")

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Class probabilities at the query points, flattened to shape ``(m * K,)``."""
        from sklearn.tree import DecisionTreeClassifier

        X, y = split_supervised(subset, mechanism="decision_tree")
        m, p = self.query_points.shape
        n_classes = len(self.classes)
        if X.shape[1] != p:
            raise ValueError(f"the subset has p={X.shape[1]} features; query points have {p}.")
        if X.shape[0] == 0:
            return np.full(m * n_classes, 1.0 / n_classes)
        Xq, idx = canonical_order(quantise(X, self.edges), class_indices(y, self.classes))
        tree = DecisionTreeClassifier(
            max_depth=int(self.max_depth), random_state=int(self.public_seed)
        )
        tree.fit(Xq, idx)
        proba = np.zeros((m, n_classes))
        proba[:, tree.classes_.astype(int)] = tree.predict_proba(
            quantise(self.query_points, self.edges)
        )
        return proba.ravel()

    def to_dict(self) -> dict:
        """JSON-serialisable configuration."""
        return {
            "mechanism": "decision_tree",
            "edges": [list(e) for e in self.edges],
            "query_points": self.query_points.tolist(),
            "classes": list(self.classes),
            "max_depth": int(self.max_depth),
            "public_seed": int(self.public_seed),
        }


def make_decision_tree(
    *,
    edges: Sequence[float] | Sequence[Sequence[float]],
    query_points,
    classes: Sequence,
    max_depth: int = 3,
    public_seed: int = 0,
) -> DecisionTreeProbabilities:
    """Build a grid-restricted decision-tree mechanism; ``edges`` shared or one list per feature."""
    first = np.asarray(edges[0], dtype=object) if len(edges) else None
    shared = first is not None and first.ndim == 0
    edge_lists = (tuple(edges),) if shared else tuple(tuple(e) for e in edges)
    return DecisionTreeProbabilities(
        edges=edge_lists,
        query_points=np.asarray(query_points, dtype=np.float64),
        classes=tuple(classes),
        max_depth=max_depth,
        public_seed=public_seed,
    )
