"""The membership-inference audit report: one JSON dict, rendered as Markdown and HTML.

:func:`audit_layout` turns the dict of :meth:`pacpriv.audit.AuditReport.to_dict` into sections
of the layout blocks of :mod:`pacpriv.report.layout`, so the Markdown and the HTML renderers
of the PAC report draw them (same rows, same rounding helper). :func:`write_audit_report`
writes ``report.json``, ``report.md``, ``report.html`` (figure embedded) and ``roc.png``.

Rounding: attack rates are estimates (nearest), their interval ends outward (lower end down,
upper end up); certified TPRs and the accountant's ε up; the one-run ε lower bound down. The
report holds public aggregates only: no record, no per-record score.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from pacpriv import _json
from pacpriv._files import report_folder
from pacpriv._numbers import format_bound
from pacpriv.report.builder import (
    REPORT_FILES,
    _check_formats,
    _command,
    _markdown_blocks,
    _md_cell,
    _versions,
    replace_earlier,
)
from pacpriv.report.html import _CSS, _blocks_html, _figure

__all__ = ["audit_layout", "audit_markdown", "render_audit_html", "write_audit_report"]


def _rate(x, side: str = "nearest") -> str:
    """A rate (fraction) with 3 significant digits toward ``side``; ``—`` for None."""
    return format_bound(None if x is None else float(x), 3, side=side)


def _estimate(entry: Mapping) -> str:
    """``0.0123 [0.0101, 0.0148]`` for a resolved TPR, ``unresolved`` otherwise."""
    if not entry.get("resolved"):
        return "unresolved"
    lo, hi = entry["ci"]
    return f"{_rate(entry['tpr'])} [{_rate(lo, 'down')}, {_rate(hi, 'up')}]"


def _fpr_text(alpha: float) -> str:
    return f"{format_bound(100.0 * float(alpha), 4, side='nearest')}%"


def verdict(gaps: list) -> str:
    """The audit's verdict: a violation is an attack whose interval lies wholly above a
    certified curve; a point estimate above the curve with the interval reaching below it is
    said so, as not significant (never as "under the curve")."""
    violations = sum(len(row.get("violations", [])) for row in gaps)
    if violations:
        return (f"{violations} attack/curve pair(s) exceed a certified curve beyond their "
                "interval (a significant violation)")
    resolved = [row for row in gaps if row.get("resolved") and row.get("tpr") is not None]
    above = [row for row in resolved if row["tpr"] > row["certified_tpr"]]
    if above:
        where = ", ".join(_fpr_text(row["fpr"]) for row in above)
        return ("no attack exceeds a certified curve beyond its interval, but the best "
                f"attack's point estimate is above the certified TPR at FPR {where} (within "
                "its interval: not a significant violation; more non-members would tell)")
    reach = [row for row in resolved if row.get("ci") and row["ci"][1] > row["certified_tpr"]]
    if reach:
        where = ", ".join(_fpr_text(row["fpr"]) for row in reach)
        return ("no attack exceeds a certified curve beyond its interval; the best attack's "
                "point estimates stay under the certified TPR, but its interval reaches above "
                f"it at FPR {where} (not a violation)")
    return ("no attack exceeds a certified curve beyond its interval; the best attack's TPR "
            "and interval stay under the certified TPR at every resolved FPR")


def _headline(r: Mapping) -> str:
    gaps = [g for g in r.get("gaps", []) if g.get("resolved")]
    curve = r["certified_curve"]["label"]
    if not gaps:
        return ("No target FPR could be resolved with the non-member scores of this game; the "
                f"certified curve is {curve}.")
    g = min(gaps, key=lambda row: row["fpr"])
    lo, hi = g["ci"]
    said = verdict(r.get("gaps", []))
    if "significant violation)" in said and said[0].isdigit():
        said = f"**{said}**"
    return (f"At FPR {_fpr_text(g['fpr'])} the best attack ({g['best_attack']}) reaches TPR "
            f"**{_rate(g['tpr'])}** (estimated; {100 * r['setup']['confidence']:g}% interval "
            f"{_rate(lo, 'down')}–{_rate(hi, 'up')}); the certified curve allows at most "
            f"**{_rate(g['certified_tpr'], 'up')}** ({curve}). {said[0].upper()}{said[1:]}.")


def _attack_grid(r: Mapping) -> tuple:
    fprs = r["setup"]["fprs"]
    columns = ["attack", "AUC", "balanced accuracy [CI]",
               *[f"TPR @ FPR {_fpr_text(a)} [CI]" for a in fprs]]
    rows = []
    for a in r["attacks"]:
        lo, hi = a["balanced_accuracy_ci"]
        cells = [a["name"], _rate(a["auc"]),
                 f"{_rate(a['balanced_accuracy'])} [{_rate(lo, 'down')}, {_rate(hi, 'up')}]"]
        cells += [_estimate(a["tpr_at_fpr"][repr(float(alpha))]) for alpha in fprs]
        rows.append(cells)
    return ("grid", columns, rows)


def _unresolved(r: Mapping) -> list[str]:
    reasons = {}
    for a in r["attacks"]:
        for key, entry in a["tpr_at_fpr"].items():
            if not entry.get("resolved"):
                reasons[key] = entry.get("reason", "")
    return [f"FPR {_fpr_text(float(k))}: unresolved, {why}." for k, why in reasons.items()]


def _gap_grid(r: Mapping) -> tuple:
    columns = ["FPR", "best attack", "TPR [CI] (estimated)", "certified TPR (rounded up)",
               "gap (certified − attack, rounded down)", "significant violation"]
    rows = []
    for g in r["gaps"]:
        if not g.get("resolved"):
            rows.append([_fpr_text(g["fpr"]), "—", "unresolved", _rate(g["certified_tpr"], "up"),
                         "—", "—"])
            continue
        lo, hi = g["ci"]
        rows.append([_fpr_text(g["fpr"]), g["best_attack"],
                     f"{_rate(g['tpr'])} [{_rate(lo, 'down')}, {_rate(hi, 'up')}]",
                     _rate(g["certified_tpr"], "up"), _rate(g["gap"], "down"),
                     ("yes: " + ", ".join(v["attack"] for v in g["violations"]))
                     if g["violations"] else
                     "no (point estimate above, within its interval)"
                     if g["tpr"] > g["certified_tpr"] else "no"])
    return ("grid", columns, rows)


def _one_run_rows(o: Mapping) -> list[tuple]:
    acc = o.get("epsilon_accountant")
    return [
        ("ε lower bound (one run; rounded down)", format_bound(o["epsilon_lower"], 4,
                                                                side="down"), "nearest", False),
        ("accountant's ε (certified; rounded up)",
         "∞ (not private)" if acc is not None and acc == float("inf")
         else format_bound(acc, 4, side="up"), "nearest", False),
        ("accountant", o.get("accountant"), "nearest", False),
        ("δ", o["delta"], "nearest", False),
        ("confidence 1 − β", o["confidence"], "nearest", False),
        ("canaries m (each included with probability ½)", o["canaries"], "nearest", False),
        ("guesses r / correct v (best of the Bonferroni-corrected tests)",
         f"{o.get('guesses')} / {o.get('correct')}", "nearest", False),
        ("guess fractions tried (Bonferroni factor)", o.get("tests"), "nearest", False),
        ("canaries mislabeled", o.get("mislabeled"), "nearest", False),
        ("ε lower bound <= accountant's ε", o.get("consistent"), "nearest", False),
    ]


def audit_layout(r: Mapping) -> list[tuple[str, list[tuple]]]:
    """Sections ``(title, blocks)`` of an audit report dict."""
    setup, model, data = r["setup"], r.get("model", {}), r.get("dataset", {})
    sections: list[tuple[str, list[tuple]]] = [
        ("Headline", [("headline", _headline(r)),
                      ("text", "**Evaluation, not a release.** Every model of this audit derives "
                               "from the root seed recorded below; none is private.")]),
        ("Threat model", [("text", str(r.get("threat_model", "")))]),
        ("Model, data and game", [("table", [
            *[(f"model {k.replace('_', ' ')}", v, "nearest", False) for k, v in model.items()],
            *[(f"dataset {k.replace('_', ' ')}", v, "nearest", False) for k, v in data.items()],
            ("candidate records (pool)", setup.get("candidate_records"), "nearest", False),
            ("population samples (never trained on)", setup.get("population_samples"),
             "nearest", False),
            ("reference models K (each the target once)", setup.get("reference_models"),
             "nearest", False),
            ("queries per record (1 + augmentations)", setup.get("queries"), "nearest", False),
            ("utility: non-member (record, model) pairs with p(y|x) > ½ (a lower bound on "
             "held-out accuracy)", setup.get("nonmember_pairs_classified_with_p_above_half"),
             "nearest", False),
            ("utility: member pairs with p(y|x) > ½",
             setup.get("member_pairs_classified_with_p_above_half"), "nearest", False),
        ])]),
        ("TPR at low FPR (estimated, with Clopper–Pearson intervals)", [
            _attack_grid(r), *([("list", _unresolved(r))] if _unresolved(r) else [])]),
        ("Gap to the certified curve", [_gap_grid(r)]),
        ("Certified curves", [("list", [f"{c['label']} -- holds for {c.get('scope', '')}"
                                        for c in r.get("certified_curves", [])])]),
        ("ROC", [("figure", "roc")]),
    ]
    if r.get("one_run"):
        sections.append(("One-run audit (Steinke, Nasr & Jagielski 2023)",
                         [("table", _one_run_rows(r["one_run"]))]))
    if r.get("notes"):
        sections.append(("Caveats", [("list", [str(n) for n in r["notes"]])]))
    return sections


def _reproducibility(r: Mapping) -> list[tuple]:
    sim = r.get("simulation", {})
    rows = [("root seed", _json.dumps(r.get("seed")), "nearest", False),
            ("reference run: backend / workers", f"{sim.get('backend')} / {sim.get('n_jobs')}",
             "nearest", False),
            ("reference run: reproducible from its seed", sim.get("reproducible"), "nearest",
             False),
            ("reference models restored from a checkpoint", sim.get("resumed_trials"),
             "nearest", False),
            *[(f"time: {k.removesuffix('_s').replace('_', ' ')} (s)", v, "nearest", False)
              for k, v in r.get("timings", {}).items() if v is not None]]
    rep = r.get("reproducibility", {})
    if rep.get("command"):
        rows.append(("command", rep["command"], "nearest", False))
    rows += [(f"version {k}", v, "nearest", False) for k, v in rep.get("versions", {}).items()]
    return [("table", rows)]


def audit_markdown(r: Mapping) -> str:
    """Markdown of an audit report dict (the figure is ``roc.png`` beside it)."""
    out = [f"# {_md_cell(r['title'])}", "", f"_Created {r.get('created', '')}_", ""]
    for title, blocks in [*audit_layout(r), ("Reproducibility", _reproducibility(r))]:
        out += [f"## {title}", ""]
        if any(b[0] == "figure" for b in blocks):
            out += ["![log–log ROC of every attack and the certified curves](roc.png)", ""]
        out += _markdown_blocks(blocks)
    return "\n".join(out) + "\n"


def render_audit_html(r: Mapping, *, figure_uri: str = "") -> str:
    """One self-contained HTML page of an audit report dict (``figure_uri``: a PNG data URI)."""
    title = html.escape(str(r["title"]))
    figs = {"roc": _figure(figure_uri, "Log–log ROC: attacks (estimated) and certified curves.")}
    body = [f"<h1>{title}</h1>",
            f'<p class="created">Created {html.escape(str(r.get("created", "")))}</p>']
    for sec_title, blocks in [*audit_layout(r), ("Reproducibility", _reproducibility(r))]:
        body += [f"<h2>{html.escape(sec_title)}</h2>", *_blocks_html(blocks, figs)]
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{title}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            + "\n".join(b for b in body if b) + "\n</body>\n</html>\n")


def write_audit_report(report: Mapping, out_dir: str | os.PathLike, *,
                       formats: Sequence[str] = ("json", "md", "html"),
                       overwrite: bool = False) -> dict[str, Path]:
    """Write an audit report dict into ``out_dir`` (created if needed).

    Parameters
    ----------
    report : dict
        :meth:`pacpriv.audit.AuditReport.to_dict`.
    out_dir : str or path
    formats : sequence of {"json", "md", "html"}
        ``roc.png`` is written with ``"md"`` or ``"html"`` when matplotlib is installed.
    overwrite : bool, default False
        Replace an earlier report in ``out_dir``; without it such a folder is refused before
        anything is written (the CLI's ``--force``).

    Returns
    -------
    dict
        Format (and ``"png"``) → path written.

    Raises
    ------
    ValueError
        Unknown format.
    FileExistsError
        ``out_dir`` already holds a report and ``overwrite`` is False.
    BlockingIOError
        Another pacpriv run (another process) is writing into ``out_dir``.
    """
    formats = _check_formats(formats)
    r = {**report, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
         "reproducibility": {"command": _command(), "versions": _versions()}}
    if not isinstance(overwrite, bool):
        raise TypeError(f"`overwrite` must be a bool; got {type(overwrite).__name__}.")
    with report_folder(out_dir, "`out_dir`", force=overwrite, report_files=REPORT_FILES,
                       force_hint="overwrite=True") as (out, _):
        replace_earlier(out, {f"report.{f}" for f in formats}
                        | ({"roc.png"} if {"md", "html"} & set(formats) else set()))
        return _write_audit_formats(out, r, formats)


def _write_audit_formats(out: Path, r: dict, formats: tuple) -> dict[str, Path]:
    paths: dict[str, Path] = {}
    if "json" in formats:
        paths["json"] = out / "report.json"
        paths["json"].write_text(_json.dumps(r, indent=2) + "\n")
    uri = ""
    if {"md", "html"} & set(formats):
        try:
            from pacpriv.plotting import figure_to_data_uri
            from pacpriv.plotting.audit import plot_audit_roc

            fig = plot_audit_roc(r)
        except ImportError:
            fig = None
        if fig is not None:
            paths["png"] = out / "roc.png"
            fig.savefig(paths["png"], dpi=110)
            uri = figure_to_data_uri(fig, dpi=110)
    if "md" in formats:
        paths["md"] = out / "report.md"
        paths["md"].write_text(audit_markdown(r))
    if "html" in formats:
        paths["html"] = out / "report.html"
        paths["html"].write_text(render_audit_html(r, figure_uri=uri))
    return paths
