"""The report's layout, once: which rows each section shows, walked by both renderers.

:func:`pac_layout` turns a PAC report dict into sections of *blocks*; :func:`section_layout`
does the same for an extra section (a DP-SGD spec, a comparison). The Markdown renderer
(:func:`pacpriv.report.builder.to_markdown`) and the HTML renderer
(:func:`pacpriv.report.html.render_html`) only turn blocks into text, so both always show the
same rows, formatted by the one helper :func:`pacpriv.report.format.cell` (bounds rounded
upward, noise downward).

A block is a tuple whose first item says its kind:

* ``("text", markdown_text)`` -- a paragraph (inline code, bold and italic only);
* ``("headline", markdown_text)`` -- the highlighted headline paragraph;
* ``("list", [markdown_text, ...])``;
* ``("table", [(label, value, side, vacuous), ...])`` -- a two-column table;
* ``("grid", columns, rows)`` -- a table with a header row;
* ``("code", text)`` -- preformatted text;
* ``("markdown", text)`` -- a section's own Markdown;
* ``("figure", name)`` -- a figure (HTML only; Markdown says where to find it).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping

from pacpriv.pac.samplers import Sampler
from pacpriv.report.format import TOP_ROWS, cell, fmt, format_percent
from pacpriv.report.pool import (
    ERROR_BAR_NOTE,
    SCALE_WARNING_ORDERS,
    noise_to_spread,
    pool_hidden,
    spread_orders,
)

__all__ = ["pac_layout", "posterior_command", "section_layout", "side_of"]

#: Keys of an extra section that are not shown as rows (rendered otherwise, or metadata).
RENDERED_KEYS = frozenset(
    {"title", "markdown", "figures", "plot", "threat_model", "table", "comparison"}
)


def side_of(key: str) -> str:
    """Rounding side for a field name: the lower end of an interval rounds down; risk bounds
    (accuracy, bound, upper, MI) and required noise (noise, std, sigma: a value a reader may
    apply, never shown below what was calibrated) round up; anything else to nearest."""
    k = key.lower()
    if "lower" in k:
        return "down"
    if "noise" in k or k.endswith("std") or "sigma" in k:
        return "up"
    if any(w in k for w in ("upper", "bound", "accuracy", "estimate", "mi_", "chi")):
        return "up"
    return "nearest"


def _blind_guess(p: Mapping) -> float:
    """The prior the posterior bound uses: best blind guess max(q, 1 − q) (Thm 1)."""
    given = p.get("blind_guess_prior")
    if given is not None:
        return float(given)
    q = float(p["membership_prior"])
    return max(q, 1.0 - q)


def posterior_command(p: Mapping) -> str:
    """The ``pacpriv pac posterior`` command that reproduces the headline bound."""
    return (
        f"pacpriv pac posterior --mi-budget {float(p['mi_claim_nats'])!r} "
        f"--prior {_blind_guess(p)!r}"  # repr: the shortest text that reads back exactly
    )


def _prior_text(p: Mapping) -> str:
    q, p0 = float(p["membership_prior"]), _blind_guess(p)
    why = p.get("prior_explanation") or (
        f"each record is in the secret subset with probability {fmt(q, 6)}, so the best "
        f"blind guess of membership is right with probability max(q, 1 − q) = {fmt(p0, 6)}"
    )
    return f"Prior used: {format_percent(p0, side='up')} ({why})."


def _released_text(r: Mapping) -> str:
    what = Sampler.describe_dict(r.get("sampler") or {})
    return (f"f was released on {what}, not on the whole pool; which records were used is the "
            "secret the bound protects, and it is neither recorded nor shown.")


def _utility(r: Mapping) -> tuple[list[tuple], str]:
    """Noise against the across-trial spread of f (public-plan quantities only)."""
    s, n = r["spectrum"], r["noise"]
    dim = int(r["simulation"].get("dim") or 0)
    power = n.get("expected_noise_power")
    total = s.get("total_variance")
    if power is None and n.get("constant_output"):  # pool statistics hidden
        return [], ("Utility: f returned the same value on every simulated subset, so there is "
                    "no spread to compare the noise with.")
    if power is None and n.get("noise_to_spread_rms") is not None:  # pool statistics hidden
        ratio = float(n["noise_to_spread_rms"])  # one significant digit (a pool statistic)
        orders = n.get("noise_to_spread_orders")
        return [("noise / spread of f across trials (RMS, one significant digit)", ratio,
                 "down", False)], (
            f"Utility: the noise is at least about {fmt(ratio, 1, side='down')}× the spread of f "
            "across random subsets (its sensitivity to which records are used; one significant "
            "digit, as the pool is not public)."
            + (_scale_warning(f"at least 10^{int(orders)}×") if orders else ""))
    if not dim or power is None or total is None:
        return [], ""
    noise_rms = (float(power) / dim) ** 0.5
    spread_rms = (float(total) / dim) ** 0.5
    if spread_rms == 0:  # f never varied: no spread to compare the noise with
        return [("noise std per coordinate (RMS)", noise_rms, "up", False)], (
            "Utility: f returned the same value on every simulated subset, so there is no "
            "spread to compare the noise with.")
    ratio = noise_rms / spread_rms
    rows = [
        ("noise std per coordinate (RMS)", noise_rms, "up", False),
        ("spread of f across trials per coordinate (RMS std)", spread_rms, "nearest", False),
        ("noise / spread", ratio, "down", False),
    ]
    release = r.get("release")
    size = None
    if release:
        scale = (sum(float(v) ** 2 for v in release) / len(release)) ** 0.5
        size = noise_rms / scale if scale > 0 else float("inf")
        rows.append(("noise std / RMS of the released values", size, "down", False))
    hint = (f"Utility: the noise is about {fmt(ratio, 3, side='down')}× the spread of f across "
            "random subsets (its sensitivity to which records are used)")
    per = noise_to_spread(s, n)
    if len(per) >= 2:
        rows.append(("noise / spread per coordinate", per, "down", False))
        hint += (f"; per coordinate from {fmt(min(per), 3, side='down')}× to "
                 f"{fmt(max(per), 3, side='down')}×")
    if size is not None and size >= 1:
        hint += (f", and {fmt(size, 3, side='down')}× the size of the released values: "
                 "the release is mostly noise")
    ratio_text = (f"about {fmt(spread_ratio(per), 3, side='down')}×"
                  if math.isfinite(spread_ratio(per)) else "more than 1e+308×")
    warning = (_scale_warning(ratio_text)
               if spread_orders(s, n) >= SCALE_WARNING_ORDERS else "")
    return rows, hint + "." + warning


def spread_ratio(per) -> float:
    """``max(per) / min(per)`` without overflow (``inf`` when the smallest is 0)."""
    hi, lo = float(max(per)), float(min(per))
    if lo <= 0:
        return math.inf
    gap = math.log(hi) - math.log(lo)
    return math.inf if gap >= math.log(sys.float_info.max) else hi / lo


def _scale_warning(factor: str) -> str:
    """The warning for coordinates on different scales (issue 35 item 7)."""
    return (f" **Warning: the coordinates of f are on different scales** (the noise/spread "
            f"ratio differs by {factor} between them): one noise is sized for the whole output, "
            "so the coordinates with a small spread (e.g. a mean of small-valued columns) are "
            "drowned. Put the columns on one scale first: `--standardize` (Python: "
            "`load_dataset(..., preprocessing=Preprocessing(standardize=True))`), whose "
            "statistics are the pool's, or rescale f's coordinates by public constants.")


def _error_bar_text(n: Mapping) -> str:
    """One line for the headline: the largest noise std of any coordinate (rounded up)."""
    if "noise_std_per_coordinate_max" not in n:
        return ""
    top = float(n["noise_std_per_coordinate_max"])
    low = float(n.get("noise_std_per_coordinate_min", top))
    spread = (f"between {fmt(low, side='up')} and {fmt(top, side='up')}" if low != top
              else f"{fmt(top, side='up')}")
    return (f"Error bar: each coordinate of the release carries Gaussian noise of standard "
            f"deviation {spread} (in the output's units; per coordinate in the Noise "
            "section).")


#: The scalar rows of the noise table: label, then key of the report's ``noise``.
_NOISE_FIELDS = (
    ("rule", "rule"), ("basis", "basis"), ("directions with own noise", "n_directions"),
    ("noise std (max)", "noise_std_max"), ("noise std (min)", "noise_std_min"),
    ("residual std (other directions)", "residual_std"),
    ("expected noise power E‖B‖²", "expected_noise_power"),
    ("confidence 1 − γ (certificate, or Algorithm 1)", "confidence"),
)
#: The rows of the simulation table after the sampler's: label, then key of ``simulation``.
_SIMULATION_FIELDS = (
    ("trials", "n_trials"), ("output dimension d", "dim"), ("backend", "backend"),
    ("n_jobs", "n_jobs"), ("wall time (s)", "elapsed_s"),
    ("trials restored from checkpoint", "resumed_trials"),
)


def _field_rows(section: Mapping, fields: tuple[tuple[str, str], ...]) -> list[tuple]:
    """Table rows ``(label, section.get(key), side_of(key), False)`` of ``(label, key)``
    fields (an absent key gives ``None``, shown as ``—``)."""
    return [(label, section.get(key), side_of(key), False) for label, key in fields]


def _shown_rows(noise: Mapping, rows: list[tuple]) -> list[tuple]:
    """Rows of the noise table; with the pool statistics hidden, the absent (absolute)
    values are left out instead of shown as ``—``."""
    if not pool_hidden(noise):
        return rows
    return [row for row in rows if row[1] is not None and row[1] != []]


def _headline(r: Mapping) -> tuple[list[tuple], list[tuple]]:
    """The headline blocks and the utility rows of the noise table."""
    p = r["privacy"]
    bound = p["posterior_success_bound"]
    acc = p.get("membership_inference_accuracy_bound")
    headline = (
        "With the calibrated noise, no adversary who knows the pool and the mechanism can infer "
        f"membership with posterior success rate above "
        f"**{format_percent(bound, vacuous=bound >= 1.0)}**, "
        f"**{p.get('posterior_success_bound_label', 'estimated (plug-in)')}** "
        f"(prior {format_percent(_blind_guess(p))}, MI budget "
        f"v = {fmt(p['mi_budget_nats'], side='up')} nats"
        + (f"; membership-inference accuracy bound {format_percent(acc)}"
           if acc is not None else "")
        + ")."
    )
    head: list[tuple] = [("headline", headline), ("text", _prior_text(p)),
                         ("text", f"Reproduce: `{posterior_command(p)}`")]
    if r.get("evaluation"):
        head.append(("text", f"**Evaluation, not a release.** {r['evaluation']}"))
    elif r.get("release") is not None or r.get("release_randomness"):
        head.append(("text", _released_text(r)))
    utility_rows, hint = _utility(r)
    if hint:
        head.append(("text", hint))
    if _error_bar_text(r["noise"]):
        head.append(("text", _error_bar_text(r["noise"])))
    if r.get("notes"):
        head += [("text", "**Caveats:**"), ("list", [str(x) for x in r["notes"]])]
    return head, utility_rows


def _noise_section(n: Mapping, utility_rows: list[tuple]) -> tuple[str, list[tuple]]:
    return ("Noise", [("table", _shown_rows(n, [
        *_field_rows(n, _NOISE_FIELDS),
        ("noise std per output coordinate (the release's error bar, output units)",
         list(n.get("noise_std_per_coordinate", []))[:TOP_ROWS], "up", False),
        ("noise std (top directions)", list(n.get("noise_std_top", [])), "up", False),
        *([("noise std / spread of f (top directions)", list(n["noise_to_spread_top"]),
            "down", False)] if "noise_to_spread_top" in n else []),
        *utility_rows,
    ]))] + ([("text", ERROR_BAR_NOTE)] if "noise_std_per_coordinate" in n else [])
     + ([("text", f"Pool statistics {n['pool_statistics']}")] if pool_hidden(n) else []))


def _privacy_section(p: Mapping) -> tuple[str, list[tuple]]:
    bound = p["posterior_success_bound"]
    vacuous = bound >= 1.0
    return ("Privacy guarantee", [("table", [
        ("MI budget v (nats)", p["mi_budget_nats"], "up", False),
        *([("MI at the estimated Σ (nats; plug-in value, for reference: ½ ln det(I + Σ "
            "Σ_B⁻¹) for plug-in rules, the trace ½ tr(Σ_B⁻¹ Σ) for the certified rule)",
            p["mi_bound_at_estimated_covariance_nats"], "up", False)]
          if "mi_bound_at_estimated_covariance_nats" in p else []),
        ("MI guaranteed (nats): v for plug-in rules, v + β for Algorithm 1",
         p["mi_claim_nats"], "up", False),
        ("membership prior q (inclusion probability)", p["membership_prior"], "nearest",
         False),
        ("prior used max(q, 1 − q) (best blind guess)", _blind_guess(p), "up", False),
        ("posterior success bound (KL inversion, Thm 1), "
         + p.get("posterior_success_bound_label", "estimated (plug-in)"), bound, "up",
         vacuous),
        ("Pinsker bound (looser)", p["pinsker_success_bound"], "up",
         p["pinsker_success_bound"] >= 1.0),
        ("average per-record MI v/n (nats, Thm 2; an average over records: one record can "
         "carry up to v, see `pacpriv pac records` for each record's exposure)",
         p["average_per_record_mi_nats"], "up", False),
    ]), ("figure", "posterior")])


def _release_section(r: Mapping) -> tuple[str, list[tuple]]:
    n, release = r["noise"], r.get("release")
    return ("Release", [("text", f"None. {r['evaluation']}")] if r.get("evaluation") else [
        ("text", "No release was made (calibration only)."),
    ] if release is None and not r.get("release_randomness") else [
        ("text", f"Noisy output f(X) + B ({r.get('release_randomness', '')}):"),
        ("code", "[]" if release is None
         else "[" + ", ".join(fmt(v, 8) for v in release) + "]"),
        *([("text", "Error bar (noise std per coordinate, output units"
            + (f"; first {len(n['noise_std_per_coordinate'])}" if release is not None
               and len(n["noise_std_per_coordinate"]) < len(release) else "") + "):"),
           ("code", "[" + ", ".join(fmt(v, 4, side="up")
                                    for v in n["noise_std_per_coordinate"]) + "]")]
          if "noise_std_per_coordinate" in n else []),
    ])


def pac_layout(r: Mapping) -> list[tuple[str, list[tuple]]]:
    """Sections ``(title, blocks)`` of a PAC report dict (:func:`build_report`)."""
    n, s, sim = r["noise"], r["spectrum"], r["simulation"]
    head, utility_rows = _headline(r)
    ds = r.get("dataset") or {}
    sampler = r.get("sampler") or {}
    return [
        ("Headline", head),
        ("Threat model", [("text", str(r["threat_model"]))]),
        ("Dataset and mechanism", [("table", [("mechanism", r["mechanism"], "nearest", False)]
                                    + [(f"dataset {k}", v, "nearest", False)
                                       for k, v in ds.items()])]),
        ("Sampler and simulation", [("table", [
            *[("sampler inclusion probability q" if k == "prior" else f"sampler {k}", v,
               "nearest", False) for k, v in sampler.items()],
            *_field_rows(sim, _SIMULATION_FIELDS),
        ])]),
        ("Output spectrum (estimated covariance Σ)", [
            ("table", [(k, v, "nearest", False) for k, v in s.items()
                       if not isinstance(v, (list, dict)) and k != "pool_statistics"]
             + ([("top eigenvalues", list(s.get("eigenvalues", []))[:TOP_ROWS], "nearest",
                  False)] if "eigenvalues" in s else
                [("top eigenvalues / largest", list(s["relative_eigenvalues"])[:TOP_ROWS],
                  "nearest", False)] if "relative_eigenvalues" in s else [])),
            ("figure", "spectrum"),
        ]),
        _noise_section(n, utility_rows),
        _privacy_section(r["privacy"]),
        _release_section(r),
    ]


def section_layout(section: Mapping) -> list[tuple]:
    """Blocks of an extra section: its Markdown, or its ``table`` and its other fields
    (nested dicts flattened to ``key: subkey`` rows; a ``vacuous`` flag marks its bound)."""
    if section.get("markdown"):
        return [("markdown", str(section["markdown"]))]
    blocks: list[tuple] = []
    table = section.get("table")
    if isinstance(table, Mapping) and "columns" in table and "rows" in table:
        blocks.append(("grid", [str(c) for c in table["columns"]],
                       [[cell(v) for v in row] for row in table["rows"]]))
    rows: list[tuple] = []
    for key, value in section.items():
        if key in RENDERED_KEYS:
            continue
        if isinstance(value, Mapping):
            vac = bool(value.get("vacuous"))
            rows += [(f"{key}: {k}".replace("_", " "), v, side_of(f"{key} {k}"),
                      vac and k in ("accuracy", "upper"))
                     for k, v in value.items()]
        else:
            rows.append((key.replace("_", " "), value, side_of(key), False))
    if rows:
        blocks.append(("table", rows))
    return blocks


def render_row(row: tuple) -> tuple[str, str]:
    """``(label, text)`` of a ``("table", ...)`` row, formatted by :func:`cell`."""
    label, value, side, vacuous = row
    return str(label), cell(value, side=side, vacuous=vacuous)
