"""Result dataclasses of :func:`pacpriv.compare.compare_pac_dpsgd` (a leaf of the package).

:class:`ComparisonRow` is one method of the comparison, :class:`ComparisonResult` the whole
table; both render through :mod:`pacpriv.compare.render` and never need torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pacpriv._display import Displayable, Summary, format_value
from pacpriv.audit._attacks import AttackResult
from pacpriv.compare.render import comparison_markdown
from pacpriv.plotting import plot_pac_vs_dpsgd

__all__ = ["ComparisonResult", "ComparisonRow"]


@dataclass(frozen=True)
class ComparisonRow:
    """One method of the comparison.

    Attributes
    ----------
    method : str
        Label, e.g. ``"DP-SGD (chi-square closed form)"``.
    family : {"dpsgd", "pac", "none"}
        Which half of pacpriv certifies it (``"none"``: the non-private baseline).
    noise : float
        The method's own noise knob: the noise multiplier σ (dimensionless, noise std / C)
        for DP-SGD, the RMS noise std per parameter ``sqrt(E||B||²/d)`` for PAC, 0 for the
        baseline. Not the same quantity across families.
    noise_units : str
        What ``noise`` measures.
    noise_multiplier : float or None
        σ (DP-SGD only).
    gradient_noise_std : float or None
        DP-SGD per-step noise std on the *averaged* gradient, σ·C/(n/M) per coordinate.
    parameter_noise_rms : float or None
        Noise std per parameter of the final model: PAC ``sqrt(E||B||²/d)`` (exact);
        DP-SGD ``η·σ·C·sqrt(M·E)/(n/M)``, the injected noise summed over the M·E steps
        without the contraction by the loss curvature (an estimate; in the linearised
        dynamics of a convex loss with ηH <= 2 it overstates what is left).
    expected_noise_power : float or None
        PAC ``E||B||² = trace(Σ_B)`` on the parameters.
    mi_budget : float or None
        PAC budget ``v`` in nats.
    test_accuracy, test_accuracy_std : float
        Mean and sd of the accuracy on the non-members over ``n_repeats`` models (DP-SGD:
        independent trainings; PAC: independent noise draws).
    accuracy_bound : float
        Membership-inference accuracy bound the method is certified to (1 for the baseline).
    bound_source : str
        Where the bound comes from.
    attack : AttackResult
        Loss-threshold attack [3]_ on the first repeat's model: members vs non-members.
    n_repeats : int
        Models averaged in ``test_accuracy``.
    wall_time_s : float
        Seconds spent on this row (PAC: including the simulation).
    informed_attack : dict or None
        Per-record PAC row only: the informed likelihood-ratio attack on held-out simulated
        trials (:meth:`pacpriv.pac.per_record.InformedAttackResult.to_dict`).
    """

    method: str
    family: str
    noise: float
    noise_units: str
    noise_multiplier: float | None
    gradient_noise_std: float | None
    parameter_noise_rms: float | None
    expected_noise_power: float | None
    mi_budget: float | None
    test_accuracy: float
    test_accuracy_std: float
    accuracy_bound: float
    bound_source: str
    attack: AttackResult
    n_repeats: int
    wall_time_s: float
    informed_attack: dict | None = None

    @property
    def attack_accuracy(self) -> float:
        """Measured attack accuracy (balanced, on the evaluation half)."""
        return self.attack.accuracy

    def to_dict(self) -> dict:
        """JSON-serialisable dict; the attack is flattened to ``attack_*`` keys."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "attack"}
        a = self.attack
        out.update(attack_accuracy=a.accuracy, attack_ci_low=a.ci_low, attack_ci_high=a.ci_high,
                   attack_auc=a.auc, attack_confidence=a.confidence, attack=a.to_dict())
        return out

    def plot_row(self) -> dict:
        """Row of :func:`pacpriv.plotting.plot_pac_vs_dpsgd`; one noise axis for all bars, so
        ``noise`` is ``parameter_noise_rms`` there (DP-SGD: the estimate), not the native knob."""
        return {"method": self.method, "noise": self.parameter_noise_rms,
                "test_accuracy": self.test_accuracy,
                "accuracy_bound": self.accuracy_bound, "attack_accuracy": self.attack_accuracy}


@dataclass(frozen=True)
class ComparisonResult(Displayable):
    """Outcome of :func:`compare_pac_dpsgd`.

    Attributes
    ----------
    target_accuracy : float
        Membership-inference accuracy bound ``a`` every row is certified to.
    mi_budget : float
        PAC budget ``v = ln 2 − H(a)`` in nats.
    rows : tuple of ComparisonRow
        DP-SGD closed form, DP-SGD exact (if available), PAC (whole subset), PAC per record
        (informed adversary, if run).
    baseline : ComparisonRow
        The same training without noise or clipping (no guarantee; bound 1).
    threat_models : dict
        ``{"pac": str, "pac_record": str, "dpsgd": str}`` (:data:`THREAT_MODELS`).
    settings : dict
        Dataset, model, training and simulation settings (JSON-serialisable).
    notes : tuple of str
        How to read the table (units, estimates, skipped rows).
    seed : dict
        ``seed_to_dict`` of the root seed (children: 0 membership, 1 simulation, 2 PAC
        noise, 3/4 DP-SGD closed form/exact, 5 attack splits, 6 per-record PAC). It
        regenerates every model of the comparison, which is why they are evaluation
        artefacts and not private releases.
    elapsed_s : float
        Wall-clock seconds of the whole comparison.
    pac_result : PacResult
        The PAC job (simulation, spectrum, noise plan; no release, ``evaluation`` set); not
        in ``to_dict``.
        ``write_report(result.pac_result.with_sections(result.report_section()), out)``
        writes the PAC report with this comparison as an extra section.
    """

    target_accuracy: float
    mi_budget: float
    rows: tuple[ComparisonRow, ...]
    baseline: ComparisonRow
    threat_models: dict
    settings: dict
    notes: tuple[str, ...]
    seed: dict
    elapsed_s: float
    pac_result: Any = field(repr=False, compare=False, default=None)

    def row(self, family: str, *, exact: bool | None = None) -> ComparisonRow:
        """The first row of ``family`` ("dpsgd" or "pac"); for DP-SGD pick ``exact``."""
        for r in self.rows:
            if r.family == family and (exact is None or ("exact" in r.method) == exact):
                return r
        raise KeyError(f"no {family!r} row (exact={exact}) in this comparison")

    def summary(self) -> Summary:
        """Rows shown by ``str(result)`` and in Jupyter: one row per method."""
        rows: list[tuple[str, Any, str]] = [
            ("target accuracy bound", self.target_accuracy, "plain")]
        for r in (*self.rows, self.baseline):
            rows.append((r.method,
                         f"test accuracy {r.test_accuracy:.3f}; bound "
                         f"{format_value(r.accuracy_bound, 'risk', 4)}; attack "
                         f"{r.attack_accuracy:.3f}", "plain"))
        return Summary("PAC versus DP-SGD at the same membership-inference bound", rows)

    def to_dict(self) -> dict:
        """JSON-serialisable dict (no arrays, no records)."""
        return {
            "target_accuracy": self.target_accuracy,
            "mi_budget_nats": self.mi_budget,
            "rows": [r.to_dict() for r in self.rows],
            "baseline": self.baseline.to_dict(),
            "threat_models": dict(self.threat_models),
            "settings": dict(self.settings),
            "notes": list(self.notes),
            "seed": self.seed,
            "elapsed_s": self.elapsed_s,
        }

    def to_markdown(self) -> str:
        """The table, the notes and the two threat models side by side (Markdown)."""
        return comparison_markdown(self)

    def report_section(self) -> dict:
        """A report section (``title``, ``markdown``, ``table``, ``plot``, ``comparison``).

        Pass it to :meth:`pacpriv.pac.job.PacResult.with_sections`, or give this result to
        :func:`pacpriv.report.write_report` directly (an analytic report).
        """
        cols = ["method", "noise", "noise_units", "parameter_noise_rms", "test_accuracy",
                "accuracy_bound", "attack_accuracy", "attack_ci_low", "attack_ci_high"]
        dicts = [r.to_dict() for r in (*self.rows, self.baseline)]
        return {
            "title": f"PAC Privacy vs DP-SGD at membership-inference accuracy "
                     f"{100 * self.target_accuracy:.1f}%",
            "markdown": self.to_markdown(),
            "threat_model": "\n\n".join(self.threat_models.values()),
            "table": {"columns": cols, "rows": [[d[c] for c in cols] for d in dicts]},
            "plot": {"kind": "pac_vs_dpsgd", "rows": self.plot_rows()},
            "comparison": self.to_dict(),
        }

    def plot_rows(self) -> list[dict]:
        """Rows for :func:`pacpriv.plotting.plot_pac_vs_dpsgd` (baseline last)."""
        return [r.plot_row() for r in (*self.rows, self.baseline)]

    def figure(self):
        """The side-by-side figure (matplotlib; ``pip install pacpriv[plot]``)."""

        return plot_pac_vs_dpsgd(self.plot_rows())
