"""ExecutionOptions: one object for the execution arguments (issue 9 item 4)."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv import pac_private
from pacpriv.pac import ExecutionOptions
from pacpriv.pac.job import run_pac
from pacpriv.pac.per_record._exposure import simulate_differences

# small trial counts on purpose: the certified rule's trial-planning warning is not the subject
pytestmark = pytest.mark.filterwarnings(
    "ignore:n_trials = .* is below the:pacpriv.exceptions.UndersampledWarning"
)

POOL = np.linspace(-1.0, 1.0, 60).reshape(30, 2)


def mean(subset):
    return np.asarray(subset).sum(axis=0) / 30.0


def test_options_reach_the_engine_through_run_pac_and_the_wrapper(tmp_path):
    """A checkpoint given only in the options is written by run_pac and by pac_private."""
    opts = ExecutionOptions(n_jobs=1, progress=False, checkpoint=tmp_path / "a")
    res = run_pac(mean, POOL, mi_budget=0.2, n_trials=20, rng=0, release=False, execution=opts)
    assert (tmp_path / "a").is_dir() and res.simulation.n_trials == 20
    f = pac_private(mean, mi_budget=0.2)
    f.calibrate(POOL, n_trials=20, rng=0,
                execution=ExecutionOptions(progress=False, checkpoint=tmp_path / "b"))
    assert (tmp_path / "b").is_dir()
    np.testing.assert_array_equal(f.simulation.outputs, res.simulation.outputs)


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


def never_called(subset):  # pragma: no cover - the tests check it is never reached
    raise AssertionError("the mechanism must not run when an argument is refused")


def test_a_misspelt_execution_argument_is_named():
    for execution in (None, ExecutionOptions(progress=False)):
        with pytest.raises(TypeError, match=r"unexpected keyword argument 'n_job'"):
            simulate_differences(never_called, X4, n_trials=6, n_job=2, execution=execution)
