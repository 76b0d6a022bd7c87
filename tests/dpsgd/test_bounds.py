"""Tests for pacpriv.dpsgd.bounds (chi-square closed form and its inverse)."""

from __future__ import annotations

import csv
import math
import warnings

import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pacpriv.dpsgd import (
    closed_form_noise_multiplier,
    log1p_chi_square,
    membership_inference_accuracy_bound,
    noise_multiplier_for_accuracy,
)


def _rows(reference_dir, name):
    with open(reference_dir / name, newline="") as fh:
        return list(csv.DictReader(fh))


def test_bound_matches_reference_csv(reference_dir):
    """Every row of ra_chi_square_bound.csv matches to 1e-12 relative (vectorised call)."""
    rows = _rows(reference_dir, "ra_chi_square_bound.csv")
    m = np.array([int(float(r["steps_per_epoch"])) for r in rows])
    e = np.array([int(float(r["epochs"])) for r in rows])
    s = np.array([float(r["noise_multiplier"]) for r in rows])
    b = membership_inference_accuracy_bound(s, steps_per_epoch=m, epochs=e)
    ref_l = np.array([float(r["log1p_chi_square"]) for r in rows])
    ref_a = np.array([float(r["accuracy_bound_clipped"]) for r in rows])
    np.testing.assert_allclose(b.log1p_chi_square, ref_l, rtol=1e-12, atol=0)
    np.testing.assert_allclose(b.accuracy, ref_a, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(b.vacuous, ref_a == 1.0)


def test_sigma_matches_reference_csv(reference_dir):
    """Every row of ra_chi_square_sigma.csv matches to 1e-12 relative, row by row (scalars)."""
    for r in _rows(reference_dir, "ra_chi_square_sigma.csv"):
        got = noise_multiplier_for_accuracy(
            float(r["target_accuracy"]),
            steps_per_epoch=int(float(r["steps_per_epoch"])),
            epochs=int(float(r["epochs"])),
        )
        assert isinstance(got, float)
        assert got == pytest.approx(float(r["noise_multiplier"]), rel=1e-12, abs=0)


def test_worked_example_m1():
    """M=1, E=1, σ=2: ½ + ¼ sqrt(e^{1/4} − 1) (MATH.md worked example)."""
    b = membership_inference_accuracy_bound(2.0, steps_per_epoch=1, epochs=1)
    assert b.accuracy == pytest.approx(0.5 + 0.25 * math.sqrt(math.expm1(0.25)), rel=1e-14)
    assert not b.vacuous


def test_mpmath_oracle_extreme_inputs():
    """Log-space evaluation agrees with 50-digit mpmath at extreme σ, M, E, no warnings."""
    mpmath.mp.dps = 50
    cases = [(0.01, 10**9, 10**7), (0.05, 3, 1), (1e4, 1, 1), (1e4, 10**9, 10**7), (0.3, 10**9, 1)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for s, m, e in cases:
            got = log1p_chi_square(s, steps_per_epoch=m, epochs=e)
            x = 1 / mpmath.mpf(s) ** 2
            ref = e * mpmath.log1p(mpmath.expm1(x) / m)
            assert got == pytest.approx(float(ref), rel=1e-12)


def test_vacuous_flag_and_clipping():
    """Small σ gives accuracy exactly 1 with vacuous=True and a finite log1p_chi_square."""
    b = membership_inference_accuracy_bound(0.01, steps_per_epoch=1, epochs=10**7)
    assert b.accuracy == 1.0 and b.vacuous
    assert math.isfinite(b.log1p_chi_square)


@settings(max_examples=60, deadline=None)
@given(
    st.floats(0.01, 1e4), st.integers(1, 10**9), st.integers(1, 10**7), st.floats(1.0001, 2.0)
)
def test_monotone_and_finite(sigma, m, e, factor):
    """Bound is finite, decreasing in σ and M, increasing in E over the whole domain."""
    f = lambda s, mm, ee: membership_inference_accuracy_bound(  # noqa: E731
        s, steps_per_epoch=mm, epochs=ee
    )
    base = f(sigma, m, e)
    assert math.isfinite(base.log1p_chi_square) and 0.5 <= base.accuracy <= 1.0
    assert f(sigma * factor, m, e).log1p_chi_square <= base.log1p_chi_square
    assert f(sigma, min(2 * m, 10**9), e).log1p_chi_square <= base.log1p_chi_square
    assert f(sigma, m, min(2 * e, 10**7)).log1p_chi_square >= base.log1p_chi_square


@settings(max_examples=60, deadline=None)
@given(st.floats(0.5001, 0.999), st.integers(1, 10**6), st.integers(1, 10**4))
def test_inverse_round_trip(target, m, e):
    """σ(target) → bound(σ) gives back the target (closed form is an exact inverse)."""
    sigma = closed_form_noise_multiplier(target, steps_per_epoch=m, epochs=e)
    acc = membership_inference_accuracy_bound(sigma, steps_per_epoch=m, epochs=e).accuracy
    assert acc == pytest.approx(target, rel=1e-9)


def test_broadcasting_shapes():
    """Arrays broadcast together; scalars give floats."""
    b = membership_inference_accuracy_bound(
        np.array([1.0, 2.0])[:, None], steps_per_epoch=np.array([10, 100, 1000]), epochs=5
    )
    assert b.accuracy.shape == (2, 3)
    s = closed_form_noise_multiplier(np.array([0.6, 0.7]), steps_per_epoch=10, epochs=1)
    assert s.shape == (2,)
    assert isinstance(closed_form_noise_multiplier(0.6, steps_per_epoch=10, epochs=1), float)


def test_to_dict_is_json():
    """to_dict is JSON-serialisable for array results."""
    import json

    b = membership_inference_accuracy_bound(np.array([1.0, 2.0]), steps_per_epoch=10, epochs=5)
    json.dumps(b.to_dict())


def test_error_sigma_nonpositive():
    """σ ≤ 0 is rejected with a message naming the argument."""
    with pytest.raises(ValueError, match="noise_multiplier"):
        membership_inference_accuracy_bound(0.0, steps_per_epoch=1, epochs=1)


def test_error_steps_not_integer():
    """Non-integer steps_per_epoch is a TypeError."""
    with pytest.raises(TypeError, match="steps_per_epoch"):
        membership_inference_accuracy_bound(1.0, steps_per_epoch=2.5, epochs=1)


def test_error_epochs_below_one():
    """epochs < 1 is rejected."""
    with pytest.raises(ValueError, match="epochs"):
        membership_inference_accuracy_bound(1.0, steps_per_epoch=1, epochs=0)


def test_error_target_out_of_range():
    """Targets outside (½, 1) are rejected."""
    for bad in (0.5, 1.0, 0.2):
        with pytest.raises(ValueError, match="target_accuracy"):
            closed_form_noise_multiplier(bad, steps_per_epoch=1, epochs=1)


def test_error_nan():
    """NaN σ is rejected."""
    with pytest.raises(ValueError, match="noise_multiplier"):
        membership_inference_accuracy_bound(float("nan"), steps_per_epoch=1, epochs=1)


def _chi_square_bound_mp(sigma, m, e):
    with mpmath.workdps(60):
        s, m, e = mpmath.mpf(sigma), mpmath.mpf(m), mpmath.mpf(e)
        log1p_chi2 = e * mpmath.log1p(mpmath.expm1(1 / s**2) / m)
        return min(mpmath.mpf(1) / 2 + mpmath.sqrt(mpmath.expm1(log1p_chi2)) / 4, 1)


@settings(max_examples=150, deadline=None)
@given(st.floats(min_value=-3.5, max_value=12.0), st.floats(0.0, 12.0), st.floats(0.0, 9.0))
@example(12.0, 9.0, 0.0)  # σ = 1e12, M = 1e9, E = 1: 0.5 + 7.9e-18 (printed 0.5 before)
def test_bound_float_is_never_below_the_exact_bound(log_sigma, log_m, log_e):
    """The returned float rounds up (V2 review: it was round-to-nearest, up to 1 ulp below)."""
    sigma, m, e = 10.0**log_sigma, int(10.0**log_m), int(10.0**log_e)
    got = membership_inference_accuracy_bound(sigma, steps_per_epoch=m, epochs=e).accuracy
    exact = _chi_square_bound_mp(sigma, m, e)
    assert mpmath.mpf(got) >= exact
    assert mpmath.mpf(got) - exact <= 1e-13 * exact + 2.3e-16  # and stays tight


@settings(max_examples=150, deadline=None)
@given(st.floats(-12.0, math.log10(0.4999)), st.floats(0.0, 12.0), st.floats(0.0, 9.0))
def test_closed_form_sigma_meets_its_target_in_floating_point(log_adv, log_m, log_e):
    """The rounded-up forward bound at the closed-form σ is at most the target."""
    a, m, e = 0.5 + 10.0**log_adv, int(10.0**log_m), int(10.0**log_e)
    sigma = noise_multiplier_for_accuracy(a, steps_per_epoch=m, epochs=e)
    assert membership_inference_accuracy_bound(sigma, steps_per_epoch=m, epochs=e).accuracy <= a
