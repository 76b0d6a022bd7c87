"""Per-record PAC membership privacy (informed adversary): math, simulation, bounds, calibration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate
from scipy.stats import norm

from pacpriv.exceptions import MechanismError
from pacpriv.pac import (
    ComplementaryPairsSampler,
    FixedSizeSampler,
    PoissonSampler,
    calibrate_from_differences,
    calibrate_per_record,
    calibrate_variance_only,
    exposure_from_differences,
    informed_attack,
    privatize,
    record_exposure,
    simulate_differences,
)
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.per_record import SHAPES
from pacpriv.pac.per_record._calibration import PerRecordPlan, uniform_max_upper
from pacpriv.pac.per_record._math import (
    bayes_accuracy,
    bernstein_upper,
    box_bernstein_upper,
)

pytestmark = pytest.mark.usefixtures("one_native_thread")

X3 = np.array([[1.0, 0.0], [2.0, 1.0], [0.5, -0.5], [0.0, 3.0]])


def sum_mech(subset):
    return subset.sum(axis=0)


def sum_with_theta(subset, rng):
    return np.append(subset.sum(axis=0), rng.normal(size=2))


def mean_1d(subset):
    return np.array([subset.mean() if len(subset) else 0.0])


def never_called(subset):  # pragma: no cover - the tests check it is never reached
    raise AssertionError("the mechanism must not run for invalid arguments")


def _naive_log_capital(x, prior_mean, prior_var, reference, delta, m, cap):
    """ln K_T(m) of one record by a plain loop (independent of the vectorised code)."""
    total, mu, var, w = 0.0, prior_mean, prior_var, 1.0
    acc_sq, acc_sum = 0.0, 0.0
    for t, (xt, rt) in enumerate(zip(x, reference, strict=True)):
        lam = math.sqrt(2 * math.log(1 / delta) / (len(x) * max(var, 1e-10)))
        lam = min(lam, cap / (1 - m))
        total += math.log(1 + lam * (m - xt))
        acc_sq += (rt - mu) ** 2
        acc_sum += rt
        mu = (w * prior_mean + acc_sum) / (w + t + 1)
        var = (w * prior_var + acc_sq) / (w + t + 1)
    return total


# ----------------------------------------------------------------------------- the formula
def _acc_by_integration(d: float, q: float) -> float:
    """Bayes accuracy ∫ max(q φ(y − d), (1 − q) φ(y)) dy by adaptive quadrature."""
    lo_lim, hi_lim = -15.0, 15.0 + d
    thr = min(max(d / 2 - math.log(q / (1 - q)) / d, lo_lim + 1), hi_lim - 1)
    value, _ = integrate.quad(lambda y: max(q * norm.pdf(y - d), (1 - q) * norm.pdf(y)),
                              lo_lim, hi_lim, points=[thr], epsabs=1e-14, epsrel=1e-13,
                              limit=400)
    return value


@pytest.mark.parametrize("q", [0.1, 0.3, 0.5, 0.8])
@pytest.mark.parametrize("d", [0.05, 0.7, 2.0, 5.5])
def test_general_prior_formula_matches_numerical_integration(q, d):
    assert float(bayes_accuracy(d, q)) == pytest.approx(_acc_by_integration(d, q), abs=1e-11)


def test_formula_limits():
    assert bayes_accuracy(0.0, 0.3) == pytest.approx(0.7, abs=0)
    assert bayes_accuracy(0.0, 0.5) == 0.5
    assert bayes_accuracy(np.inf, 0.3) == 1.0
    assert bayes_accuracy(1e-300, 0.8) == pytest.approx(0.8, abs=1e-15)
    assert bayes_accuracy(60.0, 0.2) == pytest.approx(1.0, abs=1e-15)
    assert bayes_accuracy(1.3, 0.5) == pytest.approx(norm.cdf(0.65), abs=1e-15)


@given(st.floats(0.01, 0.99), st.floats(0.0, 30.0), st.floats(0.0, 30.0))
def test_formula_monotone_and_in_range(q, d1, d2):
    a1, a2 = bayes_accuracy(min(d1, d2), q), bayes_accuracy(max(d1, d2), q)
    assert max(q, 1 - q) <= a1 <= a2 + 1e-15 <= 1.0 + 1e-15


# ----------------------------------------------------------------------------- linear mechanism
@pytest.mark.parametrize("q", [0.5, 0.3])
def test_linear_mechanism_exact(q):
    s = 1.7
    res = record_exposure(sum_mech, X3, noise_cov=s**2, n_trials=6, rng=3,
                          execution=ExecutionOptions(progress=False),
                          sampler=PoissonSampler(q))
    norms = np.linalg.norm(X3, axis=1)
    expected = bayes_accuracy(norms / s, q)
    if q == 0.5:
        np.testing.assert_allclose(expected, norm.cdf(norms / (2 * s)), atol=1e-15)
    np.testing.assert_allclose(res.accuracy, expected, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(res.records, np.arange(4))
    # zero variance over trials: Bernstein adds only 7(1−a) ln(2k/γ) / (3(n−1))
    base = max(q, 1 - q)
    slack = 7 * (1 - base) * math.log(2 * 4 / 0.05) / (3 * 5)
    mp = record_exposure(sum_mech, X3, noise_cov=s**2, n_trials=6, rng=3,
                         execution=ExecutionOptions(progress=False),
                         sampler=PoissonSampler(q), bound="bernstein")
    np.testing.assert_allclose(mp.accuracy_upper, np.minimum(expected + slack, 1), atol=1e-12)
    # betting (default): the bound solves ln K_6(m) = ln(4/γ) for constant data, computed here
    # by a plain loop over the WSR recursion (prior ½, ¼) and a bisection
    for i in range(4):
        x = np.full(6, (expected[i] - base) / (1 - base))
        lo, hi = 0.0, 1.0
        for _ in range(60):
            m = (lo + hi) / 2
            k = _naive_log_capital(x, 0.5, 0.25, x, 0.05 / 4, m, 0.9)
            lo, hi = (lo, m) if k >= math.log(4 / 0.05) else (m, hi)
        assert res.accuracy_upper[i] == pytest.approx(base + (1 - base) * hi, abs=1e-9)
    assert np.all(res.accuracy_upper < mp.accuracy_upper)
    mi = np.minimum(q * (1 - q) * norms**2 / s**2, -q * math.log(q) - (1 - q) * math.log(1 - q))
    np.testing.assert_allclose(res.mi, mi, atol=1e-12)
    assert np.all(res.mi_upper >= res.mi)


def test_noise_descriptions_agree():
    diffs = simulate_differences(sum_mech, X3, n_trials=4, rng=0,
                                 execution=ExecutionOptions(progress=False))
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    by_matrix = exposure_from_differences(diffs, noise_cov=cov)
    inv = np.linalg.inv(cov)
    d = np.sqrt(np.einsum("ij,jk,ik->i", X3, inv, X3))
    np.testing.assert_allclose(by_matrix.accuracy, norm.cdf(d / 2), atol=1e-12)
    by_vector = exposure_from_differences(diffs, noise_cov=np.array([4.0, 4.0]))
    by_scalar = exposure_from_differences(diffs, noise_cov=4.0)
    np.testing.assert_allclose(by_vector.accuracy, by_scalar.accuracy, atol=1e-15)
    plan = calibrate_variance_only([1.0, 4.0], mi_budget=0.5)
    by_plan = exposure_from_differences(diffs, noise_cov=plan)
    d = np.sqrt(np.sum(X3**2 / plan.noise_variance, axis=1))
    np.testing.assert_allclose(by_plan.accuracy, norm.cdf(d / 2), atol=1e-12)


def test_internal_randomness_is_shared_within_a_pair():
    diffs = simulate_differences(sum_with_theta, X3, n_trials=5, rng=1,
                                 execution=ExecutionOptions(progress=False))
    expected = np.concatenate([X3, np.zeros((4, 2))], axis=1)
    np.testing.assert_allclose(diffs.differences, np.broadcast_to(expected, (5, 4, 4)),
                               atol=1e-12)
    assert np.ptp(diffs.outputs[:, 2]) > 0  # θ differs between trials


def test_stored_differences_and_costs():
    diffs = simulate_differences(sum_mech, X3, n_trials=7, rng=0,
                                 execution=ExecutionOptions(progress=False),
                                 records=[3, 1])
    assert diffs.differences.shape == (7, 2, 2)
    np.testing.assert_array_equal(diffs.records, [3, 1])
    np.testing.assert_allclose(diffs.differences[:, 0], np.broadcast_to(X3[3], (7, 2)))
    masks = diffs.simulation.masks
    np.testing.assert_allclose(diffs.outputs, masks.astype(float) @ X3, atol=1e-12)
    assert diffs.n_evaluations == 7 * 3


def test_seeds_are_backend_independent_and_resumable(tmp_path):
    ref = simulate_differences(mean_1d, X3[:, :1], n_trials=6, rng=5,
                               execution=ExecutionOptions(progress=False))
    par = simulate_differences(mean_1d, X3[:, :1], n_trials=6, rng=5,
                               execution=ExecutionOptions(progress=False, n_jobs=2,
                                                          backend="threading"))
    np.testing.assert_array_equal(ref.differences, par.differences)
    ck = tmp_path / "ck"
    simulate_differences(mean_1d, X3[:, :1], n_trials=3, rng=5,
                         execution=ExecutionOptions(progress=False, checkpoint=ck))
    resumed = simulate_differences(mean_1d, X3[:, :1], n_trials=6, rng=5,
                                   execution=ExecutionOptions(progress=False, checkpoint=ck))
    assert resumed.simulation.resumed_trials == 3
    np.testing.assert_array_equal(ref.differences, resumed.differences)


def test_failure_policy_names_the_trial():
    def bad(subset):
        if len(subset) == 2:
            raise RuntimeError("boom")
        return subset.sum(axis=0)

    with pytest.raises(MechanismError, match="trial"):
        simulate_differences(bad, X3, n_trials=20, rng=0,
                             execution=ExecutionOptions(progress=False))


# ----------------------------------------------------------------------------- exact mean
def _exact_mean_exposure(x: np.ndarray, i: int, s: float, q: float) -> float:
    others = np.delete(x, i)
    total = 0.0
    for bits in itertools.product((0, 1), repeat=others.size):
        b = np.array(bits, dtype=bool)
        w = q ** b.sum() * (1 - q) ** (others.size - b.sum())
        rest = others[b]
        out0 = rest.mean() if rest.size else 0.0
        out1 = np.append(rest, x[i]).mean()
        total += w * float(bayes_accuracy(abs(out1 - out0) / s, q))
    return total


@pytest.mark.parametrize("q", [0.5, 0.35])
def test_mean_of_ten_against_enumeration(q):
    x = np.array([0.3, -1.2, 2.5, 0.8, -0.4, 1.9, -2.2, 0.1, 3.0, -0.7])
    s = 0.15
    res = record_exposure(mean_1d, x[:, None], noise_cov=s**2, n_trials=300, rng=11,
                          execution=ExecutionOptions(progress=False), sampler=PoissonSampler(q))
    exact = np.array([_exact_mean_exposure(x, i, s, q) for i in range(10)])
    diffs = simulate_differences(mean_1d, x[:, None], n_trials=300, rng=11,
                                 execution=ExecutionOptions(progress=False),
                                 sampler=PoissonSampler(q))
    acc = bayes_accuracy(np.abs(diffs.differences[..., 0]) / s, q)
    se = acc.std(axis=0, ddof=1) / math.sqrt(300)
    assert np.all(np.abs(res.accuracy - exact) <= 4.5 * se + 1e-12)
    assert np.all(res.accuracy_upper >= exact)
    assert res.max_accuracy_upper == pytest.approx(res.accuracy_upper.max())


# ----------------------------------------------------------------------------- Bernstein
def test_bernstein_upper_reference_value():
    z = np.array([[0.5], [0.6], [0.7], [0.9]])
    lt = math.log(2 / 0.01)
    ref = 0.675 + math.sqrt(2 * np.var(z, ddof=1) * lt / 4) + 7 * 0.5 * lt / 9
    got = bernstein_upper(z, low=0.5, high=1.0, delta=0.01)[0]
    assert ref <= got <= ref + 1e-14 or got == 1.0
    assert bernstein_upper(np.full((50, 1), 0.5), low=0.5, high=1.0, delta=0.5)[0] == \
        pytest.approx(0.5 + 7 * 0.5 * math.log(4) / (3 * 49))


def test_bernstein_coverage_is_at_least_nominal():
    rng = np.random.default_rng(0)
    z = 0.5 + 0.5 * rng.beta(0.3, 2.0, size=(30, 4000))  # skewed, in [0.5, 1]
    mean = 0.5 + 0.5 * 0.3 / 2.3
    miss = np.mean(bernstein_upper(z, low=0.5, high=1.0, delta=0.1) < mean)
    assert miss <= 0.1


@given(st.lists(st.floats(0.5, 1.0), min_size=3, max_size=12), st.floats(0.0, 0.3))
def test_box_bound_dominates_samples_inside(values, shrink):
    hi = np.array(values)[:, None]
    lo = 0.5 + (hi - 0.5) * (1 - shrink)
    box = box_bernstein_upper(hi, lo, low=0.5, high=1.0, delta=0.05)
    for t in (0.0, 0.5, 1.0):
        inside = lo + t * (hi - lo)
        assert box[0] >= bernstein_upper(inside, low=0.5, high=1.0, delta=0.05)[0] - 1e-15


# ----------------------------------------------------------------------------- calibration
@pytest.fixture(scope="module")
def mean_diffs():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(25, 3))
    return simulate_differences(
        lambda s: s.mean(axis=0) if len(s) else np.zeros(3), x, n_trials=120, rng=2,
        execution=ExecutionOptions(progress=False))


@pytest.mark.parametrize("shape", SHAPES.names())
def test_betting_calibration_meets_target_and_is_minimal(mean_diffs, shape):
    """The plan certifies the target for every record; an independent loop recomputes each
    record's betting capital: >= 1/δᵢ at the chosen scale, < 1/δᵢ for some record at 0.99 ŝ."""
    target = 0.6
    plan = calibrate_from_differences(mean_diffs, target_accuracy=target, shape=shape,
                                      n_pool_records=25)
    assert isinstance(plan, PerRecordPlan) and plan.bound == "betting"
    assert plan.max_accuracy_upper == target and np.all(plan.accuracy_upper <= target)
    assert plan.details["smaller_scale_fails"]
    assert plan.covers_every_record and plan.coverage == "every record (25)"
    assert plan.n_trials_shape == 30 and plan.n_trials_certify == 90
    cert = plan.record_certificate
    geom_var = (np.asarray(plan.noise_std) / plan.scale) ** 2
    diffs = np.asarray(mean_diffs.differences)
    proj = diffs if plan.basis is None else diffs @ np.asarray(plan.basis)
    dist = np.sqrt((proj**2 / geom_var).sum(-1))
    sh, ce = dist[:30], dist[30:]
    s_ref = cert.reference_scale

    def x_of(d, s):
        return 2 * norm.cdf(d / (2 * s)) - 1

    ok_at, ok_below = [], []
    for i in range(25):
        xs = x_of(sh[:, i], s_ref)
        mu0, var0 = xs.mean(), xs.var(ddof=1) + 1e-12
        ref = x_of(ce[:, i], s_ref)
        for s, out in ((plan.scale, ok_at), (0.99 * plan.scale, ok_below)):
            k = _naive_log_capital(x_of(ce[:, i], s), mu0, var0, ref, cert.delta[i], 0.2,
                                   cert.cap)
            out.append(k >= math.log(1 / cert.delta[i]) - 1e-9)
    assert all(ok_at) and not all(ok_below)
    assert cert.delta.sum() == pytest.approx(0.05, rel=1e-12)
    out = privatize(np.zeros(3), plan, rng=0)
    assert out.shape == (3,)
    assert plan.to_dict()["max_accuracy_upper_kind"] == \
        "certified (1−γ = 0.95), every record (25)"


def test_bernstein_calibration_meets_target_and_is_minimal(mean_diffs):
    """The earlier Maurer–Pontil path (``bound="bernstein"``) keeps its guarantees."""
    target = 0.6
    plan = calibrate_from_differences(mean_diffs, target_accuracy=target, bound="bernstein")
    assert plan.max_accuracy_upper <= target and plan.bound == "bernstein"
    assert plan.details["smaller_scale_fails"]
    at = exposure_from_differences(mean_diffs, noise_cov=plan.scale**2, bound="bernstein")
    below = exposure_from_differences(mean_diffs, noise_cov=(0.99 * plan.scale) ** 2,
                                      bound="bernstein")
    assert at.max_accuracy_upper <= target < below.max_accuracy_upper
    np.testing.assert_allclose(at.accuracy_upper, plan.accuracy_upper, atol=1e-15)
    assert plan.coverage == "SAMPLE of 25 of ? records"


def test_betting_needs_fewer_trials_than_bernstein(mean_diffs):
    """Same trials, same confidence: the betting plan's noise is smaller."""
    bet = calibrate_from_differences(mean_diffs, target_accuracy=0.6)
    mp = calibrate_from_differences(mean_diffs, target_accuracy=0.6, bound="bernstein")
    assert bet.scale < mp.scale


def test_uniform_bound_covers_larger_scales(mean_diffs):
    dist = np.linalg.norm(mean_diffs.differences, axis=-1)
    for s in (0.05, 0.3, 1.0):
        u = uniform_max_upper(dist, s, 0.5, 0.05 / 25)
        for factor in (1.0, 1.001, 1.5, 10.0, 1e6):
            acc = bayes_accuracy(dist / (s * factor), 0.5)
            plain = bernstein_upper(acc, low=0.5, high=1.0, delta=0.05 / 25).max()
            assert u >= plain - 1e-15


def test_calibrate_per_record_end_to_end_and_attack():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(12, 2))
    plan = calibrate_per_record(sum_mech, x, target_accuracy=0.7, n_trials=60, rng=1,
                                execution=ExecutionOptions(progress=False))
    assert plan.max_accuracy_upper <= 0.7
    held_out = simulate_differences(sum_mech, x, n_trials=200, rng=99,
                                    execution=ExecutionOptions(progress=False))
    attack = informed_attack(held_out, plan, rng=5)
    assert attack.ci_low <= plan.max_accuracy_upper
    # the LR test is Bayes-optimal: its accuracy estimates the mean exposure
    expo = exposure_from_differences(held_out, noise_cov=plan)
    assert abs(attack.accuracy - expo.accuracy.mean()) <= 3 * (attack.ci_high - attack.ci_low)
    leak = informed_attack(held_out, None, rng=5)
    assert leak.ci_low > 0.5 and leak.accuracy == 1.0


# ----------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("sampler, why", [
    (FixedSizeSampler(2), "FixedSizeSampler"),
    (ComplementaryPairsSampler(), "ComplementaryPairsSampler"),
    ("pairs", "ComplementaryPairsSampler"),
    (lambda n, rng: rng.random(n) < 0.5, "PoissonSampler"),
])
def test_refuses_dependent_samplers(sampler, why):
    with pytest.raises(ValueError, match=why):
        record_exposure(never_called, X3, noise_cov=1.0, n_trials=4, sampler=sampler)
    with pytest.raises(ValueError, match="independent"):
        calibrate_per_record(never_called, X3, target_accuracy=0.6, n_trials=4,
                             sampler=sampler if not callable(sampler) else FixedSizeSampler(1))


@pytest.mark.parametrize("kwargs, match", [
    ({"noise_cov": 0.0}, "noise_cov"),
    ({"noise_cov": np.array([1.0, -1.0])}, "noise_cov"),
    ({"noise_cov": np.array([[1.0, 2.0], [2.0, 1.0]])}, "positive definite"),
    ({"noise_cov": 1.0, "records": [0, 9]}, r"records.*\[0, 3\]"),
    ({"noise_cov": 1.0, "records": [1, 1]}, "repeat"),
    ({"noise_cov": 1.0, "confidence": 1.0}, "confidence"),
    ({"noise_cov": 1.0, "sampler": "poisson-1"}, "sampling_rate"),
])
def test_bad_input_before_any_work(kwargs, match):
    args = {"n_trials": 4, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        if args.get("sampler") == "poisson-1":  # a degenerate rate fails when constructed
            args["sampler"] = PoissonSampler(1.0)
        record_exposure(never_called, X3, **args)


def test_uncertifiable_target_is_refused_before_work():
    # 4 records, all in the focus set: each gets γ/4, and 46 trials certify with every
    # distance 0 (45 do not); the floor said 54 (γ/8) and refused 46–53 trials that certify
    with pytest.raises(ValueError, match="needs at least 46 certification trials"):
        calibrate_per_record(never_called, X3, target_accuracy=0.55, n_trials=5)
    with pytest.raises(ValueError, match="smallest certifiable"):
        calibrate_per_record(never_called, X3, target_accuracy=0.55, n_trials=5,
                             bound="bernstein")
    with pytest.raises(ValueError, match="target_accuracy"):
        calibrate_per_record(never_called, X3, target_accuracy=0.5, n_trials=50)


@pytest.mark.slow
def test_calibrated_plan_covers_the_exact_exposure():
    """Over repeated calibrations, the exact max Aᵢ at the chosen scale is <= the target in at
    least 1 − γ of the runs (here: all 20; the bound is conservative)."""
    x = np.array([0.3, -1.2, 2.5, 0.8, -0.4, 1.9, -2.2, 0.1, 3.0, -0.7])
    bits = np.array(list(itertools.product((0, 1), repeat=9)), dtype=bool)
    weights = np.full(bits.shape[0], 1 / 512)
    gaps = []  # |f(S ∪ {i}) − f(S)| over all subsets S of the others, per record
    for i in range(10):
        others = np.delete(x, i)
        sums, counts = bits @ others, bits.sum(axis=1)
        out0 = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
        gaps.append(np.abs((sums + x[i]) / (counts + 1) - out0))
    gaps = np.array(gaps)
    target, failures = 0.62, 0
    for seed in range(20):
        diffs = simulate_differences(mean_1d, x[:, None], n_trials=120, rng=seed,
                                     execution=ExecutionOptions(progress=False))
        plan = calibrate_from_differences(diffs, target_accuracy=target)
        exact = (bayes_accuracy(gaps / plan.scale, 0.5) @ weights).max()
        failures += exact > target
        assert plan.max_accuracy_upper <= target
    assert failures <= 1  # 1 − γ = 0.95: about 1 of 20 allowed, in fact 0


def _global_rng_sum(subset):
    """Draws from numpy's global state: not reproducible from the trial seed."""
    return np.array([float(np.sum(subset)) + np.random.normal()])


def test_not_reproducible_mechanism_is_named_and_reported():
    """The warning names the user's mechanism; the exposure and its report say so."""
    from pacpriv.exceptions import NotReproducibleWarning
    from pacpriv.pac.per_record._report import per_record_section

    x = np.arange(1.0, 7.0)
    with pytest.warns(NotReproducibleWarning, match="_global_rng_sum") as record:
        res = record_exposure(_global_rng_sum, x, noise_cov=1.0, n_trials=20, rng=0,
                              execution=ExecutionOptions(progress=False))
    assert not any("pair_trial" in str(w.message) for w in record)
    assert res.reproducible is False and res.to_dict()["reproducible"] is False
    assert "Not reproducible" in per_record_section(res)["markdown"]


def test_errors_name_the_users_mechanism_not_the_pair_wrapper():
    """V1 review F4: `pac records` named pacpriv.pac.per_record._sim.pair_trial."""
    from pacpriv.exceptions import MechanismError
    from pacpriv.pac import simulate_differences

    def my_broken_mean(subset):
        raise ValueError("boom")

    with pytest.raises(MechanismError) as info:
        simulate_differences(my_broken_mean, np.zeros((8, 2)), n_trials=4, rng=0,
                             execution=ExecutionOptions(progress=False))
    assert "my_broken_mean" in str(info.value) and "pair_trial" not in str(info.value)


def test_tiny_outputs_are_refused_not_certified_with_zero_noise():
    # f = mean × 1e-170: the squared differences underflowed, every record looked unexposed
    # and the plan certified 52 % with noise 0
    from pacpriv.exceptions import MechanismError
    from pacpriv.pac import calibrate_per_record

    pool = np.random.default_rng(0).normal(size=(40, 2))
    with pytest.raises(MechanismError, match="non-zero magnitude below"):
        calibrate_per_record(lambda s: np.asarray(s).mean(axis=0) * 1e-170, pool,
                             target_accuracy=0.6, n_trials=300, records=np.arange(3), rng=0,
                             execution=ExecutionOptions(progress=False))


# ----------------------------------------------------------------------------- fast path
def _stable_wine():
    from sklearn.datasets import load_wine

    from pacpriv.mechanisms.stable_logistic import StableLogistic

    X, y = load_wine(return_X_y=True)
    X = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0)) * 2 - 1
    X, y = X[::6], y[::6]
    return StableLogistic.for_pool(X, classes=(0, 1, 2), sampling_rate=0.5), (X, y)


def test_fast_per_record_path_equals_the_generic_path():
    """A mechanism's per_record_differences is used once per trial; it gives the same
    differences as 1 + n plain evaluations, and its declared bounds travel with them."""
    mech, pool = _stable_wine()
    quiet = ExecutionOptions(progress=False)
    fast = simulate_differences(mech, pool, n_trials=3, rng=4, execution=quiet)
    slow = simulate_differences(lambda s: mech(s), pool, n_trials=3, rng=4, execution=quiet)
    assert np.max(np.abs(fast.differences - slow.differences)) <= mech.difference_error
    np.testing.assert_allclose(fast.outputs, slow.outputs, atol=1e-12)
    np.testing.assert_allclose(fast.difference_bound, mech.difference_bound(pool))
    assert fast.difference_error == mech.difference_error and slow.difference_bound is None


def test_calibration_uses_a_declared_range_and_covers_every_record():
    mech, pool = _stable_wine()
    plan = calibrate_per_record(mech, pool, target_accuracy=0.6, n_trials=56, rng=2,
                                execution=ExecutionOptions(progress=False))
    assert "declared sensitivity bound" in plan.range_source
    assert plan.covers_every_record and plan.coverage == f"every record ({pool[1].size})"
    class Blind:  # the same fast differences, no declared sensitivity
        def __call__(self, subset):
            return mech(subset)

        def per_record_differences(self, pool, mask, records=None):
            return mech.per_record_differences(pool, mask, records)

    blind = calibrate_per_record(Blind(), pool, target_accuracy=0.6, n_trials=56, rng=2,
                                 execution=ExecutionOptions(progress=False))
    assert blind.range_source.startswith("none (black box)")
    assert plan.scale < blind.scale  # the declared range tightens the certificate
    section = plan.report_section()
    assert "Coverage: every record of the pool" in section["markdown"]
    assert "betting confidence bound" in section["markdown"]


def test_whole_subset_mi_of_outputs_that_never_vary_is_zero():
    """A direction where the outputs never vary reveals nothing, even with no noise there;
    one that varies with no noise is unbounded (new-user review: constant mechanism)."""
    from pacpriv.pac.per_record._exposure import _whole_subset_mi
    from pacpriv.pac.per_record._math import NoiseGeometry

    rng = np.random.default_rng(3)
    const = np.ones((40, 3))
    assert _whole_subset_mi(const, NoiseGeometry(3, np.zeros(3))) == (0.0, 0.0)
    assert _whole_subset_mi(const, NoiseGeometry(3, np.eye(3)[0], np.eye(3), 0.0)) == (0.0, 0.0)
    varying = const.copy()
    varying[:, 1] = rng.normal(size=40)
    assert _whole_subset_mi(varying, NoiseGeometry(3, np.zeros(3)))[0] == math.inf
    # only coordinate 1 varies and has variance 2: ½ ln(1 + s²/2), ½ s²/2 (s² sample variance)
    mi, lin = _whole_subset_mi(varying, NoiseGeometry(3, np.array([0.0, 2.0, 0.0])))
    s2 = float(np.var(varying[:, 1], ddof=1))
    assert mi == pytest.approx(0.5 * math.log1p(s2 / 2.0), rel=1e-12)
    assert lin == pytest.approx(0.25 * s2, rel=1e-12)


def test_calibrating_a_constant_mechanism_reports_no_whole_subset_leak():
    def constant(subset):
        return np.ones(3)

    x = np.arange(12.0).reshape(6, 2)
    plan = calibrate_per_record(constant, x, target_accuracy=0.7, n_trials=40, rng=0,
                                execution=ExecutionOptions(progress=False))
    assert plan.scale == 0.0
    assert plan.exposure.whole_subset_mi == 0.0 and plan.mi_bound == 0.0
    assert plan.exposure.whole_subset_accuracy_bound == pytest.approx(0.5, abs=1e-12)
