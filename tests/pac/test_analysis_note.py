"""A long analysis after the trials says so (seventh new-user pass, #585: thousands of outputs
of dimension thousands printed nothing for minutes; the progress bar covers the trials only)."""

from __future__ import annotations

import time
import warnings

import numpy as np

from pacpriv.exceptions import StallWarning
from pacpriv.pac import _pipeline
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.job import run_pac


def test_a_slow_calibration_says_it_is_working(monkeypatch):
    real = _pipeline.estimate_output_spectrum

    def slow(*args, **kwargs):
        time.sleep(1.0)
        return real(*args, **kwargs)

    monkeypatch.setattr(_pipeline, "ANALYSIS_NOTE_S", 0.1)
    monkeypatch.setattr(_pipeline, "estimate_output_spectrum", slow)
    pool = np.random.default_rng(0).normal(size=(30, 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_pac(lambda s: s.mean(axis=0) if len(s) else np.zeros(2), pool, mi_budget=0.5,
                n_trials=40, rng=0, release=False, execution=ExecutionOptions(progress=False))
    said = [str(w.message) for w in caught if w.category is StallWarning]
    assert said and said[0].startswith("the noise calibration after the trials has run ")
    assert "40 outputs of dimension 2" in said[0] and "not hung" in said[0]


def test_a_quick_calibration_says_nothing():
    pool = np.random.default_rng(1).normal(size=(30, 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_pac(lambda s: s.mean(axis=0) if len(s) else np.zeros(2), pool, mi_budget=0.5,
                n_trials=40, rng=0, release=False, execution=ExecutionOptions(progress=False))
    assert not [w for w in caught if w.category is StallWarning]
