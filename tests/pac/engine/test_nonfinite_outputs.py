"""Non-finite or huge values never reach a covariance or a release unnoticed (issue 35, F7):
the run fails naming the trial (never the value)."""

import numpy as np
import pytest

from pacpriv.exceptions import MechanismError
from pacpriv.pac import ExecutionOptions, pac_private, run_pac, simulate

SERIAL = ExecutionOptions(n_jobs=1, progress=False)
QUIET = ExecutionOptions(progress=False)

pytestmark = pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")


class _Bad:
    """Returns a bad value in one trial (chosen by the subset's size parity and a counter-free
    rule: the first record's index), so every backend sees the same trial fail."""

    def __init__(self, bad):
        self.bad = bad

    def __call__(self, x):
        x = np.asarray(x, dtype=float)
        out = x.mean(axis=0)
        if x.shape[0] % 7 == 3:
            out[0] = self.bad
        return out


class _Blocks:
    """The block contract: row 2 of every block is NaN."""

    def __call__(self, x):
        return np.asarray(x, dtype=float).mean(axis=0)

    def run_block(self, pool, masks, *, seeds):
        out = np.stack([pool[m].mean(axis=0) for m in masks])
        out[min(2, len(out) - 1)] = np.nan
        return out


POOL = np.random.default_rng(0).random((60, 3))


@pytest.mark.parametrize(("bad", "n_jobs"), [(np.nan, 1), (np.inf, 1), (-np.inf, 1),
                                             (1e300, 1), (-1e200, 1), (np.nan, 2)])
def test_bad_value_in_some_trials_names_the_trial_not_the_value(bad, n_jobs):
    with pytest.raises(MechanismError) as info:
        simulate(_Bad(bad), POOL, n_trials=40, rng=0,
                 execution=ExecutionOptions(n_jobs=n_jobs, progress=False))
    msg = str(info.value)
    assert f"trial {info.value.trial_index}" in msg and info.value.trial_index >= 0
    assert "1e+300" not in msg and "1e+200" not in msg  # never the value


def test_a_huge_record_fails_the_run_naming_a_trial():
    pool = POOL.copy()
    pool[5, 1] = 1e300
    with pytest.raises(MechanismError) as info:
        run_pac(lambda x: np.asarray(x).mean(axis=0), pool, mi_budget=0.1, n_trials=60, rng=0,
                execution=QUIET)
    assert "trial" in str(info.value) and "1e+300" not in str(info.value)


def test_block_mechanisms_are_checked_row_by_row():
    with pytest.raises(MechanismError) as info:
        simulate(_Blocks(), POOL, n_trials=16, rng=0,
                 execution=SERIAL)
    assert "trial" in str(info.value) and "not finite" in str(info.value)


def test_a_nonfinite_release_output_is_refused_and_not_charged():
    broken = {"now": False}

    def f(x):
        out = np.asarray(x, dtype=float).mean(axis=0)
        return out * np.inf if broken["now"] else out

    g = pac_private(f, mi_budget=0.05)
    g.calibrate(POOL, n_trials=200, rng=0, execution=SERIAL)
    broken["now"] = True
    with pytest.raises((MechanismError, ValueError), match="not finite"):
        g(POOL[:30])
    assert g.ledger.spent == 0.0
