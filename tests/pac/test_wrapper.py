"""Tests of pacpriv.pac.wrapper: calibrate once, release with fresh noise, ledger, adapters."""

from __future__ import annotations

import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
from scipy import stats

from pacpriv.datasets import load_dataset
from pacpriv.exceptions import BudgetExceededError, PacprivWarning
from pacpriv.pac.bounds._ledger import PrivacyLedger
from pacpriv.pac.bounds._posterior import posterior_success_rate
from pacpriv.pac.wrapper import (
    PacPrivateFunction,
    from_estimator,
    from_torch,
    pac_private,
    sort_rows,
)

POOL_1D = np.linspace(0.0, 1.0, 12)[:, None]
SUBSET_1D = POOL_1D[::2]  # a subset of the pool: releases on it warn about nothing


def mean_1d(subset):
    """Mean of a 1-D pool in [0, 1] (0.5 for an empty subset)."""
    return np.array([subset.mean()]) if len(subset) else np.array([0.5])


def test_release_noise_std_matches_plan():
    """Releases on a fixed subset have mean f(subset) and the plan's noise variance (chi2 test)."""
    f = pac_private(mean_1d, mi_budget=0.05).calibrate(POOL_1D, n_trials=300, rng=0)
    assert f.plan.dim == 1 and f.plan.mi_bound <= 0.05
    subset = POOL_1D[::2]
    gen = np.random.default_rng(1)
    n = 2000
    rel = np.array([f(subset, rng=gen)[0] for _ in range(n)])
    var = f.plan.expected_noise_power  # d = 1: the noise variance
    stat = (n - 1) * rel.var(ddof=1) / var  # ~ chi2(n - 1) if the std matches the plan
    assert stats.chi2.ppf(0.0005, n - 1) < stat < stats.chi2.ppf(0.9995, n - 1)
    assert abs(rel.mean() - subset.mean()) < 4 * np.sqrt(var / n)
    assert f.ledger.spent == pytest.approx(n * 0.05)


def test_calibrate_stores_plan_and_bound():
    """calibrate returns self with plan, spectrum, simulation and the posterior bound p*(v)."""
    f = PacPrivateFunction(mean_1d, mi_budget=0.1, rule="isotropic")
    assert f.calibrate(POOL_1D, n_trials=50, rng=3) is f
    assert f.plan.rule == "isotropic" and f.simulation.n_trials == 50
    assert f.posterior_success_bound == pytest.approx(posterior_success_rate(0.1, prior=0.5))
    assert f.__name__ == "mean_1d"


def test_posterior_bound_uses_best_blind_guess():
    """Sampling rate 0.25: the blind guess "out" already succeeds 75% of the time."""
    from pacpriv.pac.samplers import PoissonSampler

    f = PacPrivateFunction(mean_1d, mi_budget=0.1, rule="isotropic")
    f.calibrate(POOL_1D, n_trials=50, rng=3, sampler=PoissonSampler(0.25))
    assert f.posterior_success_bound == pytest.approx(posterior_success_rate(0.1, prior=0.75))


def test_call_before_calibrate_raises():
    """Releasing before calibrate raises a RuntimeError that says what to do."""
    f = pac_private(mean_1d, mi_budget=0.1)
    with pytest.raises(RuntimeError, match=r"not calibrated: call .calibrate\(pool"):
        f(SUBSET_1D)


def test_budget_refusal_runs_nothing_and_records_nothing():
    """Over the total budget: BudgetExceededError, func not run, ledger unchanged."""
    calls = []

    @pac_private(mi_budget=0.1, total_budget=0.25)
    def counted(subset):
        calls.append(1)
        return mean_1d(subset)

    counted.calibrate(POOL_1D, n_trials=20, rng=0)
    calls.clear()
    counted(SUBSET_1D, label="first")
    counted(SUBSET_1D, label="second")
    with pytest.raises(BudgetExceededError, match="refused"):
        counted(SUBSET_1D, label="third")
    assert len(calls) == 2
    assert [e.label for e in counted.ledger.releases] == ["first", "second"]
    assert counted.ledger.spent == pytest.approx(0.2)


def test_failed_release_records_nothing():
    """A release whose output does not match the plan raises and charges nothing."""
    shape = [1]

    def changing(subset):
        return np.full(shape[0], subset.mean() if len(subset) else 0.5)

    f = pac_private(changing, mi_budget=0.1).calibrate(POOL_1D, n_trials=20, rng=0)
    shape[0] = 2
    with pytest.raises(ValueError, match=r"`value` must have shape \(1,\)"):
        f(SUBSET_1D)
    assert f.ledger.releases == []


def test_shared_ledger_composes_across_functions():
    """Two functions sharing a ledger add their budgets to the same total."""
    ledger = PrivacyLedger(total_budget=0.1875)  # 0.125 + 0.0625 exactly (no slack)
    a = pac_private(mean_1d, mi_budget=0.125, ledger=ledger).calibrate(POOL_1D, n_trials=20,
                                                                       rng=0)
    b = pac_private(mean_1d, mi_budget=0.0625, ledger=ledger).calibrate(POOL_1D, n_trials=20,
                                                                        rng=1)
    a(SUBSET_1D)
    b(SUBSET_1D)
    with pytest.raises(BudgetExceededError):
        b(SUBSET_1D)
    assert ledger.spent == 0.1875


def test_seeded_release_reproducible_and_unseeded_fresh():
    """The same seed gives the same release; rng=None draws fresh noise."""
    f = pac_private(mean_1d, mi_budget=0.05).calibrate(POOL_1D, n_trials=50, rng=0)
    assert np.array_equal(f(SUBSET_1D, rng=7), f(SUBSET_1D, rng=7))
    assert not np.array_equal(f(SUBSET_1D), f(SUBSET_1D))


def test_invalid_arguments():
    """Bad budget, rule, ledger combination and n_trials are rejected with named arguments."""
    with pytest.raises(ValueError, match=r"`mi_budget` must be in \(0.0, inf\)"):
        pac_private(mean_1d, mi_budget=0.0)
    with pytest.raises(ValueError, match="`rule` must be one of"):
        pac_private(mean_1d, mi_budget=0.1, rule="algorithm1")
    with pytest.raises(ValueError, match="either `ledger` or `total_budget`"):
        pac_private(mean_1d, mi_budget=0.1, total_budget=1.0, ledger=PrivacyLedger())
    with pytest.raises(TypeError, match="`func` must be callable"):
        PacPrivateFunction(3, mi_budget=0.1)
    with pytest.raises(ValueError, match="`n_trials` must be"):
        pac_private(mean_1d, mi_budget=0.1).calibrate(POOL_1D, n_trials=1)


def test_estimator_adapter_coef_shape_and_values():
    """from_estimator outputs the fitted coef_ and intercept_ of a clone, flattened."""
    from sklearn.linear_model import LogisticRegression

    iris = load_dataset("iris")
    template = LogisticRegression(max_iter=500)
    mech = from_estimator(template, ("coef_", "intercept_"))
    out = mech((iris.X, iris.y))
    direct = LogisticRegression(max_iter=500).fit(iris.X, iris.y)
    assert out.shape == (3 * 4 + 3,)
    np.testing.assert_allclose(out, np.r_[direct.coef_.ravel(), direct.intercept_], rtol=1e-6)
    assert not hasattr(template, "coef_")  # the template is never fitted
    again = pickle.loads(pickle.dumps(mech))
    np.testing.assert_array_equal(again((iris.X, iris.y)), out)


def test_estimator_adapter_in_wrapper():
    """A wrapped Ridge adapter calibrates through the engine and releases coef_ + intercept_."""
    from sklearn.linear_model import Ridge

    iris = load_dataset("iris")
    f = pac_private(from_estimator(Ridge()), mi_budget=0.1).calibrate(iris.pool, n_trials=10, rng=0)
    assert f.simulation.outputs.shape == (10, 5)
    secret = np.arange(iris.n_records) % 2 == 0
    assert f((iris.X[secret], iris.y[secret]), rng=1).shape == (5,)


def test_estimator_adapter_unsupervised_seeded_and_canonical():
    """KMeans via from_estimator: rng seeds random_state=None; sort_rows orders the centres."""
    from sklearn.cluster import KMeans

    X = load_dataset("iris").X
    mech = from_estimator(
        KMeans(n_clusters=3, n_init=1), ("cluster_centers_",), supervised=False,
        canonicalize=sort_rows,
    )
    a, b = mech(X, rng=5), mech(X, rng=5)
    np.testing.assert_array_equal(a, b)
    centers = a.reshape(3, 4)
    assert np.all(np.diff(centers[:, 0]) >= 0)


def test_estimator_adapter_errors():
    """Empty attributes, a missing attribute and a non-tuple supervised subset are rejected."""
    from sklearn.linear_model import LinearRegression

    with pytest.raises(ValueError, match="`attributes` must be a non-empty sequence"):
        from_estimator(LinearRegression(), ())
    with pytest.raises(TypeError, match="must be a scikit-learn estimator"):
        from_estimator(object())
    X = np.arange(10.0).reshape(5, 2)
    with pytest.raises(AttributeError, match="no attribute 'nope_'"):
        from_estimator(LinearRegression(), ("nope_",))((X, X[:, 0]))
    with pytest.raises(ValueError, match=r"is a supervised estimator .* not a pair \(X, y\)"):
        from_estimator(LinearRegression())(X)


def test_torch_adapter_output_shape_and_rng():
    """from_torch: flattened parameters after training; seeded; global torch state untouched."""
    torch = pytest.importorskip("torch")

    def factory():
        return torch.nn.Linear(4, 1)

    def train(model, subset, rng=None):
        X = torch.tensor(np.array(subset[0]), dtype=torch.float32)
        y = torch.tensor(np.array(subset[1]), dtype=torch.float32)[:, None]
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(5):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(X), y).backward()
            opt.step()

    iris = load_dataset("iris")
    mech = from_torch(factory, train)
    state = torch.random.get_rng_state()
    out = mech(iris.pool, rng=3)
    assert torch.equal(state, torch.random.get_rng_state())
    assert out.shape == (5,) and out.dtype == np.float64
    np.testing.assert_array_equal(out, mech(iris.pool, rng=3))
    assert not np.array_equal(out, mech(iris.pool, rng=4))


def test_import_does_not_load_torch():
    """Importing pacpriv.pac.wrapper never imports torch (lazy adapter)."""
    code = "import sys, pacpriv.pac.wrapper; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_release_seed_equal_to_the_recorded_calibration_seed_is_refused():
    """The calibration seed is recorded (simulation.root_seed): a release seeded with it could be
    regenerated by anyone who sees it, so the call refuses it before spending anything."""
    f = pac_private(mean_1d, mi_budget=0.05).calibrate(POOL_1D, n_trials=50, rng=9)
    with pytest.raises(ValueError, match="must differ from the calibration's `rng`"):
        f(SUBSET_1D, rng=9)
    with pytest.raises(ValueError, match="must differ from the calibration's `rng`"):
        f(SUBSET_1D, rng=np.random.SeedSequence(9))
    assert f.ledger.spent == 0.0
    assert np.isfinite(f(SUBSET_1D, rng=10)).all() and f.ledger.spent > 0


def _mean_3d(subset, rng=None):
    return np.asarray(subset, float).mean(axis=0)


@pytest.fixture(scope="module")
def calibrated_3d():
    pool = np.random.default_rng(0).normal(size=(80, 3))
    f = pac_private(_mean_3d, mi_budget=0.05, total_budget=10.0)
    return f.calibrate(pool, n_trials=100, rng=0), pool


def test_release_on_the_whole_pool_warns(calibrated_3d):
    """New-user review F11: membership is certain on the whole pool (in any order)."""
    f, pool = calibrated_3d
    for whole in (pool, pool[::-1], np.vstack([pool, pool[:3]])):
        with pytest.warns(PacprivWarning, match="on the whole calibration pool") as info:
            f(whole)
        assert len(info) == 1


def test_release_on_foreign_records_warns_without_values(calibrated_3d):
    """Records not in the pool get a warning with a count, never a value."""
    f, pool = calibrated_3d
    foreign = np.vstack([pool[:4], np.full((2, 3), 123456.75)])
    with pytest.warns(PacprivWarning, match=r"2 of the 6 input records are not records of the "
                                            "calibration pool") as info:
        f(foreign)
    message = str(info[0].message)
    assert "123456" not in message and repr(float(pool[0, 0]))[:6] not in message
    with pytest.warns(PacprivWarning, match="record shape"), pytest.raises(ValueError):
        f(np.ones((4, 2)))  # then the mechanism's (2,) output does not fit the plan


def test_release_on_a_subset_does_not_warn(calibrated_3d):
    """A subset of the pool (any order, integer-valued copies of float records too) is silent."""
    f, pool = calibrated_3d
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(pool[np.random.default_rng(1).random(80) < 0.5])
        f(pool[[5, 3, 1]])
        g = pac_private(_mean_3d, mi_budget=0.05).calibrate(
            np.arange(30.0).reshape(10, 3), n_trials=20, rng=0)
        g(np.arange(15).reshape(5, 3))  # int copies of float records: the same records


def test_tuple_pools_are_checked_record_by_record():
    """(X, y) pools: a record is the row of X with its label; a changed label is foreign."""
    iris = load_dataset("iris")

    def mean_xy(subset):
        X, y = subset
        return np.r_[X.mean(axis=0), y.mean()]

    f = pac_private(mean_xy, mi_budget=0.5).calibrate(iris.pool, n_trials=20, rng=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f((iris.X[:50], iris.y[:50]))
    with pytest.warns(PacprivWarning, match="1 of the 50 input records"):
        f((iris.X[:50], np.r_[iris.y[:49], 2]))  # record 49 relabelled


def test_only_digests_of_the_pool_are_kept(calibrated_3d):
    """The function keeps 16-byte keyed digests, not the pool's records."""
    f, _pool = calibrated_3d
    kept = [v for v in vars(f).values() if isinstance(v, np.ndarray)]
    assert [a.dtype for a in kept] == [np.dtype("S16")] and kept[0].shape == (80,)


# --- from_estimator: a wrong attribute is said in public words (seventh new-user pass) --------


@pytest.mark.parametrize("attributes,said", [
    (("nope_",), "fitted Ridge has no attribute 'nope_'"),
    (("steps[9].coef_",), "cannot index list with [9]"),
    (("coef_", "classes_"), "fitted Ridge has no attribute 'classes_'"),
])
def test_a_missing_attribute_is_named_not_withheld(attributes, said):
    """The attribute path is the caller's configuration: the error names it (it was a
    withheld ``raised AttributeError``); the chained cause stays."""
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from pacpriv.exceptions import MechanismError
    from pacpriv.pac.engine import ExecutionOptions
    from pacpriv.pac.wrapper import from_estimator, pac_private

    gen = np.random.default_rng(0)
    X, y = gen.normal(size=(40, 3)), gen.normal(size=40)
    est = make_pipeline(StandardScaler(), Ridge()) if "steps" in attributes[0] else Ridge()
    f = pac_private(from_estimator(est, attributes=attributes), mi_budget=0.05)
    with pytest.raises(MechanismError) as info:
        f.calibrate((X, y), n_trials=10, rng=0, execution=ExecutionOptions(progress=False))
    text = str(info.value)
    assert f"could not read its `attributes` entry {attributes[-1]!r}" in text
    assert said in text and "withheld" not in text and info.value.trial_index == 0


def test_a_non_numeric_attribute_names_its_dtype_never_its_values():
    from sklearn.linear_model import LogisticRegression

    from pacpriv.exceptions import MechanismError
    from pacpriv.pac.engine import ExecutionOptions
    from pacpriv.pac.wrapper import from_estimator, pac_private

    gen = np.random.default_rng(1)
    X = gen.normal(size=(60, 2))
    y = np.array(["secret-a", "secret-b"])[(X[:, 0] > 0).astype(int)]
    f = pac_private(from_estimator(LogisticRegression(), attributes=("classes_",)),
                    mi_budget=0.05)
    with pytest.raises(MechanismError, match=r"an array of dtype str.*, not numbers") as info:
        f.calibrate((X, y), n_trials=10, rng=0, execution=ExecutionOptions(progress=False))
    assert "secret" not in str(info.value)
