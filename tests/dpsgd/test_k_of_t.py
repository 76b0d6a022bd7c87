"""Tests for k-out-of-t random allocation: chi-square bound, inverse, certified interval."""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest
from scipy import special

from pacpriv.dpsgd import (
    DPSGDSpec,
    calibrate_noise_multiplier,
    closed_form_noise_multiplier,
    exact_membership_inference_accuracy,
    log1p_chi_square,
    membership_inference_accuracy_bound,
    noise_multiplier_for_accuracy,
)
from pacpriv.dpsgd.k_of_t import (
    CHAIN_MAX_K,
    k_of_t_log1p_chi_square,
    monte_carlo_total_variation,
)


def _mp_log1p_chi2(sigma, t, k):
    """ln Σ_h P(H = h) e^{h/σ²} at 50 digits (H ~ Hypergeometric(t, k, k))."""
    with mpmath.workdps(50):
        x = 1 / mpmath.mpf(sigma) ** 2
        total = mpmath.fsum(
            mpmath.binomial(k, h) * mpmath.binomial(t - k, k - h) / mpmath.binomial(t, k)
            * mpmath.exp(h * x) for h in range(max(0, 2 * k - t), k + 1))
        return float(mpmath.log(total))


@pytest.mark.parametrize(("sigma", "t", "k"), [
    (0.3, 10, 2), (1.0, 10, 2), (1.0, 100, 10), (2.0, 1000, 50), (5.0, 10**6, 1000),
    (0.5, 7, 5), (0.05, 20, 3), (50.0, 30, 15),
])
def test_chi_square_matches_mpmath(sigma, t, k):
    """The hypergeometric sum agrees with 50-digit mpmath to 1e-12 and is never below it."""
    got = k_of_t_log1p_chi_square(sigma, steps_per_epoch=t, k=k)
    ref = _mp_log1p_chi2(sigma, t, k)
    assert got >= ref
    assert got == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize(("t", "k"), [(4, 2), (5, 3), (6, 2), (5, 5)])
def test_chi_square_matches_enumeration_of_subset_pairs(t, k):
    """E_P[(dQ/dP)²] = mean over all pairs (A, A') of e^{|A ∩ A'|/σ²} (exact enumeration)."""
    sigma = 0.8
    subsets = [set(a) for a in itertools.combinations(range(t), k)]
    mean = np.mean([math.exp(len(a & b) / sigma**2) for a in subsets for b in subsets])
    got = k_of_t_log1p_chi_square(sigma, steps_per_epoch=t, k=k)
    assert got == pytest.approx(math.log(mean), rel=1e-12)


def test_k1_reduces_to_the_closed_form_and_stays_bit_for_bit():
    """k = 1 via the hypergeometric path equals (1 + (e^{1/σ²} − 1)/t); the public k = 1
    path is the old code (same value as without the argument)."""
    for sigma, t in [(0.7, 10), (2.0, 10**4)]:
        ref = math.log1p(math.expm1(1 / sigma**2) / t)
        assert k_of_t_log1p_chi_square(sigma, steps_per_epoch=t, k=1) == pytest.approx(
            ref, rel=1e-13)
        assert log1p_chi_square(sigma, steps_per_epoch=t, epochs=3, k=1) == log1p_chi_square(
            sigma, steps_per_epoch=t, epochs=3)
        a = membership_inference_accuracy_bound(sigma, steps_per_epoch=t, epochs=3)
        b = membership_inference_accuracy_bound(sigma, steps_per_epoch=t, epochs=3, k=1)
        assert a == b


def test_k_equal_t_is_the_gaussian_shift():
    """k = t: 1 + χ² = e^{t/σ²} per epoch, and the certified interval contains Φ(√(tE)/(2σ))."""
    sigma, t, e = 2.0, 4, 3
    assert k_of_t_log1p_chi_square(sigma, steps_per_epoch=t, k=t) == pytest.approx(t / sigma**2)
    r = exact_membership_inference_accuracy(sigma, steps_per_epoch=t, epochs=e, k=t,
                                            tolerance=0.02)
    exact = special.ndtr(math.sqrt(t * e) / (2 * sigma))
    assert r.lower <= exact <= r.upper < exact + 1e-4


def test_bound_is_monotone_and_vectorised():
    s = np.linspace(0.5, 5.0, 12)
    b = membership_inference_accuracy_bound(s, steps_per_epoch=50, epochs=4, k=5)
    assert np.all(np.diff(b.accuracy) <= 0) and b.k == 5
    one = membership_inference_accuracy_bound(2.0, steps_per_epoch=50, epochs=4, k=5)
    assert isinstance(one.accuracy, float)
    assert "steps per record per epoch k" in str(one)


@pytest.mark.parametrize(("target", "t", "k", "e"), [(0.6, 100, 10, 10), (0.9, 20, 3, 2),
                                                     (0.51, 1000, 4, 100)])
def test_inverse_is_the_smallest_certified_sigma(target, t, k, e):
    s = closed_form_noise_multiplier(target, steps_per_epoch=t, epochs=e, k=k)
    assert membership_inference_accuracy_bound(s, steps_per_epoch=t, epochs=e,
                                               k=k).accuracy <= target
    below = s * (1 - 1e-9)
    assert membership_inference_accuracy_bound(below, steps_per_epoch=t, epochs=e,
                                               k=k).accuracy > target
    assert noise_multiplier_for_accuracy(target, steps_per_epoch=t, epochs=e, k=k) == s


@pytest.mark.parametrize(("sigma", "t", "k", "e"), [(1.0, 10, 2, 1), (1.0, 10, 2, 3),
                                                    (1.5, 12, 3, 2)])
def test_interval_contains_an_independent_monte_carlo(sigma, t, k, e):
    """Three independent checks: a Monte-Carlo estimate under P (E_P[(T − 1)_+], 300 000
    draws, its own seed) lies inside the certified interval (4 SE), and the chi-square bound
    lies above it."""
    r = exact_membership_inference_accuracy(sigma, steps_per_epoch=t, epochs=e, k=k,
                                            tolerance=0.05)
    mc = monte_carlo_total_variation(sigma, steps_per_epoch=t, epochs=e, k=k,
                                     n_samples=300_000, member=False, rng=12345)
    acc, se = 0.5 + 0.5 * mc["mean"], 0.5 * mc["standard_error"]
    assert r.lower - 4 * se <= acc <= r.upper + 4 * se
    chi2 = membership_inference_accuracy_bound(sigma, steps_per_epoch=t, epochs=e, k=k)
    assert chi2.accuracy >= acc - 4 * se
    # k ≤ CHAIN_MAX_K: deterministic lower end of the k-of-t chain; else the larger of the
    # pruned lower chain and Monte Carlo, with its confidence
    source = r.details["lower_source"]
    assert source == "k-of-t chain" or (k > CHAIN_MAX_K and source == "Monte Carlo")
    assert r.lower_confidence == (0.999 if source == "Monte Carlo" else 1.0) and r.k == k
    assert r.details["reduced_steps_per_epoch"] == t // k
    # the stratified upper end is close when k divides t (here within 0.012)
    assert r.upper - r.estimate < 0.012


def test_monte_carlo_lower_end_is_a_confidence_bound():
    """The empirical-Bernstein lower end is below the mean by about 3.7 SE at n = 20 000."""
    mc = monte_carlo_total_variation(1.0, steps_per_epoch=6, epochs=1, k=2, n_samples=20_000,
                                     rng=1)
    assert mc["lower"] < mc["mean"] - 2 * mc["standard_error"]
    assert mc["lower"] > mc["mean"] - 12 * mc["standard_error"]


def test_calibration_k_of_t_is_certified_and_uses_the_reduction():
    """σ is the smaller certified σ of the chi-square inverse and one-of-⌊t/k⌋ over k·E
    epochs; its interval's upper end is at most the target."""
    res = calibrate_noise_multiplier(0.6, steps_per_epoch=20, epochs=2, k=4)
    red = calibrate_noise_multiplier(0.6, steps_per_epoch=5, epochs=8)
    chi = closed_form_noise_multiplier(0.6, steps_per_epoch=20, epochs=2, k=4)
    assert res.noise_multiplier == min(red.noise_multiplier, chi)
    assert res.accuracy.upper <= 0.6 and res.k == 4
    spec = DPSGDSpec(noise_multiplier=res.noise_multiplier, steps_per_epoch=20, epochs=2, k=4)
    assert spec.membership_inference_accuracy_bound().accuracy <= 0.6 + 0.1


def test_k_larger_than_t_is_refused():
    with pytest.raises(ValueError, match="k"):
        membership_inference_accuracy_bound(1.0, steps_per_epoch=3, epochs=1, k=4)
    with pytest.raises(ValueError, match="k"):
        DPSGDSpec(noise_multiplier=1.0, steps_per_epoch=3, epochs=1, k=4)
    with pytest.raises(ValueError, match="k"):
        calibrate_noise_multiplier(0.6, steps_per_epoch=3, epochs=1, k=4)
