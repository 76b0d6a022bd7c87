"""Self-contained HTML membership-privacy report with embedded figures (extra ``plot``).

:func:`render_html` renders the report dict of :func:`pacpriv.report.build_report` -- the same
dict the JSON and Markdown come from -- as one HTML file: inline CSS, tables, and every figure
embedded as a base64 PNG ``data:`` URI (no external resource, no script). All text, including
dataset names and section Markdown, is escaped with :func:`html.escape`.

Extra sections (``report["sections"]``) are dicts with ``title``, ``markdown`` and optionally

* ``figures``: list of ``data:image/...;base64,...`` URIs (anything else is dropped), and
* ``plot``: one plot spec or a list of them, each a dict with ``kind`` and keyword arguments:
  ``{"kind": "dpsgd_accuracy_vs_sigma", "steps_per_epoch": M, "epochs": E,
  "noise_multiplier": σ, ...}`` (:func:`pacpriv.plotting.plot_dpsgd_accuracy_vs_sigma`),
  ``{"kind": "pac_vs_dpsgd", "rows": [...]}`` (:func:`pacpriv.plotting.plot_pac_vs_dpsgd`),
  ``{"kind": "posterior_curve", "mi_budget": v, "prior": p0}``
  (:func:`pacpriv.plotting.plot_posterior_curve`).

An analytic DP-SGD report (``kind == "analytic"``) whose sections carry no plot gets the
accuracy-vs-σ figure from the ``noise_multiplier``, ``steps_per_epoch`` and ``epochs`` of the
section or of the object the report was built from (e.g. :class:`pacpriv.dpsgd.DPSGDSpec`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from typing import Any

from pacpriv import _json, plotting
from pacpriv.report.format import cell
from pacpriv.report.layout import pac_layout, render_row, section_layout
from pacpriv.report.markdown import inline, markdown_to_html

__all__ = ["PLOT_KINDS", "render_html"]

#: ``kind`` values accepted in a section's ``plot`` spec.
PLOT_KINDS = (
    "dpsgd_accuracy_vs_sigma", "pac_vs_dpsgd", "posterior_curve", "per_record_histogram",
    "comparison_table",
)

_DATA_URI = re.compile(r"data:image/(png|jpeg|gif|svg\+xml);base64,[A-Za-z0-9+/]+={0,2}")
_DPSGD_KEYS = ("noise_multiplier", "steps_per_epoch", "epochs")

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1000px;
margin:2em auto;padding:0 1em;color:#1d1d1f;line-height:1.45}
h1{font-size:1.6em;border-bottom:2px solid #345;padding-bottom:.2em}
h2{font-size:1.25em;margin-top:1.8em;color:#234;border-bottom:1px solid #ccd}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #ccd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#eef1f6}td.num{font-family:ui-monospace,monospace}
.headline{background:#eef6ee;border-left:5px solid #396;padding:.7em 1em;font-size:1.05em}
pre{background:#f5f5f7;padding:.6em;white-space:pre-wrap;overflow-wrap:anywhere;
font-size:.85em}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #dde}
figcaption{font-size:.85em;color:#555}.created{color:#666;font-size:.9em}
"""


def _kv_table(rows: list[tuple[str, str]]) -> str:
    body = "".join(
        f"<tr><th>{html.escape(str(k))}</th>"
        f"<td>{html.escape(v)}</td></tr>"
        for k, v in rows
    )
    return f"<table><tbody>{body}</tbody></table>"


def _figure(uri: str, caption: str) -> str:
    if not isinstance(uri, str) or not _DATA_URI.fullmatch(uri):
        return ""
    cap = html.escape(caption)
    return f'<figure><img alt="{cap}" src="{uri}"><figcaption>{cap}</figcaption></figure>'


def _plot(kind: str, **kwargs) -> str:
    """Make one figure and return its data URI."""
    funcs: dict[str, Callable[..., Any]] = {
        "dpsgd_accuracy_vs_sigma": plotting.plot_dpsgd_accuracy_vs_sigma,
        "pac_vs_dpsgd": plotting.plot_pac_vs_dpsgd,
        "posterior_curve": plotting.plot_posterior_curve,
        "per_record_histogram": plotting.plot_per_record_histogram,
        "comparison_table": plotting.plot_comparison_table,
    }
    if kind not in funcs:
        raise ValueError(f"plot `kind` must be one of {', '.join(PLOT_KINDS)}; got {kind!r}.")
    if kind in ("pac_vs_dpsgd", "comparison_table"):
        fig = funcs[kind](kwargs.pop("rows", None) or [], **kwargs)
    elif kind == "posterior_curve":
        fig = funcs[kind](kwargs.pop("mi_budget", None), **kwargs)
    elif kind == "per_record_histogram":
        fig = funcs[kind](kwargs.pop("accuracy_upper", None), **kwargs)
    else:
        fig = funcs[kind](**kwargs)
    return plotting.figure_to_data_uri(fig)


_CAPTIONS = {
    "dpsgd_accuracy_vs_sigma": "Membership-inference accuracy bound vs noise multiplier σ.",
    "pac_vs_dpsgd": "PAC vs DP-SGD: noise, utility, bound and measured attack accuracy.",
    "posterior_curve": "Posterior success bound vs mutual-information budget.",
    "comparison_table": "Test accuracy ± sd of every method at each matched membership-"
                        "inference bound, one panel per dataset and bound.",
    "per_record_histogram": "Per-record informed-adversary accuracy (certified upper bounds) "
                            "with the target.",
}


def _plot_specs(section: Mapping) -> list[dict]:
    spec = section.get("plot")
    if spec is None:
        return []
    specs = [spec] if isinstance(spec, Mapping) else list(spec)
    for s in specs:
        if not isinstance(s, Mapping) or "kind" not in s:
            raise ValueError(f"a section's `plot` must be a dict with a 'kind'; got {s!r}.")
        if s["kind"] not in PLOT_KINDS:
            raise ValueError(
                f"plot `kind` must be one of {', '.join(PLOT_KINDS)}; got {s['kind']!r}.")
    return [dict(s) for s in specs]


def _dpsgd_spec(report: Mapping, result: Any) -> dict | None:
    """Accuracy-vs-σ plot spec of an analytic report without one, or None."""
    if report.get("kind") != "analytic":
        return None
    sections = report.get("sections", [])
    if any(_plot_specs(s) for s in sections):
        return None
    nested = [s["spec"] for s in sections if isinstance(s.get("spec"), Mapping)]
    for source in [*sections, *nested, result]:
        if isinstance(source, Mapping):
            vals = {k: source.get(k) for k in _DPSGD_KEYS}
        else:
            vals = {k: getattr(source, k, None) for k in _DPSGD_KEYS}
        if all(vals[k] is not None for k in _DPSGD_KEYS[1:]):
            return {"kind": "dpsgd_accuracy_vs_sigma", **vals}
    return None


def _blocks_html(blocks: list[tuple], figures: dict[str, str] | None = None) -> list[str]:
    """HTML of layout blocks (:mod:`pacpriv.report.layout`), the same walk as the Markdown."""
    out: list[str] = []
    for block in blocks:
        kind = block[0]
        if kind == "headline":
            out.append(f'<p class="headline">{inline(block[1])}</p>')
        elif kind == "text":
            out.append(f"<p>{inline(block[1])}</p>")
        elif kind == "markdown":
            out.append(markdown_to_html(block[1]))
        elif kind == "list":
            out.append("<ul>" + "".join(f"<li>{inline(i)}</li>" for i in block[1]) + "</ul>")
        elif kind == "table":
            out.append(_kv_table([render_row(row) for row in block[1]]))
        elif kind == "grid":
            head = "".join(f"<th>{html.escape(c)}</th>" for c in block[1])
            body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row)
                           + "</tr>" for row in block[2])
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif kind == "code":
            out.append(f"<pre>{html.escape(block[1])}</pre>")
        elif kind == "figure" and figures:
            out.append(figures.get(block[1], ""))
    return out


def _section_html(section: Mapping, figures: bool, extra: list[dict], shown_threat: Any) -> str:
    out = [f"<h2>{html.escape(str(section.get('title', 'Section')))}</h2>"]
    out += _blocks_html(section_layout(section))
    threat = str(section.get("threat_model") or "")
    markdown = str(section.get("markdown") or "")
    missing = [t for t in threat.split("\n\n") if t.strip() and t.strip() not in markdown]
    if missing and threat != shown_threat:  # e.g. PAC and DP-SGD side by side
        out += ["<h3>Threat models</h3>", markdown_to_html("\n\n".join(missing))]
    if figures:
        for uri in section.get("figures") or []:
            out.append(_figure(uri, str(section.get("title", "figure"))))
        for spec in _plot_specs(section) + extra:
            kind = spec.pop("kind")
            out.append(_figure(_plot(kind, **spec), _CAPTIONS.get(kind, kind)))
    return "\n".join(out)


def _pac_body(r: Mapping, figures: bool) -> list[str]:
    p, n, s = r["privacy"], r["noise"], r["spectrum"]
    figs: dict[str, str] = {}
    if figures:
        if "eigenvalues" in s and "noise_std" in n:  # absent from reports of older versions
            try:
                uri = plotting.figure_to_data_uri(plotting.plot_spectrum(r))
            except (OverflowError, ValueError):  # values beyond matplotlib's log axes
                uri = ""
            figs["spectrum"] = _figure(
                uri, "Eigenvalues of the output covariance and per-direction noise variance "
                "(log scale).")
        prior = p.get("blind_guess_prior") or max(p["membership_prior"],
                                                  1 - p["membership_prior"])
        figs["posterior"] = _figure(
            _plot("posterior_curve", mi_budget=p["mi_claim_nats"], prior=prior),
            "Posterior success bound (KL inversion) and Pinsker bound vs MI budget; the dot is "
            "this report's claimed MI.")
    out: list[str] = []
    for title, blocks in pac_layout(r):
        if blocks:
            out += [f"<h2>{html.escape(title)}</h2>", *_blocks_html(blocks, figs)]
    return out


def _repro_html(rep: Mapping) -> list[str]:
    out = ["<h2>Reproducibility</h2>"]
    if rep.get("reproducible") is False:
        seed = html.escape(_json.dumps(rep.get("root_seed")))
        note = html.escape(str(rep.get("reproducibility_note", "")))
        out.append(f"<p><strong>Not reproducible.</strong> Root seed <code>{seed}</code>, "
                   f"but {note}</p>")
    elif "root_seed" in rep:
        seed = html.escape(_json.dumps(rep["root_seed"]))
        out.append(f"<p>Root seed of the simulation: <code>{seed}</code> (pass "
                   "<code>rng=numpy.random.SeedSequence(**root_seed)</code> -- or, when "
                   "<code>spawn_key</code> is empty, <code>--seed &lt;entropy&gt;</code> -- to "
                   "rerun the simulation bit for bit).</p>")
    if rep.get("command"):
        out.append(f"<p>Command: <code>{html.escape(str(rep['command']))}</code></p>")
    out.append(_kv_table([(str(k), cell(v)) for k, v in rep.get("versions", {}).items()]))
    return out


def render_html(report: Mapping, result: Any = None, *, figures: bool = True) -> str:
    """Render a report dict as one self-contained HTML page.

    Parameters
    ----------
    report : dict
        From :func:`pacpriv.report.build_report` (``kind`` ``"pac"`` or ``"analytic"``).
    result : object, optional
        The object the report was built from; an analytic spec with ``noise_multiplier``,
        ``steps_per_epoch`` and ``epochs`` supplies the accuracy-vs-σ figure.
    figures : bool, default True
        Embed the figures (needs matplotlib); False gives tables and text only.

    Returns
    -------
    str
        A complete HTML5 document (UTF-8); images are base64 PNG ``data:`` URIs.

    Raises
    ------
    TypeError
        If ``report`` is not a dict with ``kind`` and ``title``.
    ValueError
        If a section's ``plot`` spec is malformed or of an unknown kind.
    ImportError
        If ``figures`` is True and matplotlib is missing (``pip install pacpriv[plot]``).
    """
    if not isinstance(report, Mapping) or "kind" not in report or "title" not in report:
        raise TypeError("`report` must be a dict from pacpriv.report.build_report (with 'kind' "
                        f"and 'title'); got {type(report).__name__}.")
    if figures:
        try:
            import matplotlib  # noqa: F401
        except ImportError as err:
            raise ImportError("the HTML report's figures need matplotlib: "
                              "pip install pacpriv[plot] (or pass figures=False)") from err
    for section in report.get("sections", []):
        _plot_specs(section)  # validate every plot spec before the (slow) figures
    title = html.escape(str(report["title"]))
    body = [f"<h1>{title}</h1>",
            f'<p class="created">Created {html.escape(str(report.get("created", "")))}</p>']
    if report["kind"] == "pac":
        body += _pac_body(report, figures)
    elif report.get("threat_model"):
        body += ["<h2>Threat model</h2>", f"<p>{inline(str(report['threat_model']))}</p>"]
    auto = _dpsgd_spec(report, result) if figures else None
    for i, section in enumerate(report.get("sections", [])):
        body.append(_section_html(section, figures, [auto] if (auto and i == 0) else [],
                                  report.get("threat_model")))
    body += _repro_html(report.get("reproducibility", {}))
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{title}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            + "\n".join(b for b in body if b) + "\n</body>\n</html>\n")
