"""One dataset, several bounds: the rows of :func:`pacpriv.compare.compare_pac_dpsgd` (private;
imports torch through :mod:`pacpriv.compare.models`).

Everything that does not depend on the bound is computed once per dataset: the membership
split, the non-private and majority-class references, the PAC black box and its per-record
trials (the expensive part: ``1 + n`` evaluations per trial, or one fast call). For each bound
``a`` the DP-SGD σ are calibrated, the whole-subset PAC job is run (budget ``v = ln 2 − H(a)``)
and the per-record noise is certified from the shared trials. A table with several bounds is
therefore row for row the same as separate comparisons with the same seed.

Seeds: children of the root seed: 0 membership split, 1 whole-subset simulation, 2 its noise
draws, 3/4 DP-SGD closed form/exact, 5 attack splits, 6 per-record trials and noise, 7 DP-SGD
on the PAC black box's features.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from dataclasses import replace
from typing import Any

import numpy as np

from pacpriv._random import trial_seed
from pacpriv.compare._phases import phase_execution
from pacpriv.compare.blackbox import StableBlackBox
from pacpriv.compare.models import (
    LogisticRegressionMechanism,
    dpsgd_row,
    evaluate_draws,
    exact_sigma,
    scale_features,
)
from pacpriv.compare.per_record import per_record_row, simulate_record_trials
from pacpriv.compare.render import (
    EVALUATION_NOTE,
    SECRETS,
    black_box_note,
    chance_note,
    comparison_notes,
    per_record_note,
)
from pacpriv.compare.results import ComparisonRow
from pacpriv.dpsgd.bounds import closed_form_noise_multiplier
from pacpriv.exceptions import TimeLimitError
from pacpriv.pac.bounds._posterior import mi_budget_for_accuracy, posterior_success_rate
from pacpriv.pac.engine._limit import carry_over, stage_within
from pacpriv.pac.job import run_pac
from pacpriv.pac.release import privatize
from pacpriv.pac.samplers import PoissonSampler

__all__ = ["run_comparison", "warm_imports"]

_NONE: dict[str, Any] = dict(
    noise=0.0, noise_units="none", noise_multiplier=None, gradient_noise_std=None,
    parameter_noise_rms=0.0, expected_noise_power=0.0, mi_budget=None, test_accuracy_std=0.0,
    accuracy_bound=1.0, bound_source="no guarantee", n_repeats=1, secret=SECRETS["none"],
    bound_label="no guarantee")


def _reference(method, mech, theta, data, *, confidence, attack_rng, dataset) -> ComparisonRow:
    tic = time.perf_counter()
    acc, _, att = evaluate_draws(mech, [theta], data, confidence=confidence,
                                 attack_rng=attack_rng)
    return ComparisonRow(method=method, family="none", test_accuracy=acc, attack=att,
                         wall_time_s=time.perf_counter() - tic, dataset=dataset, **_NONE)


def _majority(y, members, dataset) -> ComparisonRow:
    tic = time.perf_counter()
    top = int(np.bincount(y[members], minlength=int(y.max()) + 1).argmax())
    acc = float(np.mean(y[~members] == top))
    return ComparisonRow(method="majority class (of the training set)", family="none",
                         test_accuracy=acc, attack=None, wall_time_s=time.perf_counter() - tic,
                         dataset=dataset, **_NONE)


def _whole_subset_row(mech, data, *, pool, a, rule, n_trials, root, attack_rng, execution,
                      n_repeats, confidence, ds, sampler,
                      bounded) -> tuple[ComparisonRow, object, float]:
    tic = time.perf_counter()
    X, y, members = data
    v = float(mi_budget_for_accuracy(a, prior=max(sampler.prior, 1 - sampler.prior)))
    # An evaluation, not a release: the split and every noise draw derive from the recorded
    # root seed, so run_pac releases nothing and the report says so (EVALUATION_NOTE).
    quiet = (replace(rule, target_inflation=None)  # the table states the trial count itself
             if "target_inflation" in rule.parameter_names() else rule)
    pac = replace(run_pac(
        mech, pool, mi_budget=v, n_trials=n_trials, sampler=sampler, rule=quiet,
        rng=trial_seed(root, 1), release=False, execution=execution,
        mechanism_name=mech.describe(), dataset=ds.to_dict(),
    ), evaluation=EVALUATION_NOTE)
    clean = bounded(lambda: mech((X[members], y[members])),
                    what="evaluating the whole-subset PAC row")
    draws = (privatize(clean, pac.plan, rng=trial_seed(trial_seed(root, 2), r))
             for r in range(n_repeats))
    mean, std, attack = bounded(lambda: evaluate_draws(
        mech, draws, data, confidence=confidence, attack_rng=attack_rng),
        what="evaluating the whole-subset PAC row")
    power = pac.plan.expected_noise_power
    row = ComparisonRow(
        method=f"PAC, whole subset ({rule.name})", family="pac",
        noise=math.sqrt(power / mech.dim),
        noise_units="RMS noise std per parameter sqrt(E||B||²/d)", noise_multiplier=None,
        gradient_noise_std=None, parameter_noise_rms=math.sqrt(power / mech.dim),
        expected_noise_power=power, mi_budget=v, test_accuracy=mean, test_accuracy_std=std,
        accuracy_bound=pac.posterior_success_bound,
        bound_source=f"{pac.label}: KL inversion of MI <= v (PAC Thm 1), prior ½",
        attack=attack, n_repeats=n_repeats, wall_time_s=time.perf_counter() - tic,
        dataset=ds.name, target_accuracy=a, secret=SECRETS["pac"], bound_label=pac.label,
        mechanism=mech, noise_plan=pac.plan,
    )
    return row, pac, v


def _split(ds, root) -> tuple:
    """``(X, y, classes, sampler, members)``: features scaled by the public ranges, labels as
    class indices, and the Poisson-½ member split (from ``root``'s child 0)."""
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
    return X, y, classes, sampler, members


def _notes(notes: list, v, st, mech, stable: bool, plan, informed, baseline, ds, y,
           n_mem: int) -> list:
    """The caveats of one comparison: ``notes`` and those of the budget, the black box, the
    per-record plan and a baseline at chance level (first)."""
    n = int(y.shape[0])
    notes = notes + comparison_notes(v, n_records=n, n_trials=st.n_trials, dim=mech.dim,
                                     n_repeats=st.n_repeats, per_record=float(
                                         posterior_success_rate(v / n, prior=0.5)))
    notes.append(black_box_note(mech.describe(), stable))
    if plan is not None:
        notes.append(per_record_note(plan, informed, st.per_record_trials, n_pool=n))
    at_chance = chance_note(baseline.test_accuracy, y, n_test=n - n_mem,
                            bounds_source=ds.bounds_source)
    if at_chance:
        notes.insert(0, at_chance)
    return notes


def _exact_rows(a: float, st, sgd, stable_mech, data, n_classes: int, common: dict, *, root,
                attack_root) -> tuple[list, list, list[str]]:
    """``(rows, references, notes)`` of the exact-σ DP-SGD model at bound ``a``: its row, and
    (for a stable PAC black box ``stable_mech``) DP-SGD on the black box's features; or the
    note saying why the exact σ is unavailable."""
    M, E = st.steps_per_epoch, st.epochs
    sigma_ex, skipped = exact_sigma(a, M, E)
    if skipped or sigma_ex is None:
        return [], [], [skipped or "exact σ unavailable"]
    label = "certified (exact, analytic: every record)"
    rows = [dpsgd_row(ComparisonRow, "DP-SGD (exact)",
                      "certified: exact ½ + ½·TV interval, σ calibrated (RA-MIA)", sigma_ex,
                      sgd, data, root=trial_seed(root, 4), attack_rng=trial_seed(attack_root, 1),
                      bound_label=label, **common)]
    if stable_mech is None:
        return rows, [], []
    X, y, members = data
    Z = stable_mech.basis(X)
    feat = LogisticRegressionMechanism(
        n_features=Z.shape[1], n_classes=n_classes, steps_per_epoch=M, epochs=E,
        learning_rate=st.learning_rate, public_seed=st.public_seed)
    return rows, [dpsgd_row(
        ComparisonRow, "DP-SGD (exact), PAC black box's features",
        "certified: exact ½ + ½·TV interval (RA-MIA), on the pool-derived features of the PAC "
        "black box", sigma_ex, feat, (Z, y, members), root=trial_seed(root, 7),
        attack_rng=trial_seed(attack_root, 7), bound_label=label, **common)], []


def _models(ds, root, st) -> tuple:
    """``(X, y, classes, sampler, members, sgd, mech)``: the split (:func:`_split`), the
    DP-SGD rows' model and the PAC black box built for the pool."""
    X, y, classes, sampler, members = _split(ds, root)
    M, E = st.steps_per_epoch, st.epochs
    sgd = LogisticRegressionMechanism(
        n_features=X.shape[1], n_classes=classes.size, steps_per_epoch=M, epochs=E,
        learning_rate=st.learning_rate, public_seed=st.public_seed)
    mech = st.black_box.build(X, classes.size, sampling_rate=sampler.sampling_rate,
                              steps_per_epoch=M, epochs=E, learning_rate=st.learning_rate,
                              public_seed=st.public_seed)
    return X, y, classes, sampler, members, sgd, mech


def _references(sgd, stable_mech, data, conf, attack_root, name) -> tuple:
    """``(baseline, references)``: the non-private DP-SGD model, the majority class and (for
    a stable black box ``stable_mech``) the non-private black box."""
    X, y, members = data
    baseline = _reference("non-private (DP-SGD's model, no noise, no clipping)", sgd,
                          sgd((X[members], y[members])), data, confidence=conf,
                          attack_rng=trial_seed(attack_root, 3), dataset=name)
    references = [_majority(y, members, name)]
    if stable_mech is not None:
        references.append(_reference("non-private, PAC black box (no noise)", stable_mech,
                                     stable_mech((X[members], y[members])), data,
                                     confidence=conf, attack_rng=trial_seed(attack_root, 6),
                                     dataset=name))
    return baseline, references


def _dpsgd_rows(a, st, sgd, stable_mech, data, n_classes, common, *, root,
                attack_root) -> tuple[list, list, list[str]]:
    """``(rows, references, notes)`` of the DP-SGD models at bound ``a``: the closed-form
    row, and the exact-σ rows (:func:`_exact_rows`) when ``st.exact``."""
    M, E = st.steps_per_epoch, st.epochs
    sigma_cf = float(closed_form_noise_multiplier(a, steps_per_epoch=M, epochs=E))
    rows = [dpsgd_row(ComparisonRow, "DP-SGD (chi-square closed form)",
                      "certified: chi-square closed form, σ calibrated (RA-MIA)", sigma_cf,
                      sgd, data, root=trial_seed(root, 3), attack_rng=trial_seed(attack_root, 0),
                      bound_label="certified (closed form, analytic: every record)", **common)]
    if not st.exact:
        return rows, [], []
    exact_rows, exact_refs, skipped = _exact_rows(a, st, sgd, stable_mech, data, n_classes,
                                                  common, root=root, attack_root=attack_root)
    return rows + exact_rows, exact_refs, skipped


@contextlib.contextmanager
def _after_earlier_stages():
    """A refusal by the whole-subset run's probe says that the stages before it ran (the
    probe's "nothing was run" is about its own trials; twelfth new-user pass, R9)."""
    try:
        yield
    except TimeLimitError as err:
        text = str(err.args[0]) if err.args else ""
        if "nothing was run or charged" in text:
            err.args = (text.replace(
                "nothing was run or charged", "none of the whole-subset trials ran, after the "
                "comparison's earlier stages; nothing was released or charged"), *err.args[1:])
        raise


def warm_imports() -> None:
    """Import what the stages would import lazily, before a time limit's clock starts (imports
    aside: an import cut by the limit's interrupt would leave a half-imported module). The
    first ``torch.optim`` optimizer imports ``torch._dynamo`` (seconds on a cold start)."""
    import torch._dynamo  # noqa: F401


_PHASES = {"per_record": "the per-record trials", "pac": "the whole-subset trials"}


def _phase(execution, name: str, phase: str, started: float):
    """A phase's execution options: its checkpoint subfolder, and what is left of the whole
    comparison's ``time_limit`` since ``started``."""
    return carry_over(phase_execution(execution, name, phase), started, execution.time_limit,
                      before=_PHASES[phase])


def run_comparison(ds, *, root, targets, settings, execution,
                   started: float | None = None) -> list[dict]:
    """The fields of one ``ComparisonResult`` per bound in ``targets`` (validated inputs).
    ``execution.time_limit`` covers all its simulations from ``started`` (a
    ``time.monotonic()`` reading; default now): each gets what is left."""
    started = time.monotonic() if started is None else started
    # every stage that is not a simulation runs inside the whole run's limit too (R8, R9)
    bounded = functools.partial(stage_within, execution.time_limit, started,
                                checkpoint=execution.checkpoint)
    st = settings
    M, E, C = st.steps_per_epoch, st.epochs, st.max_grad_norm
    X, y, classes, sampler, members, sgd, mech = bounded(
        lambda: _models(ds, root, st), what="building the models, before any trial")
    pool = (X, y)
    stable = isinstance(st.black_box, StableBlackBox)
    data = (X, y, members)
    attack_root = trial_seed(root, 5)
    name = ds.name
    conf = st.confidence

    trials = None  # first: the per-record shape trials refuse an uncertifiable target
    if st.per_record_trials:  # (its floor needs them) before any training or other trial
        trials = simulate_record_trials(
            mech, pool, n_trials=st.per_record_trials,
            n_records_audited=X.shape[0] if st.per_record_records is None
            else st.per_record_records, root=trial_seed(root, 6),
            execution=_phase(execution, name, "per_record", started), targets=tuple(targets),
            confidence=conf)
    baseline, references = bounded(
        lambda: _references(sgd, mech if stable else None, data, conf, attack_root, name),
        what="training the non-private reference models")

    out = []
    for a in targets:
        common = dict(C=C, M=M, E=E, n_repeats=st.n_repeats, confidence=conf, bound=a,
                      dataset=name, secret=SECRETS["dpsgd"])
        rows, refs, notes = bounded(
            functools.partial(_dpsgd_rows, a, st, sgd, mech if stable else None, data,
                              classes.size, common, root=root, attack_root=attack_root),
            what=f"training the DP-SGD rows (bound {a:g})")
        refs = list(references) + refs
        with _after_earlier_stages():
            prow, pac, v = _whole_subset_row(
                mech, data, pool=pool, a=a, rule=st.rule, n_trials=st.n_trials, root=root,
                attack_rng=trial_seed(attack_root, 2),
                execution=_phase(execution, name, "pac", started), n_repeats=st.n_repeats,
                confidence=conf, ds=ds, sampler=sampler, bounded=bounded)
        rows.append(prow)
        plan = informed = None
        if trials is not None:
            row, plan, informed = bounded(functools.partial(
                per_record_row, ComparisonRow, mech, data, trials, target_accuracy=a,
                n_repeats=st.n_repeats,
                confidence=conf, root=trial_seed(root, 6),
                attack_rng=trial_seed(attack_root, 4), evaluate=evaluate_draws, dataset=name,
                secrets=SECRETS), what=f"certifying the per-record PAC row (bound {a:g})")
            rows.append(row)
        n_mem = int(members.sum())
        notes = _notes(notes, v, st, mech, stable, plan, informed, baseline, ds, y, n_mem)
        out.append({
            "target_accuracy": a, "mi_budget": v, "rows": tuple(rows), "baseline": baseline,
            "references": tuple(refs), "notes": tuple(notes), "pac_result": pac,
            "dataset": name, "pool": pool,
            "settings": _settings(ds, st, X, classes, n_mem, mech, sgd, pac, trials, plan,
                                  execution, sampler),
        })
    return out


def _settings(ds, st, X, classes, n_mem, mech, sgd, pac, trials, plan, execution,
              sampler) -> dict:
    n = int(X.shape[0])
    return {
        "dataset": ds.name, "n_records": n, "n_features": int(X.shape[1]),
        "n_classes": int(classes.size), "n_members": n_mem, "n_nonmembers": n - n_mem,
        "model": "logistic regression", "dim": sgd.dim,
        "model_detail": "torch.nn.Linear(p, K), float64, cross-entropy, public uniform init",
        "feature_scaling": f"min-max to [-1, 1] with the {ds.bounds_source} feature ranges",
        "epochs": st.epochs, "steps_per_epoch": st.steps_per_epoch,
        "expected_batch_size": n_mem / st.steps_per_epoch, "max_grad_norm": st.max_grad_norm,
        "learning_rate": st.learning_rate, "optimizer": "SGD (no momentum)",
        "pac_black_box": st.black_box.to_dict(), "pac_model": mech.describe(),
        "pac_dim": int(mech.dim), "n_trials": st.n_trials, "rule": st.rule.name,
        "sampler": sampler.to_dict(), "n_repeats": st.n_repeats,
        "public_seed": st.public_seed, "n_jobs": execution.n_jobs,
        "confidence": st.confidence, "attack": "loss threshold (Yeom et al. 2018)",
        "pac_simulation_s": pac.simulation.elapsed_s,
        "per_record_trials": st.per_record_trials,
        "per_record_simulation_s": None if trials is None else trials.elapsed_s,
        "per_record_records": None if plan is None else int(plan.records.size),
        # "all", or the public sample's indices (a sample's bound covers only these records)
        "per_record_audited": None if plan is None else (
            "all" if plan.records.size >= n else [int(r) for r in plan.records]),
    }
