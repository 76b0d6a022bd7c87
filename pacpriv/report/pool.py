"""Which statistics of the pool a report shows: the one allow-list, and the policy.

Under the PAC threat model the adversary knows the pool, so the noise plan (a function of the
pool, not of the secret subset) is no secret from it; but a user whose pool itself is
confidential may not want the report to carry the pool's statistics. Three views
(:func:`pool_view`), chosen by ``pool_statistics`` (``build_report``/``write_report``):

* ``"all"`` -- everything: a bundled public dataset by default, any pool with
  ``pool_statistics=True`` (CLI ``--report-pool-statistics``);
* ``"error_bar"`` -- the default for every other pool: the scale-free facts of
  :data:`PUBLIC_FIELDS` plus the release's error bar (:data:`ERROR_BAR_FIELDS`: the noise std of
  each output coordinate, ``sqrt(diag(Σ_B))``), which a user needs to read the release; the
  spectrum, the noise's shape and every other absolute value stay hidden;
* ``"withheld"`` -- ``pool_statistics=False`` (CLI ``--withhold-pool-statistics``), for a pool
  that is itself confidential: the scale-free facts only, the error bar withheld too.

Every renderer and the CLI decide through :func:`pool_view` and :func:`pool_hidden`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pacpriv.datasets.loading import is_bundled_source

__all__ = [
    "ERROR_BAR_FIELDS",
    "ERROR_BAR_NOTE",
    "POOL_SCALE_KEYS",
    "POOL_STATISTICS_HIDDEN",
    "POOL_STATISTICS_WITHHELD",
    "PUBLIC_FIELDS",
    "VIEWS",
    "is_public_pool",
    "pool_hidden",
    "pool_view",
    "private_privacy",
    "private_section",
    "private_spectrum_and_noise",
    "scrub_pool_scale",
    "shows_pool_statistics",
    "spread_orders",
]

#: The views of :func:`pool_view`, from most to least shown.
VIEWS = ("all", "error_bar", "withheld")

#: The allow-list: the facts of each part of a report that a private pool's report keeps
#: (shapes, ranks, counts, rules, confidences). Real-valued functions of the spectrum (effective
#: rank, the plan's plug-in MI, the certificate's noise inflation) resolve eigenvalue ratios and
#: are left out.
PUBLIC_FIELDS: dict[str, tuple[str, ...]] = {
    "spectrum": ("method", "n_trials", "dim", "rank", "n_components", "eigenvector_dtype",
                 "lazy_eigenvectors", "gram_dtype", "scale_blocks", "unresolved_dim"),
    "noise": ("rule", "mi_budget", "mi_claim", "confidence", "dim", "basis", "n_directions",
              "certified", "label", "clipped_release"),
    "certificate": ("method", "certified", "confidence", "n_shape", "n_certificate",
                    "n_clipped", "constant", "n_trials", "scaling", "summands",
                    "clip_probability", "randomized"),
    "privacy": ("mi_budget_nats", "mi_claim_nats", "membership_prior", "blind_guess_prior",
                "prior_source", "prior_explanation", "posterior_success_bound",
                "posterior_success_bound_label", "certification",
                "membership_inference_accuracy_bound", "pinsker_success_bound",
                "average_per_record_mi_nats"),
    "certification": ("label", "certified", "confidence", "gamma", "rule", "method",
                      "n_shape_trials", "n_certificate_trials", "summands", "scaling",
                      "randomized_threshold",
                      "n_clipped_simulated_outputs", "clipped_release", "output_bound",
                      "constant_outputs"),
}

#: The noise section's keys of the release's error bar, shown for every pool unless withheld.
ERROR_BAR_FIELDS = ("noise_std_per_coordinate", "noise_std_per_coordinate_max",
                    "noise_std_per_coordinate_min", "error_bar")

#: What the error bar is and which pool statistic it reveals (the report and the CLI say it).
ERROR_BAR_NOTE = (
    "The error bar of the release: the noise standard deviation of each output coordinate, "
    "sqrt(diag(Σ_B)), in the output's units (coordinate i of the release is f(X)_i plus "
    "Gaussian noise of this std). It reveals the diagonal of the noise covariance Σ_B, which "
    "is calibrated from the spread of f over random subsets of the pool: a statistic of the "
    "pool, not of the secret subset. Under the PAC threat model the adversary knows the pool, "
    "so it tells nothing about membership; if the pool itself is confidential it does reveal "
    "the pool's spread (for a mean, the scale of an outlier's value): withhold it with "
    "pool_statistics=False (CLI: --withhold-pool-statistics).")

POOL_STATISTICS_HIDDEN = (
    "hidden: the output spectrum and the noise's shape are statistics of f over subsets of a "
    "pool that is not public (for a mean, the top eigenvalue gives the scale of an outlier's "
    "value, and the ratios of eigenvalues, known the other records, its value); only the "
    "release's error bar (the noise std per output coordinate) and the noise-to-spread ratio "
    "to one significant digit are shown. Pass pool_statistics=True (CLI: "
    "--report-pool-statistics) to include them, or pool_statistics=False (CLI: "
    "--withhold-pool-statistics) to withhold the error bar too.")

POOL_STATISTICS_WITHHELD = (
    "withheld (pool_statistics=False, CLI: --withhold-pool-statistics): the output spectrum, "
    "the noise scale and the release's error bar are statistics of the pool, which was "
    "declared confidential; nothing derived from the pool is shown (not even the "
    "noise-to-spread ratio).")


#: Keys holding absolute (pool-scale) noise or spread values, removed by :func:`scrub_pool_scale`
#: from sections laid out by other modules (a per-record audit); derived from the same facts.
POOL_SCALE_KEYS = frozenset({
    "noise_std", "noise_std_max", "noise_std_min", "noise_std_top", "residual_std",
    "expected_noise_power", "total_variance", "max_coordinate_variance", "tail_variance",
    "eigenvalues", "top_eigenvalues", "coordinate_variances", "clip_radius", "summand_bound",
    "mean_summand", "upper_bound", "plugin_trace", "kappa", "kappa_plugin", "output_bound",
    "variances", "noise_variances", "scale",
})


#: Plug-in quantities of a per-record section that are functions of the pool's spectrum (the
#: whole-subset MI ``½ ln det(I + Σ Σ_B⁻¹)`` with the estimated Σ, and its posterior), removed
#: with the pool's statistics by :func:`private_section`; their table rows start with
#: :data:`PLUGIN_ROW_PREFIX`.
PLUGIN_KEYS = frozenset({"whole_subset_mi", "whole_subset_accuracy_bound"})
PLUGIN_ROW_PREFIX = "whole-subset"
#: A per-record noise plan's MI values, computed on the plug-in spectrum (functions of the
#: pool), removed from its ``noise_plan`` with the pool's statistics.
PLAN_MI_KEYS = frozenset({"mi_budget", "mi_bound", "mi_claim", "linearised_mi_bound"})


def scrub_pool_scale(obj):
    """``obj`` (nested dicts and lists) without the :data:`POOL_SCALE_KEYS` entries."""
    if isinstance(obj, dict):
        return {k: scrub_pool_scale(v) for k, v in obj.items() if k not in POOL_SCALE_KEYS}
    if isinstance(obj, list):
        return [scrub_pool_scale(v) for v in obj]
    return obj


def is_public_pool(dataset: dict) -> bool:
    """A bundled public dataset (scikit-learn's): its statistics are public facts."""
    return is_bundled_source(str(dataset.get("source", "")))


def _one_digit_down(x: float) -> float:
    """``x > 0`` rounded down to one significant digit (``2.67 -> 2``, ``0.0381 -> 0.03``)."""
    if not (math.isfinite(x) and x > 0):
        return x
    scale = 10.0 ** math.floor(math.log10(x))
    return float(math.floor(x / scale * (1.0 + 1e-12)) * scale)


def private_spectrum_and_noise(spectrum: dict, noise: dict, *,
                               error_bar: bool = False) -> tuple[dict, dict]:
    """Spectrum and noise with every pool statistic removed (but the error bar, if asked).

    With ``error_bar=False`` (withheld, CLI ``--withhold-pool-statistics``) nothing derived
    from the pool is kept, not even the one-digit ratio below.

    Kept: shapes, ranks, rules, confidences, and with ``error_bar`` the fields of
    :data:`ERROR_BAR_FIELDS` (the noise std per output coordinate). Not kept: the spectrum's
    absolute values, the noise's shape in its eigenbasis, and per-direction ratios
    (eigenvalues relative to the largest, noise relative to each direction's spread): with the
    other records known, a ratio of eigenvalues of a mean gives an outlier's value (a reviewer
    recovered a salary to 3 %). Added with ``error_bar`` (the default for a pool that is not
    public): the RMS noise relative to the spread of f, **to one significant digit** (rounded
    down), which states the utility cost without resolving the spectrum.
    """
    note = POOL_STATISTICS_HIDDEN if error_bar else POOL_STATISTICS_WITHHELD
    out_s = {k: spectrum[k] for k in PUBLIC_FIELDS["spectrum"] if k in spectrum}
    out_s["pool_statistics"] = note
    out_n = {k: noise[k] for k in PUBLIC_FIELDS["noise"] if k in noise}
    if error_bar:
        out_n.update({k: noise[k] for k in ERROR_BAR_FIELDS if k in noise})
    cert = (noise.get("details") or {}).get("certificate")
    if isinstance(cert, dict):
        out_n["details"] = {"certificate": {k: cert[k] for k in PUBLIC_FIELDS["certificate"]
                                            if k in cert}}
    power, total = noise.get("expected_noise_power"), spectrum.get("total_variance")
    if not error_bar:  # withheld: nothing derived from the pool, not even one digit of a ratio
        out_n["pool_statistics"] = note
        return out_s, out_n
    if power is not None and total:
        out_n["noise_to_spread_rms"] = _one_digit_down(math.sqrt(float(power) / float(total)))
    elif power is not None and total is not None:  # f never varied: no spread to compare with
        out_n["constant_output"] = True
    orders = spread_orders(spectrum, noise)
    if orders >= SCALE_WARNING_ORDERS:  # a power of ten only: the spreads stay unresolved
        out_n["noise_to_spread_orders"] = orders
    out_n["pool_statistics"] = note
    return out_s, out_n




#: Orders of magnitude between the smallest and largest per-coordinate noise/spread ratio
#: from which reports warn that the coordinates are on different scales.
SCALE_WARNING_ORDERS = 2


def noise_to_spread(spectrum: Mapping, noise: Mapping) -> list[float]:
    """Per output coordinate: noise std over the across-trial std of f (the first
    ``ARRAY_LIMIT`` coordinates that the report carries; coordinates where f never varied are
    left out). Empty when the report does not carry both."""
    var = spectrum.get("coordinate_variances") or []
    std = noise.get("noise_std_per_coordinate") or []
    return [float(s) / math.sqrt(float(v)) for v, s in zip(var, std, strict=False)
            if float(v) > 0]


def spread_orders(spectrum: Mapping, noise: Mapping) -> int:
    """Whole orders of magnitude (``floor(log10(max/min))``) between the per-coordinate
    noise/spread ratios: 0 when they are within 10× of each other (or unknown)."""
    ratios = [r for r in noise_to_spread(spectrum, noise) if r > 0 and math.isfinite(r)]
    if len(ratios) < 2:
        return 0
    return math.floor(math.log10(max(ratios) / min(ratios)) + 1e-12)


def private_privacy(privacy: dict) -> dict:
    """The ``privacy`` part of a PAC report restricted to :data:`PUBLIC_FIELDS`."""
    out = {k: v for k, v in privacy.items() if k in PUBLIC_FIELDS["privacy"]}
    cert = privacy.get("certification")
    if isinstance(cert, dict):
        out["certification"] = {k: v for k, v in cert.items()
                                if k in PUBLIC_FIELDS["certification"]}
    return out


def private_section(section: dict, key: str, *, withheld: bool = False) -> dict:
    """An extra section without pool-scale values, its ``key`` part marked as hidden (or as
    withheld)."""
    out = scrub_pool_scale(section)
    note = POOL_STATISTICS_WITHHELD if withheld else POOL_STATISTICS_HIDDEN
    part = {k: v for k, v in out.get(key, {}).items() if k not in PLUGIN_KEYS}
    if isinstance(part.get("noise_plan"), dict):  # the plan's plug-in MI values, pool-derived
        part["noise_plan"] = {k: v for k, v in part["noise_plan"].items()
                              if k not in PLAN_MI_KEYS}
    out[key] = {**part, "pool_statistics": note}
    table = out.get("table")
    if isinstance(table, dict) and "rows" in table:  # rows labelled by PLUGIN_ROW_PREFIX
        out["table"] = {**table, "rows": [r for r in table["rows"]
                                          if not str(r[0]).startswith(PLUGIN_ROW_PREFIX)]}
    if isinstance(out.get("markdown"), str):
        out["markdown"] = "\n".join(
            line for line in out["markdown"].split("\n")
            if not line.startswith("| " + PLUGIN_ROW_PREFIX))
    return out


def pool_view(dataset: dict, pool_statistics: bool | None) -> str:
    """The policy, one of :data:`VIEWS`: ``"all"`` for ``pool_statistics=True`` or (None) a
    bundled public pool; ``"withheld"`` for ``pool_statistics=False``; else ``"error_bar"``."""
    if pool_statistics is None:
        return "all" if is_public_pool(dataset) else "error_bar"
    if not isinstance(pool_statistics, bool):
        raise TypeError("`pool_statistics` must be True (show all), False (withhold all) or "
                        f"None (the default policy); got {pool_statistics!r}.")
    return "all" if pool_statistics else "withheld"


def shows_pool_statistics(dataset: dict, pool_statistics: bool | None) -> bool:
    """Whether the whole spectrum and noise are shown (:func:`pool_view` is ``"all"``)."""
    return pool_view(dataset, pool_statistics) == "all"


def pool_hidden(part: Mapping) -> bool:
    """Whether a report part (``report["noise"]``, a section) had its pool statistics hidden."""
    return "pool_statistics" in part
