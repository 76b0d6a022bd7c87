"""Model, training and evaluation for :mod:`pacpriv.compare` (private; imports torch).

The comparison trains one small model -- multinomial logistic regression, a float64
``torch.nn.Linear(p, K)`` with cross-entropy loss and plain SGD -- with
:func:`pacpriv.dpsgd.trainer.train_dpsgd` in two ways:

* DP-SGD: clipping norm C, noise multiplier σ, secret random allocation and noise;
* PAC: the same training *without* noise or clipping, as a deterministic black box
  ``f(subset) -> parameters`` (:class:`LogisticRegressionMechanism`): initialisation and
  batch allocation come from a fixed public seed, so the only randomness is the subset.

Features are scaled to ``[-1, 1]`` with the dataset's published per-feature ranges
(:attr:`pacpriv.datasets.Dataset.feature_low` / ``feature_high``), which do not depend on
which records are members.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pacpriv._optional import import_torch
from pacpriv._random import RNGLike, trial_seed
from pacpriv._torch_models import (
    linear_initial_parameters,
    linear_module,
    one_torch_thread,
    public_stream_int,
)
from pacpriv.audit._attacks import AttackResult, loss_threshold_attack
from pacpriv.datasets.scaling import scale_to_unit_box
from pacpriv.dpsgd.calibration import noise_multiplier_for_accuracy
from pacpriv.dpsgd.trainer import _train_dpsgd, model_losses

torch = import_torch("pacpriv.compare")

__all__ = [
    "LogisticRegressionMechanism",
    "evaluate_draws",
    "evaluate_parameters",
    "exact_sigma",
    "scale_features",
]


def scale_features(X: np.ndarray, low, high) -> np.ndarray:
    """Min-max scale ``X`` (n, p) to ``[-1, 1]`` with public ranges; constant features -> 0.

    :func:`pacpriv.datasets.scaling.scale_to_unit_box` (the one implementation).
    """
    return scale_to_unit_box(X, low, high)


@dataclass(frozen=True)
class LogisticRegressionMechanism:
    """Non-private training as a deterministic black box: ``f((X, y)) -> θ`` of shape ``(d,)``.

    Picklable (module-level frozen dataclass), so the PAC engine can run it in worker
    processes. ``d = K·p + K`` (weights row-major, then biases).

    Attributes
    ----------
    n_features, n_classes : int
        ``p`` and ``K``.
    steps_per_epoch, epochs : int
        ``M`` and ``E`` of the random-allocation trainer (same as the DP-SGD runs).
    learning_rate : float
        Step size η of ``torch.optim.SGD`` (no momentum, no weight decay).
    public_seed : int
        Public seed of the initialisation (stream 0) and of the batch allocation (stream 1).
    """

    n_features: int
    n_classes: int
    steps_per_epoch: int
    epochs: int
    learning_rate: float
    public_seed: int

    @property
    def dim(self) -> int:
        """Number of parameters ``d = K·p + K``."""
        return self.n_classes * (self.n_features + 1)

    def initial_parameters(self) -> np.ndarray:
        """Public initial ``θ₀``: uniform on ``±1/sqrt(p)`` (torch's default bound)."""
        return linear_initial_parameters(self.n_features, self.n_classes, self.public_seed)

    def model(self, theta: np.ndarray | None = None) -> torch.nn.Linear:
        """A float64 ``nn.Linear(p, K)`` holding ``theta`` (default: the public ``θ₀``)."""
        theta = self.initial_parameters() if theta is None else theta
        return linear_module(theta, self.n_features, self.n_classes)

    @staticmethod
    def parameters_of(model: torch.nn.Linear) -> np.ndarray:
        """Flatten ``(weight, bias)`` to ``θ`` of shape ``(d,)``, float64."""
        with torch.no_grad():
            parts = [model.weight.reshape(-1), model.bias.reshape(-1)]
            return torch.cat(parts).to(torch.float64).cpu().numpy().copy()

    def train(
        self,
        X: np.ndarray,
        y: np.ndarray,
        *,
        noise_multiplier: float = 0.0,
        max_grad_norm: float | None = None,
        rng: RNGLike = None,
    ) -> np.ndarray:
        """Train from ``θ₀`` with :func:`~pacpriv.dpsgd.trainer.train_dpsgd`; return ``θ``.

        ``rng`` seeds the allocation and the noise; ``None`` here means the *public* seed
        (stream 1), which is what the noise-free PAC mechanism uses.
        """

        model = self.model()
        X = np.array(X, dtype=np.float64)  # writable copies: torch warns on read-only arrays
        y = np.array(y, dtype=np.int64)
        if X.shape[0] == 0:
            return self.parameters_of(model)
        lr = self.learning_rate
        with one_torch_thread():
            _train_dpsgd(
                model,
                torch.nn.CrossEntropyLoss(),
                X,
                y,
                noise_multiplier=noise_multiplier,
                steps_per_epoch=self.steps_per_epoch,
                epochs=self.epochs,
                max_grad_norm=max_grad_norm,
                optimizer=lambda params: torch.optim.SGD(params, lr=lr),
                rng=public_stream_int(self.public_seed, 1) if rng is None else rng,
                warn_where=None,  # compare chooses the settings; no sparse-batch warning
            )
        return self.parameters_of(model)

    def __call__(self, subset) -> np.ndarray:
        """Noise-free training on ``subset = (X_sub, y_sub)``; returns ``θ`` of shape ``(d,)``."""
        X_sub, y_sub = subset
        return self.train(X_sub, y_sub)

    def predict(self, theta: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Class indices ``argmax(X Wᵀ + b)``."""
        model = self.model(theta)
        with one_torch_thread(), torch.no_grad():
            return model(torch.from_numpy(np.array(X, dtype=np.float64))).argmax(1).numpy()

    def losses(self, theta: np.ndarray, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Per-record cross-entropy losses (the loss-threshold attack's score)."""
        with one_torch_thread():
            return model_losses(self.model(theta), torch.nn.CrossEntropyLoss(),
                                np.array(X, dtype=np.float64), np.array(y, dtype=np.int64))

    def describe(self) -> str:
        """The black box in words."""
        return ("logistic regression trained by noise-free SGD (public seed), the DP-SGD rows' "
                "model and schedule without noise or clipping")


def evaluate_parameters(
    mechanism: Any,
    theta: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    members: np.ndarray,
    *,
    confidence: float,
    rng: RNGLike,
) -> tuple[float, AttackResult | None]:
    """Test accuracy on the non-members and a loss-threshold attack (members vs the rest).

    ``mechanism`` has ``predict(theta, X)`` and ``losses(theta, X, y)``. Returns
    ``(test_accuracy, attack)``; ``attack`` is None when ``rng`` is None (skip it).
    """
    X = np.array(X, dtype=np.float64)
    y = np.array(y, dtype=np.int64)
    pred = np.asarray(mechanism.predict(theta, X[~members]))
    test_accuracy = float(np.mean(pred == y[~members]))
    if rng is None:
        return test_accuracy, None
    losses = np.asarray(mechanism.losses(theta, X, y))
    attack = loss_threshold_attack(
        losses[members], losses[~members], confidence=confidence, rng=rng
    )
    return test_accuracy, attack


def exact_sigma(a: float, M: int, E: int) -> tuple[float | None, str | None]:
    """σ of the exact ½ + ½·TV calibration (and a note when it is unavailable)."""
    res = noise_multiplier_for_accuracy(
        target_accuracy=a, steps_per_epoch=M, epochs=E, method="exact"
    )
    return float(getattr(res, "noise_multiplier", res)), None


def evaluate_draws(
    mech: Any,
    thetas: Iterable[np.ndarray],
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
    *,
    confidence: float,
    attack_rng: int | np.random.SeedSequence | np.random.Generator,
) -> tuple[float, float, AttackResult]:
    """Evaluate the parameter draws of one row: ``(mean, sd, attack)``.

    ``mean`` and ``sd`` (``ddof=1``; 0 for one draw) of the test accuracy over ``thetas``, each
    evaluated as it comes (a generator trains or draws lazily), and the loss-threshold attack
    on the first draw, seeded by ``attack_rng`` (:func:`evaluate_parameters`).
    """
    X, y, members = data
    accs: list[float] = []
    attack: AttackResult | None = None
    for r, theta in enumerate(thetas):
        acc, att = evaluate_parameters(mech, theta, X, y, members, confidence=confidence,
                                       rng=attack_rng if r == 0 else None)
        accs.append(acc)
        attack = attack if att is None else att
    if attack is None:
        raise ValueError("`thetas` must hold at least one parameter vector.")
    arr = np.asarray(accs, dtype=np.float64)
    std = float(arr.std(ddof=1)) if arr.size > 1 else 0.0
    return float(arr.mean()), std, attack


def dpsgd_row(row_cls, label, source, sigma, mech, data, *, C, M, E, n_repeats, root,
              attack_rng, confidence, bound, **fields):
    """One DP-SGD row: ``n_repeats`` trainings with noise multiplier ``sigma``; ``fields`` are
    the row's ``dataset``, ``secret``, ``bound_label`` (and the like)."""
    tic = time.perf_counter()
    X, y, members = data
    models = (mech.train(X[members], y[members], noise_multiplier=sigma, max_grad_norm=C,
                         rng=trial_seed(root, r)) for r in range(n_repeats))
    mean, std, attack = evaluate_draws(mech, models, data, confidence=confidence,
                                       attack_rng=attack_rng)
    per_step = sigma * C / (int(members.sum()) / M)
    return row_cls(
        method=label, family="dpsgd", noise=sigma, noise_units="noise multiplier σ (std / C)",
        noise_multiplier=sigma, gradient_noise_std=per_step,
        parameter_noise_rms=mech.learning_rate * per_step * math.sqrt(M * E),
        expected_noise_power=None, mi_budget=None, test_accuracy=mean, test_accuracy_std=std,
        accuracy_bound=bound, bound_source=source, attack=attack, n_repeats=n_repeats,
        wall_time_s=time.perf_counter() - tic, target_accuracy=bound, **fields,
    )
