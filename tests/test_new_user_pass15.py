"""Regressions from the fifteenth fresh new-user pass (issue 35), each a kind with siblings."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

from pacpriv.exceptions import NotReproducibleWarning, UninterruptibleWarning
from pacpriv.pac.engine import ExecutionOptions, simulate

POOL = np.random.default_rng(0).normal(size=(30, 2))
_CALLS = [0]


def _slow_once_more(subset, hang_at=21):
    """Returns at once, except its ``hang_at``-th call (the first reproducibility re-run after
    20 trials), which runs past the timeout below."""
    _CALLS[0] += 1
    if _CALLS[0] == hang_at:
        time.sleep(3)
    return np.clip(subset, -2, 2).mean(axis=0)


def test_a_reproducibility_re_run_past_the_timeout_is_not_checked_not_irreproducible():
    """A re-run that timed out was reported as "not reproducible: draws randomness outside
    its rng" (warning and report): a slow re-run shows nothing about the seed, so the check
    says "not checked", without the warning."""
    _CALLS[0] = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim = simulate(_slow_once_more, POOL, n_trials=20, rng=0,
                       execution=ExecutionOptions(progress=False, timeout=1.0))
    assert sim.reproducible is None
    assert sim.reproducibility_note.startswith(
        "not checked: re-running trial 0 from its seed exceeded the per-trial timeout (1 s")
    assert not [w for w in caught if issubclass(w.category, NotReproducibleWarning)]


def _mean(subset):
    return np.clip(subset, -2, 2).mean(axis=0)


@pytest.mark.parametrize("backend, n_jobs, warned", [("threading", 2, True),
                                                     ("threading", 1, False),
                                                     ("loky", 2, False)])
def test_a_timeout_that_cannot_interrupt_thread_workers_is_said_before_the_trials(
        backend, n_jobs, warned):
    """--timeout 3 with --backend threading --n-jobs 2 let a hanging trial run 100 s, the
    warnings claiming the bound: a warning says, before the trials, that threads cannot be
    interrupted (the command line prints it at once)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        simulate(_mean, POOL, n_trials=8, rng=0,
                 execution=ExecutionOptions(progress=False, timeout=5.0, backend=backend,
                                            n_jobs=n_jobs))
    said = [w for w in caught if issubclass(w.category, UninterruptibleWarning)]
    assert bool(said) is warned
    if warned:
        assert "cannot interrupt a trial on threading workers" in str(said[0].message)
        assert UninterruptibleWarning.live


def _raises_on_a_re_run(subset, at=5):
    _CALLS[0] += 1
    if _CALLS[0] == at:
        raise ValueError("boom")
    return np.clip(subset, -2, 2).mean(axis=0)


@pytest.mark.parametrize("at", [5, 125])
def test_a_per_record_re_run_failure_never_says_empty_subset(at):
    """A per-record run's failing reproducibility re-run (or trial) said "on an empty subset"
    of a subset of 20 records (the engine's stand-in pool): the words come only from the real
    sampler's masks."""
    from pacpriv.exceptions import MechanismError
    from pacpriv.pac import record_exposure

    _CALLS[0] = 0
    X = np.random.default_rng(0).normal(size=(40, 3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            record_exposure(_raises_on_a_re_run, X, noise_cov=np.eye(3), n_trials=3, rng=0,
                            execution=ExecutionOptions(progress=False))
            text = " ".join(str(w.message) for w in caught)
        except MechanismError as err:
            text = str(err)
    assert "boom" not in text and "empty subset" not in text
    assert "raised ValueError" in text


class _HangingFit:
    """A scikit-learn classifier whose every fit hangs (the first is the carrier's, on public
    synthetic rows, before any trial)."""

    def __init__(self, seconds=60):
        self.seconds = seconds

    def get_params(self, deep=True):
        return {"seconds": self.seconds}

    def set_params(self, **params):
        self.seconds = params.get("seconds", self.seconds)
        return self

    def fit(self, X, y):
        time.sleep(self.seconds)
        return self


@pytest.mark.parametrize("limits, error", [({"timeout": 1.0}, "MechanismError"),
                                           ({"time_limit": 1.5}, "TimeLimitError")])
def test_a_meta_estimator_whose_carrier_fit_hangs_is_stopped(limits, error):
    """PACPrivateClassifier(estimator whose fit hangs) hung in the fit on public rows that
    builds the released parameters' carrier, with `timeout` and with `time_limit`: both
    bound it now, before any trial."""
    from sklearn.base import ClassifierMixin

    from pacpriv.estimators import PACPrivateClassifier

    class Hangs(ClassifierMixin, _HangingFit):
        pass

    X = np.random.default_rng(0).normal(size=(60, 2))
    est = PACPrivateClassifier(Hangs(), target_accuracy=0.7, n_trials=10, random_state=0,
                               execution=ExecutionOptions(progress=False, **limits))
    tic = time.monotonic()
    with pytest.raises(Exception) as err:
        est.fit(X, (X[:, 0] > 0).astype(int))
    assert type(err.value).__name__ == error and time.monotonic() - tic < 10
    assert "public" in str(err.value) and "before any trial" in str(err.value)


@pytest.mark.parametrize("value", ["", " ", "\t "])
def test_a_blank_checkpoint_path_is_refused(tmp_path, monkeypatch, value):
    """--checkpoint ' ' made a folder named by a space holding the un-noised outputs."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="`checkpoint` must be a non-empty path"):
        ExecutionOptions(checkpoint=value)
    assert list(tmp_path.iterdir()) == []
