"""The exact σ calibration with warm-started grids (issue 32, item 5): same certificate.

The search evaluates each σ on a grid chosen from the previous evaluation (method of the final
tolerance, resolution scaled to the tolerance); these tests check the returned σ against
independent computations: the closed form of M = 1 (mpmath), and the public exact interval
evaluated afresh (default grids) at σ and at σ/(1 + rtol).
"""

from __future__ import annotations

import warnings

import mpmath
import pytest

from pacpriv.dpsgd import calibrate_noise_multiplier, exact_membership_inference_accuracy
from pacpriv.dpsgd.calibration import _search_tolerance
from pacpriv.dpsgd.exact import warm_accuracy

from ._calibration_checks import calibrate_and_check_certified


def _sigma_m1(target: float, epochs: int) -> float:
    """Exact root at M = 1: accuracy Φ(√E/(2σ)) = target (mpmath, 30 digits)."""
    mpmath.mp.dps = 30
    z = mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf(target) - 1)
    return float(mpmath.sqrt(epochs) / (2 * z))


@pytest.mark.parametrize(("target", "epochs"), [(0.51, 1), (0.6, 10), (0.75, 100), (0.9, 3)])
def test_m1_sigma_is_certified_and_within_rtol_of_the_closed_form_root(target, epochs):
    """Upper ≤ target at σ implies σ ≥ the exact root; the search stops within rtol of it."""
    rtol = 1e-3
    r = calibrate_noise_multiplier(target, steps_per_epoch=1, epochs=epochs, rtol=rtol)
    root = _sigma_m1(target, epochs)
    assert r.accuracy.upper <= target
    assert root <= r.noise_multiplier <= root * (1 + rtol)
    assert r.lower_noise_multiplier < root


@pytest.mark.parametrize(("target", "steps", "epochs"), [(0.6, 100, 10), (0.75, 1000, 1),
                                                         (0.51, 10, 100)])
def test_sigma_checked_by_fresh_default_evaluations(target, steps, epochs):
    """The public interval on its own (cold) grids: upper ≤ target at σ (the default
    tolerance a user checks with) and lower > target at σ/1.001 (the root is within 0.1%)."""
    calibrate_and_check_certified(target, steps, epochs, rtol=1e-3)


@pytest.mark.parametrize("c", [24.0, 300.0])
def test_any_warm_grid_is_certified(c):
    """A warm start only changes the grid: coarse or fine, the interval holds the M = 1
    closed form, and at M = 50 it overlaps the cold interval."""
    sigma, epochs = 0.8, 4
    exact = float(mpmath.ncdf(mpmath.sqrt(epochs) / (2 * sigma)))
    warm = {"method_tol": 1e-4, "method": "gaussian", "c": c, "c_epoch": c, "extra": 0.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a coarse grid may miss the tolerance (still certified)
        r = warm_accuracy(sigma, 1, epochs, 1e-4, warm)
    assert r.lower <= exact <= r.upper
    cold = exact_membership_inference_accuracy(0.9, steps_per_epoch=50, epochs=epochs,
                                               progress=False)
    method = cold.details["method"]
    warm = {"method_tol": 1e-4, "method": method, "c": c, "c_epoch": c, "extra": 2.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hot = warm_accuracy(0.9, 50, epochs, 1e-4, warm)
    assert max(hot.lower, cold.lower) <= min(hot.upper, cold.upper)
    assert hot.details["method"] == method == "geometric"
    if hot.details["attempt"] == 0:  # the warm grid was used as given
        assert hot.details["c"] == c


def test_search_tolerance_rounds_to_the_default():
    """0.1·1e-3 is 9.999999999999998e-05 in floating point: the search uses 1e-4 itself (no
    extra evaluation at the default tolerance); tighter ones are kept."""
    assert _search_tolerance(0.6, 1e-3) == 1e-4
    assert _search_tolerance(0.9, 1e-3) == 1e-4
    assert _search_tolerance(0.51, 1e-3) == pytest.approx(1e-5)
    assert _search_tolerance(0.5000001, 1e-3) == 1e-7


def test_linear_lattice_needing_long_double_gives_way_to_the_geometric_grid():
    """(σ 0.8, M 300, E 1000): the linear lattice's float64 round-off, times E, would need
    long-double FFTs; the public interval comes from the geometric grid instead (a probe and
    at most two refinements), meets the tolerance, and overlaps the linear lattice's own
    certified interval (an independent discretisation)."""
    from pacpriv.dpsgd import exact as exact_mod

    sigma, steps, epochs = 0.8, 300, 1000
    assert exact_mod._choose_method(sigma, steps, epochs, 1e-6, 40.0) == "linear"
    kw = dict(c=40.0, c_epoch=40.0, extra=0.0, direction="add", method="linear", tail=1e-6,
              tol=1e-4, tick=None)
    assert exact_mod._numeric_once(sigma, steps, epochs, long_fallback=True, **kw) is None
    lin = exact_mod._numeric_once(sigma, steps, epochs, **kw)
    assert lin["extended_precision_upper"]
    r = exact_membership_inference_accuracy(sigma, steps_per_epoch=steps, epochs=epochs,
                                            progress=False)
    assert r.details["method"] == "geometric" and r.details["attempt"] <= 2
    assert r.converged and r.upper - r.lower <= 1e-4
    lin_lo = 0.5 + 0.5 * lin["tv_lower_numerical"]
    lin_up = 0.5 + 0.5 * lin["tv_upper_numerical"]
    assert max(r.lower, lin_lo) <= min(r.upper, lin_up)
    # the chi-square bound is above both
    assert r.upper <= r.details["chi_square_accuracy"]
