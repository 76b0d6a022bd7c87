"""Issue 35 (d50/m16): an output pacpriv cannot cast to float64 is reported as such.

A mechanism returning an object array holding a 401-digit int raised nothing: pacpriv's own
float64 cast overflowed, and the run said "Mechanism ... raised OverflowError ... message
withheld". Every output path (trials, blocks, the release, per-record, predictions) now says
"not castable to float64".
"""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.exceptions import MechanismError
from pacpriv.pac import ExecutionOptions, run_pac, simulate
from pacpriv.pac.engine._mechanism import InvalidOutput, as_float64, check_output
from pacpriv.pac.per_record import calibrate_per_record
from pacpriv.prediction import PrivatePredictor

QUIET = ExecutionOptions(progress=False)
POOL = np.random.default_rng(0).random((40, 2))
HUGE = 10**400


class _NoFloat:
    def __float__(self):
        raise ZeroDivisionError("secret 0.1234")


def hugeint(x):
    return np.array([HUGE + len(x)], dtype=object)


def _assert_not_castable(msg: str) -> None:
    assert "not castable to float64" in msg
    assert "raised OverflowError" not in msg and "withheld" not in msg


@pytest.mark.parametrize("value", [np.array([HUGE], dtype=object), [HUGE, 1.0], HUGE,
                                   np.array([-HUGE, 2], dtype=object),
                                   np.array([_NoFloat()], dtype=object), ["abc"]])
def test_check_output_says_not_castable(value):
    with pytest.raises(InvalidOutput, match="not castable to float64") as info:
        check_output(value, None)
    assert "0.1234" not in str(info.value)  # an object's own message is never repeated


def test_as_float64_keeps_castable_values():
    np.testing.assert_array_equal(as_float64(np.array([2**60, 1], dtype=object)),
                                  [2.0**60, 1.0])


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_run_pac_names_the_cast_and_the_trial(n_jobs):
    with pytest.raises(MechanismError) as info:
        run_pac(hugeint, POOL, mi_budget=0.1, n_trials=8, rng=0,
                execution=ExecutionOptions(n_jobs=n_jobs, progress=False))
    msg = str(info.value)
    _assert_not_castable(msg)
    assert f"in trial {info.value.trial_index}" in msg and "beyond float64's range" in msg


class _HugeBlocks:
    def __call__(self, x):
        return hugeint(x)

    def run_block(self, pool, masks, *, seeds):
        return np.array([[HUGE + int(m.sum())] for m in masks], dtype=object)


def test_block_path_says_not_castable():
    with pytest.raises(MechanismError) as info:
        simulate(_HugeBlocks(), POOL, n_trials=8, rng=0, execution=QUIET)
    _assert_not_castable(str(info.value))


def test_per_record_says_not_castable():
    with pytest.raises(MechanismError) as info:
        calibrate_per_record(hugeint, POOL, target_accuracy=0.6, n_trials=100, rng=0,
                             execution=QUIET)
    _assert_not_castable(str(info.value))


def test_prediction_worlds_say_not_castable():
    X = POOL
    y = (POOL[:, 0] > 0.5).astype(int)
    from sklearn.linear_model import LogisticRegression

    pp = PrivatePredictor(LogisticRegression(), (X, y), n_worlds=4, per_query_budget=2.0**-32,
                          total_budget=1.0, rng=7, secret_rng=8,
                          output=lambda model, Q: np.full((len(Q), 1), HUGE, dtype=object))
    with pytest.raises(ValueError) as info:
        pp.fit(execution=QUIET)
        pp.predict(X[:2])
    _assert_not_castable(str(info.value))
