"""Text of :mod:`pacpriv.compare`: threat models, reading notes, Markdown (private; no torch)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pacpriv import _json
from pacpriv._numbers import format_bound
from pacpriv.threat_models import THREAT_MODELS

if TYPE_CHECKING:
    from pacpriv.compare.results import ComparisonResult, ComparisonRow

__all__ = ["CHANCE_NOTE_PREFIX", "EVALUATION_NOTE", "SECRETS", "THREAT_MODELS",
           "black_box_note", "chance_note", "comparison_markdown", "comparison_notes",
           "per_record_note", "table_markdown"]

#: What each family of rows protects (the ``secret`` column).
SECRETS = {
    "dpsgd": "whether one record was used (add/remove one record, any dataset)",
    "pac_record": "whether one record of the pool is in the training subset (every record)",
    "pac_record_sample": "whether one of the SAMPLED records is in the training subset",
    "pac": "the training subset as a whole (Poisson-½ over the pool)",
    "none": "none (no guarantee)",
}

#: What a comparison's models are (shown in its reports instead of a release): the membership
#: split, the PAC noise draws and the DP-SGD allocations and noise all derive from the root seed
#: that the report records, so they are reproducible by anyone holding the report.
EVALUATION_NOTE = (
    "This comparison is an evaluation, not a private release. Its membership split, its PAC "
    "noise draws and its DP-SGD allocations and noise all derive from the root seed recorded "
    "in this report, so anyone holding the report can regenerate every model it measured: "
    "they are evaluation artefacts (scored with known members: test accuracy and attacks), "
    "and no model or noisy release is published here. What each row certifies is the bound "
    "and its noise calibration, i.e. the noise a private release would need; a private "
    "release draws its secret subset and noise from OS entropy that is never recorded "
    "(`pacpriv pac run`, or `train_dpsgd` with rng=None)."
)

#: First words of the note :func:`chance_note` writes (the CLI repeats that note as a warning).
CHANCE_NOTE_PREFIX = "Utility not comparable:"


# (aspect, PAC whole subset, PAC per record, DP-SGD)
_SIDE_BY_SIDE = (
    ("secret", "the random training subset X (Poisson-½ over the pool)",
     "whether one target record is in X (Poisson-½, independent memberships)",
     "whether one target record was used (add/remove one record)"),
    ("adversary knows", "the whole pool, the code and its public seed, the noise covariance",
     "the same, plus every other record's membership (informed adversary)",
     "every other record, the model, all noisy gradient steps"),
    ("quantifier", "average over the sampler, on this pool (simulated)",
     "average over the other records' memberships, for every record of the pool (simulated; "
     "a sample only where the row says so)",
     "worst case over datasets and records (analytic)"),
    ("certificate", "MI(X; release) <= v nats, KL inversion (PAC Thm 1)",
     "Bayes accuracy of two Gaussians, betting confidence bound + union bound over every "
     "record (certified 1−γ)",
     "accuracy <= ½ + ½·TV of the random-allocation pair (RA-MIA)"),
)


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}g}" if abs(x) >= 10 else f"{x:.{digits}f}"


def _noise_cell(r: ComparisonRow, c: float) -> str:
    if r.family == "dpsgd":
        return (f"σ = {format_bound(r.noise, 4)} (per-step std {r.gradient_noise_std:.3g} on "
                f"the averaged gradient, C = {c:g})")
    if r.family == "pac" and r.mi_budget is None:
        shape = getattr(r.noise_plan, "shape", "isotropic")
        return (f"{format_bound(r.noise, 3, side='up')} per parameter (E‖B‖² = "
                f"{format_bound(r.expected_noise_power, 3, side='up')}, "
                f"{shape}, per-record target)")
    if r.family == "pac":
        return (f"{format_bound(r.noise, 3, side='up')} per parameter (E‖B‖² = "
                f"{format_bound(r.expected_noise_power, 3, side='up')}, "
                f"v = {format_bound(r.mi_budget, 4)} nats)")
    return "none"


def _informed_cell(r: ComparisonRow) -> str:
    ia = r.informed_attack
    if not ia:
        return "–"
    return f"{ia['accuracy']:.3f} [{ia['ci_low']:.3f}, {ia['ci_high']:.3f}]"


def _bound_cell(r: ComparisonRow) -> str:
    if r.family == "none":
        return "1 (none)"
    # safe side: a displayed bound is rounded up; the kind (certified or estimated) beside it
    kind = r.bound_label or (r.bound_source.split(":", 1)[0] if ":" in r.bound_source
                             else r.bound_source)
    return f"{format_bound(r.accuracy_bound, 3, side='up')} ({kind})"


def _attack_cell(r: ComparisonRow) -> str:
    if r.attack is None:
        return "–"
    return f"{r.attack.accuracy:.3f} [{r.attack.ci_low:.3f}, {r.attack.ci_high:.3f}]"


def _acc_cell(r: ComparisonRow) -> str:
    sd = "" if r.n_repeats < 2 else f" ± {r.test_accuracy_std:.3f}"
    return f"{r.test_accuracy:.3f}{sd}"


def comparison_markdown(res: ComparisonResult) -> str:
    """The table, the notes and the two threat models side by side (Markdown)."""
    s = res.settings
    pct = next((round(100 * r.attack.confidence) for r in res.all_rows if r.attack), 95)
    out = [
        f"Same model ({s['model']}, d = {s['dim']} parameters), same data ({s['dataset']}: "
        f"{s['n_members']} members, {s['n_nonmembers']} non-members = test set) and same "
        f"training (E = {s['epochs']} epochs × M = {s['steps_per_epoch']} steps, SGD η = "
        f"{s['learning_rate']:g}). Every method is calibrated to membership-inference accuracy "
        f"<= **{100 * res.target_accuracy:.1f}%**, each under its own threat model (below); the "
        "bound column says whether each bound is certified (and with which confidence) or "
        "estimated.",
        "",
        "| method | noise | noise std per parameter | test accuracy | MIA accuracy bound | "
        f"secret protected | loss-attack accuracy ({pct}% CI) | "
        f"informed-attack accuracy ({pct}% CI) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in res.all_rows:
        est = " (estimate)" if r.family == "dpsgd" else ""
        out.append(
            f"| {r.method} | {_noise_cell(r, s['max_grad_norm'])} | "
            f"{_f(r.parameter_noise_rms)}{est} | {_acc_cell(r)} | "
            f"{_bound_cell(r)} | {r.secret or '–'} | {_attack_cell(r)} | {_informed_cell(r)} |"
        )
    out += ["", "Notes:", ""] + [f"- {n}" for n in res.notes]
    out += ["", "Threat models side by side:", "",
            "| | PAC Privacy (whole subset) | PAC Privacy (per record) | DP-SGD |",
            "| --- | --- | --- | --- |"]
    out += [f"| {k} | {p} | {pr} | {d} |" for k, p, pr, d in _SIDE_BY_SIDE]
    out += ["", f"**PAC Privacy, whole subset.** {res.threat_models['pac']}", ""]
    if "pac_record" in res.threat_models:
        out += [f"**PAC Privacy, per record (informed adversary).** "
                f"{res.threat_models['pac_record']}", ""]
    out += [f"**DP-SGD.** {res.threat_models['dpsgd']}", "",
            f"Root seed of the comparison: `{_json.dumps(res.seed)}`; the same seed and "
            "arguments give this table bit for bit, for any n_jobs. The models are evaluation "
            "artefacts derived from this seed (reproducible by anyone holding it), not private "
            "releases; the rows certify the bound and its noise calibration."]
    return "\n".join(out)


def per_record_note(plan, informed, n_trials: int, n_pool: int | None = None) -> str:
    """How to read the per-record PAC row (coverage, trials, certificate, attack)."""
    from pacpriv.compare.per_record import coverage_text

    k = int(plan.records.size)
    n = k if n_pool is None else int(n_pool)
    return (
        f"PAC per record: {plan.shape} noise calibrated so that every audited record has "
        f"informed-adversary accuracy <= {format_bound(plan.max_accuracy_upper, 4)}, "
        f"certified with confidence {plan.accuracy_confidence:g}: {plan.method}. Audited: "
        f"{coverage_text(k, n)}. Trials: {plan.n_trials_shape} shape trials (noise shape, "
        f"reference scale, the split of γ over records), then {plan.n_trials_certify} "
        f"independent certification trials ({n_trials} in all). The informed likelihood-ratio "
        f"attack (knows the other records' memberships) on the {informed.n_trials} shape "
        f"trials measured {informed.accuracy:.3f} [{informed.ci_low:.3f}, "
        f"{informed.ci_high:.3f}] (blind guess 0.5). The loss-attack column attacks every "
        "record of the released model and is not the per-record adversary."
    )


def black_box_note(description: str, stable: bool) -> str:
    """What the PAC rows simulate, and why the basis is free in PAC's threat model."""
    text = f"PAC black box: {description}."
    if stable:
        text += (
            " Its basis is computed from the pool (never from the secret subset): in PAC "
            "Privacy's threat model the pool is known to the adversary, so it leaks nothing "
            "about membership; DP-SGD's add/remove-one threat model would have to pay for it. "
            "The row 'DP-SGD (exact), PAC black box's features' shows DP-SGD on the same "
            "features, and 'non-private, PAC black box' the black box without noise."
        )
    return text


def chance_note(baseline_accuracy: float, labels, *, n_test: int,
                bounds_source: str) -> str | None:
    """A note when the non-private model is at chance (None when it learned something).

    The model is "at chance" when its test accuracy is not above the majority-class rate of
    the pool's labels plus two standard errors of a rate measured on ``n_test`` records
    (``2·sqrt(q(1−q)/n_test)``): a constant predictor scores about that on the test set.
    The labels are the whole pool's (public in both threat models), never the secret split's,
    and the note quotes rates only, never a record. Every method's utility is then
    meaningless; the privacy numbers are not affected.

    Parameters
    ----------
    baseline_accuracy : float
        Test accuracy of the non-private model, in [0, 1].
    labels : array_like of shape (n,)
        Class labels of the whole pool.
    n_test : int
        Number of test records (non-members), >= 1.
    bounds_source : {"published", "declared", "pool"}
        Where the feature ranges used for scaling come from
        (:attr:`pacpriv.datasets.Dataset.bounds_source`).
    """
    import numpy as np

    _, counts = np.unique(np.asarray(labels), return_counts=True)
    q = float(counts.max() / counts.sum())
    margin = 2.0 * math.sqrt(q * (1.0 - q) / max(int(n_test), 1))
    if baseline_accuracy > q + margin:
        return None
    if bounds_source == "pool":
        cause = (
            "Likely cause: the features are scaled to [-1, 1] with ranges taken from the pool "
            "itself (its per-feature min and max), so one extreme record can squeeze every "
            "other record into a tiny part of the range and the training sees no signal. "
            "Declare public feature ranges with --feature-ranges (Python: "
            "load_dataset(..., feature_ranges=...)), or check the file for outlying values."
        )
    else:
        cause = (
            f"The feature ranges are {bounds_source}; check the labels and the features, or "
            "train longer (--epochs, --learning-rate)."
        )
    return (
        f"{CHANCE_NOTE_PREFIX} the non-private model's test accuracy "
        f"{baseline_accuracy:.3f} is not clearly above the majority-class rate {q:.3f} of "
        f"the pool ({q + margin:.3f} with 2 standard errors on {n_test} test records): the "
        "model learned little or nothing from these features, so comparing the methods' test "
        "accuracies is meaningless. "
        f"{cause} The privacy bounds are not affected."
    )


def comparison_notes(v, *, n_records, n_trials, dim, n_repeats, per_record) -> list[str]:
    """How to read the comparison table (units, estimates, attack protocol)."""
    return [
        "Noise units differ: σ is the DP-SGD noise multiplier (std of the noise on each step's "
        "summed clipped gradients divided by C); PAC adds Gaussian noise once, to the final "
        "parameters. The column 'noise std per parameter' puts both on the parameters; for "
        "DP-SGD it is η·σ·C·sqrt(M·E)/(n/M), the injected noise summed over all steps without "
        "the contraction by the loss curvature (an estimate that overstates the noise left).",
        f"PAC's budget v = ln 2 − H(a) = {format_bound(v, 4)} nats bounds the whole subset "
        f"of {n_records} records at once; per record, MI averages <= v/n, so the "
        f"membership-inference accuracy averaged over records is <= "
        f"{format_bound(per_record, 4)} (concavity of the KL inversion). The DP-SGD bound holds "
        "for every record, worst case over datasets.",
        f"Test accuracy: mean ± sd over {n_repeats} models on the non-members (DP-SGD: "
        "independent trainings; PAC: independent noise draws on the same clean parameters). "
        "Attack: loss threshold on the first model, threshold chosen on a random half of the "
        "records and accuracy counted on the other half (Clopper-Pearson interval). Attacks "
        "give lower bounds on leakage; only a lower limit above the bound would refute it.",
        f"The PAC certificate uses the output covariance estimated from {n_trials} simulated "
        f"subsets (plug-in; d = {dim} parameters, so n_trials should be well above d).",
    ]


def table_markdown(table) -> str:
    """The matched-bound table of a :class:`~pacpriv.compare.results.ComparisonTable`."""
    out = [
        "Test accuracy (mean ± sd over the repeats) of each method at the same "
        "membership-inference accuracy bound, per dataset; every row names its bound's kind "
        "(certified with its 1−γ, or none) and the secret it protects.",
        "",
        "| dataset | bound | method | test accuracy | bound kind | secret protected |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for res in table.results:
        for r in res.all_rows:
            bound = "–" if r.family == "none" else format_bound(res.target_accuracy, 3)
            out.append(f"| {res.dataset} | {bound} | {r.method} | {_acc_cell(r)} | "
                       f"{r.bound_label or '–'} | {r.secret or '–'} |")
    out += ["", f"Total time {table.elapsed_s:.1f} s."]
    return "\n".join(out)
