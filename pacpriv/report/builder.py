"""PAC membership-privacy report: JSON, Markdown (and HTML with figures, extra ``plot``).

The report is built once as a JSON-serialisable ``dict`` (:func:`build_report`) from a
:class:`pacpriv.pac.job.PacResult` -- or from any object with a ``report_section()`` method,
such as :class:`pacpriv.dpsgd.DPSGDSpec` -- and rendered from that dict, so the JSON, the
Markdown and the HTML always say the same thing. No raw records, membership masks or
per-trial outputs are ever written: only the noisy release and summaries.
"""

from __future__ import annotations

import json
import platform
import sys
import warnings
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from pacpriv.report.format import TOP_ROWS
from pacpriv.report.format import fmt as _fmt
from pacpriv.report.html import render_html
from pacpriv.threat_models import THREAT_MODEL_PAC

__all__ = ["ARRAY_LIMIT", "THREAT_MODEL_PAC", "build_report", "to_markdown", "write_report"]


#: Longest per-direction array (eigenvalues, variances, noise std) copied into the report dict.
ARRAY_LIMIT = 200

_PACKAGES = ("pacpriv", "numpy", "scipy", "scikit-learn", "joblib", "tqdm")


def _versions() -> dict:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _command() -> str | None:
    """The command line, with the program shown by its base name (no local paths)."""
    if not sys.argv or not sys.argv[0]:
        return None
    prog = Path(sys.argv[0]).name
    if prog in ("__main__.py", "-c"):
        prog = "python -m pacpriv"
    return " ".join([prog, *sys.argv[1:]])


def _pac_report(result) -> dict:
    d = result.to_dict()
    plan = result.plan
    spec = result.spectrum
    n_top = TOP_ROWS
    noise_std = [float(v) for v in plan.noise_std[:n_top]]
    return {
        "kind": "pac",
        "title": (
            f"PAC membership-privacy report: {result.mechanism} on {result.dataset.get('name')}"
        ),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "threat_model": THREAT_MODEL_PAC,
        "mechanism": result.mechanism,
        "dataset": d["dataset"],
        "sampler": d["simulation"]["sampler"],
        "simulation": d["simulation"],
        "spectrum": {
            # the eigenvalues are stored once, below (not also as top_eigenvalues)
            **{k: v for k, v in d["spectrum"].items() if k != "top_eigenvalues"},
            # first <= ARRAY_LIMIT values, for the tables and figures of every rendering
            "eigenvalues": [float(v) for v in spec.eigenvalues[:ARRAY_LIMIT]],
            "coordinate_variances": [float(v) for v in spec.variances[:ARRAY_LIMIT]],
        },
        "noise": {
            **d["noise_plan"],
            "noise_std_top": noise_std,
            "noise_std": [float(v) for v in plan.noise_std[:ARRAY_LIMIT]],
        },
        "privacy": {
            "mi_budget_nats": result.mi_budget,
            "mi_bound_certified_nats": float(plan.mi_bound),
            "mi_claim_nats": result.mi_claim,
            "membership_prior": result.membership_prior,
            "posterior_success_bound": result.posterior_success_bound,
            "membership_inference_accuracy_bound": (
                result.posterior_success_bound if result.membership_prior == 0.5 else None
            ),
            "pinsker_success_bound": result.pinsker_success_bound,
            "individual_mi_bound_nats": result.individual_mi_bound,
        },
        "release": d["release"],
        "release_randomness": "caller-seeded (not for production)"
        if result.release_seeded
        else "fresh OS entropy (not recorded)",
        "reproducibility": {
            "root_seed": d["simulation"]["root_seed"],
            "versions": _versions(),
            "command": _command(),
        },
        "sections": [dict(s) for s in result.sections],
        "notes": list(getattr(result, "notes", ())),
    }


def build_report(result) -> dict:
    """Build the report as a JSON-serialisable dict.

    Parameters
    ----------
    result : PacResult or object with ``report_section()``
        A PAC job result (:func:`pacpriv.pac.run_pac`) or an analytic mechanism such as
        :class:`pacpriv.dpsgd.DPSGDSpec`.

    Returns
    -------
    dict
        Keys ``kind``, ``title``, ``threat_model``, ... (see the Markdown rendering).

    Raises
    ------
    TypeError
        If ``result`` is neither.
    """
    if hasattr(result, "simulation") and hasattr(result, "plan"):
        return _pac_report(result)
    if hasattr(result, "report_section"):
        section = dict(result.report_section())
        return {
            "kind": "analytic",
            "title": section.get("title", "Membership-privacy report"),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "threat_model": section.get("threat_model"),
            "sections": [section],
            "reproducibility": {"versions": _versions()},
        }
    raise TypeError(
        "`result` must be a PacResult (pacpriv.pac.run_pac) or an object with report_section(); "
        f"got {type(result).__name__}."
    )


def _table(rows: list[tuple[str, Any]]) -> str:
    lines = ["| quantity | value |", "| --- | --- |"]
    lines += [f"| {k} | {_fmt(v)} |" for k, v in rows]
    return "\n".join(lines)


def _pac_markdown(r: dict) -> list[str]:
    p, n, s, sim = r["privacy"], r["noise"], r["spectrum"], r["simulation"]
    acc = p["membership_inference_accuracy_bound"]
    out = [
        "## Headline",
        "",
        f"With the calibrated noise, no adversary who knows the pool and the mechanism can infer "
        "membership with posterior success rate above "
        f"**{100 * p['posterior_success_bound']:.2f}%** "
        f"(prior {100 * p['membership_prior']:.2f}%, MI budget v = {_fmt(p['mi_budget_nats'])} nats"
        + (f"; membership-inference accuracy bound {100 * acc:.2f}%" if acc is not None else "")
        + ").",
        "",
    ]
    if r.get("notes"):
        out += ["", "**Caveats:**", ""] + [f"- {note}" for note in r["notes"]]
    out += [
        "",
        "## Threat model",
        "",
        r["threat_model"],
        "",
        "## Dataset and mechanism",
        "",
        _table(
            [("mechanism", r["mechanism"])] + [(f"dataset {k}", v) for k, v in r["dataset"].items()]
        ),
        "",
        "## Sampler and simulation",
        "",
        _table(
            [(f"sampler {k}", v) for k, v in r["sampler"].items()]
            + [
                ("trials", sim["n_trials"]),
                ("output dimension d", sim["dim"]),
                ("backend", sim.get("backend")),
                ("n_jobs", sim.get("n_jobs")),
                ("wall time (s)", sim.get("elapsed_s")),
                ("trials restored from checkpoint", sim.get("resumed_trials")),
            ]
        ),
        "",
        "## Output spectrum (estimated covariance Σ)",
        "",
        _table([(k, v) for k, v in s.items() if not isinstance(v, (list, dict))]),
        "",
        "Top eigenvalues: " + ", ".join(_fmt(v, 4) for v in s["eigenvalues"][:TOP_ROWS]),
        "",
        "## Noise",
        "",
        _table(
            [
                ("rule", n["rule"]),
                ("basis", n["basis"]),
                ("directions with own noise", n["n_directions"]),
                ("noise std (max)", n["noise_std_max"]),
                ("noise std (min)", n["noise_std_min"]),
                ("residual std (other directions)", n["residual_std"]),
                ("expected noise power E||B||²", n["expected_noise_power"]),
                ("confidence (Algorithm 1)", n.get("confidence")),
            ]
        ),
        "",
        "Per-direction noise std (top directions): "
        + ", ".join(_fmt(v, 4) for v in n["noise_std_top"]),
        "",
        "## Privacy guarantee",
        "",
        _table(
            [
                ("MI budget v (nats)", p["mi_budget_nats"]),
                (
                    "certified MI bound ½ ln det(I + Σ Σ_B⁻¹) on estimated Σ (nats)",
                    p["mi_bound_certified_nats"],
                ),
                (
                    "MI guaranteed (nats): v for plug-in rules, v + β for Algorithm 1",
                    p["mi_claim_nats"],
                ),
                ("membership prior", p["membership_prior"]),
                ("posterior success bound (KL inversion, Thm 1)", p["posterior_success_bound"]),
                ("Pinsker bound (looser)", p["pinsker_success_bound"]),
                ("average per-record MI v/n (nats, Thm 2)", p["individual_mi_bound_nats"]),
            ]
        ),
        "",
        "## Release",
        "",
        f"Noisy output f(X) + B ({r['release_randomness']}):",
        "",
        "```",
        "[]" if r["release"] is None else "[" + ", ".join(_fmt(v, 8) for v in r["release"]) + "]",
        "```",
    ]
    return out


def to_markdown(report: dict) -> str:
    """Render a report dict (:func:`build_report`) as Markdown."""
    out = [f"# {report['title']}", "", f"_Created {report['created']}_", ""]
    if report["kind"] == "pac":
        out += _pac_markdown(report)
    elif report.get("threat_model"):
        out += ["## Threat model", "", report["threat_model"]]
    for section in report.get("sections", []):
        out += ["", f"## {section.get('title', 'Section')}", "", section.get("markdown", "")]
    rep = report.get("reproducibility", {})
    out += ["", "## Reproducibility", ""]
    if "root_seed" in rep:
        out += [
            f"Root seed of the simulation: `{json.dumps(rep['root_seed'])}` "
            "(pass `rng=numpy.random.SeedSequence(**root_seed)` -- or, when `spawn_key` is empty, "
            "`--seed <entropy>` -- to rerun the simulation bit for bit)."
        ]
    if rep.get("command"):
        out += ["", f"Command: `{rep['command']}`"]
    out += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in rep.get("versions", {}).items())]
    return "\n".join(out) + "\n"


def write_report(result, out_dir, *, formats=("json", "md", "html")) -> dict[str, Path]:
    """Write the report files into ``out_dir`` (created if needed).

    Parameters
    ----------
    result : PacResult or object with ``report_section()``
    out_dir : str or path
    formats : iterable of {"json", "md", "html"}
        ``"html"`` needs matplotlib (``pip install pacpriv[plot]``); it is skipped with a note
        in the returned mapping's absence when matplotlib is not installed.

    Returns
    -------
    dict
        Format → path written.

    Raises
    ------
    ValueError
        Unknown format.
    """
    formats = tuple(formats)
    unknown = set(formats) - {"json", "md", "html"}
    if unknown:
        raise ValueError(f"`formats` must be a subset of json, md, html; got {sorted(unknown)}.")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = build_report(result)
    paths: dict[str, Path] = {}
    if "json" in formats:
        paths["json"] = out / "report.json"
        paths["json"].write_text(json.dumps(report, indent=2, allow_nan=True) + "\n")
    if "md" in formats:
        paths["md"] = out / "report.md"
        paths["md"].write_text(to_markdown(report))
    if "html" in formats:
        try:
            import matplotlib  # noqa: F401  (the optional extra pacpriv[plot])
        except ImportError:
            figures = False
            _warn_no_figures()
        else:
            figures = True
        paths["html"] = out / "report.html"
        paths["html"].write_text(render_html(report, result, figures=figures))
    return paths


_warned_no_figures = False


def _warn_no_figures() -> None:
    """Say once per process that report.html is written without figures."""
    global _warned_no_figures
    if not _warned_no_figures:
        _warned_no_figures = True
        warnings.warn(
            "matplotlib is not installed: report.html is written without figures "
            "(pip install pacpriv[plot])",
            UserWarning,
            stacklevel=3,
        )
