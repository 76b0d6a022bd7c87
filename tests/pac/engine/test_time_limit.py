"""``ExecutionOptions(time_limit=...)``: a limit on the whole run, checked before any trial
against a timed probe's estimate (refused with the estimate; nothing run, created or charged)
and enforced while it runs (stopped with the finished trials kept in the checkpoint, which the
same call resumes to the same result). Issue 35's leftover: ``pac run`` had no limit."""

from __future__ import annotations

import math
import pickle
import time

import numpy as np
import pytest

from pacpriv.exceptions import TimeLimitError
from pacpriv.pac.engine import ExecutionOptions, _limit
from pacpriv.pac.engine._simulate import simulate
from pacpriv.pac.job import run_pac

POOL = np.random.default_rng(0).normal(size=(40, 3))
CALLS: list[int] = []


def slow_mean(subset):
    CALLS.append(len(subset))
    time.sleep(0.01)
    return subset.mean(axis=0) if len(subset) else np.zeros(3)


def slow_pure(subset):
    time.sleep(0.01)
    return subset.mean(axis=0) if len(subset) else np.zeros(3)


def mean(subset):
    return subset.mean(axis=0) if len(subset) else np.zeros(3)


#: How long a "hanging" call waits before it gives up: a regression fails, never hangs.
HANG_S = 20.0


def _hang() -> None:
    end = time.monotonic() + HANG_S
    while time.monotonic() < end:
        time.sleep(0.01)


def hangs_after_first(subset, rng):
    if rng.random() < 0.5:  # some trials hang
        _hang()
    return subset.mean(axis=0) if len(subset) else np.zeros(3)


def test_refused_before_any_trial_with_the_estimate(tmp_path):
    """1000 trials of 10 ms over a 1 s limit: one probe call, an estimate of about 10 s, no
    checkpoint or output file created, nothing released."""
    CALLS.clear()
    ckpt, out = tmp_path / "ckpt", tmp_path / "out.npy"
    with pytest.raises(TimeLimitError) as info:
        run_pac(slow_mean, POOL, mi_budget=0.1, n_trials=1000, rng=1,
                execution=ExecutionOptions(progress=False, time_limit=1.0,
                                           checkpoint=str(ckpt)))
    assert len(CALLS) == 2  # the probe alone (a cold trial, then a warm one)
    err = info.value
    assert 1000 * 0.01 <= err.estimate_s < 1000 * 0.5 and err.n_done is None
    text = str(err)
    assert "1000 trials" in text and "over `time_limit` 1 s" in text
    assert "nothing was run or charged" in text and "\n" not in text
    assert not ckpt.exists()
    with pytest.raises(TimeLimitError):
        simulate(slow_mean, POOL, n_trials=1000, rng=1,
                 execution=ExecutionOptions(progress=False, time_limit=1.0, output_path=out))
    assert not out.exists()


def test_estimate_counts_only_the_trials_left_in_a_checkpoint(tmp_path):
    """A run finished in its checkpoint needs no trial: no probe, no refusal."""
    ckpt = str(tmp_path / "ckpt")
    first = simulate(slow_pure, POOL, n_trials=30, rng=2,
                     execution=ExecutionOptions(progress=False, checkpoint=ckpt))
    assert _limit.kept_trials(ckpt, 30) == 30 and _limit.kept_trials(ckpt, 10) == 10
    assert _limit.kept_trials(None, 30) == 0
    assert _limit.kept_trials(str(tmp_path / "none"), 30) == 0
    again = simulate(slow_pure, POOL, n_trials=30, rng=2,
                     execution=ExecutionOptions(progress=False, checkpoint=ckpt,
                                                time_limit=0.05))
    assert again.resumed_trials == 30
    np.testing.assert_array_equal(again.outputs, first.outputs)


def test_stopped_at_the_limit_keeps_the_checkpoint_and_resumes_bit_for_bit(tmp_path,
                                                                           monkeypatch):
    """A run that outlasts its limit (the probe's estimate let it start) stops with a count of
    finished trials; the same call without the limit resumes them to the same outputs as an
    uninterrupted run."""
    monkeypatch.setattr(_limit, "_refuse_over", lambda *a, **k: None)  # the estimate passes
    ckpt = str(tmp_path / "ckpt")
    with pytest.raises(TimeLimitError) as info:
        simulate(slow_pure, POOL, n_trials=120, rng=3,
                 execution=ExecutionOptions(progress=False, checkpoint=ckpt, time_limit=0.3))
    done = info.value.n_done
    assert 0 < done < 120 and info.value.estimate_s is None
    assert f"with {done} of 120 trials finished" in str(info.value)
    assert "kept in the checkpoint" in str(info.value) and "to resume" in str(info.value)
    assert _limit.kept_trials(ckpt, 120) == done
    resumed = simulate(slow_pure, POOL, n_trials=120, rng=3,
                       execution=ExecutionOptions(progress=False, checkpoint=ckpt))
    assert resumed.resumed_trials == done
    whole = simulate(slow_pure, POOL, n_trials=120, rng=3,
                     execution=ExecutionOptions(progress=False))
    np.testing.assert_array_equal(resumed.outputs, whole.outputs)
    np.testing.assert_array_equal(resumed.masks, whole.masks)


def test_stopped_without_a_checkpoint_says_how_to_keep_trials(monkeypatch):
    monkeypatch.setattr(_limit, "_refuse_over", lambda *a, **k: None)
    with pytest.raises(TimeLimitError, match=r"not kept \(no `checkpoint`\)"):
        run_pac(slow_pure, POOL, mi_budget=0.1, n_trials=120, rng=3,
                execution=ExecutionOptions(progress=False, time_limit=0.2))


def test_a_hanging_trial_cannot_outlast_the_limit(monkeypatch):
    """No per-trial timeout given: the limit caps it, and the hang ends as a time-limit stop
    (not a mechanism error)."""
    monkeypatch.setattr(_limit, "_refuse_over", lambda *a, **k: None)
    tic = time.monotonic()
    with pytest.raises(TimeLimitError, match="reached its time limit"):
        simulate(hangs_after_first, POOL, n_trials=50, rng=4,
                 execution=ExecutionOptions(progress=False, time_limit=0.5))
    assert time.monotonic() - tic < HANG_S


def test_a_probe_that_hangs_is_stopped_at_the_limit():
    tic = time.monotonic()
    with pytest.raises(TimeLimitError, match=r"did not finish within 0.3 s \(`time_limit`\); "
                       "nothing was run or charged"):
        simulate(_always_hangs, POOL, n_trials=10, rng=5,
                 execution=ExecutionOptions(progress=False, time_limit=0.3))
    assert time.monotonic() - tic < HANG_S


def _always_hangs(subset):
    _hang()
    return np.zeros(3)


def test_within_the_limit_the_results_do_not_change():
    """A generous limit changes nothing: same outputs and masks as no limit."""
    a = simulate(mean, POOL, n_trials=64, rng=6, execution=ExecutionOptions(progress=False))
    b = simulate(mean, POOL, n_trials=64, rng=6,
                 execution=ExecutionOptions(progress=False, time_limit=600.0))
    np.testing.assert_array_equal(a.outputs, b.outputs)
    np.testing.assert_array_equal(a.masks, b.masks)


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, 10**400])
def test_bad_limits_fail_before_any_work(bad):
    with pytest.raises(ValueError, match=r"`time_limit` must be a number of seconds in "
                       r"\(0, inf\)"):
        ExecutionOptions(time_limit=bad)


@pytest.mark.parametrize("bad", ["5", True, [1.0]])
def test_limits_of_the_wrong_type(bad):
    with pytest.raises(TypeError, match="`time_limit`"):
        ExecutionOptions(time_limit=bad)


def test_the_error_survives_pickling():
    err = pickle.loads(pickle.dumps(TimeLimitError("x", estimate_s=2.5, n_done=None)))
    assert isinstance(err, TimeoutError) and err.estimate_s == 2.5 and str(err) == "x"


def test_a_run_that_fits_costs_one_probe_trial():
    """A cold trial whose estimate fits starts the run at once: one extra call, no more."""
    counts = []
    for limit in (None, 600.0):
        CALLS.clear()
        simulate(slow_mean, POOL, n_trials=10, rng=7,
                 execution=ExecutionOptions(progress=False, time_limit=limit))
        counts.append(len(CALLS))
    assert counts[1] == counts[0] + 1


@pytest.mark.parametrize("value", [10**400, -(10**400), 10**40000],
                         ids=["1e400", "-1e400", "1e40000"])
def test_an_integer_beyond_float64_is_named_as_such(value):
    """`time_limit=10**400` said "got inf": the caller passed no inf (new-user pass 10)."""
    from pacpriv.pac.engine import ExecutionOptions

    with pytest.raises(ValueError, match=r"got an integer of about \d+ digits, too large for "
                                         r"float64") as info:
        ExecutionOptions(time_limit=value)
    assert "inf." not in str(info.value)
