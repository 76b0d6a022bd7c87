"""One way in (issue 24 item 1): ``execution=ExecutionOptions(...)`` for every function that
runs trials or fits models; the 0.2 loose keywords were removed in 0.4 (a TypeError naming the
replacement)."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
from joblib import parallel_config

from pacpriv import PrivatePredictor, pac_private
from pacpriv.compare import compare_pac_dpsgd
from pacpriv.pac import (
    calibrate_per_record,
    compare_randomized_noise,
    coupling_noise,
    record_exposure,
    run_pac,
    simulate,
    simulate_differences,
)
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._options import REMOVED_EXECUTION

POOL = np.linspace(-1.0, 1.0, 40).reshape(20, 2)
QUIET = ExecutionOptions(progress=False)

RUNNERS = [simulate, run_pac, simulate_differences, record_exposure, calibrate_per_record,
           coupling_noise, compare_randomized_noise, compare_pac_dpsgd]


def _mean(subset):
    return np.asarray(subset).sum(axis=0) / 20.0


@pytest.mark.parametrize("func", RUNNERS, ids=lambda f: f.__name__)
def test_execution_is_the_one_execution_argument(func):
    """The signature has ``execution`` and none of the 0.2 loose keywords nor an ``**execution``
    passthrough (``compare_pac_dpsgd``'s ``**fields`` are ComparisonSettings fields: a loose
    execution keyword there is refused before it reaches them)."""
    params = inspect.signature(func).parameters
    assert "execution" in params and params["execution"].default is None
    assert not set(REMOVED_EXECUTION) & set(params)
    assert all(p.kind is not p.VAR_KEYWORD or p.name == "fields" for p in params.values())


def test_methods_that_fit_take_execution_too():
    for method in (PrivatePredictor.fit, type(pac_private(_mean, mi_budget=0.1)).calibrate):
        params = inspect.signature(method).parameters
        assert "execution" in params and not set(REMOVED_EXECUTION) & set(params)


def _never_called(subset):  # pragma: no cover - the tests check it is never reached
    raise AssertionError("the mechanism must not run when an argument is refused")


@pytest.mark.parametrize("func", RUNNERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("name", REMOVED_EXECUTION)
def test_a_removed_execution_keyword_is_a_type_error_naming_the_replacement(func, name):
    """0.4 removed the 0.2 loose keywords: each is refused before any work, naming
    ``execution=ExecutionOptions(...)``, with or without ``execution`` given."""
    replacement = (r"execution=ExecutionOptions\(\.\.\.\)" if name == "options"
                   else rf"execution=ExecutionOptions\({name}=\.\.\.\)")
    for execution in (None, QUIET):
        with pytest.raises(TypeError, match=rf"^{func.__name__}\(\) got an unexpected keyword "
                                            rf"argument '{name}'; pass {replacement}"):
            func(_never_called, POOL, execution=execution, **{name: 1})


def test_the_methods_refuse_removed_execution_keywords_too():
    with pytest.raises(TypeError, match=r"^fit\(\) got an unexpected keyword argument 'n_jobs'"
                                        r"; pass execution=ExecutionOptions\(n_jobs=\.\.\.\)"):
        PrivatePredictor.fit(None, n_jobs=2)  # type: ignore[arg-type]
    f = pac_private(_mean, mi_budget=0.1)
    with pytest.raises(TypeError, match=r"^calibrate\(\) got an unexpected keyword argument "
                                        r"'progress'; pass execution=ExecutionOptions"):
        f.calibrate(POOL, n_trials=4, progress=False)
    assert f.simulation is None


def test_execution_must_be_execution_options():
    with pytest.raises(TypeError, match="`execution` must be an ExecutionOptions or None"):
        simulate(_mean, POOL, n_trials=4, execution={"n_jobs": 2})


def test_parallel_config_decides_workers_and_backend_by_default():
    """joblib's convention: with n_jobs=None/backend=None an active parallel_config decides."""
    with parallel_config(backend="threading", n_jobs=2):
        res = simulate(_mean, POOL, n_trials=16, rng=4, execution=QUIET)
    assert (res.backend, res.n_jobs) == ("threading", 2)
    plain = simulate(_mean, POOL, n_trials=16, rng=4, execution=QUIET)
    assert (plain.backend, plain.n_jobs) == ("sequential", 1)
    np.testing.assert_array_equal(res.outputs, plain.outputs)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"n_jobs": 0}, ValueError, "n_jobs"),
    ({"ensemble": "yes"}, TypeError, "`ensemble` must be a bool"),
    ({"device": "tpu"}, ValueError, r"`device` must be one of \('cpu', 'cuda'\)"),
])
def test_new_fields_are_validated(kwargs, error, match):
    with pytest.raises(error, match=match):
        ExecutionOptions(**kwargs)


def test_replace_validates_and_keeps_the_rest():
    opts = ExecutionOptions(n_jobs=2, progress=False)
    assert opts.replace(retries=1) == ExecutionOptions(n_jobs=2, progress=False, retries=1)
    with pytest.raises(ValueError, match="retries"):
        opts.replace(retries=-1)


def test_no_warning_from_the_new_form():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_pac(_mean, POOL, mi_budget=0.1, n_trials=40, rng=2, release=False,
                execution=QUIET, rule="anisotropic")
        pac_private(_mean, mi_budget=0.1, rule="isotropic").calibrate(
            POOL, n_trials=20, rng=0, execution=QUIET)
