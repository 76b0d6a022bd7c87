"""``time_limit`` covers what runs after the trials too (eleventh new-user pass, #3, #4, #214,
#540, #707): a checkpoint's verification re-runs, the reproducibility check, the analysis and
the release's one call. A run never finishes past its limit; it stops with a
``TimeLimitError`` and keeps its trials in the checkpoint. The assertions count the calls that
finished (a call interrupted at the limit never records itself), not seconds."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import pacpriv.pac._pipeline as pipeline
from pacpriv.exceptions import TimeLimitError
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._simulate import simulate
from pacpriv.pac.job import run_pac
from pacpriv.pac.per_record._calibration import calibrate_per_record

pytestmark = pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")

POOL = np.random.default_rng(0).normal(size=(40, 3))
FINISHED: list[int] = []


def _wait(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:  # interruptible (SIGALRM) at every step
        time.sleep(0.01)


def env_slow(subset):
    """Sleeps ``PACPRIV_TEST_SLEEP`` seconds (read at call time: the mechanism's state, and so
    its checkpoint, stay the same when the variable changes)."""
    _wait(float(os.environ.get("PACPRIV_TEST_SLEEP", "0")))
    FINISHED.append(len(subset))
    return subset.mean(axis=0) if len(subset) else np.zeros(3)


def slow_release(subset):
    """Quick on the trials' Poisson-½ subsets, 20 s on the whole pool (the release below)."""
    if len(subset) == POOL.shape[0]:
        _wait(20.0)
        FINISHED.append(-1)
    return subset.mean(axis=0) if len(subset) else np.zeros(3)


def _complete_checkpoint(path, monkeypatch, n_trials=12):
    monkeypatch.setenv("PACPRIV_TEST_SLEEP", "0")
    FINISHED.clear()  # the mechanism's state (and so the checkpoint's) includes this list
    simulate(env_slow, POOL, n_trials=n_trials, rng=3,
             execution=ExecutionOptions(progress=False, checkpoint=str(path)))
    monkeypatch.setenv("PACPRIV_TEST_SLEEP", "0.7")
    FINISHED.clear()


@pytest.mark.parametrize("entry", ["simulate", "run_pac"])
def test_a_resume_stops_in_its_verification_re_runs(tmp_path, monkeypatch, entry):
    """A complete checkpoint re-runs two recorded trials to verify it; at 0.7 s a call, a
    1.0 s limit stops the second one (0.2: it ran both to the end, 1.4 s, and released)."""
    ckpt = tmp_path / "ck"
    _complete_checkpoint(ckpt, monkeypatch)
    options = ExecutionOptions(progress=False, checkpoint=str(ckpt), time_limit=1.0)
    with pytest.raises(TimeLimitError) as info:
        if entry == "simulate":
            simulate(env_slow, POOL, n_trials=12, rng=3, execution=options)
        else:
            run_pac(env_slow, POOL, mi_budget=0.5, n_trials=12, rng=3, execution=options)
    assert len(FINISHED) == 1  # the first re-run finished; the second was stopped
    text = str(info.value)
    assert "verifying the checkpoint" in text and "12 of 12 trials finished" in text
    assert "kept in the checkpoint" in text and "Nothing was released" in text
    # the trials are kept: without the limit the same call resumes and releases
    monkeypatch.setenv("PACPRIV_TEST_SLEEP", "0")
    FINISHED.clear()
    result = run_pac(env_slow, POOL, mi_budget=0.5, n_trials=12, rng=3,
                     execution=ExecutionOptions(progress=False, checkpoint=str(ckpt)))
    assert result.simulation.resumed_trials == 12 and result.release is not None


def test_the_release_call_is_stopped_at_the_limit(tmp_path):
    """The trials and their analysis fit in the limit; the release's call does not: it is
    interrupted, nothing is released, and the trials stay in the checkpoint."""
    FINISHED.clear()
    ckpt = tmp_path / "ck"
    with pytest.raises(TimeLimitError) as info, pytest.warns(UserWarning):
        run_pac(slow_release, POOL, mi_budget=0.5, n_trials=12, rng=4,
                secret_mask=np.ones(POOL.shape[0], dtype=bool),
                execution=ExecutionOptions(progress=False, checkpoint=str(ckpt),
                                           time_limit=3.0))
    assert FINISHED == []  # the 20 s release call never ran to its end
    text = str(info.value)
    assert "during the release's call of the mechanism" in text
    assert "12 of 12 trials finished" in text and "Nothing was released" in text
    assert info.value.n_done == 12


def test_an_analysis_past_the_limit_stops_the_run(monkeypatch):
    """The analysis cannot be interrupted, but a run whose analysis ends past the limit
    stops there (before the release), for run_pac and for measure's other callers."""
    spectrum = pipeline.estimate_output_spectrum

    def slow_spectrum(*args, **kwargs):
        _wait(1.2)
        return spectrum(*args, **kwargs)

    monkeypatch.setattr(pipeline, "estimate_output_spectrum", slow_spectrum)
    FINISHED.clear()
    with pytest.raises(TimeLimitError) as info:
        run_pac(slow_release, POOL, mi_budget=0.5, n_trials=12, rng=5,
                secret_mask=np.ones(POOL.shape[0], dtype=bool),
                execution=ExecutionOptions(progress=False, time_limit=1.0))
    assert FINISHED == []  # no release call was made
    assert "after the trials" in str(info.value) and "not kept" in str(info.value)


def test_the_estimate_counts_the_calls_after_the_trials(monkeypatch):
    """6 trials at 0.3 s fit in 2.2 s, but not with the probe and the two calls after them
    (a reproducibility re-run and the release): refused up front, saying so."""
    monkeypatch.setenv("PACPRIV_TEST_SLEEP", "0.3")
    FINISHED.clear()
    with pytest.raises(TimeLimitError) as info:
        run_pac(env_slow, POOL, mi_budget=0.5, n_trials=6, rng=6,
                execution=ExecutionOptions(progress=False, time_limit=2.2))
    assert len(FINISHED) <= 2  # the probe's calls only
    assert info.value.estimate_s is not None and info.value.estimate_s > 2.2
    assert "2 calls after them (a reproducibility re-run; a release, if the run makes one)" \
        in str(info.value)


def test_a_per_record_probe_over_the_limit_is_a_time_limit_error():
    """calibrate_per_record's probe cut by time_limit raises the same TimeLimitError as
    run_pac's (it raised the engine's private ProbeTimeoutError)."""
    with pytest.raises(TimeLimitError) as info:
        calibrate_per_record(env_slow, POOL, target_accuracy=0.7, n_trials=40, records=[0, 1],
                             rng=0, execution=ExecutionOptions(progress=False, time_limit=1e-6))
    assert "did not finish within 1e-06 s (time_limit)" in str(info.value)
