"""Report section of a per-record exposure: which records are at risk, and why.

:func:`per_record_section` turns a :class:`~pacpriv.pac.per_record.RecordExposure` (and the
calibration target, if any) into a report section (``title``, ``markdown``, ``threat_model``,
``table``, ``plot``, ``per_record``) that the report writers render to JSON, Markdown and HTML.
It holds public facts only, aggregates over the records: the maximum, median and upper
quantiles of the exposure, how many records lie above thresholds (and above the target), a
histogram of the per-record upper bounds with the target marked -- never a record's index or
its own bound -- the informed
adversary's threat model in words and, beside it, the whole-subset guarantee of the same noise.
Risk numbers are rounded **up** for display (safe side).

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, §2 and Thm 1.
.. [2] A. Maurer, M. Pontil. COLT 2009, Thm 4.
"""

from __future__ import annotations

import math

import numpy as np

from pacpriv._numbers import format_bound, format_fixed, format_percent
from pacpriv.threat_models import THREAT_MODEL_PAC, THREAT_MODEL_PAC_RECORD

__all__ = ["INFORMED_ADVERSARY", "WHOLE_SUBSET", "aggregates_line", "per_record_section",
           "round_up"]

#: The per-record threat model, in words (one text: :mod:`pacpriv.threat_models`).
INFORMED_ADVERSARY = "**Per record (informed adversary).** " + THREAT_MODEL_PAC_RECORD

#: The whole-subset threat model, in words.
WHOLE_SUBSET = ("**Whole subset (PAC Privacy).** " + THREAT_MODEL_PAC
                + " It protects all records jointly, so for the same target accuracy it needs "
                "more noise than a per-record guarantee.")


def round_up(x: float, digits: int = 4) -> float:
    """``x`` rounded up to ``digits`` decimals (display of risk numbers on the safe side).

    Exact: the decimal text of ``x`` is rounded toward +inf (:mod:`pacpriv._numbers`), so the
    result is never below ``x`` by more than the float nearest to that decimal.
    """
    if not math.isfinite(x):
        return x
    return float(format_fixed(x, digits, side="up"))


def _pct_up(x: float) -> str:
    return format_percent(x)


def _mi_up(x: float) -> str:
    return format_bound(x, side="up")


def _histogram_lines(hist: dict, target: float | None) -> list[str]:
    edges, counts = hist["edges"], hist["counts"]
    top = max(counts) or 1
    used = [j for j, c in enumerate(counts) if c]
    if target is not None:
        used += [j for j in range(len(counts)) if edges[j] <= target < edges[j + 1]]
    last = max(used, default=len(counts) - 1)
    lines = ["| accuracy upper bound | records | |", "|---|---:|---|"]
    for lo, hi, c in zip(edges[: last + 1], edges[1 : last + 2], counts[: last + 1],
                         strict=True):
        mark = " ← target" if target is not None and lo <= target < hi else ""
        bar = "█" * math.ceil(20 * c / top) if c else ""
        lines.append(f"| [{lo:.3f}, {hi:.3f}) | {c} | {bar}{mark} |")
    return lines


def aggregates_line(d: dict, target_accuracy: float | None = None) -> str:
    """The quantiles of the per-record upper bounds and the counts above thresholds (and
    above ``target_accuracy``), in one line; each bound rounded up."""
    q = d["accuracy_upper_quantiles"]
    parts = [f"{k} ≤ {_pct_up(v)}" for k, v in q.items()]
    counts = [f"{c['count']} above {_pct_up(c['accuracy'])}" for c in d.get("n_above", [])]
    if target_accuracy is not None and "n_above_target" in d:
        counts.append(f"{d['n_above_target']} above the target {_pct_up(target_accuracy)}")
    text = ", ".join(parts)
    if counts:
        text += f"; of {d['n_audited']} records: " + ", ".join(counts)
    return text

def _rows(d: dict, conf: float, target_accuracy: float | None, plan_bound: float | None,
          n_pool: int | None) -> list[tuple[str, str, str]]:
    """The table rows (quantity, value rounded up, kind) of the section."""
    certified = f"certified (1−γ = {conf:g})"
    if plan_bound is not None:
        # the scale was chosen on these trials: only the plan bound (uniform over scales) is a
        # certified statement; the individual values below it are bounds at the chosen scale
        certified = "bound at the calibrated scale (≤ the certified plan bound)"
    rows = [
        ("informed-adversary accuracy, max over records", _pct_up(d["max_accuracy_upper"]),
         certified),
        ("informed-adversary accuracy, median over records",
         _pct_up(d["median_accuracy_upper"]), certified),
        ("plug-in accuracy, max over records", _pct_up(d["max_accuracy_estimate"]),
         "estimated"),
        ("per-record MI I(bᵢ; Y), max (nats)", _mi_up(d["max_mi_upper"]),
         certified),
        ("whole-subset MI ½ ln det(I + Σ Σ_B⁻¹) (nats)", _mi_up(d["whole_subset_mi"]),
         "estimated (plug-in Σ)"),
        ("whole-subset posterior success bound", _pct_up(d["whole_subset_accuracy_bound"]),
         "estimated (plug-in Σ)"),
        ("blind guess max(q, 1 − q)", f"{100 * d['baseline_accuracy']:.2f}%", "exact"),
    ]
    # when n_pool is given: the records not audited are named as not covered
    if plan_bound is not None:
        scope = ("every record" if n_pool and d["n_audited"] >= n_pool
                 else "every audited record" if not n_pool
                 else f"SAMPLE of {d['n_audited']} of {n_pool} records")
        rows.insert(0, (f"calibrated plan: accuracy bound for {scope}",
                        _pct_up(plan_bound),
                        f"certified (1−γ = {conf:g}), uniform over noise scales ≥ s"))
    if target_accuracy is not None:
        rows.insert(0, ("target per-record accuracy", f"{100 * target_accuracy:.2f}%", "input"))
    return rows


def _coverage_lines(d: dict, n_pool: int | None) -> list[str]:
    """The Markdown lines saying whether every record of the pool or a SAMPLE is covered."""
    if not n_pool:
        return []
    if d["n_audited"] >= n_pool:
        return [f"**Coverage: every record of the pool ({n_pool}).**", ""]
    return [
        f"**Coverage: a SAMPLE of {d['n_audited']} audited records only.** The other "
        f"{n_pool - d['n_audited']} records of the pool were not audited and are not "
        "bounded here (any outlier among them can be far more exposed); audit every record "
        "before releasing with this noise.", ""]


def _how_text(exposure, d: dict, conf: float, method: str | None) -> str:
    """The certificate behind the upper bounds, in words."""
    if method is None and getattr(exposure, "bound", "bernstein") == "betting":
        method = ("betting upper bounds (Waudby-Smith & Ramdas 2024, predictable plug-in bets) "
                  f"at level γ/{d['n_audited']} for a noise fixed in advance")
    return (f"Upper bounds are empirical-Bernstein bounds (Maurer & Pontil 2009, Thm 4) at level "
            f"γ/{d['n_audited']}, so **all** of them hold at once with probability ≥ {conf:g} "
            "over the simulation for a noise fixed in advance; plug-in values are estimates."
            if method is None else
            f"Certificate: {method}; **all** audited records hold at once with probability "
            f"≥ {conf:g} over the simulation; plug-in values are estimates.")


def per_record_section(exposure, *, target_accuracy: float | None = None,
                       plan_bound: float | None = None, title: str | None = None,
                       n_pool_records: int | None = None, method: str | None = None) -> dict:
    """Report section of a per-record exposure.

    Parameters
    ----------
    exposure : RecordExposure
        From :func:`~pacpriv.pac.per_record.record_exposure` or
        :func:`~pacpriv.pac.per_record.exposure_from_differences` (e.g. at a calibrated plan).
    target_accuracy : float, optional
        The calibration target, marked in the histogram.
    plan_bound : float, optional
        A calibrated plan's certified bound (uniform over noise scales, ``>=`` the maximum of
        the per-record bounds), shown as its own row.
    title : str, optional
        Section title.
    n_pool_records : int, optional
        Size of the pool: the section says whether every record or only a SAMPLE is covered.
    method : str, optional
        The certificate in words (default: the per-record empirical-Bernstein bounds).

    Returns
    -------
    dict
        ``title``, ``markdown``, ``threat_model``, ``table`` (columns/rows), ``plot``
        (kind ``"per_record_histogram"``) and ``per_record`` (:meth:`RecordExposure.to_dict`).

    Raises
    ------
    TypeError
        If ``exposure`` is not a RecordExposure.
    """
    # duck-typed (this module is a leaf: pacpriv.pac.per_record._exposure imports it)
    if not (hasattr(exposure, "to_dict") and hasattr(exposure, "accuracy_upper")):
        raise TypeError(f"`exposure` must be a RecordExposure; got {type(exposure).__name__}.")
    d = exposure.to_dict()
    if target_accuracy is not None:  # a count, no index
        d["n_above_target"] = int(np.count_nonzero(
            np.asarray(exposure.accuracy_upper) > target_accuracy))
    conf = exposure.confidence
    if plan_bound is not None:
        d["plan_bound"] = plan_bound
        d["plan_bound_kind"] = f"certified (1-gamma = {conf}), uniform over noise scales >= s"
        d["accuracy_upper_kind"] = "bound at the calibrated scale (<= the certified plan bound)"
    rows = _rows(d, conf, target_accuracy, plan_bound, n_pool_records)
    coverage = _coverage_lines(d, n_pool_records)
    how = _how_text(exposure, d, conf, method)
    md = [
        *coverage,
        f"Audited records: {d['n_audited']}; trials: {d['n_trials']}; membership prior "
        f"q = {d['sampling_rate']:g}. " + how
        + ("" if plan_bound is None else
           " Here the noise scale was chosen on the same trials, so the certified statement is "
           "the plan bound (valid uniformly over all larger scales): every audited record's "
           "accuracy is at most that value."),
        "",
        *([] if d.get("reproducible", True) else [
            "**Not reproducible.** Re-running a trial from its seed gave a different output: "
            "the mechanism draws randomness outside its `rng` argument, so the root seed does "
            "not rerun this audit.", ""]),
        "| quantity | value | kind |",
        "|---|---|---|",
        *[f"| {a} | {b} | {c} |" for a, b, c in rows],
        "",
        "**Per-record upper bounds over the audited records (aggregates only; no record is "
        "named):** " + aggregates_line(d, target_accuracy),
        "",
        "**Per-record accuracy upper bounds:**",
        "",
        *_histogram_lines(d["histogram_accuracy_upper"], target_accuracy),
        "",
        "(bins above the last shown are empty)",
        "",
        "### Two guarantees of the same noise",
        "",
        INFORMED_ADVERSARY,
        "",
        WHOLE_SUBSET,
        "",
        "The per-record bound answers *was record i used?* for one record at a time; the "
        "whole-subset bound covers every inference about the whole subset. A record is exposed "
        "when its contribution Δᵢ is large against the noise in some trials (outliers, rare "
        "classes, high-leverage points).",
    ]
    table = {"columns": ["quantity", "value", "kind"], "rows": [list(r) for r in rows]}
    return {
        "title": title or "Per-record membership privacy (informed adversary)",
        "markdown": "\n".join(md),
        "threat_model": INFORMED_ADVERSARY + "\n\n" + WHOLE_SUBSET,
        "table": table,
        "plot": {"kind": "per_record_histogram",
                 "histogram": d["histogram_accuracy_upper"],  # counts: no per-record value
                 "target_accuracy": target_accuracy, "baseline": d["baseline_accuracy"]},
        "per_record": d,
    }
