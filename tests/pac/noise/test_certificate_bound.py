"""The certificate's upper bound and split (issue 26) against independent computations.

Exact enumeration of a tiny linear sum, a naive re-implementation of the capital process,
known-covariance Monte Carlo with a binomial test of coverage, and hypothesis properties.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacpriv.pac.noise import certify_noise, predicted_inflation
from pacpriv.pac.noise._concentration import (
    MAX_BET,
    betting_upper,
    predictable_betting_upper,
)
from pacpriv.pac.noise._shape import default_shape_trials, fit_shape


def _naive_upper(z, b, lam_star, gamma, theta=1.0, grid=4000):
    """Slow version: on a grid of t, reject when the running capital crosses 1/γ or the final
    one θ/γ; the sup of the non-rejected grid points and the next grid point."""
    ts = np.linspace(0.0, float(np.min(b)), grid)
    last = 0.0
    for t in ts:
        cap, top = 1.0, 1.0
        for zi, bi, li in zip(z, b, lam_star, strict=True):
            lam = min(li, MAX_BET / (bi - t)) if bi > t else li
            cap *= 1.0 + lam * (t - zi)
            top = max(top, cap)
        if not (top >= 1.0 / gamma or cap >= theta / gamma):
            last = t
    step = ts[1] - ts[0]
    return last, last + step


# --- the capital-process bound ------------------------------------------------------------


def test_equals_the_constant_bet_when_the_capital_peaks_at_the_end():
    """A heavy prior fixes λ* (a constant bet below the cap): on a descending sequence the
    running capital is largest at the end, so the bound is betting_upper's with that bet;
    in any other order Ville's running maximum can only lower it."""
    rng = np.random.default_rng(0)
    z = np.sort(rng.uniform(0, 1, 150) ** 2)[::-1]
    var = 0.3
    lam = math.sqrt(2 * math.log(20) / (z.size * var))
    kw = dict(confidence=0.95, prior_mean=0.3, prior_variance=var, prior_weight=1e15)
    u = predictable_betting_upper(z, np.ones_like(z), **kw)
    assert u == pytest.approx(betting_upper(z, bound=1.0, confidence=0.95, bet=lam), rel=1e-9)
    shuffled = rng.permutation(z)
    assert predictable_betting_upper(shuffled, np.ones_like(z), **kw) <= u * (1 + 1e-12)


@pytest.mark.parametrize("theta", [1.0, 0.3])
def test_matches_a_naive_grid_implementation(theta):
    """Running-mean bets and per-summand ranges: the bound lies within one grid step of a
    direct Python loop over the capital (with the randomized threshold θ/γ too)."""
    rng = np.random.default_rng(1)
    n = 40
    z = rng.chisquare(2, n) / 2
    b = np.full(n, 6.0) + rng.uniform(0, 1, n)
    z = np.minimum(z, b)
    u = predictable_betting_upper(z, b, confidence=0.9, prior_mean=1.0, prior_variance=1.0,
                                  prior_weight=4.0, threshold=theta)
    # the same predictable bets, computed here by hand
    mean, var, lam = 1.0 * 4.0, 1.0 * 4.0, []
    for i in range(n):
        mu_i, var_i = mean / (4.0 + i), var / (4.0 + i)
        lam.append(math.sqrt(2 * math.log(10) / (n * var_i)))
        mean += z[i]
        var += (z[i] - mu_i) ** 2
    lo, hi = _naive_upper(z, b, lam, 0.1, theta)
    assert max(lo, float(np.mean(z))) - 1e-9 <= u <= hi + 1e-9


def test_covers_a_common_lower_bound_of_drifting_conditional_means():
    """Bernoulli summands whose success probability rises after each success (conditional
    mean >= p, not identically distributed): P(p > U) <= γ; 400 repetitions."""
    rng = np.random.default_rng(2)
    p, gamma, reps, n = 0.05, 0.1, 400, 80
    miss = 0
    for _ in range(reps):
        z, prob = np.empty(n), p
        for i in range(n):
            z[i] = float(rng.random() < prob)
            prob = min(0.5, prob + 0.05 * z[i])
        u = predictable_betting_upper(z, np.ones(n), confidence=1 - gamma, prior_mean=0.5,
                                      prior_variance=0.25)
        miss += p > u
    assert miss <= 60  # binomial(400, 0.1): mean 40, P(X > 60) < 1e-3


def test_randomized_threshold_is_never_looser_and_still_covers():
    """θ/γ <= 1/γ: the randomized bound never exceeds the deterministic one; coverage of a
    skewed Bernoulli(0.05) mean still holds (400 repetitions)."""
    rng = np.random.default_rng(3)
    gamma, reps, miss = 0.1, 400, 0
    for _ in range(reps):
        z = (rng.random(60) < 0.05).astype(float)
        kw = dict(confidence=1 - gamma, prior_mean=0.5, prior_variance=0.25)
        det = predictable_betting_upper(z, np.ones(60), **kw)
        ran = predictable_betting_upper(z, np.ones(60), threshold=float(rng.random()), **kw)
        assert ran <= det * (1 + 1e-12)
        miss += 0.05 > ran
    assert miss <= 60  # binomial(400, 0.1): P(X > 60) < 1e-3


@settings(max_examples=60, deadline=None)
@given(
    z=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=40),
    width=st.floats(1.0, 3.0),
    prior=st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.5, 30.0)),
    conf=st.tuples(st.floats(0.5, 0.99), st.floats(0.0, 0.009)),
)
def test_bound_properties(z, width, prior, conf):
    """U >= the sample mean, U <= the known limit, and U grows with the confidence (the bets
    are tuned to γ, so up to a relative 1e-3: each γ's bet minimises its own width)."""
    arr = np.asarray(z)
    b = np.full(arr.size, width)
    kw = dict(prior_mean=prior[0], prior_variance=prior[1], prior_weight=prior[2],
              mean_limit=1.0)
    lo = predictable_betting_upper(arr, b, confidence=conf[0], **kw)
    hi = predictable_betting_upper(arr, b, confidence=conf[0] + conf[1], **kw)
    assert float(np.mean(arr)) - 1e-12 <= lo <= 1.0
    assert lo <= hi * (1 + 1e-3) + 1e-12


def test_bound_input_errors():
    kw = dict(confidence=0.9, prior_mean=0.5, prior_variance=0.1)
    with pytest.raises(ValueError, match="ranges"):
        predictable_betting_upper([0.5, 0.5], [1.0], **kw)
    with pytest.raises(ValueError, match=r"\[0, ranges\]"):
        predictable_betting_upper([0.5, 2.0], [1.0, 1.0], **kw)
    with pytest.raises(ValueError, match="threshold"):
        predictable_betting_upper([0.5], [1.0], threshold=0.0, **kw)
    with pytest.raises(ValueError, match="mean_limit"):
        predictable_betting_upper([0.5], [1.0], mean_limit=2.0, **kw)


# --- the certified plan against exact enumeration -----------------------------------------


def _tiny_pool_law():
    """All 2^10 Poisson-½ subsets of a 10-record pool in d = 2: outputs, equal weights."""
    rng = np.random.default_rng(5)
    pool = rng.standard_normal((10, 2)) * np.array([1.0, 0.3])
    pool[0] *= 4.0  # one outlying record: a skewed, non-Gaussian sum
    masks = np.array(list(itertools.product([0.0, 1.0], repeat=10)))
    return masks @ pool


def _clipped_cov(plan, law: np.ndarray) -> np.ndarray:
    """Exact covariance of the released (clipped) output over the enumerated law (the plan's
    clip, vectorised; checked against NoisePlan.clip on a few rows)."""
    w = np.asarray(plan.basis)
    y = law - plan.clip_center
    s = np.ones(plan.dim) if plan.coordinate_scale is None else plan.coordinate_scale
    coef = (y / s) @ w  # Σ_B = S Σ_y S (the shape's per-coordinate rescaling)
    n2 = np.sum(coef**2 / plan.noise_variance, axis=1)
    if w.shape[1] < plan.dim:
        n2 += (np.sum((y / s) ** 2, axis=1) - np.sum(coef**2, axis=1)) / plan.residual_variance
    scale = np.minimum(1.0, plan.clip_radius / np.sqrt(np.maximum(n2, 1e-300)))
    g = plan.clip_center + y * scale[:, None]
    for i in (0, 1, law.shape[0] - 1):
        np.testing.assert_allclose(g[i], plan.clip(law[i])[0], rtol=1e-10, atol=1e-12)
    return np.cov(g, rowvar=False, bias=True)


def _mi(plan, cov: np.ndarray) -> float:
    w = np.asarray(plan.basis)
    sb = (w * plan.noise_variance) @ w.T + plan.residual_variance * (np.eye(plan.dim) - w @ w.T)
    if plan.coordinate_scale is not None:
        sb = sb * np.outer(plan.coordinate_scale, plan.coordinate_scale)
    return 0.5 * float(np.linalg.slogdet(np.eye(plan.dim) + cov @ np.linalg.inv(sb))[1])


def test_running_mean_summands_have_the_stated_mean():
    """E||g(f) − c||²_{A⁻¹} = tr(A⁻¹Σ_g) + ||μ_g − c||²_{A⁻¹} for any fixed c (enumeration)."""
    law = _tiny_pool_law()
    shape, _, _ = fit_shape(law[::97])
    c = law[::50].mean(axis=0)
    lhs = float(np.mean(shape.whiten2(law - c)))
    mu = law.mean(axis=0)
    cov = np.cov(law, rowvar=False, bias=True)
    a_inv = (shape.vecs / shape.a) @ shape.vecs.T
    rhs = float(np.trace(a_inv @ cov)) + float((mu - c) @ a_inv @ (mu - c))
    assert lhs == pytest.approx(rhs, rel=1e-12)


@pytest.mark.parametrize("scaling", ["log-det", pytest.param("trace", marks=pytest.mark.slow)])
def test_certified_plans_cover_the_exact_mi_of_a_tiny_linear_sum(scaling):
    """200 certificates from 64 trials each of an enumerable mechanism: the exact
    ½ ln det(I + Σ_g Σ_B⁻¹) of the clipped release exceeds v in <= γ of them (binomial
    margin), while the plug-in (noise from the estimated trace alone) exceeds it often."""
    law = _tiny_pool_law()
    rng = np.random.default_rng(6)
    v, reps, miss, plug_miss = 0.1, 200, 0, 0
    for _ in range(reps):
        x = law[rng.integers(0, law.shape[0], 64)]
        plan = certify_noise(x, mi_budget=v, scaling=scaling)
        cov = _clipped_cov(plan, law)
        miss += _mi(plan, cov) > v
        c = plan.certificate
        plug_kappa = c.kappa_plugin / c.kappa  # the plug-in scale, same shape and clip
        plug_miss += _mi(plan, cov / plug_kappa) > v
    assert miss <= 20  # binomial(200, 0.05): mean 10, P(X >= 21) < 2e-3
    assert plug_miss >= 20  # measured 97 (log-det) and 48 (trace) of 200


def test_log_det_scaling_meets_the_budget_exactly_in_one_dimension():
    """d = 1: the log-det bound is exact, ½ ln(1 + U/κ) = v, and the trace scaling costs
    (e^{2v} − 1)/(2v) more noise on the same trials."""
    x = np.random.default_rng(7).standard_normal((200, 1))
    v = 0.3
    ld = certify_noise(x, mi_budget=v)
    tr = certify_noise(x, mi_budget=v, scaling="trace")
    top = max(ld.certificate.upper_bound, ld.certificate.plugin_trace)
    assert 0.5 * math.log1p(top / ld.certificate.kappa) == pytest.approx(v, rel=1e-12)
    assert ld.mi_bound == pytest.approx(v, rel=1e-12) and ld.linearised_mi_bound > v
    ratio = tr.expected_noise_power / ld.expected_noise_power
    assert ratio == pytest.approx(math.expm1(2 * v) / (2 * v), rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(
    log_scales=st.lists(st.floats(-6, 6), min_size=1, max_size=5),
    n_trials=st.integers(6, 80),
    conf=st.floats(0.5, 0.99),
    seed=st.integers(0, 2**32 - 1),
)
def test_plan_properties(log_scales, n_trials, conf, seed):
    """Never below the plug-in, the bound within the budget, the split adds up, and a higher
    confidence does not lower the noise (up to a relative 1e-3: the bets are tuned to γ)."""
    d = len(log_scales)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_trials, d)) * 10.0 ** np.asarray(log_scales)
    plan = certify_noise(x, mi_budget=0.1, confidence=conf)
    c = plan.certificate
    assert c.kappa >= c.kappa_plugin * (1 - 1e-12) and c.inflation >= 1 - 1e-12
    assert c.upper_bound >= c.mean_summand * (1 - 1e-12) or c.upper_bound == pytest.approx(
        c.clip_radius**2)
    assert plan.mi_bound <= 0.1 * (1 + 1e-12) <= plan.linearised_mi_bound * (1 + 1e-12)
    assert c.n_shape + c.n_certificate == n_trials
    assert c.n_shape == min(max(2, default_shape_trials(n_trials, d)), n_trials - 4)
    higher = certify_noise(x, mi_budget=0.1, confidence=min(0.999, conf + 0.005))
    assert higher.expected_noise_power >= plan.expected_noise_power * (1 - 1e-3)


def test_randomized_certificate_is_reproducible_and_never_more_noise():
    x = np.random.default_rng(8).standard_normal((128, 4))
    det = certify_noise(x, mi_budget=0.1)
    a = certify_noise(x, mi_budget=0.1, randomize=11)
    b = certify_noise(x, mi_budget=0.1, randomize=11)
    assert a.expected_noise_power == b.expected_noise_power <= det.expected_noise_power
    assert a.certificate.randomized and not det.certificate.randomized
    with pytest.raises(ValueError, match="randomize"):
        certify_noise(x, mi_budget=0.1, method="empirical-bernstein", randomize=1)


# --- known covariance, and the planning model ----------------------------------------------


@pytest.mark.slow
def test_coverage_with_a_known_covariance(benchmark_module):
    """Gaussian outputs, d = 5, decaying spectrum, 128 trials: P(MI > v) <= γ over 400 plans
    (binomial test), and the noise power within 1.35x of the oracle square-root rule."""
    bench = benchmark_module("certificate")
    mech = bench.gaussian("decay", 5)
    res = bench.run_cell(mech, 128, 400, n_mc=4000, seed=3)
    assert res["exceed"] <= 32  # binomial(400, 0.05): mean 20, P(X >= 33) < 3e-3
    assert 1.0 < res["ratio"] < 1.35


def test_predicted_inflation_falls_with_trials_and_tracks_the_measured_ratio():
    """The planning model decreases in n_trials, and at 128 trials of a flat d = 10 Gaussian
    it is within 15% of the measured certified noise power (trace scaling, 20 plans)."""
    preds = [predicted_inflation(m, 10) for m in (64, 128, 256, 1024)]
    assert all(a > b for a, b in itertools.pairwise(preds))
    rng = np.random.default_rng(9)
    d, v = 10, 0.1
    ratios = [certify_noise(rng.standard_normal((128, d)), mi_budget=v, scaling="trace")
              .expected_noise_power / (d * d / (2 * v)) for _ in range(20)]
    assert float(np.mean(ratios)) == pytest.approx(preds[1], rel=0.15)
