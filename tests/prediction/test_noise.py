"""Per-query noise under the world posterior (MATH.md §6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import multivariate_normal

from pacpriv.pac.bounds._posterior import posterior_success_rate
from pacpriv.prediction._noise import (
    NOISE_RULES,
    answer_query,
    calibrate_query,
    posterior_weights,
    update_log_posterior,
)


def _sigma_b(plan, d):
    if plan.basis is None:
        return np.diag(plan.noise_std**2)
    w = np.asarray(plan.basis)
    return w @ np.diag(plan.noise_std**2) @ w.T + plan.residual_std**2 * (np.eye(d) - w @ w.T)


def test_check_value_one_million_queries():
    # MATH.md §6 / issue 11: 10⁶ queries at b = 2⁻³² give a 51.08% membership bound
    assert round(posterior_success_rate(1e6 * 2.0**-32, prior=0.5), 5) == 0.51079


@pytest.mark.parametrize("rule", ["anisotropic", "isotropic"])
def test_scalar_variance_is_weighted_variance_over_2b(rule):
    o = np.array([[0.0], [1.0], [4.0]])
    p = np.array([0.5, 0.3, 0.2])
    mean = p @ o[:, 0]
    var_p = float(p @ (o[:, 0] - mean) ** 2)
    q = calibrate_query(o, np.log(p), mi_budget=0.25, rule=rule)
    assert q.plan.noise_std[0] ** 2 == pytest.approx(var_p / 0.5, rel=1e-12)
    assert q.mean[0] == pytest.approx(mean)
    assert q.mi_bound == pytest.approx(0.5 * math.log1p(0.5), rel=1e-12)


def test_scalar_exact_mi_meets_budget_exactly():
    o = np.array([[0.0], [2.0]])
    q = calibrate_query(o, np.zeros(2), mi_budget=0.3, rule="exact-mi")
    # ½ ln(1 + Var/s²) = b  <=>  s² = Var / (e^{2b} − 1), Var = 1
    assert q.plan.noise_std[0] ** 2 == pytest.approx(1.0 / math.expm1(0.6), rel=1e-9)
    assert q.mi_bound <= 0.3


@pytest.mark.parametrize("rule", NOISE_RULES.names())
def test_multivariate_logdet_bound_independently(rule):
    rng = np.random.default_rng(3)
    o = rng.normal(size=(6, 3)) * np.array([3.0, 1.0, 0.1])
    lp = rng.normal(size=6)
    q = calibrate_query(o, lp, mi_budget=0.2, rule=rule)
    p = np.exp(lp - lp.max())
    p /= p.sum()
    c = ((o - p @ o).T * p) @ (o - p @ o)
    sb = _sigma_b(q.plan, 3)
    mi = 0.5 * np.linalg.slogdet(np.eye(3) + c @ np.linalg.inv(sb))[1]
    assert mi <= 0.2 * (1 + 1e-10)
    assert mi > 0.1  # the budget is used, not wasted


def test_constant_outputs_release_without_noise_and_keep_posterior():
    o = np.tile([[0.3, 0.7]], (4, 1))
    lp = np.log([0.1, 0.2, 0.3, 0.4])
    y, lp2, q = answer_query(o, lp, 2, mi_budget=0.1, rng=np.random.default_rng(0))
    assert q.plan is None and q.mi_bound == 0.0
    np.testing.assert_array_equal(y, [0.3, 0.7])
    np.testing.assert_allclose(np.exp(lp2), [0.1, 0.2, 0.3, 0.4], rtol=1e-12)


def test_update_matches_gaussian_likelihood():
    rng = np.random.default_rng(1)
    o = rng.normal(size=(5, 3))  # 5 worlds, d = 3: C has full rank
    lp = np.log(np.full(5, 0.2))
    q = calibrate_query(o, lp, mi_budget=0.5)
    y = rng.normal(size=3)
    got = update_log_posterior(lp, o, y, q)
    sb = _sigma_b(q.plan, 3)
    ll = np.array([multivariate_normal(o[j], sb).logpdf(y) for j in range(5)])
    want = ll - np.logaddexp.reduce(ll)
    np.testing.assert_allclose(got, want, atol=1e-10)


def test_underflowed_world_still_gets_noise():
    # world 1 has log weight −2000: exp underflows, but it must keep a positive weight so that
    # the direction in which only it differs is not released noise-free
    o = np.array([[0.0, 0.0], [0.0, 5.0], [1.0, 0.0]])
    lp = np.array([0.0, -2000.0, 0.0])
    w = posterior_weights(lp)
    assert w[1] > 0
    q = calibrate_query(o, lp, mi_budget=0.1)
    sb = _sigma_b(q.plan, 2)
    assert sb[1, 1] > 0


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), m=st.integers(2, 12), d=st.integers(1, 5),
       b=st.floats(1e-6, 2.0), rule=st.sampled_from(NOISE_RULES.names()),
       spread=st.floats(-30.0, 0.0))
def test_logdet_bound_never_exceeds_budget(seed, m, d, b, rule, spread):
    rng = np.random.default_rng(seed)
    o = rng.normal(size=(m, d)) * np.exp(rng.uniform(-5, 5, size=d))
    lp = rng.uniform(spread, 0.0, size=m)
    q = calibrate_query(o, lp, mi_budget=b, rule=rule)
    p = np.exp(lp - lp.max())
    p /= p.sum()
    centred = o - p @ o
    c = (centred.T * p) @ centred
    sb = _sigma_b(q.plan, d)
    # ½ ln det(I + C Σ_B⁻¹) on the support of Σ_B (C vanishes outside it up to round-off)
    w, v = np.linalg.eigh(sb)
    keep = w > w.max() * 1e-12
    white = v[:, keep] / np.sqrt(w[keep])
    mi = 0.5 * np.linalg.slogdet(np.eye(keep.sum()) + white.T @ c @ white)[1]
    assert mi <= b * (1 + 1e-9) + 1e-12
