"""Result dataclasses of :func:`pacpriv.compare.compare_pac_dpsgd` (a leaf of the package).

:class:`ComparisonRow` is one method of the comparison, :class:`ComparisonResult` the whole
table; both render through :mod:`pacpriv.compare.render` and never need torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pacpriv._display import Displayable, Summary, format_value
from pacpriv.audit._attacks import AttackResult
from pacpriv.compare.render import comparison_markdown, table_markdown
from pacpriv.plotting import plot_comparison_table, plot_pac_vs_dpsgd

__all__ = ["ComparisonResult", "ComparisonRow", "ComparisonTable"]


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
        Per-record PAC row only: the informed likelihood-ratio attack on simulated trials
        independent of the certificate (:meth:`pacpriv.pac.per_record.InformedAttackResult.
        to_dict`).
    dataset : str
        The dataset of this row.
    target_accuracy : float or None
        The bound the row is calibrated to (None for the references without a guarantee).
    secret : str
        What the row's bound protects.
    bound_label : str
        The bound's kind: certified (with its 1−γ, and for per-record bounds whether every
        record or a named sample), exact/analytic, estimated, or no guarantee.
    mechanism : callable or None
        PAC rows: the black box that was simulated (not serialised: ``to_dict`` gives its
        description), so anyone can re-check the bound on :attr:`ComparisonResult.pool`.
    noise_plan : NoisePlan or None
        PAC rows: the calibrated noise (``to_dict`` gives its summary).
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
    attack: AttackResult | None
    n_repeats: int
    wall_time_s: float
    informed_attack: dict | None = None
    dataset: str = ""
    target_accuracy: float | None = None
    secret: str = ""
    bound_label: str = ""
    mechanism: Any = field(default=None, repr=False, compare=False)
    noise_plan: Any = field(default=None, repr=False, compare=False)

    @property
    def attack_accuracy(self) -> float | None:
        """Measured attack accuracy (balanced, on the evaluation half); None without attack."""
        return None if self.attack is None else self.attack.accuracy

    def to_dict(self) -> dict:
        """JSON-serialisable dict; the attack is flattened to ``attack_*`` keys, the mechanism
        to its description and the noise plan to its summary."""
        skip = {"attack", "mechanism", "noise_plan"}
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in skip}
        a = self.attack
        if a is None:
            out.update(attack_accuracy=None, attack_ci_low=None, attack_ci_high=None,
                       attack_auc=None, attack_confidence=None, attack=None)
        else:
            out.update(attack_accuracy=a.accuracy, attack_ci_low=a.ci_low,
                       attack_ci_high=a.ci_high, attack_auc=a.auc,
                       attack_confidence=a.confidence, attack=a.to_dict())
        m = self.mechanism
        out["mechanism"] = None if m is None else (
            m.describe() if callable(getattr(m, "describe", None)) else type(m).__name__)
        out["noise_plan"] = None if self.noise_plan is None else self.noise_plan.to_dict()
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
        The DP-SGD rows' training without noise or clipping (no guarantee; bound 1).
    references : tuple of ComparisonRow
        Further reference rows: the majority class, the PAC black box without noise and,
        with the stabilised black box, DP-SGD (exact σ) on the PAC black box's features.
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
    dataset : str
        The dataset's name.
    pool : tuple (X, y) or None
        The data the PAC rows simulated on (scaled features, class indices), so their bounds
        can be re-checked with each row's ``mechanism`` and ``noise_plan``. Never serialised.
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
    references: tuple[ComparisonRow, ...] = ()
    dataset: str = ""
    pool: Any = field(repr=False, compare=False, default=None)

    @property
    def all_rows(self) -> tuple[ComparisonRow, ...]:
        """``rows``, the baseline, then the references."""
        return (*self.rows, self.baseline, *self.references)

    def row(self, family: str, *, exact: bool | None = None,
            per_record: bool | None = None) -> ComparisonRow:
        """The first row of ``family`` ("dpsgd" or "pac"); for DP-SGD pick ``exact``, for PAC
        ``per_record``."""
        for r in self.rows:
            if r.family != family:
                continue
            if exact is not None and ("exact" in r.method) != exact:
                continue
            if per_record is not None and ("per record" in r.method) != per_record:
                continue
            return r
        raise KeyError(f"no {family!r} row (exact={exact}, per_record={per_record}) in this "
                       "comparison")

    def summary(self) -> Summary:
        """Rows shown by ``str(result)`` and in Jupyter: one row per method."""
        rows: list[tuple[str, Any, str]] = [
            ("target accuracy bound", self.target_accuracy, "plain")]
        for r in self.all_rows:
            attack = "–" if r.attack_accuracy is None else f"{r.attack_accuracy:.3f}"
            rows.append((r.method,
                         f"test accuracy {r.test_accuracy:.3f}; bound "
                         f"{format_value(r.accuracy_bound, 'risk', 4)} ({r.bound_label}); "
                         f"attack {attack}", "plain"))
        return Summary("PAC versus DP-SGD at the same membership-inference bound", rows)

    def to_dict(self) -> dict:
        """JSON-serialisable dict (no arrays, no records)."""
        return {
            "dataset": self.dataset,
            "target_accuracy": self.target_accuracy,
            "mi_budget_nats": self.mi_budget,
            "rows": [r.to_dict() for r in self.rows],
            "baseline": self.baseline.to_dict(),
            "references": [r.to_dict() for r in self.references],
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
                "test_accuracy_std", "accuracy_bound", "bound_label", "secret",
                "attack_accuracy", "attack_ci_low", "attack_ci_high"]
        dicts = [r.to_dict() for r in self.all_rows]
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


@dataclass(frozen=True)
class ComparisonTable(Displayable):
    """Comparisons over several datasets and bounds (:func:`pacpriv.compare.compare_table`).

    Attributes
    ----------
    results : tuple of ComparisonResult
        One per (dataset, target accuracy), datasets in the order given, targets ascending.
    elapsed_s : float
        Wall-clock seconds of the whole table.
    """

    results: tuple[ComparisonResult, ...]
    elapsed_s: float

    def result(self, dataset: str, target_accuracy: float) -> ComparisonResult:
        """The comparison of one dataset at one bound."""
        for r in self.results:
            if r.dataset == dataset and abs(r.target_accuracy - target_accuracy) < 1e-12:
                return r
        raise KeyError(f"no comparison for {dataset!r} at {target_accuracy!r}")

    def rows(self) -> list[dict]:
        """Every row of every comparison (``to_dict`` form, with ``dataset`` and
        ``target_accuracy``)."""
        out = []
        for res in self.results:
            for r in res.all_rows:
                d = r.to_dict()
                d["dataset"], d["target_accuracy"] = res.dataset, res.target_accuracy
                out.append(d)
        return out

    def summary(self) -> Summary:
        """One line per (dataset, bound, method)."""
        rows: list[tuple[str, Any, str]] = []
        for d in self.rows():
            rows.append((f"{d['dataset']} @ {d['target_accuracy']:g}: {d['method']}",
                         f"{d['test_accuracy']:.3f} ± {d['test_accuracy_std']:.3f} "
                         f"({d['bound_label']})", "plain"))
        return Summary("Matched-bound table: PAC Privacy vs DP-SGD", rows)

    def to_dict(self) -> dict:
        """JSON: the flat rows (each with ``dataset`` and ``target_accuracy``) and every
        comparison in full."""
        return {"rows": self.rows(), "comparisons": [r.to_dict() for r in self.results],
                "elapsed_s": self.elapsed_s}

    def to_markdown(self) -> str:
        """The matched-bound table (Markdown)."""
        return table_markdown(self)

    def plot_rows(self) -> list[dict]:
        """Rows for :func:`pacpriv.plotting.plot_comparison_table`."""
        return [{k: d[k] for k in ("dataset", "target_accuracy", "method", "family",
                                   "test_accuracy", "test_accuracy_std", "bound_label")}
                for d in self.rows()]

    def report_section(self) -> dict:
        """A report section with the table and its figure (plot kind ``comparison_table``)."""
        cols = ["dataset", "target_accuracy", "method", "test_accuracy", "test_accuracy_std",
                "accuracy_bound", "bound_label", "secret"]
        rows = self.rows()
        return {
            "title": "PAC Privacy vs DP-SGD at matched membership-inference bounds",
            "markdown": self.to_markdown(),
            "table": {"columns": cols, "rows": [[d[c] for c in cols] for d in rows]},
            "plot": {"kind": "comparison_table", "rows": self.plot_rows()},
            "comparison_table": self.to_dict(),
        }

    def figure(self):
        """Test accuracy ± sd per method, one panel per (dataset, bound) (matplotlib)."""
        return plot_comparison_table(self.plot_rows())
