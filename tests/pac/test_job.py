"""End-to-end PAC job: simulate → calibrate → release → bounds (pacpriv.pac.job)."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.datasets import load_dataset
from pacpriv.mechanisms import make_kmeans
from pacpriv.pac.bounds._posterior import posterior_success_rate
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.job import run_pac
from pacpriv.pac.noise import Algorithm1, Certified
from pacpriv.pac.release import privatize

pytestmark = pytest.mark.usefixtures("one_native_thread")

SERIAL = ExecutionOptions(n_jobs=1, progress=False)
QUIET = ExecutionOptions(progress=False)
NO_CHECK = Certified(target_inflation=None)  # no trial-count check


def _clipped_mean(subset):
    """Module-level 1-D mechanism (picklable): clipped mean of column 0, empty -> 0."""
    x = np.clip(np.asarray(subset, dtype=float)[:, 0], 0.0, 10.0)
    return np.array([x.mean() if x.size else 0.0])


def test_kmeans_iris_main_job_posterior_reads_5882():
    """The issue's main job (k-means on iris, v = 1/64) reports the MATH.md posterior 58.82%."""
    data = load_dataset("iris")
    res = run_pac(make_kmeans(n_clusters=3), data.X, mi_budget=1 / 64, n_trials=200,
                  rng=0, release_rng=1,
                      execution=SERIAL, rule=NO_CHECK)
    assert res.posterior_success_bound == pytest.approx(0.588157, abs=5e-6)
    assert res.plan.mi_bound <= 1 / 64 + 1e-12
    assert res.release.shape == (12,)
    assert res.simulation.outputs.shape == (200, 12)


def test_release_is_secret_output_plus_planned_noise():
    """With a given secret mask, release − f(secret) has the plan's noise std (1-D check).

    run_pac's release is :func:`privatize` of ``f(secret)`` with the plan, drawn from the same
    release seed, bit for bit (checked end to end at a few seeds); the 300 draws of the
    distribution check are those same releases, without 300 identical simulations."""
    x = np.linspace(0, 10, 40)[:, None]
    base = run_pac(_clipped_mean, x, mi_budget=0.1, n_trials=100, rng=3, release=False,
                   execution=SERIAL, rule=NO_CHECK)
    mask = np.zeros(40, dtype=bool)
    mask[:20] = True
    f_secret = _clipped_mean(x[mask])[0]
    seeds = [i if i != 3 else 300 for i in range(300)]  # never the simulation seed rng=3
    for i in (0, 1, 2, 300, 299):
        job = run_pac(_clipped_mean, x, mi_budget=0.1, n_trials=100, rng=3, secret_mask=mask,
                      release_rng=i, execution=SERIAL, rule=NO_CHECK)
        assert np.array_equal(job.release, privatize(np.array([f_secret]), base.plan, rng=i))
    draws = np.array([privatize(np.array([f_secret]), base.plan, rng=i)[0] for i in seeds])
    std = float(base.plan.noise_std[0])
    # the certified rule releases clip(f(secret)) + B; its clip is fixed by the simulation
    clipped, was_clipped = base.plan.clip(np.array([f_secret]))
    assert was_clipped and clipped[0] != f_secret  # this secret lies outside the clip
    assert draws.mean() == pytest.approx(clipped[0], abs=4 * std / np.sqrt(300))
    assert draws.std(ddof=1) == pytest.approx(std, rel=0.15)


def test_same_seed_same_release_and_report_numbers():
    """Seeding both the simulation and the release makes the whole job reproducible."""
    x = np.linspace(0, 10, 30)[:, None]
    a = run_pac(_clipped_mean, x, mi_budget=0.05, n_trials=50, rng=5, release_rng=6,
                execution=SERIAL, rule=NO_CHECK)
    b = run_pac(_clipped_mean, x, mi_budget=0.05, n_trials=50, rng=5, release_rng=6,
                execution=SERIAL, rule=NO_CHECK)
    np.testing.assert_array_equal(a.release, b.release)
    da, db = a.to_dict(), b.to_dict()
    for d in (da, db):
        d["simulation"].pop("elapsed_s")
    assert da == db


def test_posterior_uses_claimed_mi_and_prior():
    """The posterior bound is the KL inversion of the plan's MI claim at the sampler prior."""
    x = np.linspace(0, 10, 30)[:, None]
    res = run_pac(_clipped_mean, x, mi_budget=0.125, n_trials=50, rng=1, release=False,
                  execution=SERIAL, rule=NO_CHECK)
    assert res.membership_prior == 0.5
    assert res.posterior_success_bound == pytest.approx(
        float(posterior_success_rate(0.125, prior=0.5)))
    assert res.release is None


@pytest.mark.parametrize("rate", [0.2, 0.8])
def test_posterior_uses_best_blind_guess_for_unbalanced_prior(rate):
    """With sampling rate q != 1/2 the blind guess "out" (or "in") succeeds max(q, 1-q) of the
    time, so the headline bound must be at least that (Thm 1 at prior max(q, 1-q))."""
    from pacpriv.pac.samplers import PoissonSampler

    x = np.linspace(0, 10, 30)[:, None]
    res = run_pac(_clipped_mean, x, mi_budget=0.05, n_trials=50, rng=1, release=False,
                  execution=SERIAL,
                  sampler=PoissonSampler(rate), rule=NO_CHECK)
    assert res.membership_prior == rate
    assert res.posterior_success_bound >= 0.8
    assert res.posterior_success_bound == pytest.approx(
        float(posterior_success_rate(0.05, prior=0.8)))
    assert res.pinsker_success_bound >= res.posterior_success_bound


def test_algorithm1_low_confidence_is_a_caveat():
    """Too few trials for the matrix-Bernstein count: the report must say the claim's
    certified confidence (here 0), not present the bound unconditionally."""
    from pacpriv.exceptions import UndersampledWarning

    x = np.linspace(0, 10, 30)[:, None]
    with pytest.warns(UndersampledWarning, match="Algorithm 1 claims"):
        res = run_pac(_clipped_mean, x, mi_budget=0.1, n_trials=20, rng=1, release=False,
                      execution=SERIAL,
                      rule=Algorithm1(c=1e-3, beta=0.05, output_bound=10.0))
    assert res.plan.confidence < 1.0
    assert any("Algorithm 1 claims" in note for note in res.notes)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mi_budget": 0.0}, "mi_budget"),
        ({"mi_budget": -1.0}, "mi_budget"),
        ({"mi_budget": 0.1, "n_trials": 1}, "n_trials"),
        ({"mi_budget": 0.1, "rule": "magic"}, "rule"),
        ({"mi_budget": 0.1, "secret_mask": np.ones(3, dtype=bool)}, "secret_mask"),
    ],
)
def test_run_pac_rejects_bad_input(kwargs, match):
    """Each bad argument gets a ValueError that names it."""
    x = np.linspace(0, 10, 30)[:, None]
    kwargs = {"n_trials": 10, "rule": NO_CHECK, **kwargs}
    with pytest.raises(ValueError, match=match):
        run_pac(_clipped_mean, x, rng=0, execution=SERIAL,
                **kwargs)


def test_budget_below_float_range_is_refused_before_any_trial():
    """V1 review: --mi-budget 1e-320 gave a NaN release with exit 0."""
    calls = []

    def f(subset):
        calls.append(1)
        return np.asarray(subset, dtype=float).mean(axis=0)

    pool = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.raises(ValueError, match=r"mi_budget.*>= 1e-300"):
        run_pac(f, pool, mi_budget=1e-320, n_trials=10, rng=0,
                execution=QUIET)
    assert calls == []


@pytest.mark.parametrize(
    ("pool", "kwargs", "error", "match"),
    [
        (np.array([[1.0, np.nan], [2, 3], [4, 5]]), {},
         ValueError, r"`pool` must hold finite numbers; record 0 has a NaN or infinite value"),
        (np.array([[1.0, 2.0]]), {}, ValueError, r"`pool` must contain at least 2 records"),
        (np.ones((10, 2)), {"n_jobs": 0}, ValueError, r"`n_jobs` must be a positive number"),
        (np.ones((10, 2)), {"n_jobs": "2"}, TypeError, r"`n_jobs` must be None or a nonzero"),
    ],
)
def test_pool_and_n_jobs_are_checked_before_any_trial(pool, kwargs, error, match):
    """New-user review F4: the API named neither the pool nor n_jobs and started the trials."""
    calls = []

    def f(subset):
        calls.append(1)
        return np.asarray(subset, dtype=float).mean(axis=0)

    with pytest.raises(error, match=match) as info:
        run_pac(f, pool, mi_budget=0.02, n_trials=20, rng=0,
                execution=ExecutionOptions(progress=False, **kwargs))
    assert calls == []
    assert "nan" not in str(info.value).lower().replace("a nan or", "")  # no value quoted


def test_object_pools_are_still_accepted():
    """Pools of non-numbers (texts) pass the pool check: only float arrays must be finite."""
    words = np.array(["a", "bb", "ccc", "dddd", "eeeee", "ffffff"], dtype=object)
    res = run_pac(lambda s: np.array([float(sum(map(len, s)))]), words, mi_budget=0.5,
                  n_trials=20, rng=0, execution=QUIET,
                  rule=NO_CHECK, release=False)
    assert res.simulation.n_records == 6


def test_noise_that_overflows_is_an_error_not_a_nan_release():
    from pacpriv.exceptions import CalibrationError

    pool = np.random.default_rng(0).normal(size=(30, 2)) * 1e110  # below 2^400
    with pytest.raises(CalibrationError, match="overflows float64"):
        run_pac(lambda s: np.asarray(s).mean(axis=0), pool, mi_budget=1e-290, n_trials=12,
                rule="anisotropic", rng=0, execution=QUIET)


def test_release_seed_equal_to_the_recorded_simulation_seed_is_refused():
    """The simulation seed is published in the report: a release drawn from it could be
    regenerated by any reader, so run_pac refuses it (a different seed, or a Generator, is
    the caller's choice and is marked caller-seeded)."""
    x = np.linspace(0.0, 1.0, 20)[:, None]
    with pytest.raises(ValueError, match="`release_rng` must differ from `rng`"):
        run_pac(_clipped_mean, x, mi_budget=0.1, n_trials=10, rng=4, release_rng=4,
                execution=SERIAL, rule=NO_CHECK)
    with pytest.raises(ValueError, match="`release_rng` must differ from `rng`"):
        run_pac(_clipped_mean, x, mi_budget=0.1, n_trials=10, rng=np.random.SeedSequence(4),
                release_rng=4,
                    execution=SERIAL, rule=NO_CHECK)
    res = run_pac(_clipped_mean, x, mi_budget=0.1, n_trials=10, rng=4, release_rng=5,
                  execution=SERIAL, rule=NO_CHECK)
    assert res.release_seeded and res.release is not None


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's, on the way to the failure
@pytest.mark.parametrize("rule", ["exact-mi"])
def test_numerical_calibration_failure_names_no_pool_value(rule):
    # coordinates 230 orders of magnitude apart: the exact-mi rule's error printed the
    # calibrated noise variance (array([7.0e+231, inf])), the certified rule an internal `bet`
    # (the certified rule now plans on outputs rescaled by a power of two: it answers, with
    # at least the spread's noise on both coordinates, tests/pac/test_output_scale.py)
    from pacpriv.exceptions import CalibrationError

    pool = np.random.default_rng(0).normal(size=(40, 2))

    def mixed(s):
        s = np.asarray(s)
        return np.array([s[:, 0].mean() * 1e-115, s[:, 1].mean() * 1e115])

    # the exact-mi search now works in log space (sixth new-user pass): it answers, with at
    # least each coordinate's spread of noise and a bound within the budget; where a rule still
    # refuses, its one line names no pool value
    try:
        res = run_pac(mixed, pool, mi_budget=0.02, n_trials=40, rule=rule, rng=1,
                      execution=QUIET)
    except CalibrationError as err:
        assert "e+2" not in str(err) and "array(" not in str(err)
        assert err.__cause__ is None and err.__suppress_context__
    else:
        spread = np.asarray(res.simulation.outputs).std(axis=0)
        assert res.plan.mi_bound <= 0.02 and np.all(res.noise_std_per_coordinate > spread)


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")  # few trials
@pytest.mark.parametrize(("rule", "extra"), [("algorithm1", {"c": 1e-3, "beta": 0.05}),
                                             ("certified", {})])
def test_output_bound_contradicted_by_the_outputs_is_refused(rule, extra):
    """A declared ||f(X)||₂ <= output_bound that a simulated output breaks makes the
    certificate's assumption false: a clear error (counts only, no output norm or value)."""
    from pacpriv.exceptions import CalibrationError
    from pacpriv.pac.noise._registry import rule_with

    x = np.linspace(3.0, 4.0, 30)[:, None]  # every mean lies in [3, 4]
    with pytest.raises(CalibrationError, match=r"`output_bound`=1.0 is violated: 40 of 40") as e:
        run_pac(_clipped_mean, x, mi_budget=0.1, n_trials=40, rng=1, release=False,
                execution=SERIAL, rule=rule_with(rule, output_bound=1.0, **extra))
    assert "3." not in str(e.value).replace("1.0", "")
    # a bound that holds is accepted
    run_pac(_clipped_mean, x, mi_budget=0.1, n_trials=40, rng=1, release=False,
            execution=SERIAL, rule=rule_with(rule, output_bound=4.5, **extra))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"c": -1.0, "beta": 0.1, "output_bound": 10.0}, "`c` must be in"),
    ({"c": 1e-3, "beta": -5.0, "output_bound": 10.0}, "`beta` must be in"),
    ({"c": 1e-3, "beta": 0.1}, "needs `output_bound`"),
    ({"beta": 0.1, "output_bound": 10.0}, "needs `c`"),
    ({"c": 1e-3, "beta": 0.1, "output_bound": 10.0, "confidence": 0.9},
     "cannot certify confidence=0.9"),
])
def test_algorithm1_parameters_are_checked_before_any_trial(kwargs, match):
    """They were checked after the whole simulation, with a misleading message."""
    calls = []

    def counted(subset):
        calls.append(1)
        return _clipped_mean(subset)

    x = np.linspace(0, 10, 30)[:, None]
    with pytest.raises(ValueError, match=match):
        run_pac(counted, x, mi_budget=0.1, n_trials=40, rng=1, release=False,
                execution=SERIAL, rule=Algorithm1(**kwargs))
    assert calls == []
