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
