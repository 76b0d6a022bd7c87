"""ExecutionOptions: one object for the execution arguments (issue 9 item 4)."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv import pac_private
from pacpriv.pac import ExecutionOptions
from pacpriv.pac.engine import simulate
from pacpriv.pac.job import run_pac
from pacpriv.pac.options import merge_execution

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
    with pytest.raises(TypeError, match="ExecutionOptions"):
        merge_execution({"n_jobs": 1}, {"n_jobs": None}, n_jobs=None)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"retries": -1}, ValueError, "retries"),
    ({"timeout": 0.0}, ValueError, "timeout"),
    ({"batch_size": 0}, ValueError, "batch_size"),
    ({"progress": "yes"}, TypeError, "progress"),
    ({"backend": 3}, TypeError, "backend"),
])
def test_options_are_validated_on_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        ExecutionOptions(**kwargs)


def test_options_are_frozen():
    opts = ExecutionOptions()
    with pytest.raises(AttributeError):
        opts.n_jobs = 2  # type: ignore[misc]
