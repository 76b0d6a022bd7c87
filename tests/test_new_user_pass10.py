"""Regressions from the tenth fresh new-user pass (issue 35)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pacpriv.exceptions import MechanismError
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.job import run_pac

QUIET = ExecutionOptions(progress=False)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_a_failure_on_an_empty_subset_names_the_sampler(n_jobs):
    """A sampler that includes no record made the mechanism's NaN mean the mechanism's fault
    alone; the failure now says the subset was empty (public: a count, no record)."""
    pool = np.random.default_rng(0).random((40, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(MechanismError, match=r"in trial \d+ on an empty subset \(the sampler "
                                                 r"included no record in this trial\)"):
            run_pac(lambda X: X.mean(0), pool, mi_budget=0.1, n_trials=50, rng=0,
                    sampler=lambda n, rng: np.zeros(n, bool),
                    execution=QUIET.replace(n_jobs=n_jobs))
        with pytest.raises(MechanismError) as info:  # a non-empty subset: no such words
            run_pac(lambda X: X.mean(0) * np.nan, pool, mi_budget=0.1, n_trials=50, rng=0,
                    execution=QUIET)
    assert "empty subset" not in str(info.value)


def _env_slow(X, rng=None):
    """Sleeps PACPRIV_TEST_SLEEP seconds (read at call time: not part of its fingerprint)."""
    import os
    import time

    time.sleep(float(os.environ.get("PACPRIV_TEST_SLEEP", "0")))
    return np.array([float(len(X))])


def test_the_time_limit_covers_a_resumes_verification(tmp_path, monkeypatch):
    """Re-running recorded trials to verify a checkpoint ran outside `time_limit` (a run
    finished far past it, exit 0) and, cut by the per-trial timeout the limit set, said the
    mechanism failed and to delete the checkpoint. Now the limit covers it: a TimeLimitError
    that names the verification and keeps every finished trial."""
    from pacpriv.exceptions import TimeLimitError
    from pacpriv.pac.engine._simulate import simulate

    pool = np.arange(40.0).reshape(20, 2)
    ck = tmp_path / "ck"
    monkeypatch.setenv("PACPRIV_TEST_SLEEP", "0")
    first = simulate(_env_slow, pool, n_trials=10, rng=3,
                     execution=QUIET.replace(checkpoint=str(ck)))
    monkeypatch.setenv("PACPRIV_TEST_SLEEP", "2")
    with pytest.raises(TimeLimitError, match=r"10 of 10 trials finished; they are kept in the "
                                             r"checkpoint .*reached while verifying the "
                                             r"checkpoint") as info:
        simulate(_env_slow, pool, n_trials=10, rng=3,
                 execution=QUIET.replace(checkpoint=str(ck), time_limit=0.5))
    assert info.value.n_done == 10 and "delete" not in str(info.value)
    monkeypatch.setenv("PACPRIV_TEST_SLEEP", "0")  # the checkpoint is intact: it resumes
    again = simulate(_env_slow, pool, n_trials=10, rng=3,
                     execution=QUIET.replace(checkpoint=str(ck)))
    assert np.array_equal(again.outputs, first.outputs)
