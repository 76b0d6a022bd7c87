"""ExecutionOptions: one object for the execution arguments (issue 9 item 4)."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv import pac_private
from pacpriv.pac import ExecutionOptions
from pacpriv.pac.engine._simulate import simulate
from pacpriv.pac.job import run_pac
from pacpriv.pac.per_record._calibration import calibrate_per_record
from pacpriv.pac.per_record._exposure import record_exposure, simulate_differences

# small trial counts on purpose: the certified rule's trial-planning warning is not the subject
pytestmark = pytest.mark.filterwarnings(
    "ignore:n_trials = .* is below the:pacpriv.exceptions.UndersampledWarning"
)

POOL = np.linspace(-1.0, 1.0, 60).reshape(30, 2)


def mean(subset):
    return np.asarray(subset).sum(axis=0) / 30.0


def test_options_give_the_same_trials_as_the_keywords():
    a = simulate(mean, POOL, n_trials=40, rng=1, n_jobs=1, progress=False, retries=1)
    b = simulate(mean, POOL, n_trials=40, rng=1,
                 options=ExecutionOptions(n_jobs=1, progress=False, retries=1))
    np.testing.assert_array_equal(a.outputs, b.outputs)
    np.testing.assert_array_equal(a.masks, b.masks)


def test_options_reach_the_engine_through_run_pac_and_the_wrapper(tmp_path):
    """A checkpoint given only in the options is written by run_pac and by pac_private."""
    opts = ExecutionOptions(n_jobs=1, progress=False, checkpoint=tmp_path / "a")
    res = run_pac(mean, POOL, mi_budget=0.2, n_trials=20, rng=0, release=False, options=opts)
    assert (tmp_path / "a").is_dir() and res.simulation.n_trials == 20
    f = pac_private(mean, mi_budget=0.2)
    f.calibrate(POOL, n_trials=20, rng=0,
                options=ExecutionOptions(progress=False, checkpoint=tmp_path / "b"))
    assert (tmp_path / "b").is_dir()
    np.testing.assert_array_equal(f.simulation.outputs, res.simulation.outputs)


def test_options_and_changed_keywords_together_are_rejected():
    with pytest.raises(TypeError, match=r"either in `options` or individually.*n_jobs"):
        simulate(mean, POOL, n_trials=4, n_jobs=2, options=ExecutionOptions(progress=False))


@pytest.mark.parametrize("kwargs, error, match", [
    ({"retries": -1}, ValueError, "retries"),
    ({"timeout": 0.0}, ValueError, "timeout"),
    ({"batch_size": 0}, ValueError, "batch_size"),
    ({"progress": "yes"}, TypeError, "progress"),
    ({"backend": 3}, TypeError, "backend"),
    ({"n_jobs": 0}, ValueError, r"`n_jobs` must be a positive number of workers or negative"),
    ({"n_jobs": 2.0}, TypeError, "`n_jobs` must be None or a nonzero integer"),
])
def test_options_are_validated_on_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        ExecutionOptions(**kwargs)


def test_options_are_frozen():
    opts = ExecutionOptions()
    with pytest.raises(AttributeError):
        opts.n_jobs = 2  # type: ignore[misc]


# ----------------------------------------------------------------------------- per-record PAC
X4 = np.array([[1.0, 0.0], [2.0, 1.0], [0.5, -0.5], [0.0, 3.0]])
PER_RECORD_OPTIONS = ExecutionOptions(n_jobs=1, progress=False, retries=1, batch_size=2)
PER_RECORD_KEYWORDS = {"n_jobs": 1, "progress": False, "retries": 1, "batch_size": 2}


def sum_with_theta(subset, rng):
    return np.append(subset.sum(axis=0), rng.normal(size=2))


def never_called(subset):  # pragma: no cover - the tests check it is never reached
    raise AssertionError("the mechanism must not run when the arguments clash")


def test_simulate_differences_options_give_the_same_differences():
    a = simulate_differences(sum_with_theta, X4, n_trials=6, rng=3, **PER_RECORD_KEYWORDS)
    b = simulate_differences(sum_with_theta, X4, n_trials=6, rng=3, options=PER_RECORD_OPTIONS)
    np.testing.assert_array_equal(a.differences, b.differences)
    np.testing.assert_array_equal(a.outputs, b.outputs)
    np.testing.assert_array_equal(a.simulation.masks, b.simulation.masks)
    assert np.any(a.differences != 0)  # the comparison is not vacuous
    with pytest.raises(TypeError, match=r"either in `options` or individually.*retries"):
        simulate_differences(never_called, X4, n_trials=6, retries=2,
                             options=PER_RECORD_OPTIONS)


def test_record_exposure_options_give_the_same_bounds():
    a = record_exposure(sum_with_theta, X4, noise_cov=4.0, n_trials=6, rng=3,
                        **PER_RECORD_KEYWORDS)
    b = record_exposure(sum_with_theta, X4, noise_cov=4.0, n_trials=6, rng=3,
                        options=PER_RECORD_OPTIONS)
    np.testing.assert_array_equal(a.accuracy, b.accuracy)
    np.testing.assert_array_equal(a.accuracy_upper, b.accuracy_upper)
    np.testing.assert_array_equal(a.mi_upper, b.mi_upper)
    assert a.whole_subset_mi == b.whole_subset_mi
    with pytest.raises(TypeError, match=r"either in `options` or individually.*n_jobs"):
        record_exposure(never_called, X4, noise_cov=4.0, n_trials=6, n_jobs=2,
                        options=PER_RECORD_OPTIONS)


def test_calibrate_per_record_options_give_the_same_plan():
    kw = {"target_accuracy": 0.7, "n_trials": 60, "rng": 1}
    a = calibrate_per_record(sum_with_theta, X4, **kw, **PER_RECORD_KEYWORDS)
    b = calibrate_per_record(sum_with_theta, X4, **kw, options=PER_RECORD_OPTIONS)
    np.testing.assert_array_equal(a.noise_std, b.noise_std)
    assert a.scale == b.scale and a.max_accuracy_upper == b.max_accuracy_upper
    np.testing.assert_array_equal(a.accuracy_upper, b.accuracy_upper)
    with pytest.raises(TypeError, match=r"either in `options` or individually.*progress"):
        calibrate_per_record(never_called, X4, **kw, progress=False,
                             options=ExecutionOptions(progress=False))


def test_an_unknown_execution_argument_is_named():
    with pytest.raises(TypeError, match=r"unexpected execution argument\(s\) n_job;"):
        simulate_differences(never_called, X4, n_trials=6, n_job=2)
    with pytest.raises(TypeError, match=r"unexpected execution argument\(s\) n_job;"):
        simulate_differences(never_called, X4, n_trials=6, n_job=2, options=PER_RECORD_OPTIONS)
