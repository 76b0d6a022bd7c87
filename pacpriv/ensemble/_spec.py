"""Training settings of the ensemble trainer: optimisers, batching, clipping (no torch import).

Every setting is a frozen dataclass validated at construction, so a bad value fails before any
model is built. :class:`TrainingSpec` gathers them; the same spec drives the vectorised trainer
(:func:`pacpriv.ensemble.train_ensemble`) and the sequential reference
(:func:`pacpriv.ensemble.train_reference`).

Seed streams
------------
Model ``k`` owns one :class:`numpy.random.SeedSequence` ``s_k``. Its children are, as in
:func:`pacpriv.dpsgd.trainer.train_dpsgd` (child 0 allocation, child 1 noise):

* child :data:`BATCH_STREAM` (0): the batch order (shuffling or random allocation);
* child :data:`NOISE_STREAM` (1): the Gaussian gradient noise;
* child :data:`INIT_STREAM` (2): the initialisation, when models are initialised from seeds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Literal

from pacpriv._validation import check_int, check_real

__all__ = [
    "BATCH_STREAM",
    "INIT_STREAM",
    "NOISE_STREAM",
    "SGD",
    "Adam",
    "Batching",
    "Clipping",
    "FullBatch",
    "Optimizer",
    "RandomAllocation",
    "Shuffled",
    "TrainingSpec",
]

#: Child of a model's seed that orders its batches (``train_dpsgd``'s allocation stream).
BATCH_STREAM = 0
#: Child of a model's seed that draws its gradient noise (``train_dpsgd``'s noise stream).
NOISE_STREAM = 1
#: Child of a model's seed that initialises it (``init="seeded"``).
INIT_STREAM = 2


@dataclass(frozen=True)
class SGD:
    """Stochastic gradient descent, numerically as :class:`torch.optim.SGD`.

    With ``d = g + weight_decay·θ``: the momentum buffer is ``b₁ = d`` on a model's first
    step, then ``b ← momentum·b + (1 − dampening)·d``; the step is ``θ ← θ − lr·b``
    (``θ ← θ − lr·(d + momentum·b)`` with Nesterov), or ``θ ← θ − lr·d`` without momentum
    (Sutskever et al., ICML 2013, Eq. 1-2, in torch's form).

    Parameters
    ----------
    learning_rate : float
        Step size ``lr > 0``.
    momentum : float, default 0.0
        In ``[0, 1)``.
    dampening : float, default 0.0
        In ``[0, 1]``.
    weight_decay : float, default 0.0
        L2 coefficient ``>= 0`` (the gradient of ``weight_decay/2·‖θ‖²``), never clipped.
    nesterov : bool, default False
        Nesterov momentum (needs ``momentum > 0`` and ``dampening = 0``, as in torch).

    Raises
    ------
    TypeError, ValueError
        If a value is of the wrong type or out of range.
    """

    learning_rate: float
    momentum: float = 0.0
    dampening: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False

    def __post_init__(self) -> None:
        _set(self, "learning_rate", check_real(self.learning_rate, "learning_rate", low=0.0,
                                               low_inclusive=False))
        _set(self, "momentum", check_real(self.momentum, "momentum", low=0.0, high=1.0,
                                          high_inclusive=False))
        _set(self, "dampening", check_real(self.dampening, "dampening", low=0.0, high=1.0))
        _set(self, "weight_decay", check_real(self.weight_decay, "weight_decay", low=0.0))
        if not isinstance(self.nesterov, bool):
            raise TypeError(f"`nesterov` must be a bool; got {type(self.nesterov).__name__}.")
        if self.nesterov and (self.momentum == 0 or self.dampening != 0):
            raise ValueError("`nesterov=True` needs momentum > 0 and dampening = 0; got "
                             f"momentum={self.momentum!r}, dampening={self.dampening!r}.")

    @property
    def n_state(self) -> int:
        """Tensors of optimiser state per parameter (the momentum buffer, or none)."""
        return 1 if self.momentum > 0 else 0


@dataclass(frozen=True)
class Adam:
    """Adam (Kingma & Ba, ICLR 2015, Algorithm 1), numerically as :class:`torch.optim.Adam`.

    L2 ``weight_decay`` is added to the gradient (torch's ``Adam``, not ``AdamW``); the bias
    corrections use each model's own step count.

    Parameters
    ----------
    learning_rate : float, default 1e-3
        Step size ``> 0``.
    beta1, beta2 : float, default 0.9, 0.999
        Decay rates in ``[0, 1)``.
    eps : float, default 1e-8
        Denominator stabiliser ``> 0``.
    weight_decay : float, default 0.0
        L2 coefficient ``>= 0``.

    Raises
    ------
    TypeError, ValueError
        If a value is of the wrong type or out of range.
    """

    learning_rate: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        _set(self, "learning_rate", check_real(self.learning_rate, "learning_rate", low=0.0,
                                               low_inclusive=False))
        for name in ("beta1", "beta2"):
            _set(self, name, check_real(getattr(self, name), name, low=0.0, high=1.0,
                                        high_inclusive=False))
        _set(self, "eps", check_real(self.eps, "eps", low=0.0, low_inclusive=False))
        _set(self, "weight_decay", check_real(self.weight_decay, "weight_decay", low=0.0))

    @property
    def n_state(self) -> int:
        """Tensors of optimiser state per parameter (first and second moments)."""
        return 2


@dataclass(frozen=True)
class FullBatch:
    """One step per epoch on the model's whole subset (full-batch gradient descent)."""


@dataclass(frozen=True)
class Shuffled:
    """Minibatches of a fresh permutation each epoch (sampling without replacement).

    Model ``k`` draws ``torch.randperm(n_k)`` from its batch generator every epoch and takes
    consecutive slices of ``batch_size`` (the last one shorter; ``drop_last=False``), so it
    takes ``ceil(n_k / batch_size)`` steps per epoch. The first epoch's batches are those of
    ``BatchSampler(RandomSampler(generator=g), batch_size, drop_last=False)``; a DataLoader
    also draws worker seeds from its generator, so its later epochs differ.

    Parameters
    ----------
    batch_size : int
        Records per minibatch, ``>= 1``.
    """

    batch_size: int

    def __post_init__(self) -> None:
        _set(self, "batch_size", check_int(self.batch_size, "batch_size", low=1))


@dataclass(frozen=True)
class RandomAllocation:
    """The batches of :func:`pacpriv.dpsgd.trainer.train_dpsgd`: random allocation.

    Every epoch each of the model's ``n_k`` records goes to one of ``steps_per_epoch`` (M)
    steps uniformly at random, so batch sizes are Multinomial and a step may be empty; every
    step, empty or not, divides the summed gradients by the *expected* batch size ``n_k / M``
    and takes an optimiser step (Feldman & Shenfeld, Privacy Amplification by Random
    Allocation, 2025; Chua et al., Balls-and-Bins Sampling for DP-SGD, AISTATS 2025).

    Parameters
    ----------
    steps_per_epoch : int
        M ``>= 1``.
    """

    steps_per_epoch: int

    def __post_init__(self) -> None:
        _set(self, "steps_per_epoch", check_int(self.steps_per_epoch, "steps_per_epoch", low=1))


@dataclass(frozen=True)
class Clipping:
    """Per-example gradient clipping, optionally with Gaussian noise (DP-SGD).

    Each example's gradient over all parameters jointly is scaled by
    ``min(1, C / (‖g_i‖₂ + 10⁻⁶))`` (opacus' stabiliser, as in ``train_dpsgd``); with
    ``noise_multiplier = σ > 0``, ``N(0, σ²C²I)`` is added to the clipped sum before the
    division by the batch divisor (Abadi et al., Deep Learning with Differential Privacy,
    CCS 2016, Algorithm 1).

    Parameters
    ----------
    max_grad_norm : float
        Clipping norm ``C > 0``.
    noise_multiplier : float, default 0.0
        ``σ >= 0``; ``σ > 0`` needs :class:`RandomAllocation` batching (the divisor must not
        depend on the realised batch, which would leak it).
    """

    max_grad_norm: float
    noise_multiplier: float = 0.0

    def __post_init__(self) -> None:
        _set(self, "max_grad_norm", check_real(self.max_grad_norm, "max_grad_norm", low=0.0,
                                               low_inclusive=False))
        _set(self, "noise_multiplier", check_real(self.noise_multiplier, "noise_multiplier",
                                                  low=0.0))


Optimizer = SGD | Adam
Batching = FullBatch | Shuffled | RandomAllocation


@dataclass(frozen=True)
class TrainingSpec:
    """How every model of an ensemble is trained (one spec for the ensemble and the reference).

    Parameters
    ----------
    optimizer : SGD or Adam
        The optimiser and its hyper-parameters.
    epochs : int
        Passes over each model's subset, ``>= 0`` (0: the models keep their initialisation).
    batching : FullBatch, Shuffled or RandomAllocation, default FullBatch()
        How each epoch is cut into steps.
    reduction : {"mean", "sum"}, default "mean"
        Divisor of a step's summed per-example gradients: the realised batch size (``mean``,
        torch's default loss reduction) or 1 (``sum``). :class:`RandomAllocation` always
        divides by the expected batch size ``n_k / M`` and needs ``"mean"`` here.
    clipping : Clipping or None, default None
        Per-example clipping (and noise); ``None``: plain gradients.
    loss : {"cross_entropy", "mse"} or callable, default "cross_entropy"
        Per-example loss (``callable(outputs, targets) -> (b,)``, one value per example).

    Notes
    -----
    A model whose subset is empty takes no step and keeps its initial parameters (as the
    sequential reference does, and as the ``mlp`` and compare logistic-regression mechanisms
    do for an empty subset).

    Raises
    ------
    TypeError
        If a setting is of the wrong type.
    ValueError
        If ``epochs < 0``, ``reduction`` is unknown, or noise is asked without random
        allocation.
    """

    optimizer: Optimizer
    epochs: int
    batching: Batching = field(default_factory=FullBatch)
    reduction: Literal["mean", "sum"] = "mean"
    clipping: Clipping | None = None
    loss: str | Callable = "cross_entropy"

    def __post_init__(self) -> None:
        if not isinstance(self.optimizer, (SGD, Adam)):
            raise TypeError("`optimizer` must be pacpriv.ensemble.SGD or Adam; got "
                            f"{type(self.optimizer).__name__}.")
        _set(self, "epochs", check_int(self.epochs, "epochs", low=0))
        if not isinstance(self.batching, (FullBatch, Shuffled, RandomAllocation)):
            raise TypeError("`batching` must be FullBatch, Shuffled or RandomAllocation; got "
                            f"{type(self.batching).__name__}.")
        if self.reduction not in ("mean", "sum"):
            raise ValueError(f"`reduction` must be 'mean' or 'sum'; got {self.reduction!r}.")
        if isinstance(self.batching, RandomAllocation) and self.reduction != "mean":
            raise ValueError("`reduction` must be 'mean' with RandomAllocation (it divides by "
                             f"the expected batch size n/M); got {self.reduction!r}.")
        if self.clipping is not None and not isinstance(self.clipping, Clipping):
            raise TypeError("`clipping` must be a pacpriv.ensemble.Clipping or None; got "
                            f"{type(self.clipping).__name__}.")
        if (self.clipping is not None and self.clipping.noise_multiplier > 0
                and not isinstance(self.batching, RandomAllocation)):
            raise ValueError("noise_multiplier > 0 needs batching=RandomAllocation(...) (the "
                             "DP-SGD divisor n/M); got "
                             f"{type(self.batching).__name__}.")

    def to_dict(self) -> dict:
        """JSON-serialisable settings, with the class name of each part."""
        out: dict = {"epochs": self.epochs, "reduction": self.reduction,
                     "loss": self.loss if isinstance(self.loss, str) else "callable"}
        for name in ("optimizer", "batching", "clipping"):
            part = getattr(self, name)
            out[name] = None if part is None else {"type": type(part).__name__, **asdict(part)}
        return out


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)
