"""``time_limit`` is enforced inside a batch, whatever the batch holds (ninth new-user pass,
#51/#53/#112): a mechanism fast in the timed probe and slow afterwards ran its whole run to
the end, because the limit was checked only when a batch returned and one batch held every
trial. Each batch now carries the deadline: it starts no trial past it, interrupts a trial
running at it (where a trial can be interrupted) and returns its finished trials, which the
run keeps in the checkpoint (bit-identical when resumed)."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from pacpriv.exceptions import TimeLimitError
from pacpriv.pac.engine import ExecutionOptions, _limit
from pacpriv.pac.engine._simulate import simulate
from pacpriv.pac.engine._trial import TrialTask, run_batch
from pacpriv.pac.samplers import as_sampler

POOL = np.random.default_rng(0).normal(size=(30, 3))
N_TRIALS = 400
#: seconds a trial sleeps: the whole run (N_TRIALS of them) takes 8 s on one worker, far
#: past the limits below (a regression that runs to the end fails; it does not raise)
TRIAL_S = 0.02


def slow(subset):
    # no sleep where the test says so (the resumed and the reference runs: an environment
    # variable, which the checkpoint's fingerprint of the mechanism does not cover)
    time.sleep(0.0 if os.environ.get("PACPRIV_TEST_FAST") else TRIAL_S)
    return subset.mean(axis=0) if len(subset) else np.zeros(3)


def sleeps_long(subset):
    """A trial that would run 20 s, in small steps (interruptible)."""
    end = time.monotonic() + 20.0
    while time.monotonic() < end:
        time.sleep(0.01)
    return np.zeros(3)


class SlowBlocks:
    """An ensemble mechanism (block contract): each block sleeps a little."""

    block_size = 4

    def run_block(self, pool, masks, *, seeds):
        time.sleep(TRIAL_S * len(masks))
        w = masks.astype(float)
        return (w @ pool) / np.maximum(w.sum(axis=1, keepdims=True), 1.0)

    def __call__(self, subset):
        return subset.mean(axis=0) if len(subset) else np.zeros(3)


def _task(mechanism, *, deadline, n_trials=N_TRIALS, block_size=0, timeout=None):
    return TrialTask(mechanism=mechanism, mechanism_name="m", pool=POOL, n_records=30,
                     sampler=as_sampler(None), root=np.random.SeedSequence(5), pass_rng=False,
                     retries=2, timeout=timeout, output_dtype=np.dtype(np.float64),
                     block_size=block_size, n_trials=n_trials, deadline=deadline)


@pytest.mark.parametrize("block_size", [0, 4])
def test_a_batch_returns_its_finished_trials_at_the_deadline(block_size):
    """One batch of every trial, a deadline 0.3 s away: it returns the trials finished by then
    (their rows bit-identical to a run without a deadline) and says it stopped."""
    mech = SlowBlocks() if block_size else slow
    cut = run_batch(_task(mech, deadline=time.time() + 0.3, block_size=block_size),
                    0, N_TRIALS, None)
    assert cut.stopped and cut.failure is None
    k = len(cut.outputs)
    assert 0 < k < N_TRIALS and len(cut.masks) == k
    whole = run_batch(_task(mech, deadline=None, n_trials=k, block_size=block_size), 0, k, None)
    assert not whole.stopped and len(whole.outputs) == k
    np.testing.assert_array_equal(cut.outputs, whole.outputs)
    np.testing.assert_array_equal(cut.masks, whole.masks)


def test_a_batch_past_its_deadline_starts_no_trial():
    calls = []

    def counted(subset):
        calls.append(1)
        return np.zeros(3)

    result = run_batch(_task(counted, deadline=time.time() - 1.0), 0, 10, None)
    assert result.stopped and len(result.outputs) == 0 and calls == []


def test_a_trial_running_at_the_deadline_is_interrupted_there_not_failed():
    """A trial still running at the deadline is stopped (this process: SIGALRM) and counted
    neither as finished nor as the mechanism's failure, even with retries and a longer
    per-trial timeout."""
    result = run_batch(_task(sleeps_long, deadline=time.time() + 0.3, timeout=15.0),
                       0, 5, None)
    assert result.stopped and result.failure is None and len(result.outputs) == 0


@pytest.mark.parametrize("n_jobs, backend", [(1, None), (2, "threading"), (2, "loky")])
def test_one_batch_of_every_trial_stops_at_the_limit_and_resumes(tmp_path, monkeypatch,
                                                                 n_jobs, backend):
    """``batch_size`` = every trial (what "auto" batching chose for a mechanism fast in the
    probe): the run stops at the limit with its finished trials in the checkpoint, and the
    same call without the limit resumes them to the outputs of an uninterrupted run."""
    monkeypatch.setattr(_limit, "_refuse_over", lambda *a, **k: None)  # the estimate passes
    ckpt = str(tmp_path / "ckpt")
    options = {"n_jobs": n_jobs, "backend": backend, "batch_size": N_TRIALS,
               "progress": False, "checkpoint": ckpt}
    with pytest.raises(TimeLimitError, match="reached its time limit") as info:
        simulate(slow, POOL, n_trials=N_TRIALS, rng=3,
                 execution=ExecutionOptions(time_limit=1.0, **options))
    done = info.value.n_done
    assert 0 <= done < N_TRIALS and _limit.kept_trials(ckpt, N_TRIALS) == done
    if n_jobs > 1:
        return  # the resume is the same code for every backend (checked once, below)
    assert done > 0
    monkeypatch.setenv("PACPRIV_TEST_FAST", "1")  # the rest runs fast (the outputs do not change)
    resumed = simulate(slow, POOL, n_trials=N_TRIALS, rng=3,
                       execution=ExecutionOptions(**options))
    assert resumed.resumed_trials == done
    whole = simulate(slow, POOL, n_trials=N_TRIALS, rng=3,
                     execution=ExecutionOptions(progress=False, batch_size=N_TRIALS))
    np.testing.assert_array_equal(resumed.outputs, whole.outputs)
    np.testing.assert_array_equal(resumed.masks, whole.masks)


#: How long a trial that ignores the limit runs: a regression waits for it (and fails), never
#: hangs.
STUBBORN_S = 20.0


#: Set by the test when it is over: a trial still running in a thread of this process ends
#: then (a batch redirects sys.stdout while it runs: left running, it would outlive the test)
_RELEASE, _ENDED = threading.Event(), threading.Event()


def stubborn(subset):
    """A trial that swallows every interrupt and runs STUBBORN_S seconds (a C call that cannot
    be interrupted looks the same to the parent)."""
    end = time.monotonic() + STUBBORN_S
    while time.monotonic() < end and not _RELEASE.is_set():
        try:
            time.sleep(0.02)
        except Exception:  # swallowing the interrupt is the point
            pass
    _ENDED.set()
    return np.zeros(3)


@pytest.mark.parametrize("backend", ["loky", "threading"])
def test_the_parent_stops_waiting_for_a_trial_that_ignores_the_limit(monkeypatch, backend):
    """Workers whose trial cannot be stopped (or that are still starting): the parent stops
    waiting shortly after the limit, not when the trial ends (not a wall-clock bound on the
    run: only that it did not wait out the trial)."""
    monkeypatch.setattr(_limit, "_refuse_over", lambda *a, **k: None)
    tic = time.monotonic()
    try:
        with pytest.raises(TimeLimitError, match="with 0 of 8 trials finished"):
            simulate(stubborn, POOL, n_trials=8, rng=0, execution=ExecutionOptions(
                n_jobs=2, backend=backend, progress=False, time_limit=1.0))
        assert time.monotonic() - tic < STUBBORN_S
    finally:
        _RELEASE.set()
        if backend == "threading":  # its trials run here: let them end before the next test
            _ENDED.wait(STUBBORN_S)
            time.sleep(0.2)
        _RELEASE.clear()
        _ENDED.clear()


def test_a_refused_estimate_never_reads_as_the_limit():
    """Ninth new-user pass #1302: "about 12 s ... over --time-limit 12 s". Durations are
    rounded up at the digit shown."""
    from pacpriv.pac.engine._probe import duration_text

    assert duration_text(12.3) == "13 s" and duration_text(12.0) == "12 s"
    assert duration_text(4.21) == "4.3 s" and duration_text(4.0) == "4.0 s"
    assert duration_text(130.0) == "2.2 min" and duration_text(7300.0) == "2.1 h"
