"""The (1−γ) certificate (pacpriv.pac.noise), the rule table and the certified default."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacpriv.exceptions import ConstantOutputWarning, UndersampledWarning
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.job import run_pac
from pacpriv.pac.noise import (
    Certified,
    _registry,
    betting_upper,
    certify_noise,
    constant_output_bound,
    empirical_bernstein_upper,
    predicted_inflation,
    trials_for_inflation,
)
from pacpriv.pac.noise._calibration import DEFAULT_RULE, RULES, SPECTRUM_RULES
from pacpriv.pac.noise._concentration import MAX_BET
from pacpriv.pac.noise._shape import default_shape_trials
from pacpriv.pac.release import privatize

SERIAL = ExecutionOptions(n_jobs=1, progress=False)
QUIET = ExecutionOptions(progress=False)
NO_CHECK = Certified(target_inflation=None)  # no trial-count check


# --- the upper bounds ---------------------------------------------------------------------


def test_empirical_bernstein_reference_value():
    """Maurer & Pontil Thm 4 by hand: mean ½, V = 100/396, L = ln 40, n = 100."""
    z = [0.0, 1.0] * 50
    log_term = math.log(40.0)
    expected = 0.5 + math.sqrt(2 * (25 / 99) * log_term / 100) + 7 * log_term / (3 * 99)
    assert empirical_bernstein_upper(z, bound=1.0, confidence=0.95) == pytest.approx(
        expected, rel=1e-12)


def test_betting_upper_is_the_capital_root():
    """At U the constant-bet capital is exactly 1/γ, and it is one-sided (>= 1/γ)."""
    rng = np.random.default_rng(0)
    z = rng.uniform(0, 1, 200) ** 3
    u = betting_upper(z, bound=1.0, confidence=0.9, bet=0.5)
    log_cap = float(np.sum(np.log1p(0.5 * (u - z))))
    assert log_cap >= math.log(10.0)
    assert log_cap == pytest.approx(math.log(10.0), abs=1e-9)
    assert u > z.mean()
    # the doc example
    assert betting_upper([0.0, 1.0] * 50, bound=1.0, confidence=0.95) == pytest.approx(
        0.6287023360020129, rel=1e-9)


@pytest.mark.parametrize("upper", ["betting", "bernstein"])
def test_upper_bounds_cover_a_skewed_mean(upper):
    """P(E[Z] > U) <= γ on a skewed [0, 1] law (Bernoulli(0.05)); 400 repetitions."""
    rng = np.random.default_rng(1)
    p, gamma, reps = 0.05, 0.1, 400
    miss = 0
    for _ in range(reps):
        z = (rng.random(60) < p).astype(float)
        u = (betting_upper(z, bound=1.0, confidence=1 - gamma) if upper == "betting"
             else empirical_bernstein_upper(z, bound=1.0, confidence=1 - gamma))
        miss += p > u
    assert miss <= 60  # binomial(400, 0.1): mean 40, P(X > 60) < 1e-3


def test_upper_bound_input_errors():
    with pytest.raises(ValueError, match="bound"):
        betting_upper([0.5, 2.0], bound=1.0, confidence=0.9)
    with pytest.raises(ValueError, match="confidence"):
        empirical_bernstein_upper([0.1, 0.2], bound=1.0, confidence=1.0)
    with pytest.raises(ValueError, match="bet"):
        betting_upper([0.1], bound=1.0, confidence=0.9, bet=MAX_BET * 1.01)


def test_constant_output_bound_value():
    """1 − γ^{1/m} at zero events (exact), below ln(1/γ)/m."""
    assert constant_output_bound(200, confidence=0.95) == pytest.approx(
        1 - 0.05 ** (1 / 200), rel=1e-12)
    assert constant_output_bound(200, confidence=0.95) <= math.log(20) / 200
    # a 1-in-1024 change is not excluded by 200 trials
    assert constant_output_bound(200) > 1 / 1024


# --- the certified plan -------------------------------------------------------------------


def _explicit_noise_cov(plan) -> np.ndarray:
    w = np.asarray(plan.basis)
    cov = (w * plan.noise_variance) @ w.T
    return cov + plan.residual_variance * (np.eye(plan.dim) - w @ w.T)


@settings(max_examples=25, deadline=None)
@given(
    log_scales=st.lists(st.floats(-12, 12), min_size=1, max_size=6),
    n_trials=st.integers(6, 40),
    seed=st.integers(0, 2**32 - 1),
)
def test_no_direction_gets_zero_noise(log_scales, n_trials, seed):
    """Whatever the spread of scales (up to 1e24) or the trial count (fewer than d included),
    Σ_B is positive definite: every direction, seen or not, gets noise."""
    d = len(log_scales)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_trials, d)) * 10.0 ** np.asarray(log_scales)
    plan = certify_noise(x, mi_budget=0.1)
    assert np.all(plan.noise_std > 0)
    if plan.n_complement:
        assert plan.residual_std > 0
    assert plan.certificate.certified and plan.mi_bound <= 0.1 * (1 + 1e-12)


def test_scale_separated_outputs_get_finite_mi_within_budget():
    """Known Σ = diag(1e12, 1e-6): finite true ½ ln det(I + ΣΣ_B⁻¹) <= v, both directions
    noised (the plug-in rules zero the small one)."""
    rng = np.random.default_rng(4)
    cov = np.diag([1e12, 1e-6])
    x = rng.standard_normal((400, 2)) * np.sqrt(np.diag(cov))
    plan = certify_noise(x, mi_budget=0.05)
    cb = _explicit_noise_cov(plan)
    mi = 0.5 * float(np.linalg.slogdet(np.eye(2) + cov @ np.linalg.inv(cb))[1])
    assert math.isfinite(mi) and 0 < mi <= 0.05
    q = np.asarray(plan.basis)
    small = int(np.argmin(np.abs(q[1])) != 1)  # the column that carries coordinate 2
    assert plan.noise_std[small] ** 2 > 0
    # the clip targets 2% of outputs (clip_probability); 5% is run_pac's warning threshold
    assert plan.certificate.n_clipped <= 0.05 * 400


def test_certified_plan_meets_the_trace_bound_on_the_truth():
    """d = 20 flat Gaussian: ½ tr(Σ_B⁻¹Σ) <= v on the known Σ, while the plug-in square-root
    rule on the same trials exceeds v (MATH.md §4)."""
    from pacpriv.pac.noise._calibration import calibrate_noise
    from pacpriv.pac.spectrum._covariance import estimate_output_spectrum

    rng = np.random.default_rng(7)
    d, v = 20, 0.1
    x = rng.standard_normal((200, d))
    plan = certify_noise(x, mi_budget=v)
    trace = 0.5 * float(np.trace(np.linalg.inv(_explicit_noise_cov(plan))))
    assert trace <= v
    plug = calibrate_noise(estimate_output_spectrum(x), mi_budget=v, rule="anisotropic")
    w = np.asarray(plug.basis)
    assert 0.5 * float(np.sum(1.0 / plug.noise_variance)) > v  # Σ = I: ½ Σ 1/s² in any basis
    assert w.shape == (d, d)
    c = plan.certificate
    assert c.n_shape == default_shape_trials(200, d) == 85 and c.n_certificate == 115
    assert c.inflation >= 1.0
    assert plan.label == "certified (1−γ = 0.95)"


def test_release_applies_the_plan_clip():
    """privatize(value) = clip(value) + B, with the same B for the same seed."""
    rng = np.random.default_rng(2)
    plan = certify_noise(rng.standard_normal((60, 3)), mi_budget=0.2)
    far = np.array([100.0, -50.0, 3.0])
    clipped, was = plan.clip(far)
    assert was
    y = plan.clip_center + plan.clip_radius * 0  # centre stays centre
    np.testing.assert_array_equal(plan.clip(y)[0], y)
    np.testing.assert_allclose(privatize(far, plan, rng=5) - plan.sample(5), clipped,
                               rtol=1e-12, atol=1e-9)
    # the clipped value lies on the ellipsoid boundary
    white = math.sqrt(plan._whitened_norm2(clipped - plan.clip_center))
    assert white == pytest.approx(plan.clip_radius, rel=1e-9)


def test_asymptotic_rule_is_never_called_certified():
    rng = np.random.default_rng(3)
    plan = certify_noise(rng.standard_normal((60, 3)), mi_budget=0.2, method="student-t")
    assert not plan.certified and plan.clip_radius is None
    assert "not certified" in plan.label


def test_certify_noise_input_errors():
    with pytest.raises(ValueError, match="n_trials = 5"):
        certify_noise(np.zeros((5, 2)), mi_budget=0.1)
    with pytest.raises(ValueError, match="confidence"):
        certify_noise(np.zeros((10, 2)), mi_budget=0.1, confidence=1.5)
    with pytest.raises(ValueError, match="shape_fraction"):
        certify_noise(np.zeros((10, 2)), mi_budget=0.1, shape_fraction=1.0)
    with pytest.raises(ValueError, match="method"):
        certify_noise(np.zeros((10, 2)), mi_budget=0.1, method="hoeffding")


# --- zero-variance outputs (issue 12, item 4) ------------------------------------------------


def _all_in(subset):
    """1 iff the subset holds all 10 records: a 1-in-1024 event under Poisson-½."""
    return np.array([1.0 if len(subset) == 10 else 0.0])


# the release is on the whole pool on purpose (a fixed secret subset); that warning is expected
@pytest.mark.filterwarnings("ignore:this release is on the whole pool")
def test_rare_event_is_not_called_reveals_nothing():
    """200 trials of a 1-in-1024 event (MI 0.0077 nats = 7.7x a budget of 0.001) that did not
    occur: no 'reveals nothing', the supported statement, and a certified release."""
    pool = np.arange(10.0)[:, None]
    kw = dict(mi_budget=0.001, n_trials=200, rng=0, execution=SERIAL,
              secret_mask=np.ones(10, dtype=bool), release_rng=1)
    with pytest.warns(ConstantOutputWarning):
        res = run_pac(_all_in, pool, **kw)
    assert np.all(res.simulation.outputs == 0)  # the event was not seen
    text = json.dumps(res.to_dict(), ensure_ascii=False)
    assert "reveals nothing" not in text and "no noise is needed" not in text
    assert any("at most 0.01487" in n for n in res.notes)
    # without an output bound the certified release is the seen value (clipped): MI = 0
    assert res.plan.clip_radius == 0.0 and res.release[0] == 0.0
    assert res.label == "certified (1−γ = 0.95)"
    # with an output bound: a certified minimum noise, true MI of the mechanism <= v
    with pytest.warns(ConstantOutputWarning):
        res_b = run_pac(_all_in, pool, rule=Certified(output_bound=1.0), **kw)
    s2 = float(res_b.plan.noise_variance[0])
    p = 1 / 1024
    assert s2 > 0 and 0.5 * math.log1p(p * (1 - p) / s2) <= 0.001
    # the plug-in rule adds no noise and says it is an estimate
    with pytest.warns(ConstantOutputWarning) as rec:
        res_p = run_pac(_all_in, pool, rule="anisotropic", **kw)
    assert all("reveals nothing" not in str(w.message) for w in rec)
    assert res_p.label == "estimated (plug-in)"
    assert any(n.startswith("estimated (plug-in)") for n in res_p.notes)


# --- trial planning -----------------------------------------------------------------------


def test_trials_for_inflation_is_the_smallest_count():
    for d in (1, 12, 50):
        m = trials_for_inflation(d, target_inflation=1.2)
        assert predicted_inflation(m, d) <= 1.2 < predicted_inflation(m - 1, d)
    assert trials_for_inflation(12, target_inflation=1.5) < trials_for_inflation(12)
    with pytest.raises(ValueError, match="target_inflation"):
        trials_for_inflation(5, target_inflation=1.0)


def test_planned_trials_give_the_target_inflation():
    """At trials_for_inflation(d = 20) the measured certified noise power on a flat Gaussian
    is within a few percent of the 1.2x target (median of 5 runs)."""
    d, v = 20, 0.1
    m = trials_for_inflation(d, target_inflation=1.2)
    oracle = d**2 / (2 * v)  # (Σ sqrt λ)² / (2v) with Σ = I
    rng = np.random.default_rng(11)
    ratios = [certify_noise(rng.standard_normal((m, d)), mi_budget=v).expected_noise_power
              / oracle for _ in range(5)]
    assert 1.0 < float(np.median(ratios)) < 1.3


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"confidence": 1.0}, "confidence"),
    ({"output_bound": -1.0}, "output_bound"),
    ({"c": 0.1}, "do not apply"),
    ({"n_trials": 5}, "n_trials"),
])
def test_run_pac_rejects_bad_certificate_input_before_simulating(kwargs, match):
    def boom(subset):  # never called: the error comes first
        raise AssertionError("simulated")

    from pacpriv.pac.noise._registry import rule_with

    n_trials = kwargs.pop("n_trials", 50)
    with pytest.raises(ValueError, match=match):
        run_pac(boom, np.zeros((10, 1)), mi_budget=0.1, execution=QUIET, n_trials=n_trials,
                rule=rule_with("certified", **kwargs))


def test_run_pac_warns_below_the_planned_trials():
    x = np.linspace(0, 10, 30)[:, None]
    with pytest.warns(UndersampledWarning, match="trials_for_inflation"):
        run_pac(_mean0, x, mi_budget=0.1, n_trials=20, rng=0, release=False,
                execution=SERIAL)


def _mean0(subset):
    a = np.asarray(subset, dtype=float)[:, 0]
    return np.array([a.mean() if a.size else 0.0])


# --- rule table and labels ----------------------------------------------------------------


def test_rule_table_drives_the_names():
    assert RULES == tuple(_registry.RULE_CLASSES) and RULES[0] == DEFAULT_RULE == "certified"
    assert set(SPECTRUM_RULES) == {k for k, i in _registry.RULE_CLASSES.items()
                                   if i.source == "spectrum"}
    certified = {k for k, i in _registry.RULE_CLASSES.items() if i.certified}
    assert certified == {"certified", "algorithm1"}
    import inspect

    assert inspect.signature(run_pac).parameters["rule"].default == "certified"


def test_result_reports_the_certificate():
    x = np.linspace(0, 10, 30)[:, None]
    res = run_pac(_mean0, x, mi_budget=0.1, n_trials=400, rng=0, release=False,
                  execution=SERIAL, rule=NO_CHECK)
    cert = res.to_dict()["certification"]
    assert cert["label"] == "certified (1−γ = 0.95)" and cert["gamma"] == pytest.approx(0.05)
    assert cert["n_shape_trials"] == default_shape_trials(400, 1) == 44
    assert cert["n_certificate_trials"] == 356
    assert cert["noise_inflation_vs_plugin"] >= 1.0
    assert res.to_dict()["posterior_success_bound_label"] == cert["label"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plug = run_pac(_mean0, x, mi_budget=0.1, n_trials=400, rng=0, release=False,
                       execution=SERIAL, rule="isotropic")
    assert plug.to_dict()["certification"]["label"] == "estimated (plug-in)"
    assert plug.to_dict()["certification"]["certified"] is False


# --- coverage (small fast version of benchmarks/coverage.py) --------------------------------


def test_coverage_certified_vs_plugin(benchmark_module):
    """Known Σ: the certified rule exceeds v in <= γ of runs (binomial margin), the plug-in
    square-root rule at n_trials = 2d exceeds it in most runs."""
    cov = benchmark_module("coverage")
    sc = cov.linear_sum_scenario(20)
    res = cov.run_cell(sc, 40, 30, n_mc=4000, rules=("certified", "anisotropic"))
    assert res["certified"]["exceed"] <= 5  # binomial(30, 0.05): P(X >= 6) < 0.01
    assert res["anisotropic"]["exceed"] >= 20
    assert res["certified"]["power"] > res["anisotropic"]["power"]


def test_complementary_pairs_certify_on_independent_trials():
    """With the pairs sampler trial 2k+1 is the complement of trial 2k; the certificate uses
    one member of each pair only (independent draws), so its trials add up to n_trials/2."""
    from pacpriv.pac.samplers import ComplementaryPairsSampler

    x = np.linspace(0, 10, 30)[:, None]
    res = run_pac(_mean0, x, mi_budget=0.1, n_trials=400, rng=0, release=False,
                  execution=SERIAL, rule=NO_CHECK,
                  sampler=ComplementaryPairsSampler())
    c = res.plan.certificate
    assert c.n_shape + c.n_certificate == 200
    direct = certify_noise(res.simulation.outputs[0::2], mi_budget=0.1)
    assert res.plan.expected_noise_power == pytest.approx(direct.expected_noise_power, rel=1e-12)
