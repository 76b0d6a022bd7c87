"""PAC membership-privacy report: JSON, Markdown (and HTML with figures, extra ``plot``).

The report is built once as a JSON-serialisable ``dict`` (:func:`build_report`) from a
:class:`pacpriv.pac.job.PacResult` -- or from any object with a ``report_section()`` method,
such as :class:`pacpriv.dpsgd.DPSGDSpec` -- and rendered from that dict, so the JSON, the
Markdown and the HTML always say the same thing. No raw records, membership masks or
per-trial outputs are ever written: only the noisy release and summaries.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import warnings
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np

from pacpriv import _json
from pacpriv._files import check_output_dir, report_folder
from pacpriv.datasets.loading import PUBLIC_BOUNDS
from pacpriv.report.format import TOP_ROWS
from pacpriv.report.html import render_html
from pacpriv.report.layout import pac_layout, render_row, section_layout
from pacpriv.report.pool import (
    ERROR_BAR_NOTE,
    pool_view,
    private_privacy,
    private_section,
    private_spectrum_and_noise,
)
from pacpriv.threat_models import THREAT_MODEL_PAC

__all__ = ["ARRAY_LIMIT", "THREAT_MODEL_PAC", "build_report", "to_markdown", "write_report"]


#: Longest per-direction array (eigenvalues, variances, noise std) copied into the report dict.
ARRAY_LIMIT = 200

_PACKAGES = ("pacpriv", "numpy", "scipy", "scikit-learn", "joblib", "tqdm")


def _versions() -> dict[str, str | None]:
    from pacpriv._version import __version__

    # pacpriv's own version from the code that runs (the installed metadata may belong to an
    # older install that a checkout on ``PYTHONPATH`` shadows)
    out: dict[str, str | None] = {"python": platform.python_version(), "pacpriv": __version__}
    for name in (n for n in _PACKAGES if n != "pacpriv"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


#: Command-line flags whose value is a secret and is never written to a report: the release
#: seed fixes the secret subset and the noise, so with the pool it would reveal both; the
#: prediction secret seed (``predict fit --secret-seed``) fixes the secret world index and noise.
SECRET_FLAGS = ("--release-seed", "--secret-seed")
REDACTED = "<secret, not recorded>"


def redact_command(args: list[str]) -> list[str]:
    """``args`` with the value of every :data:`SECRET_FLAGS` flag replaced by :data:`REDACTED`
    and every local path shown by its base name.

    Handles ``--flag value``, ``--flag=value`` and argparse's unambiguous prefixes
    (``--release-s value``).
    """
    out: list[str] = []
    hide_next = False
    for tok in args:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        name, eq, value = tok.partition("=")
        secret = name.startswith("--") and len(name) > 3 and any(
            flag.startswith(name) for flag in SECRET_FLAGS)
        if secret and eq:
            out.append(f"{name}={REDACTED}")
        elif eq and name.startswith("--"):
            out.append(f"{name}={local_base_name(value)}")
        else:
            out.append(local_base_name(tok))
            hide_next = secret
    return out


def _looks_like_path(tok: str) -> bool:
    """True for an absolute or explicitly relative path, a Windows path, or an existing file
    or folder (``file.py:attr`` counts by its file part); not for text such as ``</i>``."""
    if tok.startswith(("/", "~", "./", "../", ".\\", "..\\")) or re.match(r"^[A-Za-z]:[\\/]", tok):
        return True
    head = tok.rsplit(":", 1)[0] if ":" in tok else tok
    return ("/" in head or "\\" in head) and os.path.exists(head)


def local_base_name(tok: str) -> str:
    """A local path shown by its base name (the directories are local facts, not public).

    ``"/home/a/f.py:mean"`` becomes ``"f.py:mean"``; text that does not look like a path
    (:func:`_looks_like_path`) is unchanged.
    """
    if _looks_like_path(tok):
        name = tok.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
        return name or tok
    return tok


def _plugin_mi(plan) -> float:
    """MI of the plan's noise at the estimated covariance (a plug-in value, for reference).

    Plug-in rules: their ``½ ln det(I + Σ Σ_B⁻¹)``. Certified rule: ``plan.mi_bound`` is the
    certified bound (the budget), so the plug-in value is the trace ``½ tr(Σ_B⁻¹ Σ)`` at the
    estimated Σ, ``plugin_trace/(2κ)`` (itself >= the plug-in ln det).
    """
    cert = (plan.details or {}).get("certificate")
    if cert and cert.get("kappa"):
        return float(cert["plugin_trace"]) / (2.0 * float(cert["kappa"]))
    return float(plan.mi_bound)


def _command() -> str | None:
    """The command line, with the program shown by its base name (no local paths) and the
    values of secret flags (:data:`SECRET_FLAGS`) redacted."""
    if not sys.argv or not sys.argv[0]:
        return None
    prog = Path(sys.argv[0]).name
    if prog in ("__main__.py", "-c"):
        prog = "python -m pacpriv"
    return " ".join([prog, *redact_command(sys.argv[1:])])


#: Dataset keys a report may print (public facts); feature ranges only when public.
_DATASET_KEYS = ("name", "n_records", "n_features", "n_classes", "feature_names", "labelled",
                 "target_names", "description", "source", "bounds_source", "feature_ranges",
                 "preprocessing")


def _public_dataset(ds: dict) -> dict:
    """The public part of a dataset summary: no pool statistic, no local path.

    Feature ranges are kept only when published or declared public
    (:data:`pacpriv.datasets.loading.PUBLIC_BOUNDS`); unknown keys (which might hold
    statistics of the records) are dropped.
    """
    out = {k: ds[k] for k in _DATASET_KEYS if k in ds}
    if ds.get("bounds_source") in PUBLIC_BOUNDS:
        out.update({k: ds[k] for k in ("feature_low", "feature_high") if k in ds})
    elif "feature_low" in ds or "feature_high" in ds:
        out["feature_ranges"] = "not shown: not declared public"
    if "source" in out and not str(out["source"]).startswith("sklearn."):
        out["source"] = Path(str(out["source"])).name
    return out


def _release_fields(result, release) -> dict:
    """The release and its randomness, or, for an evaluation, only the evaluation text."""
    evaluation = getattr(result, "evaluation", "")
    if evaluation:  # models derived from a recorded seed: no release, no release wording
        if release is not None:
            raise ValueError("an evaluation (`evaluation` set) must not carry a release.")
        return {"release": None, "evaluation": str(evaluation)}
    return {"release": release,
            "release_randomness": None if result.release is None
            else "seeded, not for release (caller-seeded)" if result.release_seeded
            else "fresh OS entropy (not recorded)"}


def _spectrum_and_noise(result, d: dict) -> tuple[dict, dict]:
    """The report's spectrum and noise sections (every pool statistic still in)."""
    plan, spec = result.plan, result.spectrum
    spectrum = {
        # the eigenvalues are stored once, below (not also as top_eigenvalues)
        **{k: v for k, v in d["spectrum"].items() if k != "top_eigenvalues"},
        # first <= ARRAY_LIMIT values, for the tables and figures of every rendering
        "eigenvalues": [float(v) for v in spec.eigenvalues[:ARRAY_LIMIT]],
        "coordinate_variances": [float(v) for v in spec.variances[:ARRAY_LIMIT]],
    }
    bar = plan.noise_std_per_coordinate
    noise = {
        **d["noise_plan"],
        "noise_std_top": [float(v) for v in plan.noise_std[:TOP_ROWS]],
        "noise_std": [float(v) for v in plan.noise_std[:ARRAY_LIMIT]],
        # the release's error bar: sqrt(diag Σ_B) per output coordinate (first ARRAY_LIMIT)
        "noise_std_per_coordinate": [float(v) for v in bar[:ARRAY_LIMIT]],
        "noise_std_per_coordinate_max": float(np.max(bar)) if bar.size else 0.0,
        "noise_std_per_coordinate_min": float(np.min(bar)) if bar.size else 0.0,
        "error_bar": ERROR_BAR_NOTE,
    }
    return spectrum, noise


def _privacy(result) -> dict:
    """The report's privacy section (the bounds and the prior)."""
    return {
        "mi_budget_nats": result.mi_budget,
        "mi_bound_at_estimated_covariance_nats": _plugin_mi(result.plan),
        "mi_claim_nats": result.mi_claim,
        "membership_prior": result.membership_prior,
        "blind_guess_prior": result.blind_guess_prior,
        "prior_source": result.prior_source,
        "prior_explanation": result.prior_explanation,
        "posterior_success_bound": result.posterior_success_bound,
        "posterior_success_bound_label": result.posterior_label,
        "certification": result.certification(),
        "membership_inference_accuracy_bound": (
            result.posterior_success_bound if result.membership_prior == 0.5 else None
        ),
        "pinsker_success_bound": result.pinsker_success_bound,
        "average_per_record_mi_nats": result.individual_mi_bound,
    }


def _pac_report(result, pool_statistics: bool | None = None) -> dict:
    d = result.to_dict()
    spectrum, noise = _spectrum_and_noise(result, d)
    view = pool_view(d["dataset"], pool_statistics)
    show = view == "all"
    if not show:
        spectrum, noise = private_spectrum_and_noise(spectrum, noise,
                                                     error_bar=view == "error_bar")
    mech = local_base_name(str(result.mechanism))  # a file mechanism without its directories
    report = {
        "kind": "pac",
        "title": (
            f"PAC membership-privacy report: {mech} on {result.dataset.get('name')}"
        ),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "threat_model": THREAT_MODEL_PAC,
        "mechanism": mech,
        "dataset": _public_dataset(d["dataset"]),
        "sampler": d["simulation"]["sampler"],
        "simulation": {
            **d["simulation"],
            # a file mechanism's private module name means nothing to the reader
            "mechanism": mech
            if "_pacpriv_user_mechanism_" in str(d["simulation"].get("mechanism"))
            else local_base_name(str(d["simulation"].get("mechanism"))),
            # local paths by their base name (the directories are local facts)
            **{k: local_base_name(str(d["simulation"][k]))
               for k in ("checkpoint", "output_path") if d["simulation"].get(k)},
        },
        "spectrum": spectrum,
        "noise": noise,
        "privacy": _privacy(result),
        **_release_fields(result, d["release"]),
        "reproducibility": {
            "root_seed": d["simulation"]["root_seed"],
            "reproducible": d["simulation"].get("reproducible"),
            "reproducibility_note": d["simulation"].get("reproducibility_note", ""),
            "versions": _versions(),
            "command": _command(),
        },
        "sections": [dict(s) for s in result.sections],
        "notes": list(getattr(result, "notes", ())),
    }
    if not show:
        report["privacy"] = private_privacy(report["privacy"])
    return report


def build_report(result, *, pool_statistics: bool | None = None) -> dict:
    """Build the report as a JSON-serialisable dict.

    Parameters
    ----------
    result : PacResult or object with ``report_section()``
        A PAC job result (:func:`pacpriv.pac.run_pac`) or an analytic mechanism such as
        :class:`pacpriv.dpsgd.DPSGDSpec`.
    pool_statistics : bool or None, default None
        Which statistics of the pool a PAC report shows (:mod:`pacpriv.report.pool`). They are
        statistics of f over subsets of the pool, not of the secret subset: under the PAC
        threat model the adversary knows them, but a confidential pool may not want them
        printed (for a mean, the top eigenvalue gives the scale of an outlier's value).

        * None (default): the release's **error bar** -- the noise std of each output
          coordinate, ``sqrt(diag(Σ_B))`` in the output's units -- for every pool, with a
          sentence saying which pool statistic it reveals; the spectrum and the noise's full
          shape (eigenvalues, coordinate variances, noise std per direction, expected noise
          power, the certificate's clip radius) only for a bundled public dataset; otherwise
          facts that are not real-valued functions of the spectrum (ranks, counts, rules,
          confidences) and the RMS noise relative to the spread of f to one significant digit.
        * True: everything, for any pool (CLI ``--report-pool-statistics``).
        * False: nothing pool-derived, the error bar withheld too, for a pool that is itself
          confidential (CLI ``--withhold-pool-statistics``); two pools that differ in one
          record's value give the same report.

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
        return _pac_report(result, pool_statistics)
    if hasattr(result, "report_section"):
        section = dict(result.report_section())
        if "per_record" in section and not pool_statistics:
            # a per-record audit's calibrated noise scale is a statistic of f over subsets of
            # the pool (like a PAC report's): kept only when asked for
            section = private_section(section, "per_record",
                                      withheld=pool_statistics is False)
        return {
            "kind": "analytic",
            "title": section.get("title", "Membership-privacy report"),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "threat_model": section.get("threat_model"),
            "sections": [section],
            "reproducibility": {
                **({"root_seed": section["root_seed"]} if section.get("root_seed") else {}),
                "command": _command(),
                "versions": _versions(),
            },
        }
    raise TypeError(
        "`result` must be a PacResult (pacpriv.pac.run_pac) or an object with report_section(); "
        f"got {type(result).__name__}."
    )


def _md_cell(text: object) -> str:
    """A table cell's text with Markdown's table separator and raw HTML neutralised (column
    names and file names come from the user's data)."""
    out = (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
           .replace("|", "\\|").replace("\n", " "))
    # link and image syntax ([x](…), ![i](…)) from column names stays text
    return out.replace("](", "]\\(").replace("![", "!\\[")


def _markdown_blocks(blocks: list[tuple]) -> list[str]:
    out: list[str] = []
    for block in blocks:
        kind = block[0]
        if kind in ("text", "headline", "markdown"):
            out += [block[1], ""]
        elif kind == "list":
            out += [f"- {item}" for item in block[1]] + [""]
        elif kind == "table":
            out += ["| quantity | value |", "| --- | --- |"]
            out += [f"| {_md_cell(k)} | {_md_cell(v)} |"
                    for k, v in map(render_row, block[1])] + [""]
        elif kind == "grid":
            out += ["| " + " | ".join(map(_md_cell, block[1])) + " |",
                    "|" + " --- |" * len(block[1])]
            out += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in block[2]] + [""]
        elif kind == "code":
            out += ["```", block[1], "```", ""]
        # figures are in report.html only
    return out


def _sections_markdown(sections: list[tuple[str, list[tuple]]]) -> list[str]:
    out: list[str] = []
    for title, blocks in sections:
        if blocks:
            out += [f"## {title}", "", *_markdown_blocks(blocks)]
    return out


def to_markdown(report: dict) -> str:
    """Render a report dict (:func:`build_report`) as Markdown."""
    out = [f"# {_md_cell(report['title'])}", "", f"_Created {report['created']}_", ""]
    if report["kind"] == "pac":
        out += _sections_markdown(pac_layout(report))
    elif report.get("threat_model"):
        out += ["## Threat model", "", report["threat_model"], ""]
    out += _sections_markdown([(str(sec.get("title", "Section")), section_layout(sec))
                               for sec in report.get("sections", [])])
    rep = report.get("reproducibility", {})
    out += ["## Reproducibility", ""]
    if rep.get("reproducible") is False:
        out += [
            f"**Not reproducible.** Root seed `{_json.dumps(rep.get('root_seed'))}`, but "
            f"{rep.get('reproducibility_note', '')}"
        ]
    elif "root_seed" in rep:
        out += [
            f"Root seed of the simulation: `{_json.dumps(rep['root_seed'])}` "
            "(pass `rng=numpy.random.SeedSequence(**root_seed)` -- or, when `spawn_key` is empty, "
            "`--seed <entropy>` -- to rerun the simulation bit for bit)."
        ]
    if rep.get("command"):
        # (in a code span: a backtick in a file name must not close it)
        command = str(rep["command"]).replace("`", "'")
        out += ["", f"Command: `{command}`"]
    out += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in rep.get("versions", {}).items())]
    return "\n".join(out) + "\n"


def write_report(result, out_dir, *, formats=("json", "md", "html"),
                 pool_statistics: bool | None = None, overwrite: bool = False) -> dict[str, Path]:
    """Write the report files into ``out_dir`` (created if needed).

    Parameters
    ----------
    result : PacResult or object with ``report_section()``
    out_dir : str or path
    formats : iterable of {"json", "md", "html"}
        Without matplotlib (``pip install pacpriv[plot]``) ``"html"`` is written without its
        figures, with a ``UserWarning`` once per process.
    pool_statistics : bool or None, default None
        See :func:`build_report`: None shows the release's error bar for every pool and the
        spectrum for a bundled public dataset; True everything; False nothing pool-derived.
    overwrite : bool, default False
        Replace an earlier report (``report.json``, ``.md``, ``.html``, ``roc.png``) in
        ``out_dir``; without it such a folder is refused before anything is written (the
        CLI's ``--force``).

    Returns
    -------
    dict
        Format → path written.

    Raises
    ------
    ValueError
        Unknown format.
    FileExistsError
        ``out_dir`` already holds a report and ``overwrite`` is False.
    BlockingIOError
        Another pacpriv run (another process) is writing into ``out_dir``.
    NotADirectoryError, PermissionError
        ``out_dir`` (or a folder on its way) is an existing file, or not writable; checked
        before the report is built.
    ValueError
        ``out_dir`` is, or holds, the run's checkpoint or ``output_path`` (un-noised outputs
        of every trial: the report folder may be shared).
    """
    formats = _check_formats(formats)
    out = check_output_dir(out_dir, "`out_dir`")
    _check_private_files_outside(result, out)
    overwrite = _check_overwrite(overwrite)
    # no other run writes here meanwhile; an earlier report only with overwrite=True (a CLI
    # command holds the folder already, after its own --force check)
    with report_folder(out, "`out_dir`", force=overwrite, report_files=REPORT_FILES,
                       force_hint="overwrite=True"):
        out.mkdir(parents=True, exist_ok=True)
        report = build_report(result, pool_statistics=pool_statistics)
        replace_earlier(out, {f"report.{f}" for f in formats})
        return _write_formats(out, report, result, formats)


def _check_private_files_outside(result, out: Path) -> None:
    """Refuse a report folder that is, or holds, the run's checkpoint or ``output_path``."""
    sim = getattr(result, "simulation", None)
    folder = out.resolve()
    for what in ("checkpoint", "output_path"):
        private = getattr(sim, what, None)
        if isinstance(private, (str, os.PathLike)):
            p = Path(private).resolve()
            if p == folder or folder in p.parents:
                raise ValueError(f"`out_dir` must lie outside the run's {what} (the report "
                                 "folder may be shared; the checkpoint holds the un-noised "
                                 "output of every trial and its subset mask)")


def _check_formats(formats) -> tuple:
    """``formats`` as a tuple of at least one of json, md and html (a str: comma-separated, as
    the CLI's ``--format``); ValueError naming the unknown ones or an empty selection (it wrote
    nothing and returned ``{}``: fourteenth new-user pass), TypeError for a non-iterable."""
    if isinstance(formats, str):
        formats = [part.strip() for part in formats.split(",") if part.strip()]
    try:
        formats = tuple(formats)
    except TypeError:
        raise TypeError(f"`formats` must be an iterable of 'json', 'md', 'html'; got "
                        f"{type(formats).__name__}.") from None
    unknown = sorted({f if isinstance(f, str) else repr(f) for f in formats
                      if not (isinstance(f, str) and f in ("json", "md", "html"))})
    if unknown:
        raise ValueError(f"`formats` must be a subset of json, md, html; got {unknown}.")
    if not formats:
        raise ValueError("`formats` must list at least one of json, md, html (nothing would "
                         "be written); got none.")
    return tuple(dict.fromkeys(formats))


def _check_overwrite(overwrite) -> bool:
    if not isinstance(overwrite, bool | np.bool_):
        raise TypeError(f"`overwrite` must be a bool; got {type(overwrite).__name__}.")
    return bool(overwrite)


def _write_formats(out: Path, report: dict, result, formats: tuple) -> dict[str, Path]:
    paths: dict[str, Path] = {}
    if "json" in formats:
        paths["json"] = out / "report.json"
        paths["json"].write_text(_json.dumps(report, indent=2) + "\n")
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


#: Files a pacpriv report writes into its folder (a PAC report, an audit report).
REPORT_FILES = ("report.json", "report.md", "report.html", "roc.png")


def replace_earlier(out: Path, written: set[str] | frozenset[str]) -> None:
    """An earlier report in ``out`` is replaced whole: its files (:data:`REPORT_FILES`) that
    this report does not write are removed, with a warning that names them (never a
    report.md of another run beside this report.json). Files written again are simply
    overwritten."""
    from pacpriv.exceptions import PacprivWarning, warn_user

    stale = [f for f in REPORT_FILES if f not in written and (out / f).is_file()]
    if not stale:
        return
    for name in stale:
        (out / name).unlink()
    warn_user(f"{str(out)!r} held an earlier report: this one replaces it, and its "
              f"{', '.join(stale)} (not written this time) were removed.", PacprivWarning)


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
