"""Figures of pacpriv.plotting: the plotted data are the library's numbers, and they embed."""

from __future__ import annotations

import base64
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from pacpriv import plotting
from pacpriv.dpsgd.bounds import membership_inference_accuracy_bound
from pacpriv.pac.bounds._posterior import pinsker_bound, posterior_success_rate
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.job import run_pac
from pacpriv.pac.noise._calibration import calibrate_noise
from pacpriv.pac.spectrum._covariance import spectrum_from_covariance
from pacpriv.report import build_report

# small trial counts on purpose: the certified rule's trial-planning warning is not the subject
pytestmark = pytest.mark.filterwarnings(
    "ignore:n_trials = .* is below the:pacpriv.exceptions.UndersampledWarning"
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _mean_mech(subset):
    """Two clipped column means of the subset (0 for an empty subset)."""
    x = np.clip(np.asarray(subset, dtype=float), 0.0, 10.0)
    return x.mean(axis=0) if x.shape[0] else np.zeros(x.shape[1])


@pytest.fixture(scope="module")
def worked_example():
    """MATH.md §2 worked example: λ = (4, 1), v = ½; square-root rule s² = (6, 3)."""
    spec = spectrum_from_covariance(np.diag([4.0, 1.0]))
    return spec, calibrate_noise(spec, mi_budget=0.5)


def test_spectrum_plots_eigenvalues_and_noise_variances(worked_example):
    """plot_spectrum draws λ = (4, 1) and the square-root-rule noise variances (6, 3), log y."""
    spec, plan = worked_example
    fig = plotting.plot_spectrum(spec, plan)
    (ax,) = fig.axes
    lam, noise = ax.lines[0], ax.lines[1]
    np.testing.assert_allclose(lam.get_ydata(), [4.0, 1.0])
    np.testing.assert_allclose(noise.get_ydata(), [6.0, 3.0], rtol=1e-12)
    np.testing.assert_array_equal(noise.get_xdata(), [1, 2])
    assert ax.get_yscale() == "log"


def test_spectrum_from_report_dict_matches_objects():
    """The report dict's arrays give the same spectrum figure data as the PacResult itself."""
    x = np.linspace(0, 10, 60).reshape(30, 2)
    res = run_pac(_mean_mech, x, mi_budget=0.1, n_trials=40, rng=0, release=False,
                  execution=ExecutionOptions(progress=False, n_jobs=1))
    a = plotting.plot_spectrum(res).axes[0]
    b = plotting.plot_spectrum(build_report(res, pool_statistics=True)).axes[0]
    assert len(a.lines) == len(b.lines) == 2
    for la, lb in zip(a.lines, b.lines, strict=True):
        np.testing.assert_allclose(la.get_ydata(), lb.get_ydata(), rtol=1e-15)


def test_spectrum_variance_only_uses_coordinate_variances():
    """For the variance-only rule the signal line is diag(Σ) per coordinate, not λ."""
    cov = np.array([[2.0, 1.0], [1.0, 3.0]])
    spec = spectrum_from_covariance(cov)
    plan = calibrate_noise(spec, mi_budget=0.2, rule="variance-only")
    ax = plotting.plot_spectrum(spec, plan).axes[0]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [2.0, 3.0])
    np.testing.assert_allclose(ax.lines[1].get_ydata(), plan.noise_std**2)
    assert ax.get_xlabel().startswith("coordinate")


def test_spectrum_of_constant_outputs_is_linear_and_empty():
    """A zero spectrum (constant outputs, zero noise) plots nothing on a log axis: linear y."""
    from pacpriv.exceptions import ConstantOutputWarning

    with pytest.warns(ConstantOutputWarning):
        spec = spectrum_from_covariance(np.zeros((2, 2)))
    plan = calibrate_noise(spec, mi_budget=0.1)
    ax = plotting.plot_spectrum(spec, plan).axes[0]
    assert ax.get_yscale() == "linear"
    assert ax.lines[0].get_ydata().size == 0
    np.testing.assert_array_equal(ax.lines[1].get_ydata(), [0.0, 0.0])


def test_spectrum_rejects_spectrum_without_plan(worked_example):
    """An OutputSpectrum without its NoisePlan is a TypeError that names both kinds."""
    with pytest.raises(TypeError, match="OutputSpectrum given with `plan`"):
        plotting.plot_spectrum(worked_example[0])


def test_spectrum_rejects_report_dict_without_arrays():
    """A dict without the per-direction arrays is a ValueError pointing at build_report."""
    with pytest.raises(ValueError, match="build_report"):
        plotting.plot_spectrum({"spectrum": {}, "noise": {}})


def test_posterior_curve_marks_chosen_point_and_pinsker_is_above():
    """The chosen v is marked at posterior_success_rate(v); Pinsker lies above the KL curve."""
    fig = plotting.plot_posterior_curve(1 / 64, prior=0.5)
    ax = fig.axes[0]
    kl, pins, _prior, point = ax.lines
    np.testing.assert_allclose(point.get_ydata(), [0.588157], atol=5e-6)  # MATH.md §1
    v = kl.get_xdata()
    np.testing.assert_allclose(kl.get_ydata(), posterior_success_rate(v, prior=0.5))
    np.testing.assert_allclose(pins.get_ydata(), pinsker_bound(v, prior=0.5))
    assert np.all(pins.get_ydata() >= kl.get_ydata())
    assert ax.get_xscale() == "log"
    assert v.min() < 1 / 64 < v.max()


def test_posterior_curve_validates_budget():
    """A non-positive budget is rejected with the argument's name and range."""
    with pytest.raises(ValueError, match="mi_budget"):
        plotting.plot_posterior_curve(0.0, prior=0.5)


def test_posterior_curve_validates_prior():
    """A prior outside (0, 1) is rejected; there is no default prior (no silent ½)."""
    with pytest.raises(ValueError, match="prior"):
        plotting.plot_posterior_curve(0.1, prior=1.0)
    with pytest.raises(TypeError, match="prior"):
        plotting.plot_posterior_curve(0.1)


def test_posterior_curve_rejects_empty_range():
    """v_max <= v_min is a ValueError naming both."""
    with pytest.raises(ValueError, match="v_max"):
        plotting.plot_posterior_curve(0.1, prior=0.5, v_min=1.0, v_max=0.5)


def test_dpsgd_curve_is_the_chi_square_closed_form():
    """The closed-form line equals bounds.membership_inference_accuracy_bound at each σ."""
    fig = plotting.plot_dpsgd_accuracy_vs_sigma(steps_per_epoch=10, epochs=5,
                                                noise_multiplier=2.0, exact=False,
                                                comparators=False)
    ax = fig.axes[0]
    chi = ax.lines[0]
    s = chi.get_xdata()
    want = membership_inference_accuracy_bound(s, steps_per_epoch=10, epochs=5).accuracy
    np.testing.assert_allclose(chi.get_ydata(), want)
    marker = ax.lines[-1]
    np.testing.assert_allclose(
        marker.get_ydata(),
        [membership_inference_accuracy_bound(2.0, steps_per_epoch=10, epochs=5).accuracy])
    assert np.all(np.diff(chi.get_ydata()) <= 0)  # decreasing in σ


def test_dpsgd_exact_interval_contains_m1_closed_form():
    """With M = 1 the exact accuracy is Φ(√E/(2σ)) (MATH.md §3); the plotted interval holds it."""
    from scipy.stats import norm

    fig = plotting.plot_dpsgd_accuracy_vs_sigma(steps_per_epoch=1, epochs=10, sigma_min=0.5,
                                                sigma_max=4.0, n_exact=4, comparators=False,
                                                exact_max_bound=1.0, noise_multiplier=2.0)
    ax = fig.axes[0]
    upper, chosen = ax.lines[1], ax.lines[2]
    phi = norm.cdf(np.sqrt(10) / 4)
    assert phi <= chosen.get_ydata()[0] <= phi + 2e-3  # exact upper at the chosen σ = 2
    s = upper.get_xdata()
    np.testing.assert_allclose(s, np.geomspace(0.5, 4.0, 4))
    truth = norm.cdf(np.sqrt(10) / (2 * s))
    assert np.all(upper.get_ydata() >= truth - 1e-12)
    assert np.all(upper.get_ydata() <= truth + 2e-3)  # plotting tolerance
    low = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert low.min() <= truth.min() + 1e-12


def test_dpsgd_exact_curve_skips_sigmas_with_large_chi_square_bound():
    """Exact points are computed only where the chi-square bound is <= exact_max_bound."""
    from pacpriv.dpsgd.bounds import closed_form_noise_multiplier

    fig = plotting.plot_dpsgd_accuracy_vs_sigma(steps_per_epoch=1, epochs=10, sigma_min=0.5,
                                                sigma_max=4.0, n_exact=6, comparators=False,
                                                exact_max_bound=0.75)
    s = fig.axes[0].lines[1].get_xdata()
    cut = closed_form_noise_multiplier(0.75, steps_per_epoch=1, epochs=10)
    grid = np.geomspace(0.5, 4.0, 6)
    np.testing.assert_allclose(s, grid[grid >= cut])
    assert 0 < s.size < 6


def test_dpsgd_comparator_curves_are_the_comparators_values():
    """The dotted comparator lines are ckp_accuracy and gdp_clt_accuracy at each σ."""
    from pacpriv.dpsgd import comparators as comp
    fig = plotting.plot_dpsgd_accuracy_vs_sigma(steps_per_epoch=10, epochs=5, exact=False,
                                                n_points=7)
    lines = {ln.get_label(): ln for ln in fig.axes[0].lines}
    for label, func in [("CKP leading term (approximation)", comp.ckp_accuracy),
                        ("GDP CLT (approximation)", comp.gdp_clt_accuracy)]:
        s = lines[label].get_xdata()
        want = [func(float(x), steps_per_epoch=10, epochs=5) for x in s]
        np.testing.assert_allclose(lines[label].get_ydata(), want)


def test_dpsgd_curve_validates_sigma_range():
    """sigma_max must exceed sigma_min."""
    with pytest.raises(ValueError, match="sigma_max"):
        plotting.plot_dpsgd_accuracy_vs_sigma(steps_per_epoch=1, epochs=1, sigma_min=2.0,
                                              sigma_max=1.0)


def test_pac_vs_dpsgd_bar_heights_and_missing_values():
    """Bar lengths are the rows' values; None leaves the bar out."""
    rows = [
        {"method": "PAC", "noise": 4.4, "test_accuracy": 0.9, "accuracy_bound": 0.588,
         "attack_accuracy": 0.52},
        {"method": "DP-SGD", "noise": 1.2, "test_accuracy": 0.85, "accuracy_bound": 0.6,
         "attack_accuracy": None},
    ]
    axes = plotting.plot_pac_vs_dpsgd(rows).axes
    lengths = [[p.get_width() for p in ax.patches] for ax in axes]
    assert lengths[0] == [4.4, 1.2]
    assert lengths[1] == [0.9, 0.85]
    assert lengths[2] == [0.588, 0.6, 0.52]  # two bounds, one measured attack
    assert [t.get_text() for t in axes[0].get_yticklabels()] == ["PAC", "DP-SGD"]


def test_pac_vs_dpsgd_rejects_empty_rows():
    """An empty table is a ValueError."""
    with pytest.raises(ValueError, match="at least one row"):
        plotting.plot_pac_vs_dpsgd([])


def test_pac_vs_dpsgd_rejects_unknown_keys():
    """A misspelt key is reported with the allowed keys."""
    with pytest.raises(ValueError, match="unknown keys"):
        plotting.plot_pac_vs_dpsgd([{"method": "PAC", "nosie": 1.0}])


def test_pac_vs_dpsgd_rejects_row_without_method():
    """Each row needs a 'method'."""
    with pytest.raises(ValueError, match="'method'"):
        plotting.plot_pac_vs_dpsgd([{"noise": 1.0}])


def test_pac_vs_dpsgd_rejects_non_list():
    """A single dict instead of a list is a TypeError."""
    with pytest.raises(TypeError, match="list of dicts"):
        plotting.plot_pac_vs_dpsgd({"method": "PAC"})


def test_figure_to_data_uri_is_a_png(worked_example):
    """The data URI decodes to a PNG."""
    uri = plotting.figure_to_data_uri(plotting.plot_spectrum(*worked_example), dpi=40)
    prefix = "data:image/png;base64,"
    assert uri.startswith(prefix)
    assert base64.b64decode(uri[len(prefix):]).startswith(PNG_MAGIC)


def test_figure_to_data_uri_rejects_non_figure():
    """Anything without savefig is a TypeError."""
    with pytest.raises(TypeError, match="matplotlib Figure"):
        plotting.figure_to_data_uri(object())


def test_missing_matplotlib_says_what_to_install(hide_modules, worked_example):
    """Without matplotlib the ImportError names the extra: pip install pacpriv[plot]."""
    hide_modules("matplotlib")
    with pytest.raises(ImportError, match=r"pip install pacpriv\[plot\]"):
        plotting.plot_spectrum(*worked_example)


def test_importing_plotting_does_not_import_matplotlib():
    """matplotlib is imported lazily, inside the plotting functions."""
    code = ("import sys, pacpriv, pacpriv.plotting, pacpriv.report.html, pacpriv.report; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_posterior_curve_at_a_huge_budget_has_no_overflow_warning():
    """A valid but huge budget (1e308 nats) plots without a numpy RuntimeWarning."""
    import warnings

    from pacpriv.plotting import plot_posterior_curve

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fig = plot_posterior_curve(1e308, prior=0.5)
    assert fig is not None


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_spectrum_with_huge_noise_variance_draws_without_overflow_warning():
    """A tiny MI budget (noise variance ~1e300) used to warn 'overflow encountered in exp'
    from the log axis's margins; the figure is drawn, and renders, without it."""
    spec = spectrum_from_covariance(np.diag([4.0, 1.0]))
    plan = calibrate_noise(spec, mi_budget=1e-300)
    fig = plotting.plot_spectrum(spec, plan)
    assert fig.axes[0].get_yscale() == "log"
    assert plotting.figure_to_data_uri(fig).startswith("data:image/png")
