"""Tests for pacpriv.dpsgd.tradeoff_curve (certified TPR upper bounds and ε from the PLD)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, special

from pacpriv.dpsgd import (
    PoissonSampling,
    RandomAllocation,
    exact_membership_inference_accuracy,
    tradeoff_curve,
)


def _gaussian_tpr(fpr, mu):
    """Φ(Φ⁻¹(α) + μ): the trade-off curve of N(0,1) vs N(μ,1) (Dong, Roth & Su 2022, Eq. 2.5)."""
    return special.ndtr(special.ndtri(fpr) + mu)


def _gaussian_delta(eps, mu):
    """δ(ε) of μ-GDP: Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su 2022, Cor. 2.13)."""
    return special.ndtr(-eps / mu + mu / 2) - math.exp(eps) * special.ndtr(-eps / mu - mu / 2)


@pytest.mark.parametrize(("sigma", "epochs"), [(0.5, 1), (1.0, 1), (1.0, 10), (3.0, 100)])
def test_single_step_is_the_gaussian_curve(sigma, epochs):
    """M = 1: the certified curve lies above Φ(Φ⁻¹(α) + √E/σ) everywhere and within 1e-4,
    and within 1% relative at α = 1e-6."""
    c = tradeoff_curve(noise_multiplier=sigma, steps_per_epoch=1, epochs=epochs)
    a = c.fpr[(c.fpr > 0) & (c.fpr < 1)]
    exact = _gaussian_tpr(a, math.sqrt(epochs) / sigma)
    got = c.tpr_at(a)
    assert np.all(got >= exact)
    assert np.max(got - exact) < 1e-4
    assert got[0] / exact[0] < 1.01
    assert c.fpr[0] == 0.0 and c.fpr.min() == 0.0 and a.min() == pytest.approx(1e-6)
    assert c.certified
    # accuracy = ½ + ½δ(0) above Φ(μ/2) and close
    acc = special.ndtr(math.sqrt(epochs) / (2 * sigma))
    assert acc <= c.accuracy < acc + 1e-4


def test_k_equal_t_is_a_gaussian_shift():
    """k = t: the record is in every step, so the pair is N(0, I) vs N(1, I) over t·E steps."""
    c = tradeoff_curve(noise_multiplier=2.0, steps_per_epoch=5, epochs=3, k=5,
                       fpr=[1e-5, 1e-3, 0.1, 0.5])
    exact = _gaussian_tpr(c.fpr, math.sqrt(15) / 2.0)
    assert np.all(c.tpr >= exact) and np.max(c.tpr - exact) < 1e-4


@pytest.mark.parametrize(("sigma", "steps", "epochs"), [(1.0, 100, 10), (2.0, 1000, 100)])
def test_accuracy_matches_the_exact_interval(sigma, steps, epochs):
    """½ + ½δ(0) of the curve's PLD is a certified upper bound: inside [lower, upper + 1e-4]."""
    c = tradeoff_curve(noise_multiplier=sigma, steps_per_epoch=steps, epochs=epochs)
    r = exact_membership_inference_accuracy(sigma, steps_per_epoch=steps, epochs=epochs)
    assert r.lower <= c.accuracy <= r.upper + 1e-4
    # max_α (β(α) − α) = δ(0): the curve's largest advantage equals the accuracy bound
    assert np.max(c.tpr - c.fpr) <= 2 * c.accuracy - 1 + 1e-12


def _ra_likelihood_ratios(sigma, steps, epochs, n, rng, member):
    """ln T of random allocation (one record, k = 1) under Q (member) or P, by simulation."""
    total = np.zeros(n)
    for _ in range(epochs):
        z = rng.standard_normal((n, steps))
        if member:
            z[np.arange(n), rng.integers(0, steps, n)] += 1.0 / sigma
        lw = z / sigma - 0.5 / sigma**2
        total += special.logsumexp(lw, axis=1) - math.log(steps)
    return total


def test_monte_carlo_roc_lies_below_the_curve():
    """The likelihood-ratio test's empirical ROC (200 000 draws per class, 4 SE) stays below."""
    rng = np.random.default_rng(20260517)
    sigma, steps, epochs, n = 0.8, 10, 2, 200_000
    lq = _ra_likelihood_ratios(sigma, steps, epochs, n, rng, member=True)
    lp = _ra_likelihood_ratios(sigma, steps, epochs, n, rng, member=False)
    c = tradeoff_curve(noise_multiplier=sigma, steps_per_epoch=steps, epochs=epochs)
    for thr in np.quantile(lp, [0.5, 0.9, 0.99, 0.999]):
        fpr, tpr = np.mean(lp > thr), np.mean(lq > thr)
        se = math.sqrt(tpr * (1 - tpr) / n) + math.sqrt(fpr * (1 - fpr) / n)
        assert tpr <= c.tpr_at(fpr) + 4 * se
        assert tpr >= c.tpr_at(fpr) - 0.02  # and the curve is not loose there


def test_reverse_direction_is_bounded_by_monte_carlo():
    """δ'(ε) = E_P[(1 − e^ε T)_+] (record out is the "alternative"): MC estimate with 4 SE
    below the certified reverse bound; ε at δ covers both directions."""
    rng = np.random.default_rng(7)
    sigma, steps, epochs, n = 0.8, 10, 2, 400_000
    lp = _ra_likelihood_ratios(sigma, steps, epochs, n, rng, member=False)
    c = tradeoff_curve(noise_multiplier=sigma, steps_per_epoch=steps, epochs=epochs)
    for eps in (0.0, 0.5, 1.0):
        g = np.maximum(-np.expm1(eps + lp), 0.0)
        mc, se = g.mean(), g.std() / math.sqrt(n)
        bound = float(c.loss.delta_reverse(np.array([eps]))[0])
        assert mc - 4 * se <= bound <= mc + 0.01
    eps = c.get_epsilon(1e-3)
    assert float(c.loss.delta(np.array([eps]))[0]) <= 1e-3
    assert float(c.loss.delta_reverse(np.array([eps]))[0]) <= 1e-3


@pytest.mark.parametrize(("sigma", "epochs", "delta"), [(1.0, 1, 1e-5), (0.5, 1, 1e-3),
                                                        (1.0, 10, 1e-5)])
def test_epsilon_of_the_gaussian_case(sigma, epochs, delta):
    """ε(δ) at M = 1 is at least the exact Gaussian ε (brentq on δ(ε) of μ-GDP), within 2e-3."""
    mu = math.sqrt(epochs) / sigma
    exact = optimize.brentq(lambda e: _gaussian_delta(e, mu) - delta, 0.0, 100.0, xtol=1e-12)
    got = tradeoff_curve(noise_multiplier=sigma, steps_per_epoch=1, epochs=epochs).get_epsilon(
        delta)
    assert exact <= got <= exact + 2e-3


def test_stratified_reduction_for_k_of_t():
    """k of t is accounted as k·E epochs of one-of-⌊t/k⌋: the curve equals that one."""
    a = tradeoff_curve(noise_multiplier=1.5, steps_per_epoch=21, epochs=3, k=4, fpr=[1e-3, 0.1])
    b = tradeoff_curve(noise_multiplier=1.5, steps_per_epoch=5, epochs=12, fpr=[1e-3, 0.1])
    np.testing.assert_array_equal(a.tpr, b.tpr)
    assert a.k == 4 and a.sampling == {"scheme": "random_allocation", "k": 4}
    same = tradeoff_curve(noise_multiplier=1.5, steps_per_epoch=21, epochs=3,
                          sampling=RandomAllocation(k=4), fpr=[1e-3, 0.1])
    np.testing.assert_array_equal(a.tpr, same.tpr)


def test_poisson_curve_full_rate_is_gaussian():
    """Poisson at rate 1 is the Gaussian mechanism over t·E steps (dp-accounting's PLD)."""
    c = tradeoff_curve(noise_multiplier=2.0, steps_per_epoch=4, epochs=1, k=4,
                       sampling="poisson", fpr=[1e-4, 0.01, 0.3])
    exact = _gaussian_tpr(c.fpr, 2.0 / 2.0)
    assert not c.certified and c.sampling["sampling_rate"] == 1.0
    assert np.all(c.tpr >= exact) and np.max(c.tpr - exact) < 5e-3


def test_fdp_export_and_dict():
    c = tradeoff_curve(noise_multiplier=2.0, steps_per_epoch=10, epochs=5, fpr=[0.0, 0.01, 1.0])
    f = c.to_fdp()
    assert f["alpha"] == [0.0, 0.01, 1.0]
    assert all(0.0 <= b <= 1.0 - t + 1e-15 for b, t in zip(f["beta"], f["tpr"], strict=True))
    assert f["tpr"][-1] == 1.0 and f["beta"][-1] == 0.0
    d = c.to_dict()
    assert d["certified"] is True and len(d["tpr"]) == 3
    assert "TPR at FPR 1e-06" in str(c)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"fpr": [0.1, 1.5]}, "fpr"),
    ({"fpr": [[0.1]]}, "1-D"),
    ({"k": 11}, "k"),
    ({"sampling": "shuffle"}, "sampling"),
    ({"tolerance": 0.5}, "tolerance"),
    ({"noise_multiplier": 0.0}, "noise_multiplier"),
])
def test_bad_arguments_fail_before_work(kwargs, match):
    args = {"noise_multiplier": 1.0, "steps_per_epoch": 10, "epochs": 1, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        tradeoff_curve(**args)


def test_k_given_twice_is_refused():
    with pytest.raises(TypeError, match="not both"):
        tradeoff_curve(noise_multiplier=1.0, steps_per_epoch=10, epochs=1, k=2,
                       sampling=RandomAllocation(k=3))
    with pytest.raises(TypeError, match="sampling_rate"):
        tradeoff_curve(noise_multiplier=1.0, steps_per_epoch=10, epochs=1, k=2,
                       sampling=PoissonSampling(0.1))
