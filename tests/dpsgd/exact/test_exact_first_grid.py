"""Issue 32 item 5, the last two exact-σ cells over 1 s: first grids chosen from the inputs.

(M 1e4, E 1e3, target 0.6) took two public attempts on the linear lattice (the tolerance's
first grid c = 40 just missed it) and a float64 pass before long double in each; (M 1e4, E 1,
target 0.51) missed its first tight grids. The linear lattice's first grid now comes from a
width prediction, a finer attempt keeps the long double its coarser one needed, tight
geometric grids below the default tolerance jump further from the probe, one epoch convolves
small blocks by FFT, and near-½ searches start from the Gaussian limit. Only grids, precision
and the search's first point change: the tests check the certificate and the calibrated σ
against the former path's values (main before the change) and independent checks.
"""

from __future__ import annotations

import math

import pytest

from pacpriv.dpsgd import exact as exact_mod
from pacpriv.dpsgd import exact_membership_inference_accuracy, noise_multiplier_for_accuracy
from pacpriv.dpsgd._exact import ladder

from ._calibration_checks import calibrate_and_check_certified

#: (M, E, target) -> σ returned before the change (benchmarks/dpsgd_calibration.py --issue29)
FORMER_SIGMA = {(10**4, 1000, 0.6): 0.887091, (10**4, 1, 0.51): 0.545618}


@pytest.mark.parametrize(("steps", "epochs", "target"), sorted(FORMER_SIGMA))
def test_calibrated_sigma_matches_the_former_path_and_is_certified(steps, epochs, target):
    """Within 0.1% of the former σ, the upper end at most the target (also re-checked at the
    default tolerance), and the exact root above σ/1.001 (a certified lower end there)."""
    r = calibrate_and_check_certified(target, steps, epochs, rtol=1e-3)
    assert abs(r.noise_multiplier / FORMER_SIGMA[(steps, epochs, target)] - 1.0) <= 1e-3


def test_linear_public_evaluation_meets_the_tolerance_in_one_attempt():
    """(0.887, 1e4, 1e3): the rule's c = 40 gave width 1.15e-4 > 1e-4; the predicted first
    grid meets it at once, and the interval overlaps the c = 40 one (both certified)."""
    sigma, steps, epochs = 0.887091, 10**4, 1000
    r = exact_membership_inference_accuracy(sigma, steps_per_epoch=steps, epochs=epochs,
                                            progress=False)
    assert r.details["method"] == "linear" and r.details["attempt"] == 0
    assert r.upper - r.lower <= 1e-4 and r.details["c"] > 40.0
    with exact_mod._one_blas_thread():
        old = exact_mod._numeric_once(sigma, steps, epochs, c=40.0, c_epoch=40.0, extra=0.0,
                                      direction="add", method="linear", tail=1e-6, tol=1e-4,
                                      tick=None)
    lo, up = 0.5 + 0.5 * old["tv_lower_numerical"], 0.5 + 0.5 * old["tv_upper_numerical"]
    assert up - lo > 1e-4  # the former first grid missed the tolerance
    assert max(lo, r.lower) <= min(up, r.upper)


@pytest.mark.parametrize(("sigma", "steps", "epochs"), [
    (2.09, 100, 100), (1.405, 100, 1000), (0.9818, 1000, 1000), (2.11, 10**4, 100),
    (0.5456, 10**4, 1), (3.0, 10, 1000),
])
def test_predicted_width_is_above_the_measured_one(sigma, steps, epochs):
    """The width model behind the first linear grid, ``K(M)·φ(z)·z·g/c²`` at c = 40, is at
    least the measured width (so the first grid is not too coarse), within a factor 2.5 (not
    needlessly fine); the first c is between the rule's c and 4 times it."""
    s2 = 1.0 / sigma**2
    chi2 = math.expm1(s2) / steps
    z = 0.5 * math.sqrt(epochs * math.log1p(chi2))
    g = chi2 / ((1.0 + chi2) * math.log1p(chi2))
    k = max(ladder._LIN_KMIN, ladder._LIN_K0 + ladder._LIN_K1 * math.log2(steps))
    predicted = k * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi) * z * g / 40.0**2
    with exact_mod._one_blas_thread():
        out = exact_mod._numeric_once(sigma, steps, epochs, c=40.0, c_epoch=40.0, extra=0.0,
                                      direction="add", method="linear", tail=1e-6, tol=1e-4,
                                      tick=None)
    measured = 0.5 * (out["tv_upper_numerical"] - out["tv_lower_numerical"])
    assert measured <= predicted <= 2.5 * measured
    c = ladder.linear_first_c(sigma, steps, epochs, 1e-4, 40.0)
    assert 40.0 <= c <= 160.0
    assert c == pytest.approx(max(40.0, math.sqrt(predicted * 1600.0 / (0.6e-4))))


def test_long_double_start_is_certified_and_matches_the_float64_pass():
    """A chain started in long double (as after a coarser attempt that needed it) gives an
    interval overlapping the float64-first one; where the upper chain needs long double the
    lower one starts there."""
    sigma, steps, epochs = 0.887091, 10**4, 1000
    kw = dict(c=44.0, c_epoch=44.0, extra=0.0, direction="add", method="linear", tail=1e-6,
              tol=1e-4, tick=None)
    with exact_mod._one_blas_thread():
        first = exact_mod._numeric_once(sigma, steps, epochs, **kw)
        ext = exact_mod._numeric_once(sigma, steps, epochs, start_extended=(True, True), **kw)
    assert first["extended_precision_upper"] and first["extended_precision_lower"]
    assert ext["extended_precision_upper"] and ext["extended_precision_lower"]
    assert ext["tv_lower_numerical"] <= first["tv_upper_numerical"]
    assert first["tv_lower_numerical"] <= ext["tv_upper_numerical"]
    # the same discretisation: only the round-off terms differ (both tiny here)
    assert abs(ext["tv_upper"] - first["tv_upper"]) < 1e-8


def test_first_geometric_jump_cap_grows_below_the_default_tolerance():
    """The probe's first jump is capped at 4 at tolerance 1e-4 and above (unchanged) and
    further below it, as the probe's resolution rises more slowly than the needed one."""
    wide = 1e-2
    assert ladder._factor("geometric", 0, wide, 1e-4) == 4.0
    assert ladder._factor("geometric", 0, wide, 1e-3) == 4.0
    cap = ladder._factor("geometric", 0, wide, 1e-5)
    assert cap == pytest.approx(4.0 * 10 ** (1 / 1.7 - 0.25))
    assert ladder._factor("geometric", 1, wide, 1e-5) == ladder.GEO_MAX_JUMP


def test_one_epoch_convolves_small_blocks_by_fft(monkeypatch):
    """E = 1: no direct convolutions (their round-off advantage is multiplied by E); the
    interval equals the direct one's to 1e-8 and overlaps it (both certified)."""
    from pacpriv.dpsgd._exact import lattice

    calls = []
    orig_direct, orig_epoch = lattice._combine_direct, lattice.epoch_lattice

    def counting(a, b):
        calls.append(a.m)
        return orig_direct(a, b)

    monkeypatch.setattr(lattice, "_combine_direct", counting)
    kw = dict(c=40.0, c_epoch=40.0, extra=0.0, direction="add", method="linear", tail=1e-6,
              tol=1e-4, tick=None)
    point = (0.545622, 10**4, 1)
    with exact_mod._one_blas_thread():
        fft = exact_mod._numeric_once(*point, **kw)
        assert calls == []
        monkeypatch.setattr(lattice, "epoch_lattice",
                            lambda *a, **k: orig_epoch(*a, **{**k, "direct": True}))
        direct = exact_mod._numeric_once(*point, **kw)
    assert calls  # the small blocks were convolved directly there
    for key in ("tv_lower_numerical", "tv_upper_numerical"):
        assert abs(fft[key] - direct[key]) < 1e-8
    assert fft["tv_lower_numerical"] <= direct["tv_upper_numerical"]
    assert direct["tv_lower_numerical"] <= fft["tv_upper_numerical"]


@pytest.mark.parametrize(("steps", "epochs"), [(10**4, 1), (100, 100), (1000, 1000)])
def test_near_half_search_starts_from_the_gaussian_limit(steps, epochs):
    """Target 0.51 (search tolerance 1e-5): the first σ is 3% below the Gaussian-limit root,
    between 0.95 and 1 times the calibrated σ (0.84·σ_cf is 4–9% off there); at the default
    tolerance the start stays 0.84·σ_cf."""
    from pacpriv.dpsgd import closed_form_noise_multiplier
    from pacpriv.dpsgd.calibration import _search_tolerance, _start

    target = 0.51
    cf = float(closed_form_noise_multiplier(target, steps_per_epoch=steps, epochs=epochs))
    first = _start(target, steps, epochs, cf, _search_tolerance(target, 1e-3))
    sigma = noise_multiplier_for_accuracy(target, steps_per_epoch=steps, epochs=epochs,
                                          method="exact")
    assert 0.95 * sigma <= first <= sigma
    assert _start(0.6, steps, epochs, cf, 1e-4) == 0.84 * cf
