"""Tests for pacpriv.pac.release (privatize: one noisy release)."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.pac.noise._calibration import calibrate_noise, calibrate_variance_only
from pacpriv.pac.release import privatize
from pacpriv.pac.spectrum._covariance import estimate_output_spectrum


def _one_dim_plan(mi_budget=0.5):
    """1-D Gaussian outputs with variance ≈ 16: the square-root rule gives s² = λ/(2v)."""
    rng = np.random.default_rng(0)
    outputs = rng.normal(5.0, 4.0, size=(400, 1))
    spec = estimate_output_spectrum(outputs)
    return spec, calibrate_noise(spec, mi_budget=mi_budget)


def test_release_noise_has_predicted_std():
    """40 000 releases of a 1-D plan have std sqrt(λ/(2v)) (catches variance/std mix-ups)."""
    spec, plan = _one_dim_plan(mi_budget=0.5)
    lam = float(spec.eigenvalues[0])
    predicted = np.sqrt(lam / (2 * 0.5))
    assert plan.noise_std[0] == pytest.approx(predicted)
    gen = np.random.default_rng(1)
    released = np.array([privatize([5.0], plan, rng=gen)[0] for _ in range(40_000)])
    # sample std of 40 000 normals has relative s.e. ~ 1/sqrt(2n) ≈ 0.35 %; allow 2 %
    assert released.std(ddof=1) == pytest.approx(predicted, rel=0.02)
    assert released.mean() == pytest.approx(5.0, abs=5 * predicted / np.sqrt(40_000))
    assert abs(predicted**2 - predicted) > 0.5 * predicted  # the test separates std from var


def test_coordinate_plan_std():
    """Coordinate (variance-only) noise: per-axis empirical std ≈ noise_std."""
    plan = calibrate_variance_only([1.0, 9.0, 0.0], mi_budget=0.25)
    gen = np.random.default_rng(2)
    draws = np.array([privatize(np.zeros(3), plan, rng=gen) for _ in range(20_000)])
    assert np.allclose(draws.std(axis=0, ddof=1), plan.noise_std, rtol=0.03)
    assert np.all(draws[:, 2] == 0.0)


def test_reproducible_with_seed_fresh_without():
    """Same seed gives the same release; rng=None gives fresh noise each call."""
    _, plan = _one_dim_plan()
    assert privatize([1.0], plan, rng=7).tolist() == privatize([1.0], plan, rng=7).tolist()
    assert privatize([1.0], plan)[0] != privatize([1.0], plan)[0]


def test_error_shape():
    """The value must have shape (d,)."""
    _, plan = _one_dim_plan()
    with pytest.raises(ValueError, match=r"`value` must have shape \(1,\) to match the plan"):
        privatize([1.0, 2.0], plan)


def test_error_not_finite():
    """NaN values cannot be released."""
    _, plan = _one_dim_plan()
    with pytest.raises(ValueError, match="`value` must be finite"):
        privatize([np.nan], plan)


def test_error_dtype():
    """Non-numeric values are a TypeError."""
    _, plan = _one_dim_plan()
    with pytest.raises(TypeError, match="`value` must hold real numbers"):
        privatize(["a"], plan)


def test_error_plan_type():
    """The plan must be a NoisePlan."""
    with pytest.raises(TypeError, match="`plan` must be a NoisePlan"):
        privatize([1.0], {"noise_std": 1.0})


@pytest.mark.parametrize("fill", [True, False])
def test_a_secret_mask_of_the_whole_pool_or_none_is_noted(fill):
    """run_pac(secret_mask=all True) released f(pool) + B with its bound and no word, while the
    wrapper warns (seventh new-user pass, #599); an empty subset is as certain."""
    import warnings

    from pacpriv.exceptions import PacprivWarning
    from pacpriv.pac.engine import ExecutionOptions
    from pacpriv.pac.job import run_pac

    pool = np.random.default_rng(0).normal(size=(40, 2))
    mask = np.full(40, fill)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run_pac(lambda s: s.mean(axis=0) if len(s) else np.zeros(2), pool,
                      mi_budget=0.5, n_trials=30, rng=0, secret_mask=mask,
                      execution=ExecutionOptions(progress=False))
    which = "the whole pool" if fill else "an empty subset"
    said = [str(w.message) for w in caught if issubclass(w.category, PacprivWarning)
            and "membership is certain" in str(w.message)]
    assert len(said) == 1 and f"this release is on {which}" in said[0]
    assert any("membership is certain" in n for n in res.notes)
    mixed = mask.copy()
    mixed[0] = not fill
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_pac(lambda s: s.mean(axis=0) if len(s) else np.zeros(2), pool, mi_budget=0.5,
                n_trials=30, rng=0, secret_mask=mixed, execution=ExecutionOptions(progress=False))
    assert not [w for w in caught if "membership is certain" in str(w.message)]
