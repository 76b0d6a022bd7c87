"""Text of :mod:`pacpriv.compare`: threat models, reading notes, Markdown (private; no torch)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pacpriv.threat_models import THREAT_MODELS

if TYPE_CHECKING:
    from pacpriv.compare.results import ComparisonResult, ComparisonRow

__all__ = ["THREAT_MODELS", "comparison_markdown", "comparison_notes"]


_SIDE_BY_SIDE = (
    ("secret", "the random training subset X (Poisson-½ over the pool)",
     "whether one target record was used (add/remove one record)"),
    ("adversary knows", "the whole pool, the code and its public seed, the noise covariance",
     "every other record, the model, all noisy gradient steps"),
    ("quantifier", "average over the sampler, on this pool (simulated)",
     "worst case over datasets and records (analytic)"),
    ("certificate", "MI(X; release) <= v nats, KL inversion (PAC Thm 1)",
     "accuracy <= ½ + ½·TV of the random-allocation pair (RA-MIA)"),
)


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}g}" if abs(x) >= 10 else f"{x:.{digits}f}"


def _noise_cell(r: ComparisonRow, c: float) -> str:
    if r.family == "dpsgd":
        return (f"σ = {r.noise:.3f} (per-step std {r.gradient_noise_std:.3g} on the averaged "
                f"gradient, C = {c:g})")
    if r.family == "pac":
        return (f"{r.noise:.3g} per parameter (E‖B‖² = {r.expected_noise_power:.3g}, "
                f"v = {r.mi_budget:.4g} nats)")
    return "none"


def comparison_markdown(res: ComparisonResult) -> str:
    """The table, the notes and the two threat models side by side (Markdown)."""
    s = res.settings
    pct = round(100 * res.rows[0].attack.confidence) if res.rows else 95
    out = [
        f"Same model ({s['model']}, d = {s['dim']} parameters), same data ({s['dataset']}: "
        f"{s['n_members']} members, {s['n_nonmembers']} non-members = test set) and same "
        f"training (E = {s['epochs']} epochs × M = {s['steps_per_epoch']} steps, SGD η = "
        f"{s['learning_rate']:g}). Every method is certified to membership-inference accuracy "
        f"<= **{100 * res.target_accuracy:.1f}%**, each under its own threat model (below).",
        "",
        "| method | noise | noise std per parameter | test accuracy | MIA accuracy bound | "
        f"loss-attack accuracy ({pct}% CI) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in (*res.rows, res.baseline):
        est = " (estimate)" if r.family == "dpsgd" else ""
        bound = "1 (none)" if r.family == "none" else f"{r.accuracy_bound:.3f}"
        out.append(
            f"| {r.method} | {_noise_cell(r, s['max_grad_norm'])} | "
            f"{_f(r.parameter_noise_rms)}{est} | {r.test_accuracy:.3f}"
            f"{'' if s['n_repeats'] < 2 else f' ± {r.test_accuracy_std:.3f}'} | {bound} | "
            f"{r.attack_accuracy:.3f} "
            f"[{r.attack.ci_low:.3f}, {r.attack.ci_high:.3f}] |"
        )
    out += ["", "Notes:", ""] + [f"- {n}" for n in res.notes]
    out += ["", "Threat models side by side:", "", "| | PAC Privacy | DP-SGD |",
            "| --- | --- | --- |"]
    out += [f"| {k} | {p} | {d} |" for k, p, d in _SIDE_BY_SIDE]
    out += ["", f"**PAC Privacy.** {res.threat_models['pac']}", "",
            f"**DP-SGD.** {res.threat_models['dpsgd']}", "",
            f"Root seed of the comparison: `{json.dumps(res.seed)}`; the same seed and "
            "arguments give this table bit for bit, for any n_jobs."]
    return "\n".join(out)


def comparison_notes(v, *, n_records, n_trials, dim, n_repeats, per_record) -> list[str]:
    """How to read the comparison table (units, estimates, attack protocol)."""
    return [
        "Noise units differ: σ is the DP-SGD noise multiplier (std of the noise on each step's "
        "summed clipped gradients divided by C); PAC adds Gaussian noise once, to the final "
        "parameters. The column 'noise std per parameter' puts both on the parameters; for "
        "DP-SGD it is η·σ·C·sqrt(M·E)/(n/M), the injected noise summed over all steps without "
        "the contraction by the loss curvature (an estimate that overstates the noise left).",
        f"PAC's budget v = ln 2 − H(a) = {v:.4g} nats bounds the whole subset of {n_records} "
        f"records at once; per record, MI averages <= v/n, so the membership-inference "
        f"accuracy averaged over records is <= {per_record:.4f} (concavity of the KL "
        "inversion). The DP-SGD bound holds for every record, worst case over datasets.",
        f"Test accuracy: mean ± sd over {n_repeats} models on the non-members (DP-SGD: "
        "independent trainings; PAC: independent noise draws on the same clean parameters). "
        "Attack: loss threshold on the first model, threshold chosen on a random half of the "
        "records and accuracy counted on the other half (Clopper-Pearson interval). Attacks "
        "give lower bounds on leakage; only a lower limit above the bound would refute it.",
        f"The PAC certificate uses the output covariance estimated from {n_trials} simulated "
        f"subsets (plug-in; d = {dim} parameters, so n_trials should be well above d).",
    ]
