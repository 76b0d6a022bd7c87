"""The trade-off picture: test accuracy against the membership-inference bound, PAC beside DP-SGD.

:func:`privacy_utility_curve` sweeps the target bound ``a`` (default 0.52 … 0.8) on one
dataset with :func:`pacpriv.compare.compare_table` (one PAC simulation shared by every bound)
and keeps, at each bound, three methods:

* **PAC, per record** (informed adversary; every record of the pool, or a named SAMPLE);
* **PAC, whole subset** (the Poisson-½ subset is the secret);
* **DP-SGD, exact σ** (random allocation, certified exact accuracy).

Each point is the mean test accuracy over ``n_repeats`` models with its standard deviation
(the error bar) at the bound the row is certified to; the non-private model and the majority
class are the reference lines. The bounds are *not* of one threat model (each point carries its
``bound_label`` and ``secret``): the picture puts the three certified numbers on one axis, as
the comparison table does. :meth:`PrivacyUtilityCurve.report_section` embeds the figure (a
PNG when matplotlib is installed) and the data.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 1 and Thm 3.
.. [2] Membership-inference accuracy bound for DP-SGD with random allocation (RA-MIA).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pacpriv._display import Displayable, Summary
from pacpriv._numbers import format_bound
from pacpriv._random import RNGLike
from pacpriv.compare.results import ComparisonResult, ComparisonTable
from pacpriv.threat_models import THREAT_MODELS

__all__ = ["DEFAULT_CURVE_TARGETS", "CurvePoint", "PrivacyUtilityCurve", "curve_from_table",
           "privacy_utility_curve"]

#: Default sweep of the target membership-inference accuracy bound.
DEFAULT_CURVE_TARGETS = (0.52, 0.55, 0.6, 0.7, 0.8)

#: (curve label, how to pick the row of a comparison)
_METHODS = (
    ("PAC, per record", {"family": "pac", "per_record": True}),
    ("PAC, whole subset", {"family": "pac", "per_record": False}),
    ("DP-SGD, exact sigma", {"family": "dpsgd", "exact": True}),
)


@dataclass(frozen=True)
class CurvePoint:
    """One method at one target bound.

    Attributes
    ----------
    method : str
        ``"PAC, per record"``, ``"PAC, whole subset"`` or ``"DP-SGD, exact sigma"``.
    row_method : str
        The comparison row's full label (says SAMPLE when the per-record row audits one).
    family : str
        ``"pac"`` or ``"dpsgd"``.
    target_accuracy, accuracy_bound : float
        The target and the bound the row is certified to (x axis), in (½, 1].
    test_accuracy, test_accuracy_std : float
        Mean and sd of the test accuracy over ``n_repeats`` models (y axis, error bar).
    n_repeats : int
    bound_label, secret : str
        The bound's kind (certified with its 1−γ, every record or a SAMPLE) and what it
        protects.
    """

    method: str
    row_method: str
    family: str
    target_accuracy: float
    accuracy_bound: float
    test_accuracy: float
    test_accuracy_std: float
    n_repeats: int
    bound_label: str
    secret: str


@dataclass(frozen=True)
class PrivacyUtilityCurve(Displayable):
    """Test accuracy against the membership bound for three methods (:func:`privacy_utility_curve`).

    Attributes
    ----------
    dataset : str
    points : tuple of CurvePoint
        Methods in the order of ``_METHODS``, targets ascending within each.
    baseline_accuracy, baseline_accuracy_std : float
        The non-private model (DP-SGD's training without noise or clipping; no guarantee).
    majority_accuracy : float or None
        The majority-class predictor (the floor).
    targets : tuple of float
    settings : dict
        The comparison settings (of the first bound; the same for all).
    notes : tuple of str
        Every comparison's notes, once.
    elapsed_s : float
    """

    dataset: str
    points: tuple[CurvePoint, ...]
    baseline_accuracy: float
    baseline_accuracy_std: float
    majority_accuracy: float | None
    targets: tuple[float, ...]
    settings: dict
    notes: tuple[str, ...]
    elapsed_s: float

    def methods(self) -> list[str]:
        """The methods present, in plotting order."""
        return list(dict.fromkeys(p.method for p in self.points))

    def summary(self) -> Summary:
        """One row per (method, bound): test accuracy ± sd at the certified bound."""
        rows: list[tuple[str, Any, str]] = [
            (f"{p.method} @ bound {format_bound(p.accuracy_bound, 4, side='up')}",
             f"{p.test_accuracy:.3f} ± {p.test_accuracy_std:.3f} ({p.bound_label})", "plain")
            for p in self.points]
        rows.append(("non-private (no guarantee)",
                     f"{self.baseline_accuracy:.3f} ± {self.baseline_accuracy_std:.3f}",
                     "plain"))
        return Summary(f"Test accuracy vs membership-inference bound, {self.dataset}", rows)

    def to_dict(self) -> dict:
        """JSON-serialisable dict (the points as a list of dicts)."""
        out = asdict(self)
        out["points"] = [asdict(p) for p in self.points]
        return out

    def to_markdown(self) -> str:
        """The curve's data as a Markdown table (bounds rounded up)."""
        lines = ["| method | target | certified bound | test accuracy | sd | models | bound |",
                 "|---|---|---|---|---|---|---|"]
        for p in self.points:
            lines.append(f"| {p.row_method} | {p.target_accuracy:g} | "
                         f"{format_bound(p.accuracy_bound, 4, side='up')} | "
                         f"{p.test_accuracy:.3f} | {p.test_accuracy_std:.3f} | {p.n_repeats} "
                         f"| {p.bound_label} |")
        lines.append(f"| non-private (no guarantee) | - | 1 | {self.baseline_accuracy:.3f} | "
                     f"{self.baseline_accuracy_std:.3f} | - | none |")
        if self.majority_accuracy is not None:
            lines.append(f"| majority class | - | - | {self.majority_accuracy:.3f} | - | - | "
                         "none |")
        return "\n".join(lines) + "\n"

    def plot_points(self) -> list[dict]:
        """Rows of :func:`pacpriv.plotting.plot_privacy_utility_curve`."""
        return [{"method": p.method + (" (SAMPLE of records)" if "SAMPLE" in p.row_method
                                       else ""), "accuracy_bound": p.accuracy_bound,
                 "test_accuracy": p.test_accuracy, "test_accuracy_std": p.test_accuracy_std}
                for p in self.points]

    def figure(self):
        """The picture (matplotlib; ``pip install pacpriv[plot]``)."""
        from pacpriv.plotting.curve import plot_privacy_utility_curve

        return plot_privacy_utility_curve(self.plot_points(), baseline=self.baseline_accuracy,
                                          majority=self.majority_accuracy)

    def report_section(self) -> dict:
        """A report section: the table, the data (``privacy_utility_curve``) and, with
        matplotlib, the figure as an embedded PNG (``figures``)."""
        section: dict = {
            "title": f"Trade-off: test accuracy vs membership-inference bound ({self.dataset})",
            "markdown": self.to_markdown() + "\nError bars: ± one sd over the models of each "
            "point. Each bound is certified under its own threat model (column 'bound').",
            "threat_model": "\n\n".join(THREAT_MODELS.values()),
            "privacy_utility_curve": self.to_dict(),
        }
        if importlib.util.find_spec("matplotlib") is not None:
            from pacpriv.plotting import figure_to_data_uri

            section["figures"] = [figure_to_data_uri(self.figure())]
        return section


def _pick(res: ComparisonResult, how: dict):
    try:
        return res.row(how["family"], exact=how.get("exact"), per_record=how.get("per_record"))
    except KeyError:
        return None  # that row was not run (per_record_trials=0, exact=False)


def curve_from_table(table: ComparisonTable, *, elapsed_s: float | None = None
                     ) -> PrivacyUtilityCurve:
    """The curve of a one-dataset :class:`~pacpriv.compare.ComparisonTable`.

    Raises
    ------
    ValueError
        If the table holds several datasets or none of the three rows.
    """
    names = {r.dataset for r in table.results}
    if len(names) != 1:
        raise ValueError(f"`table` must hold one dataset; got {len(names)}.")
    results = sorted(table.results, key=lambda r: r.target_accuracy)
    points = []
    for label, how in _METHODS:
        for res in results:
            row = _pick(res, how)
            if row is None:
                continue
            points.append(CurvePoint(
                method=label, row_method=row.method, family=row.family,
                target_accuracy=res.target_accuracy, accuracy_bound=row.accuracy_bound,
                test_accuracy=row.test_accuracy, test_accuracy_std=row.test_accuracy_std,
                n_repeats=row.n_repeats, bound_label=row.bound_label, secret=row.secret))
    if not points:
        raise ValueError("the comparisons hold none of the curve's rows (PAC per record, PAC "
                         "whole subset, DP-SGD exact sigma).")
    first = results[0]
    majority = next((r.test_accuracy for r in first.references
                     if r.method.startswith("majority")), None)
    notes = tuple(dict.fromkeys(n for r in results for n in r.notes))
    return PrivacyUtilityCurve(
        dataset=first.dataset, points=tuple(points),
        baseline_accuracy=first.baseline.test_accuracy,
        baseline_accuracy_std=first.baseline.test_accuracy_std, majority_accuracy=majority,
        targets=tuple(r.target_accuracy for r in results), settings=first.settings,
        notes=notes, elapsed_s=table.elapsed_s if elapsed_s is None else elapsed_s)


def privacy_utility_curve(
    dataset: Any = "breast_cancer",
    *,
    targets: Sequence[float] = DEFAULT_CURVE_TARGETS,
    settings: Any = None,
    rng: RNGLike = None,
    execution: Any = None,
) -> PrivacyUtilityCurve:
    """Sweep the target bound and return test accuracy against it for PAC and DP-SGD.

    Parameters
    ----------
    dataset : str, path or Dataset, default "breast_cancer"
        A classification pool (as in :func:`~pacpriv.compare.compare_pac_dpsgd`).
    targets : sequence of float, default (0.52, 0.55, 0.6, 0.7, 0.8)
        Target membership-inference accuracy bounds in (½, 1), at least two; duplicates are
        dropped, the rest sorted.
    settings : ComparisonSettings, optional
        Training, simulation and per-record settings (default ``ComparisonSettings()``);
        ``exact=False`` or ``per_record_trials=0`` leave that curve out.
    rng : None, int, SeedSequence or Generator
        Root seed (as in :func:`~pacpriv.compare.compare_table`: the point at ``a`` equals
        ``compare_pac_dpsgd(dataset, target_accuracy=a, rng=rng)``'s rows).
    execution : ExecutionOptions, optional
        How the simulations run (never changes the result).

    Returns
    -------
    PrivacyUtilityCurve

    Raises
    ------
    TypeError, ValueError
        Invalid arguments, or fewer than two distinct targets (before any training).
    """
    from pacpriv.compare.run import ComparisonSettings, _targets, compare_table

    if not isinstance(targets, Sequence) or isinstance(targets, str):
        raise TypeError("`targets` must be a sequence of bounds in (0.5, 1); got "
                        f"{type(targets).__name__}.")
    sweep = _targets(targets)
    if len(sweep) < 2:
        raise ValueError(f"`targets` must hold at least two distinct bounds in (0.5, 1); got "
                         f"{len(sweep)}.")
    table = compare_table(dataset if not isinstance(dataset, (list, tuple)) else list(dataset),
                          target_accuracies=sweep, settings=settings or ComparisonSettings(),
                          rng=rng, execution=execution)
    return curve_from_table(table)
