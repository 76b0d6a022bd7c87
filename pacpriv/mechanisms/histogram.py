"""Histograms over fixed public bins: per-feature counts or label counts.

Output
------
* :class:`FeatureHistogram`: the counts of each selected feature over its public bin edges,
  concatenated in feature order: shape ``(sum_j n_bins_j,)``, float64 (integer-valued). With one
  shared edge list for all ``p`` features this is ``(p * n_bins,)``.
* :class:`LabelHistogram`: the number of records of each class in the public class list,
  shape ``(n_classes,)``.

Bins
----
Edges must be public (fixed before seeing the subset); bins are ``[e_0, e_1), ..., [e_{B-1}, e_B]``
as in :func:`numpy.histogram`. A value outside ``[e_0, e_B]`` is counted in the nearest end bin
(clipping), so every record contributes exactly one count per feature and the replace-one
sensitivity is 2 per feature.

Canonicalisation
----------------
Counts are a symmetric, deterministic function of the records; ``rng`` is ignored.

Fallback
--------
An empty subset returns all zeros (the exact counts). An unknown label raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._common import class_indices, split_supervised, split_unsupervised

__all__ = [
    "FeatureHistogram",
    "LabelHistogram",
    "feature_histogram",
    "make_feature_histogram",
    "make_label_histogram",
]


def _check_edges(edges) -> tuple[float, ...]:
    e = np.asarray(edges, dtype=np.float64)
    if e.ndim != 1 or e.size < 2:
        raise ValueError(f"bin edges must be a 1-D sequence of >= 2 values; got shape {e.shape}.")
    if not np.all(np.isfinite(e)) or np.any(np.diff(e) <= 0):
        raise ValueError(f"bin edges must be finite and strictly increasing; got {e.tolist()}.")
    return tuple(float(v) for v in e)


@dataclass(frozen=True)
class FeatureHistogram:
    """Per-feature counts over public bin edges (picklable callable).

    Parameters
    ----------
    edges : tuple of tuple of float
        One edge list per selected feature, or a single edge list shared by all of them.
    features : tuple of int or None
        Columns to histogram; ``None`` means every column.
    """

    edges: tuple[tuple[float, ...], ...]
    features: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        edges = tuple(_check_edges(e) for e in self.edges)
        if not edges:
            raise ValueError("`edges` must hold at least one edge list.")
        object.__setattr__(self, "edges", edges)
        if self.features is not None:
            feats = tuple(int(j) for j in self.features)
            if len(edges) not in (1, len(feats)):
                raise ValueError(
                    f"`edges` must hold 1 or len(features)={len(feats)} edge lists; "
                    f"got {len(edges)}."
                )
            object.__setattr__(self, "features", feats)

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Concatenated per-feature counts; zeros for an empty subset."""
        X = split_unsupervised(subset)
        feats = self.features if self.features is not None else tuple(range(X.shape[1]))
        if len(self.edges) not in (1, len(feats)):
            raise ValueError(
                f"the mechanism has {len(self.edges)} edge lists but the subset has "
                f"{len(feats)} features."
            )
        if feats and max(feats) >= X.shape[1]:
            raise ValueError(f"feature index {max(feats)} out of range for p={X.shape[1]}.")
        out = []
        for k, j in enumerate(feats):
            e = np.asarray(self.edges[0] if len(self.edges) == 1 else self.edges[k])
            nb = e.size - 1
            idx = np.searchsorted(e[1:-1], X[:, j], side="right")
            out.append(np.bincount(idx, minlength=nb).astype(np.float64))
        return np.concatenate(out) if out else np.zeros(0)

    def clip_ranges(self, n_features: int) -> tuple[np.ndarray, np.ndarray]:
        """Outer edges per feature, ``(low, high)`` of shape ``(p,)`` (``∓inf`` for a feature
        not histogrammed): a value beyond them counts in the end bin, i.e. it is clipped."""
        low, high = np.full(n_features, -np.inf), np.full(n_features, np.inf)
        feats = self.features if self.features is not None else tuple(range(n_features))
        for k, j in enumerate(feats):
            if 0 <= j < n_features:
                e = self.edges[0] if len(self.edges) == 1 else self.edges[k]
                low[j], high[j] = e[0], e[-1]
        return low, high

    def per_record_differences(self, pool, mask, records=None) -> tuple[np.ndarray, np.ndarray]:
        """``f(S)`` and ``Δᵢ = f(S ∪ {i}) − f(S ∖ {i})``: record ``i``'s own counts (one per
        feature), exact and O(n) a call; shapes ``(d,)`` and ``(len(records), d)``."""
        X = split_unsupervised(pool)
        mask = np.asarray(mask, dtype=bool)
        recs = np.arange(X.shape[0]) if records is None else np.asarray(records, np.int64)
        return self(X[mask]), self._one_hot(X[recs])

    def _one_hot(self, X: np.ndarray) -> np.ndarray:
        feats = self.features if self.features is not None else tuple(range(X.shape[1]))
        col = 0
        out = np.zeros((X.shape[0], self(X[:0]).shape[0]))
        for k, j in enumerate(feats):
            e = np.asarray(self.edges[0] if len(self.edges) == 1 else self.edges[k])
            idx = np.searchsorted(e[1:-1], X[:, j], side="right")
            out[np.arange(X.shape[0]), col + idx] = 1.0
            col += e.size - 1
        return out

    def to_dict(self) -> dict:
        """JSON-serialisable configuration."""
        return {
            "mechanism": "feature_histogram",
            "edges": [list(e) for e in self.edges],
            "features": None if self.features is None else list(self.features),
        }


@dataclass(frozen=True)
class LabelHistogram:
    """Counts of each public class label (picklable callable), shape ``(n_classes,)``."""

    classes: tuple

    def __post_init__(self) -> None:
        classes = tuple(np.asarray(self.classes).tolist())
        if len(classes) == 0 or len(set(classes)) != len(classes):
            raise ValueError(f"`classes` must be non-empty and distinct; got {classes}.")
        object.__setattr__(self, "classes", classes)

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Label counts in the order of ``classes``; zeros for an empty subset."""
        _, y = split_supervised(subset, mechanism="label_histogram")
        idx = class_indices(y, self.classes)
        return np.bincount(idx, minlength=len(self.classes)).astype(np.float64)

    def per_record_differences(self, pool, mask, records=None) -> tuple[np.ndarray, np.ndarray]:
        """``f(S)`` and ``Δᵢ``: the one-hot vector of record ``i``'s class, exact, O(n) a call."""
        X, y = split_supervised(pool, mechanism="label_histogram")
        mask = np.asarray(mask, dtype=bool)
        recs = np.arange(X.shape[0]) if records is None else np.asarray(records, np.int64)
        base = self((X[mask], y[mask]))
        return base, np.eye(len(self.classes))[class_indices(y[recs], self.classes)]

    def to_dict(self) -> dict:
        """JSON-serialisable configuration."""
        return {"mechanism": "label_histogram", "classes": list(self.classes)}


def make_feature_histogram(
    *,
    edges: Sequence[float] | Sequence[Sequence[float]],
    features: Sequence[int] | None = None,
) -> FeatureHistogram:
    """Build a per-feature histogram; ``edges`` is one shared edge list or one per feature."""
    first = np.asarray(edges[0], dtype=object) if len(edges) else None
    shared = first is not None and first.ndim == 0
    edge_lists = (tuple(edges),) if shared else tuple(tuple(e) for e in edges)
    feats = None if features is None else tuple(features)
    return FeatureHistogram(edges=edge_lists, features=feats)


def make_label_histogram(*, classes: Sequence) -> LabelHistogram:
    """Build a label-count mechanism over the public class list ``classes``."""
    return LabelHistogram(classes=tuple(classes))


def feature_histogram(subset, *, rng=None) -> np.ndarray:
    """Counts of every feature over 10 equal bins on the data-independent range ``[-1, 1]``."""
    return _DEFAULT(subset)


_DEFAULT = FeatureHistogram(edges=(tuple(np.linspace(-1.0, 1.0, 11).tolist()),))
feature_histogram.clip_ranges = _DEFAULT.clip_ranges  # type: ignore[attr-defined]
