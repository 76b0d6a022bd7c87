"""Hardened release noise: an exact discrete Gaussian on a declared grid, from the OS CSPRNG
(Canonne, Kamath & Steinke, NeurIPS 2020); seeded releases are labelled."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from pacpriv.pac._sampling import (
    FROM_OS,
    GRID_STEPS,
    SEEDED,
    NoiseSource,
    discrete_gaussian,
    grid_overhead,
    grid_release,
)
from pacpriv.pac.noise._calibration import calibrate_variance_only
from pacpriv.pac.release import privatize, release


def test_unseeded_release_lies_on_the_declared_grid(fixed_os_entropy):
    plan = calibrate_variance_only([1.0, 4.0, 0.25], mi_budget=0.5)
    value = np.array([0.123456789, -3.3, 1e-9])
    for _ in range(20):
        out = release(value, plan)
        assert out.noise == FROM_OS and out.grid is not None
        np.testing.assert_array_equal(out.grid, plan.noise_std / GRID_STEPS)
        steps = out.value / out.grid
        assert np.all(np.abs(steps - np.rint(steps)) < 1e-3)  # integers up to float division
        np.testing.assert_array_equal(np.rint(steps) * out.grid, out.value)  # on the grid
        assert 0 < out.mi_overhead == grid_overhead(3) < 1e-11
    # the noise is there: spread of the order of the plan's standard deviations (400 draws
    # from OS bytes would miss 20% once in ~2e7 runs: the bytes are fixed for this check)
    fixed_os_entropy(0)
    draws = np.array([privatize(value, plan) for _ in range(400)])
    assert np.all(np.abs(draws.std(axis=0) / plan.noise_std - 1) < 0.2)


def test_seeded_release_is_labelled_and_reproducible():
    plan = calibrate_variance_only([1.0, 4.0], mi_budget=0.5)
    a, b = release([0.0, 1.0], plan, rng=7), release([0.0, 1.0], plan, rng=7)
    assert a.noise == b.noise == SEEDED == "seeded, not for release"
    assert a.grid is None and a.mi_overhead == 0.0
    np.testing.assert_array_equal(a.value, b.value)


def test_anisotropic_release_goes_through_the_grid_in_the_noise_basis():
    from pacpriv.pac.noise import calibrate_noise
    from pacpriv.pac.spectrum import estimate_output_spectrum

    rng = np.random.default_rng(0)
    outputs = rng.normal(size=(200, 3)) @ np.array([[2.0, 1.0, 0.0], [0.0, 1.0, 0.5],
                                                     [0.0, 0.0, 0.1]])
    plan = calibrate_noise(estimate_output_spectrum(outputs), mi_budget=0.25,
                           rule="anisotropic")
    out = release(outputs[0], plan)
    assert out.noise == FROM_OS and out.value.shape == (3,) and np.all(np.isfinite(out.value))
    assert out.grid.shape == (plan.basis.shape[1],)


@pytest.mark.parametrize("sigma2", [1, 2, 5])
def test_discrete_gaussian_matches_its_pmf(sigma2):
    """Exact sampler: the empirical pmf of 20,000 seeded draws against exp(-z²/2σ²)/N."""
    src = NoiseSource(12345 + sigma2)
    counts = Counter(discrete_gaussian(sigma2, src) for _ in range(20_000))
    support = range(-12 * sigma2, 12 * sigma2 + 1)
    norm = math.fsum(math.exp(-z * z / (2 * sigma2)) for z in support)
    for z in range(-2, 3):
        p = math.exp(-z * z / (2 * sigma2)) / norm
        se = math.sqrt(p * (1 - p) / 20_000)
        assert abs(counts[z] / 20_000 - p) < 5 * se, (z, counts[z])
    assert sum(counts.values()) == 20_000 and sum(counts[z] for z in support) == 20_000


def test_grid_release_coordinates_and_zero_noise_directions():
    src = NoiseSource(3)
    released, h, ints = grid_release(np.array([0.5, 2.0]), np.array([1.0, 0.0]), src)
    assert released[1] == 2.0 and h[1] == 0.0 and ints[1] == 0  # no noise: released as is
    assert released[0] == h[0] * float(ints[0]) and h[0] == 1.0 / GRID_STEPS
    with pytest.raises(ValueError, match="grid"):
        grid_release(np.array([np.inf]), np.array([1.0]), src)


def test_grid_overhead_is_small_and_grows_with_the_dimension():
    values = [grid_overhead(k) for k in (0, 1, 10, 10_000)]
    assert values[0] == 0.0 and values[1] < values[2] < values[3] < 1e-6
    assert values[3] == pytest.approx(10_000**1.5 / GRID_STEPS, rel=1e-3)


def test_noise_source_rejects_bad_seeds():
    with pytest.raises(TypeError, match="rng"):
        NoiseSource(-1)
    assert NoiseSource(np.random.SeedSequence(1)).seeded
    assert not NoiseSource(None).seeded


def test_residual_noise_outside_the_basis_is_released_on_a_grid_too(fixed_os_entropy):
    """d > n_trials: the plan puts isotropic residual noise on the complement of its basis;
    the hardened release has the same noise power as the plan's (float) noise."""
    from pacpriv.pac.noise import calibrate_noise
    from pacpriv.pac.spectrum import estimate_output_spectrum

    x = np.random.default_rng(0).normal(size=(30, 200))
    plan = calibrate_noise(estimate_output_spectrum(x), mi_budget=0.5, rule="anisotropic")
    assert plan.residual_std > 0 and plan.n_complement > 0
    fixed_os_entropy(1)  # a 15% ratio of 10 draws: fixed bytes, one outcome (not by chance)
    hardened = np.array([release(x[0], plan).value - x[0] for _ in range(10)])
    seeded = np.array([plan.sample(i) for i in range(10)])
    assert abs(np.mean(hardened**2) / np.mean(seeded**2) - 1) < 0.15
    assert release(x[0], plan).mi_overhead == grid_overhead(plan.basis.shape[1] + 200)
