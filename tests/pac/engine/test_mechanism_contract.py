"""The mechanism contract (pacpriv.pac.engine._mechanism): simulation and release call ``f`` alike.

Before 0.2 the engine's trials, the release in ``run_pac`` and the wrapper each had their own
rule for "does f take rng"; ``def f(subset, **kw)`` was calibrated without ``rng`` and released
with it. Each test records how ``f`` was called on every path and compares.
"""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv import pac_private
from pacpriv.exceptions import MechanismError
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._checkpoint import run_fingerprint
from pacpriv.pac.engine._mechanism import (
    InvalidOutput,
    accepts_rng,
    call_mechanism,
    check_output,
    mechanism_fingerprint,
    subset_pool,
)
from pacpriv.pac.engine._simulate import simulate
from pacpriv.pac.job import run_pac
from pacpriv.pac.noise._randomized import coupling_noise
from pacpriv.pac.samplers import PoissonSampler

# small trial counts on purpose: the certified rule's trial-planning warning is not the subject
pytestmark = pytest.mark.filterwarnings(
    "ignore:n_trials = .* is below the:pacpriv.exceptions.UndersampledWarning"
)

POOL = np.linspace(-1.0, 1.0, 40).reshape(20, 2)


def _recorder(kind: str):
    """A mechanism with the given signature that records whether it received a Generator."""
    calls: list[bool] = []

    def value(subset):
        return np.asarray(subset, dtype=float).sum(axis=0) / 20.0

    if kind == "var_keyword":
        def f(subset, **kw):
            calls.append(isinstance(kw.get("rng"), np.random.Generator))
            return value(subset)
    elif kind == "keyword_only":
        def f(subset, *, rng=None):
            calls.append(isinstance(rng, np.random.Generator))
            return value(subset)
    elif kind == "positional_or_keyword":
        def f(subset, rng=None):
            calls.append(isinstance(rng, np.random.Generator))
            return value(subset)
    elif kind == "positional_only":
        def f(subset, rng=None, /):
            calls.append(isinstance(rng, np.random.Generator))
            return value(subset)
    else:
        def f(subset):
            calls.append(False)
            return value(subset)
    return f, calls


EXPECTED = {
    "var_keyword": True,
    "keyword_only": True,
    "positional_or_keyword": True,
    "positional_only": False,  # rng cannot be passed by keyword: left to its default
    "none": False,
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_accepts_rng_rule(kind):
    f, _ = _recorder(kind)
    assert accepts_rng(f) is EXPECTED[kind]


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_simulation_and_release_call_f_the_same_way(kind):
    """Every simulated trial and the release receive rng, or none of them does."""
    f, calls = _recorder(kind)
    res = run_pac(f, POOL, mi_budget=0.2, n_trials=30, rng=0, release_rng=1,
                  execution=ExecutionOptions(n_jobs=1, progress=False))
    assert res.release is not None
    # 30 trials + the reproducibility re-runs (trials 0, 14, 29: cheap trials) + the release
    assert len(calls) == 34
    assert set(calls) == {EXPECTED[kind]}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_wrapper_calibration_and_release_call_f_the_same_way(kind):
    f, calls = _recorder(kind)
    wrapped = pac_private(f, mi_budget=0.2)
    wrapped.calibrate(POOL, n_trials=30, rng=0, execution=ExecutionOptions(n_jobs=1))
    wrapped(POOL[:10], rng=2)
    assert len(calls) == 34  # 30 trials + the reproducibility re-runs + the release
    assert set(calls) == {EXPECTED[kind]}


@pytest.mark.parametrize("kind", ["var_keyword", "positional_only"])
def test_randomized_path_uses_the_same_rule(kind):
    f, calls = _recorder(kind)
    coupling_noise(f, POOL, mi_budget=0.2, n_pairs=4, tau=2, rng=0,
                   execution=ExecutionOptions(n_jobs=1))
    assert calls and set(calls) == {EXPECTED[kind]}


def test_simulation_generator_is_the_trials_mechanism_stream():
    """With rng, a trial's output is reproducible from the root seed (same seed, same draw)."""
    def f(subset, **kw):
        return np.array([kw["rng"].normal(), float(len(subset))])

    a = simulate(f, POOL, n_trials=8, rng=3, execution=ExecutionOptions(n_jobs=1, progress=False))
    b = simulate(f, POOL, n_trials=8, rng=3, execution=ExecutionOptions(n_jobs=1, progress=False))
    np.testing.assert_array_equal(a.outputs, b.outputs)
    assert np.unique(a.outputs[:, 0]).size == 8  # a fresh generator per trial


def test_checkpoint_fingerprint_records_the_rule():
    f_kw, _ = _recorder("var_keyword")
    f_pos, _ = _recorder("positional_only")
    assert mechanism_fingerprint(f_kw)["accepts_rng"] is True
    assert mechanism_fingerprint(f_pos)["accepts_rng"] is False
    fp = run_fingerprint(f_kw, POOL, PoissonSampler(), np.float64)
    assert fp["mechanism"]["accepts_rng"] is True


def test_subset_pool_array_and_tuple():
    mask = np.zeros(20, dtype=bool)
    mask[[1, 5]] = True
    np.testing.assert_array_equal(subset_pool(POOL, mask), POOL[[1, 5]])
    y = np.arange(20)
    X_sub, y_sub = subset_pool((POOL, y), mask)
    np.testing.assert_array_equal(X_sub, POOL[[1, 5]])
    np.testing.assert_array_equal(y_sub, [1, 5])


def test_call_mechanism_turns_seeds_into_generators():
    seen = []
    call_mechanism(lambda s, *, rng: seen.append(rng), None, rng=7)
    assert isinstance(seen[0], np.random.Generator)
    assert seen[0].integers(1 << 30) == np.random.default_rng(7).integers(1 << 30)
    assert call_mechanism(lambda s: s + 1, 1, rng=7) == 2


@pytest.mark.parametrize("bad, match", [
    ([np.nan, 1.0], "not finite"), ([[1.0, 2.0]], "1-D"), ([1 + 2j], "real"), ([], "1-D"),
])
def test_check_output_rejects(bad, match):
    with pytest.raises(InvalidOutput, match=match):
        check_output(bad, None)


def test_release_output_is_checked_like_a_trial():
    """A release that returns NaN fails with the same check as a simulated trial."""
    state = {"n": 0}

    def f(subset):
        state["n"] += 1
        # calls 1-20: the trials, 21-23: the engine's reproducibility re-runs (trials 0, 9
        # and 19), 24: the release
        return np.array([np.nan]) if state["n"] > 23 else np.array([len(subset) / 20.0])

    # a MechanismError, as a trial's invalid output is (thirteenth new-user pass)
    with pytest.raises(MechanismError, match=r"on the release's secret subset .*not finite"):
        run_pac(f, POOL, mi_budget=0.2, n_trials=20, rng=0,
                execution=ExecutionOptions(n_jobs=1, progress=False))
