"""Tests for pacpriv.dpsgd.calibration (closed-form and exact σ for a target accuracy)."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.dpsgd import (
    calibrate_noise_multiplier,
    closed_form_noise_multiplier,
    exact_membership_inference_accuracy,
    noise_multiplier_for_accuracy,
)


@pytest.fixture(scope="module")
def cal():
    """Exact calibration for target 0.6, M=100, E=10 (shared by several tests)."""
    return calibrate_noise_multiplier(0.6, steps_per_epoch=100, epochs=10, rtol=1e-2)


def test_exact_sigma_is_certified(cal):
    """The certified upper accuracy at the returned σ is ≤ target (one-sided)."""
    assert cal.accuracy.upper <= 0.6
    again = exact_membership_inference_accuracy(
        cal.noise_multiplier, steps_per_epoch=100, epochs=10, tolerance=1e-5
    )
    assert again.lower <= 0.6


def test_exact_sigma_is_near_smallest(cal):
    """Root bracket: lower bound at lower_noise_multiplier exceeds the target, σ within rtol."""
    low = exact_membership_inference_accuracy(
        cal.lower_noise_multiplier, steps_per_epoch=100, epochs=10
    )
    assert low.lower > 0.6
    assert cal.noise_multiplier / cal.lower_noise_multiplier - 1 < 0.05


def test_noise_saving_in_seed_range(cal):
    """Saving vs the closed form is in the seed's reported 13.0%–20.2% range."""
    assert cal.closed_form_noise_multiplier == pytest.approx(
        closed_form_noise_multiplier(0.6, steps_per_epoch=100, epochs=10)
    )
    assert 0.13 <= cal.noise_saving <= 0.202


def test_gaussian_limit_ratio():
    """M=1, large σ: σ_exact/σ_closed-form → sqrt(2/π) (20.2% saving, MATH.md §3)."""
    r = calibrate_noise_multiplier(0.52, steps_per_epoch=1, epochs=1, rtol=1e-3)
    assert r.noise_multiplier / r.closed_form_noise_multiplier == pytest.approx(
        np.sqrt(2 / np.pi), rel=2e-2
    )


def test_method_exact_returns_float():
    """noise_multiplier_for_accuracy(method="exact") returns a float below the closed form."""
    s = noise_multiplier_for_accuracy(0.56, steps_per_epoch=50, epochs=2, method="exact", rtol=1e-2)
    assert isinstance(s, float)
    assert s < closed_form_noise_multiplier(0.56, steps_per_epoch=50, epochs=2)


def test_to_dict_json(cal):
    """NoiseCalibration.to_dict is JSON-serialisable."""
    import json

    json.dumps(cal.to_dict())


def test_error_method():
    """Unknown method is rejected."""
    with pytest.raises(ValueError, match="method"):
        noise_multiplier_for_accuracy(0.6, steps_per_epoch=10, epochs=1, method="magic")


def test_error_rtol():
    """rtol outside [1e-6, 0.1] is rejected."""
    with pytest.raises(ValueError, match="rtol"):
        calibrate_noise_multiplier(0.6, steps_per_epoch=10, epochs=1, rtol=0.5)


def test_error_target():
    """Target outside (½, 1) is rejected by both methods."""
    with pytest.raises(ValueError, match="target_accuracy"):
        calibrate_noise_multiplier(0.4, steps_per_epoch=10, epochs=1)
    with pytest.raises(ValueError, match="target_accuracy"):
        noise_multiplier_for_accuracy(1.0, steps_per_epoch=10, epochs=1, method="exact")


@pytest.mark.parametrize("target", [0.5000001, 0.99, 0.9999])
def test_exact_calibration_at_m2_extremes_returns_a_certified_sigma(target):
    """V2 review: M = 2, E = 1 raised CalibrationError ("no bracket") at these targets."""
    from pacpriv.dpsgd.calibration import calibrate_noise_multiplier

    res = calibrate_noise_multiplier(target, steps_per_epoch=2, epochs=1)
    assert res.accuracy.upper <= target
    assert res.noise_multiplier <= res.closed_form_noise_multiplier


@pytest.mark.parametrize(("target", "steps", "epochs"), [(0.9, 100, 1), (0.75, 100, 10),
                                                         (0.51, 100, 100)])
def test_search_is_certified_within_a_tenth_of_a_percent_in_few_evaluations(
        target, steps, epochs):
    """rtol 1e-3: the returned σ's upper end is at most the target, the exact root lies above
    σ/1.001 (certified lower end there exceeds the target), and the secant search needs at
    most 10 exact evaluations (the Gaussian-limit model alone used 71 at (0.9, 100, 1))."""
    r = calibrate_noise_multiplier(target, steps_per_epoch=steps, epochs=epochs, rtol=1e-3)
    assert r.accuracy.upper <= target
    check = exact_membership_inference_accuracy(
        r.noise_multiplier / 1.001, steps_per_epoch=steps, epochs=epochs,
        tolerance=max(1e-7, (target - 0.5) * 2e-4))
    assert check.lower > target
    assert r.n_evaluations <= 10
    low = exact_membership_inference_accuracy(r.lower_noise_multiplier, steps_per_epoch=steps,
                                              epochs=epochs, tolerance=r.accuracy.tolerance)
    assert low.lower > target and r.noise_multiplier / r.lower_noise_multiplier - 1 < 2e-3
