"""Stabilisers: wrappers that make a black box's output depend less on any one record.

PAC Privacy prices the *actual* differences ``f(S ∪ {i}) − f(S ∖ {i})`` of a black box, so a
more stable black box needs less noise for the same per-record bound. Each class here is a
deterministic, picklable mechanism ``f(subset) -> (d,)``:

* :class:`SubsampleAggregate`: average of the base mechanism on disjoint shards; a record's
  shard is a public function of the record itself (a hash of its bytes), so it does not depend
  on which other records were drawn. One record moves one shard's output, so the average moves
  by ``1/K`` of that (Nissim, Raskhodnikova & Smith, STOC 2007, sample-and-aggregate).
* :class:`TunedStableLogistic`: the regularisation strength chosen *inside* the black box by
  K-fold cross-validation on the subset; the simulation then accounts for the tuning, which
  DP-SGD must pay for separately.
* :class:`AlignedRows`: canonical alignment of an output made of interchangeable rows with
  arbitrary signs (principal directions, cluster centres): rows are matched to a public
  reference (Hungarian assignment) and signed to agree with it.
* :class:`ClippedGradientDescent`: full-batch gradient descent on the softmax cross-entropy
  with per-example gradient clipping and L2, a fixed number of steps from zero, no noise.

References
----------
.. [1] K. Nissim, S. Raskhodnikova, A. Smith. Smooth sensitivity and sampling in private data
   analysis. STOC 2007 (sample-and-aggregate).
.. [2] M. Abadi et al. Deep learning with differential privacy. CCS 2016 (per-example clipping).
.. [3] H. W. Kuhn. The Hungarian method for the assignment problem. 1955.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

__all__ = ["AlignedRows", "ClippedGradientDescent", "SubsampleAggregate",
           "TunedStableLogistic", "record_shards"]


def record_shards(X: np.ndarray, n_shards: int, salt: int = 0) -> np.ndarray:
    """Shard of each record: ``sha256(salt, row bytes) mod n_shards`` (public, per record)."""
    X = np.ascontiguousarray(np.asarray(X, dtype=np.float64))
    out = np.empty(X.shape[0], dtype=np.int64)
    prefix = int(salt).to_bytes(8, "little", signed=False)
    for i, row in enumerate(X.reshape(X.shape[0], -1)):
        out[i] = int.from_bytes(hashlib.sha256(prefix + row.tobytes()).digest()[:8],
                                "little") % n_shards
    return out


@dataclass(frozen=True)
class SubsampleAggregate:
    """``f(S) = (1/K) Σ_k base(S ∩ shard_k)`` with record-determined shards.

    Parameters
    ----------
    base : callable
        ``base((X, y)) -> (d,)``; a ``base.per_record_differences`` and ``base.difference_bound``
        are used shard by shard (fast path and declared range).
    n_shards : int
        ``K >= 1``.
    salt : int, default 0
        Public salt of the shard hash.
    """

    base: Any
    n_shards: int
    salt: int = 0

    def __post_init__(self) -> None:
        if not (isinstance(self.n_shards, int) and self.n_shards >= 1):
            raise ValueError(f"`n_shards` must be an int >= 1; got {self.n_shards!r}.")

    @property
    def dim(self) -> int:
        """Output dimension of the base."""
        return int(self.base.dim)

    @property
    def difference_error(self) -> float:
        """The base's error, divided by ``K``."""
        return float(getattr(self.base, "difference_error", 0.0)) / self.n_shards

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Average of the shard outputs."""
        X, y = subset
        shard = record_shards(X, self.n_shards, self.salt)
        outs = [self.base((X[shard == k], y[shard == k])) for k in range(self.n_shards)]
        return np.mean(outs, axis=0)

    def predict(self, theta, X) -> np.ndarray:
        """The base's prediction from the averaged parameters."""
        return self.base.predict(theta, X)

    def losses(self, theta, X, y) -> np.ndarray:
        """The base's per-record losses."""
        return self.base.losses(theta, X, y)

    def describe(self) -> str:
        """In words."""
        inner = self.base.describe() if hasattr(self.base, "describe") else type(self.base)
        return f"average over {self.n_shards} record-hashed shards of: {inner}"

    def difference_bound(self, pool) -> np.ndarray:
        """``base.difference_bound`` of each record's shard pool, over ``K``."""
        X, y = pool
        shard = record_shards(X, self.n_shards, self.salt)
        out = np.empty(X.shape[0])
        for k in range(self.n_shards):
            idx = shard == k
            out[idx] = np.asarray(self.base.difference_bound((X[idx], y[idx]))) / self.n_shards
        return out

    def per_record_differences(self, pool, mask, records=None):
        """``f(S)`` and ``Δᵢ`` via the base's fast path on each shard (``Δᵢ`` = its shard's
        difference over ``K``)."""
        X, y = pool
        mask = np.asarray(mask, dtype=bool)
        recs = np.arange(X.shape[0]) if records is None else np.asarray(records, np.int64)
        shard = record_shards(X, self.n_shards, self.salt)
        base_out = np.zeros(self.dim)
        diffs = np.zeros((recs.size, self.dim))
        pos = {int(r): j for j, r in enumerate(recs)}
        for k in range(self.n_shards):
            idx = np.flatnonzero(shard == k)
            mine = [i for i in idx if int(i) in pos]
            local = np.searchsorted(idx, mine)
            b, d = self.base.per_record_differences((X[idx], y[idx]), mask[idx], local)
            base_out += b / self.n_shards
            for row, i in zip(d, mine, strict=True):
                diffs[pos[int(i)]] = row / self.n_shards
        return base_out, diffs


def _fold_of(X: np.ndarray, folds: int) -> np.ndarray:
    return record_shards(X, folds, salt=0x5EED)


@dataclass(frozen=True)
class TunedStableLogistic:
    """A :class:`~mechanisms.stable_logistic.StableLogistic` whose ``λ`` is chosen inside.

    ``λ* = argmin_{λ ∈ grid}`` of the K-fold cross-validated error on the subset (folds by a
    public record hash; ties: the largest ``λ``), then the base refitted on the whole subset
    with ``λ*``. No fast path and no declared range: a different ``λ*`` for ``S ∪ {i}`` and
    ``S ∖ {i}`` can move the output far, and PAC prices exactly that.
    """

    base: Any
    grid: tuple = (0.01, 0.03, 0.1)
    folds: int = 3

    @property
    def dim(self) -> int:
        """Output dimension."""
        return int(self.base.dim)

    def choose(self, X: np.ndarray, y: np.ndarray) -> float:
        """``λ*`` of the subset ``(X, y)``."""
        fold = _fold_of(X, self.folds)
        best, best_err = self.grid[-1], np.inf
        for lam in sorted(self.grid, reverse=True):
            m = replace(self.base, l2=float(lam),
                        normalizer=self.base.normalizer * (self.folds - 1) / self.folds)
            errs = 0
            for k in range(self.folds):
                train, test = fold != k, fold == k
                if not test.any():
                    continue
                theta = m((X[train], y[train]))
                errs += int(np.sum(m.predict(theta, X[test]) != y[test]))
            if errs < best_err:
                best, best_err = float(lam), errs
        return best

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Parameters of the base at ``λ*``."""
        X, y = subset
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y)
        return replace(self.base, l2=self.choose(X, y))((X, y))

    def predict(self, theta, X) -> np.ndarray:
        """The base's prediction."""
        return self.base.predict(theta, X)

    def losses(self, theta, X, y) -> np.ndarray:
        """The base's per-record losses."""
        return self.base.losses(theta, X, y)

    def describe(self) -> str:
        """In words."""
        return (f"{self.base.describe()}, with λ chosen inside by {self.folds}-fold "
                f"cross-validation over {self.grid}")


@dataclass(frozen=True, eq=False)
class AlignedRows:
    """Output of ``base`` as ``(m, b)`` rows, permuted and signed to match a public reference.

    Row ``j`` of the output is the base row assigned to reference row ``j`` by the Hungarian
    method on ``|⟨row, ref⟩|`` (cosine), multiplied by the sign of that inner product.
    """

    base: Any
    reference: np.ndarray

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """The aligned output, flattened."""
        from scipy.optimize import linear_sum_assignment

        ref = np.asarray(self.reference, dtype=np.float64)
        rows = np.asarray(self.base(subset), dtype=np.float64).reshape(ref.shape)
        norms = np.linalg.norm(rows, axis=1)[:, None] * np.linalg.norm(ref, axis=1)[None, :]
        cos = rows @ ref.T / np.where(norms > 0, norms, 1.0)
        r, c = linear_sum_assignment(-np.abs(cos))
        out = np.empty_like(ref)
        for i, j in zip(r, c, strict=True):
            out[j] = rows[i] * (1.0 if cos[i, j] >= 0 else -1.0)
        return out.ravel()


@dataclass(frozen=True)
class ClippedGradientDescent:
    """Full-batch GD, softmax cross-entropy, per-example clipping at ``C``, L2 ``λ``.

    ``θ ← θ − η (λθ + (1/N) Σ_{j∈S} clip_C(∇ℓ_j(θ)))`` for ``steps`` steps from ``θ = 0``;
    ``N`` is a public normaliser. Output ``(W, b)`` flattened, ``K (p + 1)`` values.
    """

    n_features: int
    n_classes: int
    clip: float = 1.0
    l2: float = 0.02
    steps: int = 100
    learning_rate: float = 1.0
    normalizer: float = 1.0

    @property
    def dim(self) -> int:
        """``K (p + 1)``."""
        return self.n_classes * (self.n_features + 1)

    def _x1(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64).reshape(-1, self.n_features)
        return np.hstack([X, np.ones((X.shape[0], 1))])

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """The parameters after ``steps`` steps."""
        X, y = subset
        X1 = self._x1(X)
        Y = np.eye(self.n_classes)[np.asarray(y, dtype=np.int64)]
        W = np.zeros((X1.shape[1], self.n_classes))
        xn = np.linalg.norm(X1, axis=1)
        for _ in range(self.steps):
            z = X1 @ W
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
            r = p - Y
            norm = np.linalg.norm(r, axis=1) * xn
            r *= np.minimum(1.0, self.clip / np.where(norm > 0, norm, 1.0))[:, None]
            W = W * (1.0 - self.learning_rate * self.l2) - self.learning_rate * (
                X1.T @ r) / self.normalizer
        return W.T.ravel()

    def predict(self, theta, X) -> np.ndarray:
        """``argmax`` of the scores."""
        W = np.asarray(theta).reshape(self.n_classes, -1)
        return (self._x1(X) @ W.T).argmax(axis=1)

    def losses(self, theta, X, y) -> np.ndarray:
        """Per-record cross-entropy."""
        W = np.asarray(theta).reshape(self.n_classes, -1)
        z = self._x1(X) @ W.T
        z -= z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return -logp[np.arange(z.shape[0]), np.asarray(y, dtype=np.int64)]

    def describe(self) -> str:
        """In words."""
        return (f"full-batch GD, per-example clipping C = {self.clip:g}, L2 {self.l2:g}, "
                f"{self.steps} steps, η = {self.learning_rate:g} (no noise)")
