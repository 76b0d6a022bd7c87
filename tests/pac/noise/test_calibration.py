"""Tests for pacpriv.pac.noise._calibration (noise rules of MATH.md §2)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import example as hyp_example
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pacpriv.exceptions import CalibrationError, ConstantOutputWarning
from pacpriv.pac.noise import Algorithm1
from pacpriv.pac.noise._calibration import (
    SPECTRUM_RULES,
    NoisePlan,
    calibrate_noise,
    calibrate_variance_only,
)
from pacpriv.pac.noise._confidence import trials_for_confidence
from pacpriv.pac.noise._registry import shorthands
from pacpriv.pac.spectrum._covariance import estimate_output_spectrum, spectrum_from_covariance

#: The plug-in spectrum rules usable by name (read from the registry).
PLUGIN_RULES = tuple(n for n in SPECTRUM_RULES if n in shorthands())
ALG1 = {"c": 1e-3, "beta": 0.25, "output_bound": 1.0}


def _noise_cov(plan: NoisePlan) -> np.ndarray:
    """Explicit Σ_B of a plan (small d only)."""
    if plan.basis is None:
        return np.diag(plan.noise_variance)
    w = np.asarray(plan.basis, dtype=np.float64)
    d = plan.dim
    return w @ np.diag(plan.noise_variance) @ w.T + plan.residual_variance * (np.eye(d) - w @ w.T)


def _dense_mi(cov, plan):
    """Naive ½ slogdet(I + Σ Σ_B⁻¹); +inf if Σ_B is singular on Σ's range."""
    nb = _noise_cov(plan)
    lam_b, vb = np.linalg.eigh(nb)
    keep = lam_b > 1e-12 * max(lam_b.max(), 1e-300)
    proj_null = vb[:, ~keep]
    if proj_null.size and np.linalg.norm(proj_null.T @ cov @ proj_null) > 1e-9 * np.trace(cov):
        return math.inf
    white = vb[:, keep] / np.sqrt(lam_b[keep])
    m = white.T @ cov @ white
    return 0.5 * float(np.sum(np.log1p(np.clip(np.linalg.eigvalsh(m), 0, None))))


def _rule(rule):
    return Algorithm1(**ALG1) if rule == "algorithm1" else rule


@pytest.fixture
def example():
    """λ = (4, 1) in a rotated basis (MATH.md worked example)."""
    rot = np.array([[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]])
    return spectrum_from_covariance(rot @ np.diag([4.0, 1.0]) @ rot.T)


def test_worked_example_square_root(example):
    """Square-root rule: s² = (6, 3), E||B||² = 9, exact bound 0.39925, linearised ½."""
    plan = calibrate_noise(example, mi_budget=0.5)
    assert np.allclose(plan.noise_variance, [6.0, 3.0])
    assert np.allclose(plan.noise_std, np.sqrt([6.0, 3.0]))
    assert plan.expected_noise_power == pytest.approx(9.0)
    assert plan.mi_bound == pytest.approx(0.39925, abs=5e-6)
    assert plan.linearised_mi_bound == pytest.approx(0.5)


def test_worked_example_isotropic(example):
    """Isotropic rule: 5 in each direction, E||B||² = 10."""
    plan = calibrate_noise(example, mi_budget=0.5, rule="isotropic")
    assert plan.basis is None and np.allclose(plan.noise_variance, 5.0)
    assert plan.expected_noise_power == pytest.approx(10.0)


def test_worked_example_exact_mi(example):
    """Exact-MI optimum ≈ (4.24694, 2.50101), E||B||² ≈ 6.74795, bound exactly at budget."""
    plan = calibrate_noise(example, mi_budget=0.5, rule="exact-mi")
    assert np.allclose(plan.noise_variance, [4.24694, 2.50101], atol=5e-6)
    assert plan.expected_noise_power == pytest.approx(6.74795, abs=5e-6)
    assert plan.mi_bound <= 0.5
    assert plan.mi_bound == pytest.approx(0.5, rel=1e-9)


@pytest.mark.parametrize(("r", "expected"), [(1.0, [12.04497, 6.04497]), (100.0, [10.004] * 2)])
def test_worked_example_algorithm1(example, r, expected):
    """Algorithm 1, λ̂ = (4,1), c = 1e-3, v = β = ¼, d = 2: gap 3 vs r·sqrt(d·c) + 2c."""
    plan = calibrate_noise(example, mi_budget=0.25, rule=Algorithm1(c=1e-3, beta=0.25,
                                                                    output_bound=r))
    assert np.allclose(plan.noise_variance, expected, atol=5e-6)
    assert plan.details["branch"] == ("anisotropic" if r == 1.0 else "isotropic")
    assert plan.mi_claim == 0.5 and plan.confidence == 1.0
    assert plan.mi_bound <= 0.25


@settings(max_examples=60, deadline=None)
@given(
    lam=arrays(np.float64, st.integers(1, 8), elements=st.floats(0.0, 1e4)),
    v=st.floats(1e-3, 5.0),
)
def test_exact_mi_never_more_power_than_square_root(lam, v):
    """Exact-MI power <= square-root power, and both certify MI <= budget."""
    spec = spectrum_from_covariance(np.diag(lam)) if np.any(lam > 0) else None
    if spec is None:
        return
    sq = calibrate_noise(spec, mi_budget=v)
    ex = calibrate_noise(spec, mi_budget=v, rule="exact-mi")
    assert ex.expected_noise_power <= sq.expected_noise_power * (1 + 1e-12)
    assert ex.mi_bound <= v and sq.mi_bound <= v


@settings(max_examples=40, deadline=None)
@given(
    lam=arrays(np.float64, st.integers(1, 6), elements=st.floats(0.0, 1e3)),
    v=st.floats(1e-2, 3.0),
    rule=st.sampled_from(SPECTRUM_RULES),
)
@hyp_example(lam=np.array([5e-324]), v=1.0, rule="anisotropic")  # subnormal λ: s² underflowed to 0
@hyp_example(lam=np.array([5e-324]), v=0.5, rule="variance-only")
@hyp_example(lam=np.array([5e-324, 5e-324, 5e-324]), v=1.0, rule="variance-only")
def test_every_rule_certifies_budget(lam, v, rule):
    """For random spectra, every rule's certified bound (and an independent recomputation) <= v."""
    if not np.any(lam > 0):
        return
    rot, _ = np.linalg.qr(np.random.default_rng(len(lam)).normal(size=(len(lam), len(lam))))
    cov = rot @ np.diag(lam) @ rot.T
    cov = (cov + cov.T) / 2
    spec = spectrum_from_covariance(cov)
    plan = calibrate_noise(spec, mi_budget=v, rule=_rule(rule))
    assert plan.mi_bound <= v
    assert plan.mi_claim >= plan.mi_bound  # the headline is never below the plan's MI
    # independent check against the covariance itself (the spectrum may raise eigenvalues to
    # its resolution, which bounds Σ from above; at subnormal scales that bound is loose)
    assert _dense_mi(cov, plan) <= v * (1 + 1e-8)


def test_exact_mi_falls_back_when_worse(monkeypatch, example):
    """If the water-filling answer used more power than the square-root rule, fall back."""
    from pacpriv.pac.noise import _rules

    monkeypatch.setattr(_rules, "_exact_variances", lambda lam, mu: 100.0 * lam)
    plan = calibrate_noise(example, mi_budget=0.5, rule="exact-mi")
    assert np.allclose(plan.noise_variance, [6.0, 3.0])
    assert "square-root" in plan.details["fallback"]


def test_exact_mi_huge_budget_is_refused_and_the_cap_still_plans(example):
    """Above 100 nats every posterior bound is already 1: refused in one line naming the range;
    at the cap the exact-MI plan is finite and spends no more than the budget."""
    with pytest.raises(ValueError, match=r"<= 100 nats"):
        calibrate_noise(example, mi_budget=1e4, rule="exact-mi")
    plan = calibrate_noise(example, mi_budget=100.0, rule="exact-mi")
    var = np.asarray(plan.noise_variance)
    assert np.all(np.isfinite(var)) and np.all(var > 0)
    assert 0.5 * np.sum(np.log1p(np.array([4.0, 1.0]) / var)) <= 100.0 * (1 + 1e-9)


def test_algorithm1_unresolved_complement_goes_isotropic():
    """A truncated spectrum whose unseen eigenvalues may exceed c takes the isotropic branch."""
    rng = np.random.default_rng(12)
    x = rng.normal(size=(80, 5)) * np.array([3.0, 2.0, 1.5, 1.0, 0.8])
    spec = estimate_output_spectrum(x, n_components=2)
    rule = Algorithm1(c=1e-3, beta=0.5, output_bound=1.0)
    plan = calibrate_noise(spec, mi_budget=0.5, rule=rule)
    assert plan.details["branch"] == "isotropic" and plan.basis is None
    full = calibrate_noise(estimate_output_spectrum(x), mi_budget=0.5, rule=rule)
    assert full.details["branch"] == "anisotropic"


@pytest.mark.parametrize("rule", SPECTRUM_RULES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_certified_bound_within_budget_dense_oracle(rule, seed):
    """For every rule the naive dense ½ slogdet on the estimated Σ is <= budget."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(60, 3)) @ rng.normal(size=(3, 5)) * rng.uniform(0.1, 3, size=5)
    x /= 10 * np.max(np.linalg.norm(x, axis=1))
    spec = estimate_output_spectrum(x)
    cov = np.cov(x.T)
    plan = calibrate_noise(spec, mi_budget=0.3, rule=_rule(rule))
    oracle = _dense_mi(cov, plan)
    assert oracle <= 0.3 * (1 + 1e-9)
    # the spectrum's eigenvalues are raised by the resolution (rank 3 < d = 5 here), so the
    # plan's bound is on the safe side of the oracle, by ~sqrt(resolution)
    assert oracle <= plan.mi_bound * (1 + 1e-12)
    assert plan.mi_bound == pytest.approx(oracle, rel=1e-6, abs=1e-12)


def test_gram_plan_charges_unresolved_complement():
    """Gram path, sample filled all n - 1 directions: the 13 unseen ones are charged tr(Σ̂)."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(8, 20))
    spec = estimate_output_spectrum(x)
    assert spec.rank == 7 and spec.unresolved_dim == 13
    assert spec.tail_variance >= np.trace(np.cov(x.T)) * (1 - 1e-12)
    plan = calibrate_noise(spec, mi_budget=0.5)
    assert plan.basis.shape == (20, 7)
    # residual variance: square-root rule on the pooled complement eigenvalue tr / 13
    pooled = spec.tail_variance / 13
    root_sum = np.sum(np.sqrt(spec.eigenvalues)) + 13 * np.sqrt(pooled)
    assert plan.residual_std**2 == pytest.approx(np.sqrt(pooled) * root_sum / 1.0, rel=1e-12)
    assert _dense_mi(np.cov(x.T), plan) <= plan.mi_bound
    # the population here is isotropic N(0, I_20): the true MI is finite and within budget
    assert _dense_mi(np.eye(20), plan) <= 0.5
    alg1 = calibrate_noise(spec, mi_budget=0.5, rule=Algorithm1(c=1e-3, beta=0.5,
                                                                output_bound=10.0))
    assert alg1.residual_std > 0 or alg1.basis is None


def test_truncated_spectrum_is_safe():
    """With n_components < rank, the tail gets residual noise and the true bound stays <= v."""
    rng = np.random.default_rng(6)
    x = rng.normal(size=(50, 6)) * np.array([5, 3, 2, 1, 0.5, 0.2])
    cov = np.cov(x.T)
    spec = estimate_output_spectrum(x, n_components=2)
    for rule in PLUGIN_RULES:
        plan = calibrate_noise(spec, mi_budget=0.4, rule=rule)
        assert _dense_mi(cov, plan) <= 0.4 * (1 + 1e-9), rule
        assert plan.mi_bound >= _dense_mi(cov, plan) * (1 - 1e-9), rule
    assert calibrate_noise(spec, mi_budget=0.4).residual_std > 0


def test_variance_only_functions_agree():
    """calibrate_variance_only(variances) equals the rule on a spectrum; trace bound >= log-det."""
    rng = np.random.default_rng(7)
    x = rng.normal(size=(40, 4)) @ rng.normal(size=(4, 4))
    spec = estimate_output_spectrum(x)
    a = calibrate_noise(spec, mi_budget=0.2, rule="variance-only")
    b = calibrate_variance_only(spec.variances, mi_budget=0.2)
    assert np.allclose(a.noise_std, b.noise_std)
    assert b.mi_bound == pytest.approx(0.2) and a.linearised_mi_bound == pytest.approx(0.2)
    assert a.mi_bound < b.mi_bound
    t = spec.variances
    assert np.allclose(b.noise_variance, np.sqrt(t) * np.sqrt(t).sum() / 0.4)


@pytest.mark.parametrize("rule", PLUGIN_RULES)
def test_constant_outputs_zero_noise(rule):
    """Constant outputs: zero noise and MI bound 0."""
    with pytest.warns(ConstantOutputWarning):
        spec = estimate_output_spectrum(np.ones((4, 3)))
    plan = calibrate_noise(spec, mi_budget=0.1, rule=rule)
    assert plan.mi_bound == 0.0 and plan.expected_noise_power == 0.0
    assert np.all(plan.sample(0) == 0.0)


def test_sample_covariance_matches_plan(example):
    """Empirical covariance of many draws ≈ Σ_B (std, not variance, is what is drawn)."""
    plan = calibrate_noise(example, mi_budget=0.5)
    gen = np.random.default_rng(11)
    draws = np.array([plan.sample(gen) for _ in range(20_000)])
    assert np.allclose(np.cov(draws.T), _noise_cov(plan), rtol=0.05, atol=0.1)
    assert plan.sample(3).tolist() == plan.sample(3).tolist()


def test_algorithm1_confidence_certified_or_error():
    """A requested confidence above the matrix-Bernstein certificate raises; enough trials pass."""
    rng = np.random.default_rng(8)
    x = rng.uniform(-0.5, 0.5, size=(200, 2))
    spec = estimate_output_spectrum(x)
    with pytest.raises(CalibrationError, match="certifies confidence"):
        calibrate_noise(spec, mi_budget=0.25, rule=Algorithm1(confidence=0.9, c=0.05, beta=0.25,
                                                              output_bound=1.0))
    m = trials_for_confidence(confidence=0.9, c=0.05, output_bound=1.0, dim=2)
    big = estimate_output_spectrum(rng.uniform(-0.5, 0.5, size=(m, 2)))
    plan = calibrate_noise(big, mi_budget=0.25, rule=Algorithm1(confidence=0.9, c=0.05, beta=0.25,
                                                                output_bound=1.0))
    assert plan.confidence >= 0.9


def test_to_dict_json(example):
    """NoisePlan.to_dict is JSON-serialisable for each rule."""
    for rule in SPECTRUM_RULES:
        d = calibrate_noise(example, mi_budget=0.5, rule=_rule(rule)).to_dict()
        json.dumps(d, allow_nan=False)
        assert d["rule"] == rule


def test_error_rule(example):
    """An unknown rule is rejected with the list of rules."""
    with pytest.raises(ValueError, match="`rule` must be one of"):
        calibrate_noise(example, mi_budget=0.5, rule="laplace")


def test_error_budget(example):
    """The budget must be positive."""
    with pytest.raises(ValueError, match=r"`mi_budget` must be in \(0.0, inf\)"):
        calibrate_noise(example, mi_budget=0.0)


def test_error_spectrum_type():
    """calibrate_noise needs an OutputSpectrum."""
    with pytest.raises(TypeError, match="`spectrum` must be an OutputSpectrum"):
        calibrate_noise(np.eye(2), mi_budget=0.5)


def test_error_alg1_params_on_other_rule(example):
    """Algorithm-1 parameters beside a rule are an error naming the rule object (0.4)."""
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'c'; pass "
                                        r"rule=Algorithm1\(c=\.\.\.\)"):
        calibrate_noise(example, mi_budget=0.5, c=1e-3)


def test_error_alg1_missing_param(example):
    """Algorithm 1 needs c, beta and output_bound."""
    with pytest.raises(ValueError, match="rule='algorithm1' needs `output_bound`"):
        calibrate_noise(example, mi_budget=0.5, rule=Algorithm1(c=1e-3, beta=0.1))


def test_error_variances():
    """calibrate_variance_only needs a non-empty 1-D non-negative array."""
    with pytest.raises(ValueError, match="must be a non-empty 1-D array"):
        calibrate_variance_only(np.ones((2, 2)), mi_budget=0.5)
    with pytest.raises(ValueError, match=r"`variances` must be in \[0.0, inf\)"):
        calibrate_variance_only([-1.0], mi_budget=0.5)


def test_algorithm1_rule_object_equals_rule_with():
    """Algorithm 1's parameters travel with the rule (issue 9 item 4); beside it, a keyword is
    refused (0.4)."""
    from pacpriv.pac.noise._registry import rule_with

    spec = estimate_output_spectrum(np.random.default_rng(3).uniform(-0.5, 0.5, size=(400, 3)))
    kwargs = {"confidence": 0.5, "c": 0.5, "beta": 0.25, "output_bound": 1.0}
    by_name = calibrate_noise(spec, mi_budget=0.25, rule=rule_with("algorithm1", **kwargs))
    by_object = calibrate_noise(spec, mi_budget=0.25, rule=Algorithm1(**kwargs))
    assert by_object.rule == "algorithm1"
    np.testing.assert_array_equal(by_object.noise_std, by_name.noise_std)
    with pytest.raises(TypeError, match="unexpected keyword argument 'c'"):
        calibrate_noise(spec, mi_budget=0.25, rule=Algorithm1(**kwargs), c=1e-3)


def test_variance_only_takes_the_moments_object_itself():
    """``calibrate_variance_only(streaming_moments(outputs))`` said "`variances` must be
    numeric; got dtype object" (seventh new-user pass, #534): the moments' variances are
    used, the same plan as passing ``.variances``."""
    from pacpriv.pac.noise import calibrate_variance_only
    from pacpriv.pac.spectrum import streaming_moments

    outputs = np.random.default_rng(3).normal(size=(60, 5)) * np.arange(1, 6)
    moments = streaming_moments(outputs)
    a = calibrate_variance_only(moments, mi_budget=0.1)
    b = calibrate_variance_only(moments.variances, mi_budget=0.1)
    np.testing.assert_array_equal(a.noise_variance, b.noise_variance)
    assert a.mi_bound == b.mi_bound
