"""Text of :mod:`pacpriv.compare`: threat models, reading notes, Markdown (private; no torch)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pacpriv import _json
from pacpriv._numbers import format_bound
from pacpriv.threat_models import THREAT_MODELS

if TYPE_CHECKING:
    from pacpriv.compare.results import ComparisonResult, ComparisonRow

__all__ = ["CHANCE_NOTE_PREFIX", "EVALUATION_NOTE", "THREAT_MODELS", "chance_note",
           "comparison_markdown", "comparison_notes", "per_record_note"]

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
     "Bayes accuracy of two Gaussians, empirical Bernstein + union bound (certified 1−γ)",
     "accuracy <= ½ + ½·TV of the random-allocation pair (RA-MIA)"),
)


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}g}" if abs(x) >= 10 else f"{x:.{digits}f}"


def _noise_cell(r: ComparisonRow, c: float) -> str:
    if r.family == "dpsgd":
        return (f"σ = {format_bound(r.noise, 4)} (per-step std {r.gradient_noise_std:.3g} on "
                f"the averaged gradient, C = {c:g})")
    if r.family == "pac" and r.mi_budget is None:
        return (f"{format_bound(r.noise, 3, side='up')} per parameter (E‖B‖² = "
                f"{format_bound(r.expected_noise_power, 3, side='up')}, "
                "isotropic, per-record target)")
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
    kind = r.bound_source.split(":", 1)[0] if ":" in r.bound_source else r.bound_source
    return f"{format_bound(r.accuracy_bound, 3, side='up')} ({kind})"


def comparison_markdown(res: ComparisonResult) -> str:
    """The table, the notes and the two threat models side by side (Markdown)."""
    s = res.settings
    pct = round(100 * res.rows[0].attack.confidence) if res.rows else 95
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
        f"loss-attack accuracy ({pct}% CI) | informed-attack accuracy ({pct}% CI) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in (*res.rows, res.baseline):
        est = " (estimate)" if r.family == "dpsgd" else ""
        out.append(
            f"| {r.method} | {_noise_cell(r, s['max_grad_norm'])} | "
            f"{_f(r.parameter_noise_rms)}{est} | {r.test_accuracy:.3f}"
            f"{'' if s['n_repeats'] < 2 else f' ± {r.test_accuracy_std:.3f}'} | "
            f"{_bound_cell(r)} | {r.attack_accuracy:.3f} "
            f"[{r.attack.ci_low:.3f}, {r.attack.ci_high:.3f}] | {_informed_cell(r)} |"
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


def per_record_note(plan, informed, n_trials: int,
                    whole_subset_power: float | None = None,
                    n_pool: int | None = None) -> str:
    """How to read the per-record PAC row (coverage, trials, certified bound, attack).

    ``n_pool`` (the pool's size) says whether the bound covers every record or only the
    audited sample (then it says so in capitals: the other records are not bounded). When the
    per-record noise power exceeds ``whole_subset_power`` (the whole-subset PAC row's E‖B‖²),
    the note says why: with few trials the empirical-Bernstein term of the certified
    per-record bound dominates.
    """
    from pacpriv.compare.per_record import coverage_text

    more = ""
    power = plan.expected_noise_power
    k = int(plan.records.size)
    n = k if n_pool is None else int(n_pool)
    if whole_subset_power is not None and power > whole_subset_power:
        n_cert = int(plan.n_trials_certify)
        gamma = 1.0 - float(plan.accuracy_confidence)
        base = max(plan.sampling_rate, 1.0 - plan.sampling_rate)
        floor = base + 7.0 * (1.0 - base) * math.log(2.0 * k / gamma) / (3.0 * (n_cert - 1))
        more = (
            f" Here the per-record noise (E‖B‖² = {format_bound(power, 4, side='up')}) is "
            f"larger than the whole-subset noise ({format_bound(whole_subset_power, 4)}): with "
            f"{n_cert} certifying trials the empirical-Bernstein term of the certified bound is "
            f"large (the smallest certifiable bound for {k} records at 1−γ = "
            f"{plan.accuracy_confidence:g} is max(q, 1−q) + 7(1 − max(q, 1−q))·ln(2k/γ)/"
            f"(3(n − 1)) = {format_bound(floor, 4)}), so the noise must cover it; more trials "
            "lower it. The two rows protect against different adversaries and are not ordered."
        )
    return (
        f"PAC per record: isotropic noise calibrated so that each audited record has "
        f"informed-adversary accuracy <= {format_bound(plan.max_accuracy_upper, 4)}, "
        f"certified with confidence {plan.accuracy_confidence:g} from "
        f"{plan.n_trials_certify} simulated trials (empirical Bernstein, union bound over the "
        f"{k} audited records; uniform over noise scales >= the chosen one). Audited: "
        f"{coverage_text(k, n)}. The informed likelihood-ratio attack "
        f"(knows the other records' memberships) on {informed.n_trials} held-out trials of the "
        f"{n_trials} measured {informed.accuracy:.3f} [{informed.ci_low:.3f}, "
        f"{informed.ci_high:.3f}] (blind guess 0.5). The loss-attack column attacks every "
        "record of the released model and is not the per-record adversary." + more
    )


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
