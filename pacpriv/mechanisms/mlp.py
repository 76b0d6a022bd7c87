"""Small multilayer perceptron trained full-batch; output = its flattened parameters.

Output
------
``ndarray`` of shape ``(p*h + h + h*K + K,)``, float64: ``W1`` (p, h) row-major, ``b1`` (h,),
``W2`` (h, K) row-major, ``b2`` (K,) of a one-hidden-layer network
``softmax(tanh(Z W1 + b1) W2 + b2)`` with ``h = hidden_units`` and ``K = len(classes)``, after
``epochs`` full-batch Adam steps on the mean cross-entropy (L2 ``weight_decay``), in float64.
``Z = (X - center) / scale`` with public constants.

Canonicalisation
----------------
* Initialisation: uniform ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` drawn from a private
  ``torch.Generator`` seeded with the public ``public_seed`` (never torch's global generator).
* Data order: full-batch training has no mini-batch order; rows are also sorted (label, then
  features), so even the floating-point summation order depends only on the multiset of records.
* The class list is public (fixed output layer), so a subset missing a class still yields the
  same shape. ``rng`` is ignored.

Hidden-unit permutation symmetry is *not* removed (a fixed initialisation keeps units from
swapping in practice). Results are bit-identical across calls with the same torch build and
thread count.

Fallback
--------
An empty subset returns the initial parameters (training on no data leaves them unchanged).
Tiny and single-class subsets train normally.

Requires torch (``pip install pacpriv[torch]``); it is imported only when the mechanism runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ._common import (
    canonical_order,
    class_indices,
    split_supervised,
)
from ._linear import SupervisedConfig, standardise

__all__ = ["MLPParameters", "make_mlp", "mlp_parameters"]


def _import_torch():
    try:
        import torch
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the 'mlp' mechanism needs PyTorch: pip install pacpriv[torch]"
        ) from err
    return torch


@dataclass(frozen=True)
class MLPParameters(SupervisedConfig):
    """One-hidden-layer MLP parameters after deterministic full-batch training (picklable).

    Parameters
    ----------
    classes : tuple
        Public class list (>= 2 distinct labels).
    hidden_units : int
        Width ``h`` of the hidden layer.
    epochs : int
        Number of full-batch Adam steps (>= 0).
    learning_rate : float
        Adam step size (> 0).
    weight_decay : float
        L2 penalty (>= 0).
    public_seed : int
        Public initialisation seed.
    center, scale : tuple of float or None
        Public standardisation constants.
    """

    classes: tuple = (0, 1)
    hidden_units: int = 8
    epochs: int = 50
    learning_rate: float = 0.05
    weight_decay: float = 1e-4
    public_seed: int = 0
    center: tuple[float, ...] | None = None
    scale: tuple[float, ...] | None = None

    mechanism: ClassVar[str] = "mlp"
    regularised: ClassVar[bool] = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if int(self.hidden_units) < 1:
            raise ValueError(f"`hidden_units` must be >= 1; got {self.hidden_units!r}.")
        if int(self.epochs) < 0:
            raise ValueError(f"`epochs` must be >= 0; got {self.epochs!r}.")
        if not (np.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ValueError(f"`learning_rate` must be > 0; got {self.learning_rate!r}.")
        if not (np.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"`weight_decay` must be >= 0; got {self.weight_decay!r}.")

    def output_dim(self, n_features: int) -> int:
        """``p*h + h + h*K + K``."""
        h, k = int(self.hidden_units), len(self.classes)
        return n_features * h + h + h * k + k

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Flattened trained parameters, shape ``(p*h + h + h*K + K,)``."""
        torch = _import_torch()
        X, y = split_supervised(subset, mechanism=self.mechanism)
        p, h, k = X.shape[1], int(self.hidden_units), len(self.classes)
        gen = torch.Generator().manual_seed(int(self.public_seed))

        def uniform(shape, fan_in):
            bound = 1.0 / np.sqrt(fan_in)
            u = torch.rand(shape, generator=gen, dtype=torch.float64)
            return ((2.0 * u - 1.0) * bound).requires_grad_(True)

        params = [uniform((p, h), p), uniform((h,), p), uniform((h, k), h), uniform((k,), h)]
        if X.shape[0] > 0 and int(self.epochs) > 0:
            Xs, idx = canonical_order(
                standardise(X, self.center, self.scale), class_indices(y, self.classes)
            )
            Zt = torch.from_numpy(np.ascontiguousarray(Xs))
            yt = torch.from_numpy(np.asarray(idx, dtype=np.int64))
            opt = torch.optim.Adam(
                params, lr=float(self.learning_rate), weight_decay=float(self.weight_decay)
            )
            W1, b1, W2, b2 = params
            for _ in range(int(self.epochs)):
                opt.zero_grad()
                logits = torch.tanh(Zt @ W1 + b1) @ W2 + b2
                loss = torch.nn.functional.cross_entropy(logits, yt)
                loss.backward()
                opt.step()
        return np.concatenate([t.detach().numpy().ravel() for t in params]).astype(np.float64)


def make_mlp(
    *,
    classes: Sequence,
    hidden_units: int = 8,
    epochs: int = 50,
    learning_rate: float = 0.05,
    weight_decay: float = 1e-4,
    public_seed: int = 0,
    center: float | Sequence[float] | None = None,
    scale: float | Sequence[float] | None = None,
) -> MLPParameters:
    """Build an MLP mechanism; see :class:`MLPParameters`."""
    return MLPParameters(
        classes=tuple(classes), hidden_units=hidden_units, epochs=epochs,
        learning_rate=learning_rate, weight_decay=weight_decay, center=center, scale=scale,
        public_seed=public_seed,
    )


def mlp_parameters(subset, *, rng=None) -> np.ndarray:
    """Default: binary classes ``(0, 1)``, 8 hidden units, 50 Adam steps, seed 0."""
    return _DEFAULT(subset)


_DEFAULT = MLPParameters()
