"""The ``mlp`` mechanism in blocks: a one-hidden-layer tanh network trained full-batch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pacpriv._validation import check_int, check_real
from pacpriv.ensemble._mechanisms import as_block, class_positions, pool_arrays
from pacpriv.ensemble._spec import Adam, TrainingSpec
from pacpriv.ensemble._torch import torch
from pacpriv.ensemble._train import train_ensemble

__all__ = ["EnsembleMLP", "TanhMLP"]


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

    @staticmethod
    def stacked_forward(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """Logits of M stacked networks on shared rows ``x (n, p)``: shape ``(M, n, K)``."""
        h = torch.tanh(torch.matmul(x, params["W1"]) + params["b1"].unsqueeze(1))
        return torch.baddbmm(params["b2"].unsqueeze(1), h, params["W2"])


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
        X, y = pool_arrays(pool)
        if self.center is not None:
            X = X - np.asarray(self.center)
        if self.scale is not None:
            X = X / np.asarray(self.scale)
        labels = class_positions(y, self.classes)
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
        pool, masks = as_block(subset)
        return self.run_block(pool, masks)[0]
