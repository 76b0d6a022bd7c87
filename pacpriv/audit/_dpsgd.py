"""Empirical audit of DP-SGD with random allocation: attack trained models, compare with the bound.

:func:`audit_dpsgd` splits a data pool at random into members (half) and non-members, trains
a model on the members with :func:`pacpriv.dpsgd.trainer.train_dpsgd`, attacks it with the
loss-threshold attack and offline LiRA (shadow models trained with the same algorithm on
random halves of the pool), and reports the measured attack accuracies, with confidence
intervals, next to the membership-inference accuracy bound of [1]_ for the σ used.

An attack accuracy whose *lower* confidence limit exceeds the bound would refute the bound
(or reveal a bug in the trainer); one whose *upper* limit is below it shows, with that
confidence, that these attacks stay below the bound. Attacks are lower bounds on leakage, so
a small measured accuracy never certifies privacy on its own.

torch is imported lazily (``pip install pacpriv[torch]``).

References
----------
.. [1] Membership-inference accuracy bound for DP-SGD with random allocation (RA-MIA,
   CWI / VU Amsterdam): accuracy <= ½ + ¼ sqrt((1 + (e^{1/σ²} - 1)/M)^E - 1).
.. [2] N. Carlini et al., Membership Inference Attacks From First Principles, S&P 2022.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pacpriv._display import Displayable, Summary, shown_estimate
from pacpriv._json import field_values
from pacpriv._optional import import_torch
from pacpriv._random import (
    AUDIT_ATTACK_STREAM,
    AUDIT_MODELS_STREAM,
    AUDIT_SPLIT_STREAM,
    MODEL_INIT_STREAM,
    MODEL_TRAINING_STREAM,
    RNGLike,
    as_seed_sequence,
    seed_to_dict,
    trial_seed,
)
from pacpriv._validation import check_int, check_real, keyword_fields
from pacpriv.audit._attacks import (
    AttackResult,
    evaluate_attack,
    logit_scaled_confidence,
    loss_threshold_attack,
)
from pacpriv.audit._lira import lira_scores
from pacpriv.dpsgd.bounds import membership_inference_accuracy_bound, parameter_rows
from pacpriv.dpsgd.calibration import noise_multiplier_for_accuracy
from pacpriv.dpsgd.spec import DPSGDSpec, spec_triple, with_max_grad_norm

__all__ = ["AuditResult", "audit_dpsgd"]


@dataclass(frozen=True)
class AuditResult(Displayable):
    """Outcome of :func:`audit_dpsgd`.

    Attributes
    ----------
    noise_multiplier : float
        σ used for the target and the shadow models.
    steps_per_epoch, epochs : int
        M and E.
    max_grad_norm : float or None
        Clipping norm C (``None``: non-private training, bound 1).
    accuracy_bound : float
        Membership-inference accuracy bound the audit checks against: ``target_accuracy``
        when σ was calibrated to it, otherwise the chi-square closed form at σ.
    chi_square_bound : float
        Closed-form bound ½ + ¼ sqrt((1 + (e^{1/σ²} - 1)/M)^E - 1) at σ (1 when σ = 0).
    target_accuracy : float or None
        Calibration target, if σ was calibrated.
    calibration_method : str or None
        ``"exact"`` or ``"closed-form"`` when σ was calibrated.
    loss_attack : AttackResult
        Loss-threshold attack on members vs non-members.
    lira_attack : AttackResult or None
        Offline LiRA with ``n_shadow_models`` shadows (``None`` when 0).
    n_shadow_models : int
        Number of shadow models (each record is OUT in exactly half of them).
    bound_violated : bool
        True if some attack's lower confidence limit exceeds ``accuracy_bound``.
    train_accuracy, test_accuracy : float or None
        Classification accuracy of the target model on members / non-members (``None`` if the
        targets are not integer class labels).
    n_members, n_nonmembers : int
        Sizes of the random split of the pool.
    seed : dict
        ``seed_to_dict`` of the root seed.
    """

    noise_multiplier: float
    steps_per_epoch: int
    epochs: int
    max_grad_norm: float | None
    accuracy_bound: float
    chi_square_bound: float
    target_accuracy: float | None
    calibration_method: str | None
    loss_attack: AttackResult
    lira_attack: AttackResult | None
    n_shadow_models: int
    bound_violated: bool
    train_accuracy: float | None
    test_accuracy: float | None
    n_members: int
    n_nonmembers: int
    seed: dict

    def summary(self) -> Summary:
        """Rows shown by ``str(result)`` and in Jupyter: the certified bounds (rounded up)
        beside the measured attack accuracies (estimates with their intervals)."""
        def attack(result: AttackResult | None) -> str | None:
            return None if result is None else shown_estimate(
                result.accuracy, result.ci_low, result.ci_high, result.confidence)

        calibrated = (None if self.target_accuracy is None
                      else f"{self.target_accuracy:g} ({self.calibration_method})")
        return Summary("DP-SGD audit: attacks on the trained model against the bound", [
            *parameter_rows(self.noise_multiplier, self.steps_per_epoch, self.epochs),
            ("clipping norm C", self.max_grad_norm, "plain"),
            ("σ calibrated to accuracy", calibrated, "plain"),
            ("accuracy bound (certified)", self.accuracy_bound, "risk"),
            ("chi-square bound at σ (certified)", self.chi_square_bound, "risk"),
            ("loss-threshold attack accuracy", attack(self.loss_attack), "plain"),
            (f"LiRA accuracy ({self.n_shadow_models} shadow models)", attack(self.lira_attack),
             "plain"),
            ("bound violated", self.bound_violated, "plain"),
            ("model accuracy on members", self.train_accuracy, "plain"),
            ("model accuracy on non-members", self.test_accuracy, "plain"),
            ("members / non-members", f"{self.n_members} / {self.n_nonmembers}", "plain"),
        ])

    def to_dict(self) -> dict:
        """JSON-serialisable dictionary (attack results nested as dictionaries)."""
        return {
            **field_values(self),
            "loss_attack": self.loss_attack.to_dict(),
            "lira_attack": None if self.lira_attack is None else self.lira_attack.to_dict(),
        }


def _fit(torch, model_factory, loss_fn, X, y, seed, *, optimizer, **train_kwargs):
    """Build a model with a seeded init (global torch RNG untouched) and train it."""
    from pacpriv.dpsgd.trainer import train_dpsgd  # imports torch (extra pacpriv[torch])

    init_seed = int(trial_seed(seed, MODEL_INIT_STREAM).generate_state(1, dtype=np.uint64)[0])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(init_seed)
        model = model_factory()
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            f"`model_factory` must return a torch.nn.Module; got {type(model).__name__}."
        )
    train_dpsgd(model, loss_fn, X, y, optimizer=optimizer, rng=trial_seed(seed,
                                                                          MODEL_TRAINING_STREAM),
                **train_kwargs)
    return model


def _class_accuracy(torch, model, X, y) -> float | None:
    if not np.issubdtype(np.asarray(y).dtype, np.integer):
        return None
    first = next(iter(model.parameters()))
    with torch.no_grad():
        out = model(torch.as_tensor(X).to(dtype=first.dtype, device=first.device))
    if out.ndim != 2:
        return None
    return float(np.mean(out.argmax(1).cpu().numpy() == np.asarray(y)))


def _bounds(sigma, M, E, target_accuracy):
    if sigma == 0:
        return 1.0, 1.0
    chi2 = float(
        membership_inference_accuracy_bound(sigma, steps_per_epoch=M, epochs=E).accuracy
    )
    return (chi2 if target_accuracy is None else target_accuracy), chi2


#: Streams of :func:`audit_dpsgd`'s root beyond the audit's common ones (pacpriv._random):
#: the LiRA attack's randomness, and shadow model ``s`` at ``_SHADOW_STREAMS + s`` (whose own
#: child ``_SHADOW_SPLIT_STREAM`` draws the half it trains on).
_LIRA_ATTACK_STREAM, _SHADOW_STREAMS, _SHADOW_SPLIT_STREAM = 3, 4, 2

#: The DP-SGD settings :func:`audit_dpsgd` takes as keywords (or in ``spec``).
AUDIT_KEYWORDS = ("noise_multiplier", "steps_per_epoch", "epochs", "max_grad_norm",
                  "target_accuracy", "calibration_method")


def audit_dpsgd(
    X,
    y,
    *,
    model_factory: Callable[[], object],
    loss_fn: Callable,
    spec: DPSGDSpec | None = None,
    optimizer: Callable | None = None,
    n_shadow_models: int = 8,
    confidence: float = 0.95,
    rng: RNGLike = None,
    **settings: Any,
) -> AuditResult:
    """Train on a random half of ``(X, y)`` with DP-SGD, attack the model, compare with the bound.

    The DP-SGD settings come in ``spec`` or as the keywords ``noise_multiplier``,
    ``steps_per_epoch``, ``epochs``, ``max_grad_norm``, ``target_accuracy`` and
    ``calibration_method`` (``settings``); ``max_grad_norm`` is required unless ``spec``
    gives it.

    Parameters
    ----------
    X : array-like of shape (n, ...)
        Data pool (e.g. standardised features of a bundled dataset); n >= 8.
    y : array-like of shape (n, ...)
        Targets.
    model_factory : callable
        ``model_factory() -> torch.nn.Module``, a fresh model; called ``1 + n_shadow_models``
        times under :func:`torch.random.fork_rng` with a seed derived from ``rng``.
    loss_fn : callable
        As in :func:`pacpriv.dpsgd.trainer.train_dpsgd`. LiRA's logit scaling assumes
        ``loss = -log p(y | x)`` (cross-entropy); for other losses its statistic is still a
        decreasing function of the loss.
    steps_per_epoch, epochs : int
        M >= 1 and E >= 1.
    max_grad_norm : float or None
        Clipping norm C (``None`` only with ``noise_multiplier=0``).
    noise_multiplier : float, optional
        σ >= 0. Give exactly one of ``noise_multiplier`` and ``target_accuracy``.
    target_accuracy : float, optional
        Calibrate σ so the membership-inference accuracy bound is ``target_accuracy`` (in
        (½, 1)) with :func:`pacpriv.dpsgd.calibration.noise_multiplier_for_accuracy`.
    calibration_method : {"exact", "closed-form"}, default "exact"
        Calibration rule: the certified exact accuracy, or the chi-square closed form (more
        noise, conservative).
    optimizer : callable, optional
        Factory ``params -> torch.optim.Optimizer`` (one optimizer per model); default SGD(0.1).
    n_shadow_models : int, default 8
        Even number >= 0 of LiRA shadow models, in complementary pairs of halves.
    confidence : float, default 0.95
        Level of the attack accuracy intervals.
    rng : None, int, SeedSequence or Generator
        Root seed (split, inits, allocations, noise, attack splits); None = fresh OS entropy.
        Either way it is recorded in the result's ``seed``, which regenerates the split and
        every model: an audit is an evaluation (its attacks need known members), its models
        are never returned, and none of them may be deployed as a private release (train
        that with :func:`pacpriv.dpsgd.trainer.train_dpsgd` and ``rng=None``).
    spec : DPSGDSpec, optional
        Instead of ``noise_multiplier``, ``steps_per_epoch``, ``epochs`` (see ``spec_arguments``).

    Returns
    -------
    AuditResult

    Raises
    ------
    ValueError
        If both or neither of ``noise_multiplier`` and ``target_accuracy`` are given, a
        scalar is out of range, or the pool has fewer than 8 records.
    """
    given = with_max_grad_norm(keyword_fields(settings, AUDIT_KEYWORDS, where="audit_dpsgd",
                                              owner="DPSGDSpec"), spec, "audit_dpsgd")
    return _audit_dpsgd(X, y, model_factory=model_factory, loss_fn=loss_fn, spec=spec,
                        optimizer=optimizer, n_shadow_models=n_shadow_models,
                        confidence=confidence, rng=rng, **given)


def _audit_dpsgd(
    X,
    y,
    *,
    model_factory: Callable[[], object],
    loss_fn: Callable,
    steps_per_epoch: int | None = None,
    epochs: int | None = None,
    max_grad_norm: float | None,
    noise_multiplier: float | None = None,
    target_accuracy: float | None = None,
    calibration_method: str = "exact",
    optimizer: Callable | None = None,
    n_shadow_models: int = 8,
    confidence: float = 0.95,
    rng: RNGLike = None,
    spec: DPSGDSpec | None = None,
) -> AuditResult:
    """:func:`audit_dpsgd` with every setting as a keyword (validated here)."""
    torch = import_torch("audit_dpsgd")

    if (noise_multiplier is None) == (target_accuracy is None):
        raise ValueError("give exactly one of `noise_multiplier` and `target_accuracy`.")
    noise_multiplier, steps_per_epoch, epochs = spec_triple(
        spec, noise_multiplier, steps_per_epoch, epochs
    )
    M = check_int(steps_per_epoch, "steps_per_epoch", low=1)
    E = check_int(epochs, "epochs", low=1)
    S = check_int(n_shadow_models, "n_shadow_models", low=0)
    if S % 2:
        raise ValueError(f"`n_shadow_models` must be even (complementary pairs); got {S}.")
    method = None
    if target_accuracy is not None:
        target_accuracy = check_real(
            target_accuracy, "target_accuracy", low=0.5, high=1.0,
            low_inclusive=False, high_inclusive=False,
        )
        if calibration_method not in ("exact", "closed-form"):
            raise ValueError(
                "`calibration_method` must be 'exact' or 'closed-form'; "
                f"got {calibration_method!r}."
            )

        method = calibration_method
        noise_multiplier = float(
            noise_multiplier_for_accuracy(
                target_accuracy=target_accuracy, steps_per_epoch=M, epochs=E, method=method
            )
        )
    sigma = check_real(noise_multiplier, "noise_multiplier", low=0.0)
    X_arr, y_arr = np.asarray(X), np.asarray(y)
    n = X_arr.shape[0] if X_arr.ndim else 0
    if n < 8 or y_arr.shape[:1] != (n,):
        raise ValueError(
            f"`X` and `y` must hold the same number (>= 8) of records; got {n} and "
            f"{y_arr.shape[:1]}."
        )
    bound, chi2 = _bounds(sigma, M, E, target_accuracy)

    from pacpriv.dpsgd.trainer import model_losses  # imports torch (extra pacpriv[torch])

    root = as_seed_sequence(rng)
    split = np.random.default_rng(trial_seed(root, AUDIT_SPLIT_STREAM))
    member = np.zeros(n, dtype=bool)
    member[split.permutation(n)[: n // 2]] = True
    train = dict(
        noise_multiplier=sigma, steps_per_epoch=M, epochs=E, max_grad_norm=max_grad_norm
    )

    target = _fit(torch, model_factory, loss_fn, X_arr[member], y_arr[member],
                  trial_seed(root, AUDIT_MODELS_STREAM), optimizer=optimizer, **train)
    losses = model_losses(target, loss_fn, X_arr, y_arr)
    loss_res = loss_threshold_attack(losses[member], losses[~member], confidence=confidence,
                                     rng=trial_seed(root, AUDIT_ATTACK_STREAM))
    lira_res = None
    if S:
        inside = np.zeros((S, n), dtype=bool)
        stats = np.zeros((S, n))
        for s in range(S):
            seed = trial_seed(root, _SHADOW_STREAMS + s)
            if s % 2 == 0:
                order = np.random.default_rng(trial_seed(seed, _SHADOW_SPLIT_STREAM)).permutation(n)
                inside[s, order[: n // 2]] = True
            else:
                inside[s] = ~inside[s - 1]
            shadow = _fit(torch, model_factory, loss_fn, X_arr[inside[s]], y_arr[inside[s]],
                          seed, optimizer=optimizer, **train)
            stats[s] = logit_scaled_confidence(model_losses(shadow, loss_fn, X_arr, y_arr))
        scores = lira_scores(logit_scaled_confidence(losses), stats, inside, online=False)
        lira_res = evaluate_attack(scores[member], scores[~member], confidence=confidence,
                                   rng=trial_seed(root, _LIRA_ATTACK_STREAM))
    attacks = [r for r in (loss_res, lira_res) if r is not None]
    return AuditResult(
        noise_multiplier=sigma,
        steps_per_epoch=M,
        epochs=E,
        max_grad_norm=None if max_grad_norm is None else float(max_grad_norm),
        accuracy_bound=float(bound),
        chi_square_bound=float(chi2),
        target_accuracy=target_accuracy,
        calibration_method=method,
        loss_attack=loss_res,
        lira_attack=lira_res,
        n_shadow_models=S,
        bound_violated=any(r.ci_low > bound for r in attacks),
        train_accuracy=_class_accuracy(torch, target, X_arr[member], y_arr[member]),
        test_accuracy=_class_accuracy(torch, target, X_arr[~member], y_arr[~member]),
        n_members=int(member.sum()),
        n_nonmembers=int(n - member.sum()),
        seed=seed_to_dict(root),
    )
