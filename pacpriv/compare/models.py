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

import contextlib
import math
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from pacpriv._optional import import_torch
from pacpriv._random import RNGLike, trial_seed
from pacpriv.audit._attacks import AttackResult, loss_threshold_attack
from pacpriv.compare.per_record import per_record_row
from pacpriv.compare.render import (
    EVALUATION_NOTE,
    chance_note,
    comparison_notes,
    per_record_note,
)
from pacpriv.compare.results import ComparisonRow
from pacpriv.datasets.scaling import scale_to_unit_box
from pacpriv.dpsgd.bounds import closed_form_noise_multiplier
from pacpriv.dpsgd.calibration import noise_multiplier_for_accuracy
from pacpriv.dpsgd.trainer import model_losses, train_dpsgd
from pacpriv.pac.bounds._posterior import mi_budget_for_accuracy, posterior_success_rate
from pacpriv.pac.job import run_pac
from pacpriv.pac.release import privatize
from pacpriv.pac.samplers import PoissonSampler

torch = import_torch("pacpriv.compare")

__all__ = [
    "LogisticRegressionMechanism",
    "evaluate_draws",
    "evaluate_parameters",
    "run_comparison",
    "scale_features",
    "single_thread",
]


def scale_features(X: np.ndarray, low, high) -> np.ndarray:
    """Min-max scale ``X`` (n, p) to ``[-1, 1]`` with public ranges; constant features -> 0.

    :func:`pacpriv.datasets.scaling.scale_to_unit_box` (the one implementation).
    """
    return scale_to_unit_box(X, low, high)


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Run torch on one intra-op thread (tiny models are faster so), then restore."""
    before = torch.get_num_threads()
    if before != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if before != 1:
            torch.set_num_threads(before)


def _seed_int(seed: int, stream: int) -> int:
    """A 63-bit integer derived from the public ``seed`` for one named stream."""
    ss = np.random.SeedSequence(seed, spawn_key=(stream,))
    return int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


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
        gen = np.random.default_rng(_seed_int(self.public_seed, 0))
        bound = 1.0 / np.sqrt(self.n_features)
        return gen.uniform(-bound, bound, size=self.dim)

    def model(self, theta: np.ndarray | None = None) -> torch.nn.Linear:
        """A float64 ``nn.Linear(p, K)`` holding ``theta`` (default: the public ``θ₀``)."""
        theta = self.initial_parameters() if theta is None else np.asarray(theta, np.float64)
        k, p = self.n_classes, self.n_features
        model = torch.nn.Linear(p, k, dtype=torch.float64)
        with torch.no_grad():
            model.weight.copy_(torch.from_numpy(theta[: k * p].reshape(k, p).copy()))
            model.bias.copy_(torch.from_numpy(theta[k * p :].copy()))
        return model

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
        with single_thread():
            train_dpsgd(
                model,
                torch.nn.CrossEntropyLoss(),
                X,
                y,
                noise_multiplier=noise_multiplier,
                steps_per_epoch=self.steps_per_epoch,
                epochs=self.epochs,
                max_grad_norm=max_grad_norm,
                optimizer=lambda params: torch.optim.SGD(params, lr=lr),
                rng=_seed_int(self.public_seed, 1) if rng is None else rng,
            )
        return self.parameters_of(model)

    def __call__(self, subset) -> np.ndarray:
        """Noise-free training on ``subset = (X_sub, y_sub)``; returns ``θ`` of shape ``(d,)``."""
        X_sub, y_sub = subset
        return self.train(X_sub, y_sub)


def evaluate_parameters(
    mechanism: LogisticRegressionMechanism,
    theta: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    members: np.ndarray,
    *,
    confidence: float,
    rng: RNGLike,
) -> tuple[float, AttackResult | None]:
    """Test accuracy on the non-members and a loss-threshold attack (members vs the rest).

    Returns ``(test_accuracy, attack)``; ``attack`` is None when ``rng`` is None (skip it).
    """

    model = mechanism.model(theta)
    X = np.array(X, dtype=np.float64)
    y = np.array(y, dtype=np.int64)
    with single_thread(), torch.no_grad():
        pred = model(torch.from_numpy(X[~members])).argmax(1).numpy()
    test_accuracy = float(np.mean(pred == y[~members]))
    if rng is None:
        return test_accuracy, None
    with single_thread():
        losses = model_losses(model, torch.nn.CrossEntropyLoss(), X, y)
    attack = loss_threshold_attack(
        losses[members], losses[~members], confidence=confidence, rng=rng
    )
    return test_accuracy, attack


def _exact_sigma(a: float, M: int, E: int) -> tuple[float | None, str | None]:
    res = noise_multiplier_for_accuracy(
        target_accuracy=a, steps_per_epoch=M, epochs=E, method="exact"
    )
    return float(getattr(res, "noise_multiplier", res)), None


def evaluate_draws(
    mech: LogisticRegressionMechanism,
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


def _dpsgd_row(row_cls, label, source, sigma, mech, data, *, C, M, E, n_repeats, root,
               attack_rng, confidence, bound):
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
        wall_time_s=time.perf_counter() - tic,
    )


def run_comparison(ds, *, root, rule, exact, execution, target_accuracy, epochs,
                   steps_per_epoch, max_grad_norm, learning_rate, n_trials, n_repeats,
                   confidence, public_seed, per_record_trials=0, per_record_records=None,
                   per_record_holdout=0.2) -> dict:
    """Run the three certified trainings and the baseline; fields of ``ComparisonResult``.

    ``execution`` is the :class:`~pacpriv.pac.engine.ExecutionOptions` of both simulations.
    """

    a, M, E, C = target_accuracy, steps_per_epoch, epochs, max_grad_norm
    X = scale_features(ds.X, ds.feature_low, ds.feature_high)
    classes = np.asarray(ds.classes)
    y = np.searchsorted(classes, np.asarray(ds.y)).astype(np.int64)
    sampler = PoissonSampler(sampling_rate=0.5)
    members = sampler.draw(X.shape[0], np.random.default_rng(trial_seed(root, 0)))
    if min(members.sum(), (~members).sum()) < 2:
        raise ValueError(
            f"the Poisson-½ split of {X.shape[0]} records left {int(members.sum())} members; "
            "members and non-members need >= 2 each: use a larger pool or another `rng`."
        )
    mech = LogisticRegressionMechanism(
        n_features=X.shape[1], n_classes=classes.size, steps_per_epoch=M, epochs=E,
        learning_rate=learning_rate, public_seed=public_seed,
    )
    data = (X, y, members)
    attack_root = trial_seed(root, 5)
    common = dict(C=C, M=M, E=E, n_repeats=n_repeats, confidence=confidence, bound=a)
    notes = []
    sigma_cf = float(closed_form_noise_multiplier(a, steps_per_epoch=M, epochs=E))
    rows = [_dpsgd_row(ComparisonRow, "DP-SGD (chi-square closed form)",
                       "certified: chi-square closed form, σ calibrated (RA-MIA)", sigma_cf,
                       mech, data,
                       root=trial_seed(root, 3), attack_rng=trial_seed(attack_root, 0),
                       **common)]
    if exact:
        sigma_ex, skipped = _exact_sigma(a, M, E)
        if skipped:
            notes.append(skipped)
        else:
            rows.append(_dpsgd_row(ComparisonRow, "DP-SGD (exact)",
                                   "certified: exact ½ + ½·TV interval, σ calibrated (RA-MIA)",
                                   sigma_ex, mech, data, root=trial_seed(root, 4),
                                   attack_rng=trial_seed(attack_root, 1), **common))

    tic = time.perf_counter()
    v = float(mi_budget_for_accuracy(a, prior=max(sampler.prior, 1 - sampler.prior)))
    noise_root = trial_seed(root, 2)
    # An evaluation, not a release: the split and every noise draw derive from the recorded
    # root seed, so run_pac releases nothing and the report says so (EVALUATION_NOTE).
    quiet = (replace(rule, target_inflation=None)  # the table states the trial count itself
             if "target_inflation" in rule.parameter_names() else rule)
    pac = replace(run_pac(
        mech, (X, y), mi_budget=v, n_trials=n_trials, sampler=sampler, rule=quiet,
        rng=trial_seed(root, 1), release=False, execution=execution,
        mechanism_name="logistic regression trained by noise-free SGD (public seed)",
        dataset=ds.to_dict(),
    ), evaluation=EVALUATION_NOTE)
    clean = mech((X[members], y[members]))
    draws = (privatize(clean, pac.plan, rng=trial_seed(noise_root, r))
             for r in range(n_repeats))
    mean, std, attack = evaluate_draws(mech, draws, data, confidence=confidence,
                                       attack_rng=trial_seed(attack_root, 2))
    power = pac.plan.expected_noise_power
    rows.append(ComparisonRow(
        method=f"PAC ({rule.name})", family="pac", noise=math.sqrt(power / mech.dim),
        noise_units="RMS noise std per parameter sqrt(E||B||²/d)", noise_multiplier=None,
        gradient_noise_std=None, parameter_noise_rms=math.sqrt(power / mech.dim),
        expected_noise_power=power, mi_budget=v, test_accuracy=mean, test_accuracy_std=std,
        accuracy_bound=pac.posterior_success_bound,
        bound_source=f"{pac.label}: KL inversion of MI <= v (PAC Thm 1), prior ½",
        attack=attack,
        n_repeats=n_repeats, wall_time_s=time.perf_counter() - tic,
    ))

    per_record_plan, record_note = None, None
    if per_record_trials:
        row, per_record_plan, informed, _ = per_record_row(
            ComparisonRow, mech, data, target_accuracy=a, n_trials=per_record_trials,
            n_records_audited=(X.shape[0] if per_record_records is None
                               else per_record_records), holdout=per_record_holdout,
            n_repeats=n_repeats, confidence=confidence, root=trial_seed(root, 6),
            attack_rng=trial_seed(attack_root, 4), execution=execution,
            evaluate=evaluate_draws)
        rows.append(row)
        record_note = per_record_note(per_record_plan, informed, per_record_trials,
                                      whole_subset_power=power, n_pool=X.shape[0])

    tic = time.perf_counter()
    acc, _, att = evaluate_draws(mech, [clean], data, confidence=confidence,
                                 attack_rng=trial_seed(attack_root, 3))
    baseline = ComparisonRow(
        method="non-private (no noise, no clipping)", family="none", noise=0.0,
        noise_units="none", noise_multiplier=None, gradient_noise_std=None,
        parameter_noise_rms=0.0, expected_noise_power=0.0, mi_budget=None, test_accuracy=acc,
        test_accuracy_std=0.0, accuracy_bound=1.0, bound_source="no guarantee", attack=att,
        n_repeats=1, wall_time_s=time.perf_counter() - tic,
    )
    n_mem = int(members.sum())
    notes += comparison_notes(v, n_records=X.shape[0], n_trials=n_trials, dim=mech.dim,
                    n_repeats=n_repeats, per_record=float(posterior_success_rate(
                        v / X.shape[0], prior=0.5)))
    if record_note:
        notes.append(record_note)
    at_chance = chance_note(acc, y, n_test=int(X.shape[0] - n_mem),
                            bounds_source=ds.bounds_source)
    if at_chance:
        notes.insert(0, at_chance)
    settings = {
        "dataset": ds.name, "n_records": int(X.shape[0]), "n_features": int(X.shape[1]),
        "n_classes": int(classes.size), "n_members": n_mem, "n_nonmembers": int(X.shape[0] - n_mem),
        "model": "logistic regression", "dim": mech.dim,
        "model_detail": "torch.nn.Linear(p, K), float64, cross-entropy, public uniform init",
        "feature_scaling": f"min-max to [-1, 1] with the {ds.bounds_source} feature ranges",
        "epochs": E, "steps_per_epoch": M, "expected_batch_size": n_mem / M,
        "max_grad_norm": C, "learning_rate": learning_rate, "optimizer": "SGD (no momentum)",
        "n_trials": n_trials, "rule": rule.name, "sampler": sampler.to_dict(),
        "n_repeats": n_repeats, "public_seed": public_seed, "n_jobs": execution.n_jobs,
        "confidence": confidence, "attack": "loss threshold (Yeom et al. 2018)",
        "pac_simulation_s": pac.simulation.elapsed_s,
        "per_record_trials": per_record_trials,
        "per_record_records": None if per_record_plan is None else int(
            per_record_plan.records.size),
        # "all", or the public sample's indices (a sample's bound covers only these records)
        "per_record_audited": None if per_record_plan is None else (
            "all" if per_record_plan.records.size >= X.shape[0]
            else [int(r) for r in per_record_plan.records]),
    }
    return {"mi_budget": v, "rows": tuple(rows), "baseline": baseline, "settings": settings,
            "notes": tuple(notes), "pac_result": pac}

