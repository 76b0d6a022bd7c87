"""Ensemble mechanisms: a block of subsets in, one output row per subset out.

The block contract for the PAC engine: ``run_block(pool, masks, seeds=...)`` takes a pool
``(X, y)``, a ``(B, n_records)`` boolean array of membership masks and B per-trial
``SeedSequence`` children (the engine's mechanism-stream seeds of the block's trials), and
returns a ``(B, d)`` float64 array whose row ``b`` is a function of ``pool[masks[b]]`` and
``seeds[b]`` only: it agrees across block sizes to float round-off, and is bit-identical for
the same blocks (:mod:`pacpriv.ensemble._schedule`). ``mechanism(subset, rng=...)`` is the
one-trial form of the same computation, for the engine's one-trial-per-task path; given the
engine's ``numpy.random.default_rng(seed)`` it trains with ``seed`` itself
(:func:`trial_seed_of`), so both paths use the same seed per trial.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from pacpriv._random import as_seed_sequence
from pacpriv._torch_models import linear_initial_parameters, linear_module, public_stream_int
from pacpriv._validation import check_int
from pacpriv.ensemble._gradients import LossArg
from pacpriv.ensemble._spec import (
    SGD,
    Clipping,
    FullBatch,
    RandomAllocation,
    TrainingSpec,
)
from pacpriv.ensemble._torch import torch
from pacpriv.ensemble._train import train_ensemble

__all__ = [
    "EnsembleLogisticRegression",
    "EnsembleMechanism",
    "as_block",
    "class_positions",
    "pool_arrays",
    "trial_seed_of",
]


def pool_arrays(pool) -> tuple[np.ndarray, np.ndarray]:
    """``(X (n, p) float64, y (n,))`` of a supervised pool; a 1-D ``X`` is one feature."""
    if not (isinstance(pool, tuple) and len(pool) == 2):
        raise ValueError(f"the pool must be a tuple (X, y); got {type(pool).__name__}.")
    X = np.asarray(pool[0], dtype=np.float64)
    if X.ndim == 1:
        X = X.reshape(-1, 1)
    y = np.asarray(pool[1]).reshape(-1)
    if X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise ValueError(f"the pool's X must be 2-D (n, p) with one label per row; got shapes "
                         f"{X.shape} and {y.shape}.")
    return X, y


def as_block(subset) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """One subset as a block: ``(subset, all-true mask of shape (1, n))``."""
    X, y = pool_arrays(subset)
    return (X, y), np.ones((1, X.shape[0]), dtype=bool)


@dataclass(frozen=True)
class EnsembleMechanism:
    """Train ``model`` on each subset of a block; output each model's flattened parameters.

    Parameters
    ----------
    model : torch.nn.Module
        The architecture (and, with ``init="shared"``, the public initialisation).
    training : TrainingSpec
    loss : {"cross_entropy", "mse"} or callable, default "cross_entropy"
    init : {"seeded", "shared"}, default "seeded"
        ``"seeded"``: model ``b`` initialised from child 2 of ``seeds[b]``.
    dtype : {"float32", "float64"}, default "float32"
    device : str, default "cpu"
    memory_limit : float, optional
        Bytes (default: a quarter of the available memory).

    Notes
    -----
    Output row ``b``: ``concat(p.reshape(-1) for p in model_b.parameters())`` in float64, the
    layout of :class:`pacpriv._adapters.TorchMechanism`.
    """

    model: torch.nn.Module
    training: TrainingSpec
    loss: LossArg = "cross_entropy"
    init: str = "seeded"
    dtype: str = "float32"
    device: str = "cpu"
    memory_limit: float | None = None

    def run_block(self, pool, masks, *, seeds: Sequence[np.random.SeedSequence]) -> np.ndarray:
        """Outputs of a block of subsets, shape ``(B, d)`` float64 (see the module docstring).

        Raises
        ------
        ValueError, TypeError
            As :func:`pacpriv.ensemble.train_ensemble`, before any training.
        """
        X, y = pool_arrays(pool)
        training = replace(self.training, loss=self.loss)
        return train_ensemble(self.model, X, y, masks, seeds=seeds, training=training,
                              init=self.init, dtype=self.dtype, device=self.device,
                              memory_limit=self.memory_limit).flat_parameters()

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """One subset ``(X, y)``; ``rng`` is the trial's seed or Generator (see
        :func:`trial_seed_of`; None: fresh OS entropy)."""
        pool, masks = as_block(subset)
        return self.run_block(pool, masks, seeds=[trial_seed_of(rng)])[0]


def trial_seed_of(rng) -> np.random.SeedSequence:
    """The ``SeedSequence`` a trial's ``rng`` stands for.

    A ``numpy.random.Generator`` built from a SeedSequence (``default_rng(seed)``, what the
    engine passes) gives that ``seed`` back (``rng.bit_generator.seed_seq``, whatever was drawn
    since); a SeedSequence is itself; an int ``i`` is ``SeedSequence(i)``; None is fresh OS
    entropy (:func:`pacpriv._random.as_seed_sequence` for the rest).
    """
    if isinstance(rng, np.random.Generator):
        seq = getattr(rng.bit_generator, "seed_seq", None)
        if isinstance(seq, np.random.SeedSequence):
            return seq
    return as_seed_sequence(rng)


@dataclass(frozen=True)
class EnsembleLogisticRegression:
    """Multinomial logistic regression by (clipped, noise-free) gradient descent, in blocks.

    ``torch.nn.Linear(p, K)`` with cross-entropy, plain SGD (optional L2 ``weight_decay``)
    from the public initialisation ``θ₀ ~ U(±1/√p)`` of
    :class:`pacpriv.compare.models.LogisticRegressionMechanism` (numpy, public stream 0).
    With ``steps_per_epoch = M`` the batches are random allocations drawn from the public seed
    (stream 1), the same for every trial, and each step divides by ``n/M`` -- that class's
    training exactly (:meth:`from_compare`); with ``steps_per_epoch=None`` each epoch is one
    full-batch step on the mean loss. ``max_grad_norm`` clips each example's gradient
    (Abadi et al., CCS 2016, Algorithm 1, without the noise). The output is a deterministic
    function of the subset: trial seeds are accepted and ignored.

    Parameters
    ----------
    n_features, n_classes : int
        ``p >= 1`` and ``K >= 2``; labels are ``0..K-1``.
    epochs : int
        ``E >= 0``.
    learning_rate : float
        SGD step ``> 0``.
    steps_per_epoch : int or None, default None
        ``M`` of random allocation, or None for full-batch steps.
    weight_decay : float, default 0.0
        L2 coefficient (torch ``SGD(weight_decay=)``).
    max_grad_norm : float or None, default None
        Per-example clipping norm ``C``.
    public_seed : int, default 0
    dtype : {"float64", "float32"}, default "float64"
    device : str, default "cpu"
    memory_limit : float, optional

    Notes
    -----
    Output: ``[W.ravel() (K·p, row-major), b (K)]``, ``d = K(p + 1)``, float64.
    """

    n_features: int
    n_classes: int
    epochs: int
    learning_rate: float
    steps_per_epoch: int | None = None
    weight_decay: float = 0.0
    max_grad_norm: float | None = None
    public_seed: int = 0
    dtype: str = "float64"
    device: str = "cpu"
    memory_limit: float | None = None
    training: TrainingSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_int(self.n_features, "n_features", low=1)
        check_int(self.n_classes, "n_classes", low=2)
        check_int(self.public_seed, "public_seed", low=0)
        batching = (FullBatch() if self.steps_per_epoch is None
                    else RandomAllocation(self.steps_per_epoch))
        clipping = None if self.max_grad_norm is None else Clipping(self.max_grad_norm)
        spec = TrainingSpec(SGD(self.learning_rate, weight_decay=self.weight_decay),
                            epochs=self.epochs, batching=batching, clipping=clipping)
        object.__setattr__(self, "training", spec)

    @classmethod
    def from_compare(cls, mechanism, **options) -> EnsembleLogisticRegression:
        """The ensemble form of a ``pacpriv.compare.models.LogisticRegressionMechanism``.

        Reads its public attributes (``n_features``, ``n_classes``, ``steps_per_epoch``,
        ``epochs``, ``learning_rate``, ``public_seed``); ``options`` are ``dtype``, ``device``
        or ``memory_limit``.
        """
        return cls(n_features=mechanism.n_features, n_classes=mechanism.n_classes,
                   epochs=mechanism.epochs, learning_rate=mechanism.learning_rate,
                   steps_per_epoch=mechanism.steps_per_epoch,
                   public_seed=mechanism.public_seed, **options)

    @property
    def dim(self) -> int:
        """``d = K·(p + 1)``."""
        return self.n_classes * (self.n_features + 1)

    def initial_parameters(self) -> np.ndarray:
        """``θ₀``: uniform on ``±1/√p`` from the public stream 0 (float64, shape ``(d,)``)."""
        return linear_initial_parameters(self.n_features, self.n_classes, self.public_seed)

    def model(self) -> torch.nn.Linear:
        """A float64 ``nn.Linear(p, K)`` holding ``θ₀``."""
        return linear_module(self.initial_parameters(), self.n_features, self.n_classes)

    def run_block(self, pool, masks, *, seeds: Sequence | None = None) -> np.ndarray:
        """Parameters trained on each subset, shape ``(B, d)`` float64; ``seeds`` is ignored.

        Raises
        ------
        ValueError
            If the pool is not ``(X, y)`` with ``p`` features and labels in ``0..K-1``, or the
            masks are invalid.
        """
        X, y = pool_arrays(pool)
        if X.shape[1] != self.n_features:
            raise ValueError(f"the pool has {X.shape[1]} features; the mechanism expects "
                             f"n_features={self.n_features}.")
        labels = class_positions(y, range(self.n_classes))
        n_models = np.asarray(masks).shape[0] if np.ndim(masks) == 2 else 1
        public = np.random.SeedSequence(public_stream_int(self.public_seed, 1))
        return train_ensemble(self.model(), X, labels, masks, seeds=[public] * n_models,
                              training=self.training, init="shared", dtype=self.dtype,
                              device=self.device,
                              memory_limit=self.memory_limit).flat_parameters()

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Parameters trained on one subset ``(X, y)``, shape ``(d,)``; ``rng`` is ignored."""
        pool, masks = as_block(subset)
        return self.run_block(pool, masks)[0]


def class_positions(y: np.ndarray, classes) -> np.ndarray:
    """Positions of the labels in the public class list (a ValueError names no value)."""
    classes_arr = np.asarray(list(classes))
    order = np.argsort(classes_arr, kind="stable")
    pos = np.clip(np.searchsorted(classes_arr[order], y), 0, len(classes_arr) - 1)
    idx = order[pos]
    if y.size and np.any(classes_arr[idx] != y):
        raise ValueError(f"the pool has a label outside the public class list of "
                         f"{len(classes_arr)} classes.")
    return idx.astype(np.int64)
