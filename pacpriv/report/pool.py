"""Which statistics of the pool a report shows: the one allow-list, and the policy.

Under the PAC threat model the adversary knows the pool, so the noise plan (a function of the
pool, not of the secret subset) is no secret from it; but a user whose pool itself is
confidential may not want the report to carry the pool's statistics. A report of a bundled
public dataset shows them all; for any other pool the report keeps the scale-free facts listed
here (:data:`PUBLIC_FIELDS`) unless the caller asks for the statistics
(``pool_statistics=True``, CLI ``--report-pool-statistics``). Every renderer and the CLI decide
through :func:`shows_pool_statistics` and :func:`pool_hidden`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pacpriv.datasets.loading import is_bundled_source

__all__ = [
    "POOL_SCALE_KEYS",
    "POOL_STATISTICS_HIDDEN",
    "PUBLIC_FIELDS",
    "is_public_pool",
    "pool_hidden",
    "private_privacy",
    "private_section",
    "private_spectrum_and_noise",
    "scrub_pool_scale",
    "shows_pool_statistics",
]

#: The allow-list: the facts of each part of a report that a private pool's report keeps
#: (shapes, ranks, counts, rules, confidences). Real-valued functions of the spectrum (effective
#: rank, the plan's plug-in MI, the certificate's noise inflation) resolve eigenvalue ratios and
#: are left out.
PUBLIC_FIELDS: dict[str, tuple[str, ...]] = {
    "spectrum": ("method", "n_trials", "dim", "rank", "n_components", "eigenvector_dtype",
                 "lazy_eigenvectors", "gram_dtype", "scale_blocks", "unresolved_dim"),
    "noise": ("rule", "mi_budget", "mi_claim", "confidence", "dim", "basis", "n_directions",
              "certified", "label", "clipped_release"),
    "certificate": ("method", "certified", "confidence", "n_shape", "n_pairs", "n_clipped",
                    "constant", "n_trials"),
    "privacy": ("mi_budget_nats", "mi_claim_nats", "membership_prior", "blind_guess_prior",
                "prior_source", "prior_explanation", "posterior_success_bound",
                "posterior_success_bound_label", "certification",
                "membership_inference_accuracy_bound", "pinsker_success_bound",
                "individual_mi_bound_nats"),
    "certification": ("label", "certified", "confidence", "gamma", "rule", "method",
                      "n_shape_trials", "n_certificate_trials", "n_certificate_pairs",
                      "n_clipped_simulated_outputs", "clipped_release", "output_bound",
                      "constant_outputs"),
}

POOL_STATISTICS_HIDDEN = (
    "hidden: the output spectrum and the noise scale are statistics of f over subsets of a "
    "pool that is not public (for a mean, the top eigenvalue gives the scale of an outlier's "
    "value, and the ratios of eigenvalues, known the other records, its value); only the "
    "noise-to-spread ratio is shown, to one significant digit. Pass pool_statistics=True "
    "(CLI: --report-pool-statistics) to include them.")


#: Keys holding absolute (pool-scale) noise or spread values, removed by :func:`scrub_pool_scale`
#: from sections laid out by other modules (a per-record audit); derived from the same facts.
POOL_SCALE_KEYS = frozenset({
    "noise_std", "noise_std_max", "noise_std_min", "noise_std_top", "residual_std",
    "expected_noise_power", "total_variance", "max_coordinate_variance", "tail_variance",
    "eigenvalues", "top_eigenvalues", "coordinate_variances", "clip_radius", "summand_bound",
    "mean_summand", "upper_bound", "plugin_trace", "kappa", "kappa_plugin", "output_bound",
    "variances", "noise_variances", "scale",
})


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


def private_spectrum_and_noise(spectrum: dict, noise: dict) -> tuple[dict, dict]:
    """Spectrum and noise with every pool statistic removed.

    Kept: shapes, ranks, rules, confidences. Not kept: absolute values (the pool's scale) and
    per-direction ratios (eigenvalues relative to the largest, noise relative to each
    direction's spread): with the other records known, a ratio of eigenvalues of a mean gives
    an outlier's value (a reviewer recovered a salary to 3 %). Added: the RMS noise relative
    to the spread of f, **to one significant digit** (rounded down), which states the utility
    cost without resolving the spectrum.
    """
    out_s = {k: spectrum[k] for k in PUBLIC_FIELDS["spectrum"] if k in spectrum}
    out_s["pool_statistics"] = POOL_STATISTICS_HIDDEN
    out_n = {k: noise[k] for k in PUBLIC_FIELDS["noise"] if k in noise}
    cert = (noise.get("details") or {}).get("certificate")
    if isinstance(cert, dict):
        out_n["details"] = {"certificate": {k: cert[k] for k in PUBLIC_FIELDS["certificate"]
                                            if k in cert}}
    power, total = noise.get("expected_noise_power"), spectrum.get("total_variance")
    if power is not None and total:
        out_n["noise_to_spread_rms"] = _one_digit_down(math.sqrt(float(power) / float(total)))
    elif power is not None and total is not None:  # f never varied: no spread to compare with
        out_n["constant_output"] = True
    out_n["pool_statistics"] = POOL_STATISTICS_HIDDEN
    return out_s, out_n




def private_privacy(privacy: dict) -> dict:
    """The ``privacy`` part of a PAC report restricted to :data:`PUBLIC_FIELDS`."""
    out = {k: v for k, v in privacy.items() if k in PUBLIC_FIELDS["privacy"]}
    cert = privacy.get("certification")
    if isinstance(cert, dict):
        out["certification"] = {k: v for k, v in cert.items()
                                if k in PUBLIC_FIELDS["certification"]}
    return out


def private_section(section: dict, key: str) -> dict:
    """An extra section without pool-scale values, its ``key`` part marked as hidden."""
    out = scrub_pool_scale(section)
    out[key] = {**out.get(key, {}), "pool_statistics": POOL_STATISTICS_HIDDEN}
    return out


def shows_pool_statistics(dataset: dict, pool_statistics: bool | None) -> bool:
    """The policy: ``pool_statistics`` if given, else whether the pool is public."""
    return is_public_pool(dataset) if pool_statistics is None else bool(pool_statistics)


def pool_hidden(part: Mapping) -> bool:
    """Whether a report part (``report["noise"]``, a section) had its pool statistics hidden."""
    return "pool_statistics" in part
