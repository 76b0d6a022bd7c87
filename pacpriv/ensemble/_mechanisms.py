"""Ensemble mechanisms: a block of subsets in, one output row per subset out.

The block contract for the PAC engine: ``run_block(pool, masks, seeds=...)`` takes a pool
``(X, y)``, a ``(B, n_records)`` boolean array of membership masks and B per-trial
``SeedSequence`` children, and returns a ``(B, d)`` float64 array whose row ``b`` depends only on
``pool[masks[b]]`` and ``seeds[b]``: the same for any block size (bit for bit on one machine and
build; :mod:`pacpriv.ensemble._schedule` explains why). ``mechanism(subset, rng=seed)`` is the
one-trial form of the same computation, for the engine's one-trial-per-task path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pacpriv._random import as_seed_sequence
from pacpriv._validation import check_int, check_real
from pacpriv.ensemble._gradients import LossArg
from pacpriv.ensemble._spec import (
    SGD,
    Adam,
    Clipping,
    FullBatch,
    RandomAllocation,
    TrainingSpec,
)
from pacpriv.ensemble._torch import torch
from pacpriv.ensemble._train import train_ensemble

__all__ = ["EnsembleLogisticRegression", "EnsembleMLP", "EnsembleMechanism", "TanhMLP"]


def _pool(pool) -> tuple[np.ndarray, np.ndarray]:
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


def _all_true(subset) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    X, y = _pool(subset)
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
        X, y = _pool(pool)
        return train_ensemble(self.model, X, y, masks, seeds=seeds, training=self.training,
                              loss=self.loss, init=self.init, dtype=self.dtype,
                              device=self.device,
                              memory_limit=self.memory_limit).flat_parameters()

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """One subset ``(X, y)``; ``rng`` is the trial's seed (None: fresh OS entropy)."""
        pool, masks = _all_true(subset)
        return self.run_block(pool, masks, seeds=[as_seed_sequence(rng)])[0]


def _seed_int(seed: int, stream: int) -> int:
    """63 bits of ``SeedSequence(seed, spawn_key=(stream,))``: the public streams of
    :class:`pacpriv.compare.models.LogisticRegressionMechanism` (0 init, 1 batch order)."""
    ss = np.random.SeedSequence(seed, spawn_key=(stream,))
    return int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


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
        gen = np.random.default_rng(_seed_int(self.public_seed, 0))
        bound = 1.0 / np.sqrt(self.n_features)
        return gen.uniform(-bound, bound, size=self.dim)

    def model(self) -> torch.nn.Linear:
        """A float64 ``nn.Linear(p, K)`` holding ``θ₀``."""
        theta = self.initial_parameters()
        k, p = self.n_classes, self.n_features
        lin = torch.nn.Linear(p, k, dtype=torch.float64)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(theta[: k * p].reshape(k, p).copy()))
            lin.bias.copy_(torch.from_numpy(theta[k * p:].copy()))
        return lin

    def run_block(self, pool, masks, *, seeds: Sequence | None = None) -> np.ndarray:
        """Parameters trained on each subset, shape ``(B, d)`` float64; ``seeds`` is ignored.

        Raises
        ------
        ValueError
            If the pool is not ``(X, y)`` with ``p`` features and labels in ``0..K-1``, or the
            masks are invalid.
        """
        X, y = _pool(pool)
        if X.shape[1] != self.n_features:
            raise ValueError(f"the pool has {X.shape[1]} features; the mechanism expects "
                             f"n_features={self.n_features}.")
        labels = _labels(y, range(self.n_classes))
        n_models = np.asarray(masks).shape[0] if np.ndim(masks) == 2 else 1
        public = np.random.SeedSequence(_seed_int(self.public_seed, 1))
        return train_ensemble(self.model(), X, labels, masks, seeds=[public] * n_models,
                              training=self.training, init="shared", dtype=self.dtype,
                              device=self.device,
                              memory_limit=self.memory_limit).flat_parameters()

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Parameters trained on one subset ``(X, y)``, shape ``(d,)``; ``rng`` is ignored."""
        pool, masks = _all_true(subset)
        return self.run_block(pool, masks)[0]


def _labels(y: np.ndarray, classes) -> np.ndarray:
    """Positions of the labels in the public class list (a ValueError names no value)."""
    classes_arr = np.asarray(list(classes))
    order = np.argsort(classes_arr, kind="stable")
    pos = np.clip(np.searchsorted(classes_arr[order], y), 0, len(classes_arr) - 1)
    idx = order[pos]
    if y.size and np.any(classes_arr[idx] != y):
        raise ValueError(f"the pool has a label outside the public class list of "
                         f"{len(classes_arr)} classes.")
    return idx.astype(np.int64)


class TanhMLP(torch.nn.Module):
    """``tanh(x W1 + b1) W2 + b2`` with ``W1 (p, h)``, ``W2 (h, K)`` (the ``mlp`` layout).

    Initialised as the ``mlp`` mechanism: ``U(±1/√fan_in)`` from
    ``torch.rand(..., generator=torch.Generator().manual_seed(public_seed))`` in float64, in
    the order ``W1, b1, W2, b2`` (fan-in ``p, p, h, h``).
    """

    def __init__(self, n_features: int, hidden_units: int, n_classes: int, *,
                 public_seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(int(public_seed))
        p, h, k = n_features, hidden_units, n_classes

        def uniform(shape: tuple[int, ...], fan_in: int) -> torch.nn.Parameter:
            u = torch.rand(shape, generator=gen, dtype=torch.float64)
            return torch.nn.Parameter((2.0 * u - 1.0) * (1.0 / np.sqrt(fan_in)))

        self.W1 = uniform((p, h), p)
        self.b1 = uniform((h,), p)
        self.W2 = uniform((h, k), h)
        self.b2 = uniform((k,), h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits, shape ``(n, K)``."""
        return torch.tanh(x @ self.W1 + self.b1) @ self.W2 + self.b2


@dataclass(frozen=True)
class EnsembleMLP:
    """The ``mlp`` mechanism (:class:`pacpriv.mechanisms.mlp.MLPParameters`) in blocks.

    A one-hidden-layer tanh network (:class:`TanhMLP`) trained by ``epochs`` full-batch Adam
    steps (Kingma & Ba, ICLR 2015) on the mean cross-entropy with L2 ``weight_decay``, from the
    public initialisation, on ``(X − center)/scale``. Deterministic in the subset: trial seeds
    are accepted and ignored. An empty subset returns the initial parameters.

    Parameters
    ----------
    classes : tuple
        Public class list (``>= 2`` distinct labels).
    hidden_units, epochs : int
        ``h >= 1`` and ``E >= 0``.
    learning_rate, weight_decay : float
        Adam step ``> 0`` and L2 ``>= 0``.
    public_seed : int
    center, scale : tuple of float or None
        Public standardisation constants (scalars or per feature).
    dtype : {"float64", "float32"}, default "float64"
        float64 reproduces the ``mlp`` mechanism.
    device : str, default "cpu"
    memory_limit : float, optional

    Notes
    -----
    Output: ``[W1 (p·h), b1 (h), W2 (h·K), b2 (K)]`` in float64, as the ``mlp`` mechanism.
    """

    classes: tuple = (0, 1)
    hidden_units: int = 8
    epochs: int = 50
    learning_rate: float = 0.05
    weight_decay: float = 1e-4
    public_seed: int = 0
    center: tuple | None = None
    scale: tuple | None = None
    dtype: str = "float64"
    device: str = "cpu"
    memory_limit: float | None = None

    def __post_init__(self) -> None:
        classes = tuple(np.asarray(self.classes).tolist())
        if len(classes) < 2 or len(set(classes)) != len(classes):
            raise ValueError(f"`classes` must list at least 2 distinct labels; got "
                             f"{len(classes)} with {len(set(classes))} distinct.")
        object.__setattr__(self, "classes", classes)
        check_int(self.hidden_units, "hidden_units", low=1)
        check_int(self.public_seed, "public_seed", low=0)
        self.training_spec()  # validates epochs, learning_rate, weight_decay
        for name in ("center", "scale"):
            value = getattr(self, name)
            if value is not None:
                arr = np.atleast_1d(np.asarray(value, dtype=np.float64))
                if not np.all(np.isfinite(arr)) or (name == "scale" and np.any(arr <= 0)):
                    raise ValueError(f"`{name}` must be finite{' and > 0' * (name == 'scale')}.")
                object.__setattr__(self, name, tuple(arr.tolist()))

    @classmethod
    def from_mlp(cls, mechanism, **options) -> EnsembleMLP:
        """The ensemble form of an ``mlp`` mechanism (reads its public attributes)."""
        return cls(classes=mechanism.classes, hidden_units=mechanism.hidden_units,
                   epochs=mechanism.epochs, learning_rate=mechanism.learning_rate,
                   weight_decay=mechanism.weight_decay, public_seed=mechanism.public_seed,
                   center=mechanism.center, scale=mechanism.scale, **options)

    def training_spec(self) -> TrainingSpec:
        """Full-batch Adam on the mean loss for ``epochs`` steps."""
        return TrainingSpec(Adam(check_real(self.learning_rate, "learning_rate", low=0.0,
                                            low_inclusive=False),
                                 weight_decay=self.weight_decay), epochs=self.epochs)

    def output_dim(self, n_features: int) -> int:
        """``p·h + h + h·K + K``."""
        h, k = self.hidden_units, len(self.classes)
        return n_features * h + h + h * k + k

    def run_block(self, pool, masks, *, seeds: Sequence | None = None) -> np.ndarray:
        """Trained parameters of each subset, shape ``(B, d)`` float64; ``seeds`` is ignored.

        Raises
        ------
        ValueError
            If the pool is not ``(X, y)``, a label is outside ``classes``, or the masks are
            invalid.
        """
        X, y = _pool(pool)
        if self.center is not None:
            X = X - np.asarray(self.center)
        if self.scale is not None:
            X = X / np.asarray(self.scale)
        labels = _labels(y, self.classes)
        net = TanhMLP(X.shape[1], self.hidden_units, len(self.classes),
                      public_seed=self.public_seed)
        n_models = np.asarray(masks).shape[0] if np.ndim(masks) == 2 else 1
        public = np.random.SeedSequence(self.public_seed)  # unused: full batch, shared init
        return train_ensemble(net, X, labels, masks, seeds=[public] * n_models,
                              training=self.training_spec(), init="shared", dtype=self.dtype,
                              device=self.device,
                              memory_limit=self.memory_limit).flat_parameters()

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Parameters trained on one subset ``(X, y)``; ``rng`` is ignored."""
        pool, masks = _all_true(subset)
        return self.run_block(pool, masks)[0]
