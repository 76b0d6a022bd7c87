"""Model families an audit can attack: DP-SGD torch models, scikit-learn estimators, PAC releases.

A family is a small picklable object that trains one model on a subset and scores records
under it; it also says which certified curve its training algorithm has and, for DP
algorithms, the accountant's ε. The interface (duck-typed, see :class:`ModelFamily`):

* ``fit(X, y, *, rng) -> model`` -- train on ``(X, y)``, every random choice from ``rng``;
* ``statistics(model, X, y) -> (n,)`` -- the logit-scaled confidence
  ``φ = log p(y|x) − log(1 − p(y|x))`` of each record, computed from the logits as
  ``z_y − logsumexp_{c ≠ y} z_c`` (stable for confident predictions; Carlini et al., S&P 2022,
  Sec. IV-C);
* ``describe() -> dict`` -- public facts of the training algorithm (no data);
* ``certified_curves(fpr) -> tuple of TradeoffCurve`` -- the first is the audit's
  "certified curve";
* ``accountant_epsilon(delta) -> (ε or None, label)``.

Labels are class indices ``0 .. C−1`` (torch models and PAC releases) or any labels the
estimator was fitted on (scikit-learn; mapped through ``classes_``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from scipy import special

from pacpriv._numbers import format_bound
from pacpriv._optional import import_torch
from pacpriv._random import MODEL_INIT_STREAM, MODEL_TRAINING_STREAM, trial_seed
from pacpriv._torch_models import MLPFactory, one_torch_thread
from pacpriv._validation import check_int, check_real
from pacpriv.audit._accountant import checked_call, dpsgd_epsilon
from pacpriv.audit._curves import TradeoffCurve, accuracy_curve, mi_curve, trivial_curve
from pacpriv.registry import Registry

__all__ = ["DPSGDModel", "EstimatorModel", "ImageShift", "LinearLogits", "MLPFactory",
           "ModelFamily", "PacReleaseModel", "image_shifts", "phi_from_logits"]


class ModelFamily(Protocol):
    """What :func:`pacpriv.audit.run_audit` needs from a model family (see the module doc)."""

    def fit(self, X: Any, y: Any, *, rng: np.random.Generator) -> Any: ...

    def statistics(self, model: Any, X: Any, y: Any) -> np.ndarray: ...

    def describe(self) -> dict: ...

    def certified_curves(self, fpr: np.ndarray) -> tuple[TradeoffCurve, ...]: ...

    def accountant_epsilon(self, delta: float) -> tuple[float | None, str]: ...


def phi_from_logits(logits, y) -> np.ndarray:
    """``φ = z_y − logsumexp_{c ≠ y} z_c`` per row (logits or log-probabilities, float64).

    Parameters
    ----------
    logits : array-like of shape (n, C)
        ``C >= 2`` scores; a single column ``(n, 1)`` is read as the logit of class 1 against 0.
    y : array-like of int, shape (n,)
        Class indices in ``[0, C)``.

    Raises
    ------
    ValueError
        If the shapes disagree or a label is outside ``[0, C)`` (counts only in the message).
    """
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim == 2 and z.shape[1] == 1:
        z = np.hstack([np.zeros_like(z), z])
    labels = np.asarray(y)
    if z.ndim != 2 or labels.shape != (z.shape[0],):
        raise ValueError(f"logits of shape (n, C) and labels of shape (n,) are needed; got "
                         f"{z.shape} and {labels.shape}.")
    if labels.size and (labels.dtype.kind not in "iu" or labels.min() < 0
                        or labels.max() >= z.shape[1]):
        bad = int(np.sum((labels < 0) | (labels >= z.shape[1]))) if labels.dtype.kind in "iu" \
            else labels.size
        raise ValueError(f"labels must be class indices in [0, {z.shape[1]}); {bad} are not.")
    rows = np.arange(z.shape[0])
    zy = z[rows, labels]
    other = z.copy()
    other[rows, labels] = -np.inf
    return zy - special.logsumexp(other, axis=1)


#: The audit's built-in torch models: name -> ``factory(n_features, n_classes, hidden)`` of an
#: :class:`MLPFactory` (the ``--model`` choices beside ``module:attr`` / ``file.py:attr``).
MODELS: Registry[Callable[[int, int, int], MLPFactory]] = Registry("model", argument="model",
                                                                    callable_entries=True)
MODELS.register("logistic", lambda p, k, hidden: MLPFactory(p, k, ()),
                doc="multinomial logistic regression")
MODELS.register("mlp", lambda p, k, hidden: MLPFactory(p, k, (hidden,)),
                doc="one-hidden-layer tanh MLP (--hidden units)")


def _seed_from(rng: np.random.Generator) -> np.random.SeedSequence:
    return np.random.SeedSequence([int(w) for w in rng.integers(0, 2**32, size=4)])


@dataclass(frozen=True)
class DPSGDModel:
    """A torch classifier trained by :func:`pacpriv.dpsgd.trainer.train_dpsgd` (random allocation).

    Parameters
    ----------
    model_factory : callable
        ``model_factory() -> torch.nn.Module`` returning logits of shape ``(n, C)``; picklable
        for process backends (e.g. :class:`MLPFactory`). Initialised under a seed from ``rng``.
    noise_multiplier : float
        σ >= 0; σ = 0 trains without noise (``max_grad_norm=None``: without clipping too), a
        non-private twin with the same batching.
    steps_per_epoch, epochs : int
        M and E.
    max_grad_norm : float or None, default 1.0
        Clipping norm C (None only with σ = 0).
    learning_rate : float, default 0.5
        SGD step size.
    target_accuracy : float or None
        The accuracy bound σ was calibrated to (shown in the report), if any.
    ensemble : bool, default False
        Train the audit's reference batch with :func:`pacpriv.ensemble.train_ensemble`
        (``torch.func``, all models as one program; the same DP-SGD: random allocation,
        per-example clipping, noise ``N(0, σ²C²I)``, SGD, initialisation from each model's
        seed), in blocks (:meth:`fit_block`). On a CPU it is several times faster without
        clipping and slower with per-example clipping. ``fit`` (one model, e.g. the one-run
        audit's) always uses :func:`pacpriv.dpsgd.trainer.train_dpsgd`.
    """

    model_factory: Callable[[], Any]
    noise_multiplier: float
    steps_per_epoch: int = field(metadata={
        "flag": "--steps-per-epoch",
        "help": "steps per epoch M >= 1; each record used at one random step per epoch"})
    epochs: int = field(metadata={"flag": "--epochs", "help": "epochs E >= 1"})
    max_grad_norm: float | None = field(default=1.0, metadata={
        "flag": "--max-grad-norm",
        "help": "DP-SGD clipping norm C > 0 (unused with --non-private)"})
    learning_rate: float = field(default=0.5, metadata={"flag": "--learning-rate",
                                                        "help": "SGD step size > 0"})
    target_accuracy: float | None = None
    ensemble: bool = field(default=False, metadata={
        "flag": "--ensemble", "help": "train the reference models with pacpriv.ensemble "
        "(vectorised, one program; several times faster without clipping, slower with it on "
        "a CPU)"})

    def __post_init__(self) -> None:
        if not isinstance(self.ensemble, bool):
            raise TypeError(f"`ensemble` must be a bool; got {type(self.ensemble).__name__}.")
        if not callable(self.model_factory):
            raise TypeError("`model_factory` must be callable; got "
                            f"{type(self.model_factory).__name__}.")
        sigma = check_real(self.noise_multiplier, "noise_multiplier", low=0.0)
        check_int(self.steps_per_epoch, "steps_per_epoch", low=1)
        check_int(self.epochs, "epochs", low=1)
        check_real(self.learning_rate, "learning_rate", low=0.0, low_inclusive=False)
        if self.max_grad_norm is None and sigma > 0:
            raise ValueError("`max_grad_norm` must be a positive number when noise_multiplier "
                             f"> 0; got None with noise_multiplier={sigma!r}.")
        if self.max_grad_norm is not None:
            check_real(self.max_grad_norm, "max_grad_norm", low=0.0, low_inclusive=False)

    @classmethod
    def for_accuracy(cls, model_factory: Callable[[], Any], target_accuracy: float, *,
                     steps_per_epoch: int, epochs: int, method: str = "exact",
                     **options: Any) -> DPSGDModel:
        """The family trained at the σ whose membership-inference accuracy bound is
        ``target_accuracy`` (the DP-SGD audit game of :func:`pacpriv.audit.run_audit`).

        Parameters
        ----------
        model_factory : callable
            As for the class.
        target_accuracy : float
            The accuracy bound, in (½, 1).
        steps_per_epoch, epochs : int
            M >= 1 and E >= 1.
        method : {"exact", "closed-form"}, default "exact"
            Calibration of :func:`pacpriv.dpsgd.noise_multiplier_for_accuracy`: the certified
            exact accuracy, or the chi-square closed form (more noise, conservative).
        **options
            ``max_grad_norm``, ``learning_rate``, ``ensemble`` (as for the class).

        Raises
        ------
        ValueError
            If ``target_accuracy`` is outside (½, 1), ``method`` is unknown or M, E < 1.
        """
        from pacpriv.dpsgd import noise_multiplier_for_accuracy

        target = check_real(target_accuracy, "target_accuracy", low=0.5, high=1.0,
                            low_inclusive=False, high_inclusive=False)
        if method not in ("exact", "closed-form"):
            raise ValueError(f"`method` must be 'exact' or 'closed-form'; got {method!r}.")
        sigma = float(noise_multiplier_for_accuracy(
            target_accuracy=target, steps_per_epoch=check_int(steps_per_epoch,
                                                              "steps_per_epoch", low=1),
            epochs=check_int(epochs, "epochs", low=1), method=method))
        return cls(model_factory, noise_multiplier=sigma, steps_per_epoch=steps_per_epoch,
                   epochs=epochs, target_accuracy=target, **options)

    def fit(self, X, y, *, rng: np.random.Generator):
        """A fresh model trained with DP-SGD on ``(X, y)``; init, allocation, noise from ``rng``."""
        torch = import_torch("DPSGDModel")
        from pacpriv.dpsgd.trainer import _train_dpsgd  # imports torch

        seed = _seed_from(rng)
        init = int(trial_seed(seed, MODEL_INIT_STREAM).generate_state(1, dtype=np.uint64)[0])
        lr = float(self.learning_rate)
        with one_torch_thread():
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(init)
                model = self.model_factory()
            _train_dpsgd(model, torch.nn.CrossEntropyLoss(), X, np.asarray(y, dtype=np.int64),
                        noise_multiplier=float(self.noise_multiplier),
                        steps_per_epoch=int(self.steps_per_epoch), epochs=int(self.epochs),
                        max_grad_norm=self.max_grad_norm,
                        optimizer=lambda params: torch.optim.SGD(params, lr=lr),
                        rng=trial_seed(seed, MODEL_TRAINING_STREAM), warn_where=None)
        return model

    @property
    def supports_blocks(self) -> bool:
        """Whether reference batches are trained by :meth:`fit_block` (``ensemble=True``)."""
        return self.ensemble

    def fit_block(self, X, y, masks, *, seeds):
        """``len(seeds)`` models at once, model ``b`` on ``X[masks[b]]`` from ``seeds[b]``
        (:func:`pacpriv.ensemble.train_ensemble`; children 0 allocation, 1 noise, 2 init)."""
        torch = import_torch("DPSGDModel")
        from pacpriv.ensemble import SGD, Clipping, RandomAllocation, TrainingSpec, train_ensemble

        clipping = None if self.max_grad_norm is None else Clipping(
            float(self.max_grad_norm), noise_multiplier=float(self.noise_multiplier))
        spec = TrainingSpec(SGD(float(self.learning_rate)), epochs=int(self.epochs),
                            batching=RandomAllocation(int(self.steps_per_epoch)),
                            clipping=clipping)
        with one_torch_thread():
            with torch.random.fork_rng(devices=[]):
                template = self.model_factory()  # the architecture; init from the seeds
            return train_ensemble(template, X, np.asarray(y, dtype=np.int64), masks,
                                  seeds=list(seeds), training=spec, init="seeded")

    def statistics_block(self, models, X, y) -> np.ndarray:
        """φ of each record under each model of a block, shape ``(B, n)``."""
        import_torch("DPSGDModel")  # a missing torch is named by the family
        with one_torch_thread():
            logits = models.evaluate(np.asarray(X))
        labels = np.asarray(y)
        return np.stack([phi_from_logits(z, labels) for z in logits])

    def statistics(self, model, X, y) -> np.ndarray:
        """φ of each record from the model's logits (eval mode, no gradients)."""
        torch = import_torch("DPSGDModel")
        first = next(iter(model.parameters()))
        with one_torch_thread(), torch.no_grad():
            was = model.training
            model.eval()
            try:
                logits = model(torch.as_tensor(np.asarray(X), dtype=first.dtype))
            finally:
                model.train(was)
        return phi_from_logits(logits.detach().cpu().double().numpy(), np.asarray(y))

    def describe(self) -> dict:
        """Training algorithm, architecture and the DP-SGD parameters."""
        arch = getattr(self.model_factory, "describe", None)
        return {
            "training": ("DP-SGD with random allocation" if self.noise_multiplier > 0
                         else "non-private SGD (same random-allocation batching, σ = 0"
                         + (", no clipping)" if self.max_grad_norm is None else ")")),
            "architecture": arch() if callable(arch) else type(self.model_factory).__name__,
            "noise_multiplier": float(self.noise_multiplier),
            "steps_per_epoch": int(self.steps_per_epoch), "epochs": int(self.epochs),
            "max_grad_norm": self.max_grad_norm, "learning_rate": float(self.learning_rate),
            "target_accuracy": self.target_accuracy,
        }

    def certified_curves(self, fpr) -> tuple[TradeoffCurve, ...]:
        """The pessimistic-PLD trade-off curve and the exact-accuracy (TV) curve."""
        sigma, M, E = float(self.noise_multiplier), int(self.steps_per_epoch), int(self.epochs)
        if sigma == 0:
            return (trivial_curve(fpr, reason="non-private training, σ = 0"),)
        from pacpriv.dpsgd import exact_membership_inference_accuracy

        exact = exact_membership_inference_accuracy(sigma, steps_per_epoch=M, epochs=E)
        tv = accuracy_curve(
            float(exact.upper), fpr,
            label=(f"DP-SGD, random allocation (σ = {format_bound(sigma, 6, side='down')}, "
                   f"M = {M}, E = {E}), certified exact membership-inference accuracy"))
        pld = _pld_curve(sigma, M, E, fpr)
        return (tv,) if pld is None else (pld, tv)

    def accountant_epsilon(self, delta: float) -> tuple[float | None, str]:
        """A certified upper bound on ε(δ) (:func:`pacpriv.audit._accountant.dpsgd_epsilon`)."""
        return dpsgd_epsilon(float(self.noise_multiplier), steps_per_epoch=self.steps_per_epoch,
                             epochs=self.epochs, delta=delta)


def _pld_curve(sigma: float, steps: int, epochs: int, fpr) -> TradeoffCurve | None:
    """The pessimistic-PLD trade-off curve of :func:`pacpriv.dpsgd.tradeoff_curve` (None when
    its numerics overflowed: then the exact-accuracy curve is the certified one)."""
    from pacpriv.dpsgd import tradeoff_curve

    grid = np.asarray(fpr, dtype=float)
    curve = checked_call(lambda: tradeoff_curve(noise_multiplier=sigma, steps_per_epoch=steps,
                                                epochs=epochs, k=1, fpr=grid))
    if curve is None:
        return None
    kind = "certified" if curve.certified else "estimated"
    return TradeoffCurve(
        label=(f"{kind}: DP-SGD, random allocation (σ = {format_bound(sigma, 6, side='down')}, "
               f"M = {steps}, E = {epochs}), pessimistic privacy-loss distribution, "
               "TPR <= min over ε of e^ε·FPR + δ(ε)"),
        certified=bool(curve.certified), confidence=None, scope="every record", fpr=grid,
        tpr=np.minimum(1.0, np.maximum.accumulate(np.asarray(curve.tpr, dtype=float))))


#: log of the smallest normal float64: the floor of an estimator's log-probabilities.
_LOG_TINY = float(np.log(np.finfo(np.float64).tiny))


@dataclass(frozen=True)
class EstimatorModel:
    """A scikit-learn classifier with ``predict_log_proba`` (or ``predict_proba``), non-private.

    Each fit uses ``sklearn.base.clone(estimator)``; a ``random_state`` left at None is set from
    ``rng``. Fitting runs with one BLAS thread (``threadpoolctl``), so results do not depend on
    the number of workers.
    """

    estimator: Any

    def fit(self, X, y, *, rng: np.random.Generator):
        """A fitted clone of the estimator."""
        from sklearn.base import clone
        from threadpoolctl import threadpool_limits

        est = clone(self.estimator)
        if est.get_params().get("random_state", 0) is None:
            est.set_params(random_state=int(rng.integers(0, 2**31 - 1)))
        with threadpool_limits(limits=1):
            est.fit(np.asarray(X), np.asarray(y))
        return est

    def statistics(self, model, X, y) -> np.ndarray:
        """φ from ``predict_log_proba``; a label the model never saw is an error."""
        from threadpoolctl import threadpool_limits

        classes = np.asarray(model.classes_)
        labels = np.asarray(y)
        idx = np.searchsorted(classes, labels)
        unseen = (idx >= classes.size) | (classes[np.minimum(idx, classes.size - 1)] != labels)
        if np.any(unseen):
            raise ValueError(f"{int(unseen.sum())} record(s) carry a label the fitted estimator "
                             "never saw (a class missing from its training subset).")
        with threadpool_limits(limits=1), np.errstate(divide="ignore"):
            if hasattr(model, "predict_log_proba"):
                logp = model.predict_log_proba(np.asarray(X))
            else:
                logp = np.log(model.predict_proba(np.asarray(X)))
        # trees, forests and neighbours predict exact 0s: floor log p at the smallest normal
        # float's log (order kept for every representable probability, φ stays finite)
        logp = np.maximum(np.asarray(logp, dtype=np.float64), _LOG_TINY)
        return phi_from_logits(logp, idx)

    def describe(self) -> dict:
        """The estimator's class name (parameters are public too, but may be long)."""
        return {"training": "non-private scikit-learn fit",
                "architecture": type(self.estimator).__name__}

    def certified_curves(self, fpr) -> tuple[TradeoffCurve, ...]:
        """No bound: the trivial curve."""
        return (trivial_curve(fpr, reason="non-private scikit-learn estimator"),)

    def accountant_epsilon(self, delta: float) -> tuple[float | None, str]:
        """``(inf, "not private")``."""
        return math.inf, "not private (no accountant)"


@dataclass(frozen=True)
class PacReleaseModel:
    """A model released by PAC Privacy: ``f(subset) + B`` with the plan's Gaussian noise.

    Parameters
    ----------
    mechanism : callable
        ``f(subset) -> (d,)`` as given to :func:`pacpriv.pac.run_pac` (``subset = (X, y)``;
        ``rng=`` passed when its signature has it), e.g. a
        :class:`pacpriv.pac.engine.EstimatorMechanism`.
    plan : NoisePlan
        The calibrated noise (``result.plan``), calibrated on subsets of this pool drawn with
        inclusion probability ½ -- the game the audit plays.
    logits : callable
        ``logits(released_vector, X) -> (n, C)`` class scores of the released model.
    """

    mechanism: Callable[..., Any]
    plan: Any
    logits: Callable[[np.ndarray, np.ndarray], Any]

    def __post_init__(self) -> None:
        from pacpriv.pac.noise._plan import NoisePlan

        if not isinstance(self.plan, NoisePlan):
            raise TypeError(f"`plan` must be a NoisePlan; got {type(self.plan).__name__}.")
        if not callable(self.mechanism) or not callable(self.logits):
            raise TypeError("`mechanism` and `logits` must be callable.")
        rate = getattr(self.plan, "sampling_rate", 0.5)
        if rate != 0.5:
            raise ValueError(f"a per-record plan must be calibrated at sampling rate 0.5 (the "
                             f"audit's membership prior); got {rate!r}.")

    def fit(self, X, y, *, rng: np.random.Generator) -> np.ndarray:
        """One release: the mechanism on ``(X, y)`` plus one draw of the plan's noise."""
        from pacpriv.pac.engine._mechanism import call_mechanism, check_output
        from pacpriv.pac.release import privatize

        value = check_output(call_mechanism(self.mechanism, (np.asarray(X), np.asarray(y)),
                                            rng=rng), self.plan.dim)
        return privatize(value, self.plan, rng=rng)

    def statistics(self, model, X, y) -> np.ndarray:
        """φ from ``logits(released_vector, X)``."""
        return phi_from_logits(self.logits(model, np.asarray(X)), np.asarray(y))

    def describe(self) -> dict:
        """The plan's rule, budget and certification wording."""
        return {"training": "PAC Privacy release f(X) + B", "noise_rule": self.plan.rule,
                "mi_budget_nats": float(self.plan.mi_budget),
                "mi_claim_nats": float(self.plan.mi_claim), "certification": self.plan.label}

    def certified_curves(self, fpr) -> tuple[TradeoffCurve, ...]:
        """The MI-budget curve of the plan's claim (every record) and, for a per-record plan,
        the accuracy curve of its certificate (the audited records only)."""
        plan = self.plan
        curves = [mi_curve(
            float(plan.mi_claim), fpr, label=f"PAC Privacy ({plan.rule} noise rule)",
            certified=bool(plan.certified),
            confidence=float(plan.confidence) if plan.certified else None)]
        per_record = getattr(plan, "max_accuracy_upper", None)
        if per_record is not None:
            curves.append(accuracy_curve(
                float(per_record), fpr, confidence=float(plan.accuracy_confidence),
                scope=f"the {int(np.asarray(plan.records).size)} audited records of the plan",
                label="per-record PAC certificate (informed adversary)"))
        return tuple(curves)

    def accountant_epsilon(self, delta: float) -> tuple[float | None, str]:
        """PAC Privacy has no ε: ``(None, reason)``."""
        return None, "PAC Privacy bounds mutual information, not (ε, δ)"


@dataclass(frozen=True)
class ImageShift:
    """One augmentation of flattened ``height × width`` images: a shift by ``(dy, dx)`` pixels
    with zero fill (the record's own query is never shifted)."""

    height: int
    width: int
    dy: int
    dx: int

    def __call__(self, X) -> np.ndarray:
        """The shifted images, same shape as ``X`` (``(n, height·width)``)."""
        arr = np.asarray(X, dtype=np.float64)
        imgs = arr.reshape(arr.shape[0], self.height, self.width)
        out = np.zeros_like(imgs)
        ys = slice(max(self.dy, 0), self.height + min(self.dy, 0))
        xs = slice(max(self.dx, 0), self.width + min(self.dx, 0))
        ys_src = slice(max(-self.dy, 0), self.height + min(-self.dy, 0))
        xs_src = slice(max(-self.dx, 0), self.width + min(-self.dx, 0))
        out[:, ys, xs] = imgs[:, ys_src, xs_src]
        return out.reshape(arr.shape)


def image_shifts(height: int, width: int) -> tuple[ImageShift, ...]:
    """The four one-pixel shifts (up, down, left, right) of flattened images, as LiRA's
    augmented queries (Carlini et al., S&P 2022, Sec. IV-C uses shifts and flips; digits are
    not mirror-symmetric, so no flips)."""
    h = check_int(height, "height", low=2)
    w = check_int(width, "width", low=2)
    return tuple(ImageShift(h, w, dy, dx) for dy, dx in ((1, 0), (-1, 0), (0, 1), (0, -1)))


@dataclass(frozen=True)
class LinearLogits:
    """Logits of a released linear model ``[coef_ (k × p) flattened, intercept_ (k)]``, the
    layout of :class:`pacpriv.pac.engine.EstimatorMechanism` with its default attributes.

    ``k = 1`` (a binary scikit-learn classifier) gives one logit column (class 1 against 0).
    """

    n_features: int
    n_outputs: int

    def __call__(self, vector, X) -> np.ndarray:
        """``X @ W.T + b`` of shape ``(n, k)``."""
        v = np.asarray(vector, dtype=np.float64)
        p, k = int(self.n_features), int(self.n_outputs)
        if v.shape != (k * p + k,):
            raise ValueError(f"a linear model with {k} output(s) and {p} features has "
                             f"{k * p + k} parameters; got a vector of shape {v.shape}.")
        return np.asarray(X, dtype=np.float64) @ v[: k * p].reshape(k, p).T + v[k * p:]

