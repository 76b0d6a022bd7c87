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


_EDGES = [0.0, -0.0, 2.0**-400, -(2.0**-400), 2.0**-401, np.nextafter(2.0**-400, 0.0),
          float(np.finfo(np.float32).tiny), np.nextafter(float(np.finfo(np.float32).tiny), 0.0),
          2.0**400, -(2.0**400), np.nextafter(2.0**400, np.inf), np.inf, -np.inf, np.nan,
          5e-324, -5e-324, 1.0, -3.5, 1e300, -1e-300]


def _in_range_reference(arr, low):
    """The output range check written on the values (NumPy comparisons, no bit patterns)."""
    from pacpriv.pac.engine._mechanism import MAX_OUTPUT_MAGNITUDE

    mag = np.abs(arr)
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.isfinite(mag)) and np.all(mag <= MAX_OUTPUT_MAGNITUDE)
                    and not np.any((mag > 0) & (mag < low)))


@pytest.mark.parametrize("low", [2.0**-400, float(np.finfo(np.float32).tiny)])
def test_output_range_check_on_bit_patterns_matches_the_values(low):
    """The engine's fast output check (bit patterns of ``|x|``, chunk by chunk) agrees with
    the check written on the values, at every edge (±0, the limits and their neighbours,
    subnormals, ±inf, NaN), in any chunk, and on strided views."""
    from pacpriv.pac.engine._mechanism import _CHECK_CHUNK, _in_range

    rng = np.random.default_rng(7)
    for edge in _EDGES:
        for where in (0, _CHECK_CHUNK - 1, _CHECK_CHUNK, 2 * _CHECK_CHUNK + 5):
            arr = rng.poisson(0.5, 2 * _CHECK_CHUNK + 9).astype(np.float64)  # many exact zeros
            arr[where] = edge
            assert _in_range(arr, low) == _in_range_reference(arr, low), (edge, where)
            strided = np.repeat(arr, 2)[::2]
            assert _in_range(strided, low) == _in_range(arr, low)
    for _ in range(300):
        arr = rng.choice(np.array(_EDGES), size=int(rng.integers(1, 40)))
        assert _in_range(arr, low) == _in_range_reference(arr, low)
