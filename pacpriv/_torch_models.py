"""The small torch classifiers shared by ``compare``, ``ensemble`` and ``audit``: the audit's
:class:`MLPFactory`, the comparison's logistic regression from a public ``θ₀`` (also the
ensemble's start), and :func:`one_torch_thread`. torch is imported only when a model is built;
:mod:`pacpriv.mechanisms` keeps its own ``mlp`` (that package imports nothing of pacpriv).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from pacpriv._optional import import_torch
from pacpriv._validation import check_int

__all__ = ["MLPFactory", "linear_initial_parameters", "linear_module", "one_torch_thread",
           "public_stream_int"]


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run torch on one intra-op thread, then restore the caller's count (the thread count
    changes the reduction order, so results are identical only at a fixed count)."""
    torch = import_torch("one_torch_thread")
    before = torch.get_num_threads()
    if before != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if before != 1:
            torch.set_num_threads(before)


def public_stream_int(seed: int, stream: int) -> int:
    """63 bits of ``SeedSequence(seed, spawn_key=(stream,))``: a named public stream of the
    public ``seed`` (0: initialisation, 1: batch order of the comparison's models)."""
    ss = np.random.SeedSequence(seed, spawn_key=(stream,))
    return int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def linear_initial_parameters(n_features: int, n_classes: int, public_seed: int) -> np.ndarray:
    """Public ``θ₀`` of ``nn.Linear(p, K)``: uniform on ``±1/√p`` (torch's default bound) from
    public stream 0; float64, shape ``(K·p + K,)`` (weights row-major, then biases)."""
    gen = np.random.default_rng(public_stream_int(public_seed, 0))
    bound = 1.0 / np.sqrt(n_features)
    return gen.uniform(-bound, bound, size=n_classes * (n_features + 1))


def linear_module(theta: np.ndarray, n_features: int, n_classes: int) -> Any:
    """A float64 ``torch.nn.Linear(p, K)`` holding ``θ = [W.ravel() (K·p), b (K)]``."""
    torch = import_torch("linear_module")
    theta = np.asarray(theta, np.float64)
    k, p = n_classes, n_features
    model = torch.nn.Linear(p, k, dtype=torch.float64)
    with torch.no_grad():
        model.weight.copy_(torch.from_numpy(theta[: k * p].reshape(k, p).copy()))
        model.bias.copy_(torch.from_numpy(theta[k * p:].copy()))
    return model


@dataclass(frozen=True)
class MLPFactory:
    """Picklable factory of a fresh torch classifier: ``Linear`` layers with ``tanh`` between.

    ``hidden=()`` is multinomial logistic regression. Only ``nn.Linear`` and element-wise
    activations: the DP-SGD trainer clips them exactly with ghost clipping.
    """

    n_features: int
    n_classes: int
    hidden: tuple[int, ...] = (64,)

    def __post_init__(self) -> None:
        check_int(self.n_features, "n_features", low=1)
        check_int(self.n_classes, "n_classes", low=2)
        for i, h in enumerate(self.hidden):
            check_int(h, f"hidden[{i}]", low=1)

    def __call__(self):
        """A new ``torch.nn.Sequential`` (initialised from torch's current global seed)."""
        torch = import_torch("MLPFactory")
        sizes = [self.n_features, *self.hidden, self.n_classes]
        layers: list = []
        for i in range(len(sizes) - 1):
            layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
            if i < len(sizes) - 2:
                layers.append(torch.nn.Tanh())
        return torch.nn.Sequential(*layers)

    def describe(self) -> str:
        """E.g. ``"MLP 64-32-10 (tanh)"`` or ``"logistic regression (64 features, 10 classes)"``."""
        if not self.hidden:
            return f"logistic regression ({self.n_features} features, {self.n_classes} classes)"
        widths = "-".join(str(h) for h in (*self.hidden, self.n_classes))
        return f"MLP {self.n_features}-{widths} (tanh)"
