"""Error messages never echo data (issue 25, item 7).

``evaluate_attack`` with NaN scores printed the members' score array. Here a sentinel value is
planted in every bad-input path that takes an array -- the generic validators, attack scores,
bounds and noise inputs, DP-SGD arrays, data files (.npy, .npz), pools, mechanism outputs, a
built-in mechanism's labels -- and must appear in no message (in any common formatting), while
the message still says how many entries are invalid and where.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from pacpriv.exceptions import MechanismError
from pacpriv.pac.engine import ExecutionOptions

SENTINEL = 987654.321123


def _forms(x: float) -> set[str]:
    forms = {repr(x), str(x), f"{x:e}", f"{x:.6g}", f"{x:.4g}", f"{x:.3f}", f"{x:.1f}",
             f"{x:.0f}", json.dumps(x), "987654", "9.87654", "9.8765"}
    return forms | {f.replace("+", "") for f in forms}


FORMS = _forms(SENTINEL) | _forms(-SENTINEL)


def _assert_clean(err: BaseException) -> str:
    text = str(err)
    hits = [f for f in FORMS if f in text]
    assert not hits, f"a planted value ({hits}) is echoed in: {text}"
    return text


def _bad_scores():
    return np.array([0.1, np.nan, SENTINEL, 0.3])


def _call_validation():
    from pacpriv._validation import check_array_real

    yield lambda: check_array_real(_bad_scores(), "x"), r"1 of 4 entries \(at index 1\)"
    yield lambda: check_array_real(np.array([1.0, -SENTINEL, 2.0]), "x", low=0.0), \
        r"1 of 3 entries \(at index 1\)"
    yield lambda: check_array_real(np.array([[1.0, SENTINEL + 0.5]]), "x", integer=True), \
        r"at index \(0, 1\)"
    yield lambda: check_array_real(np.array([SENTINEL, SENTINEL]), "x", high=1.0), \
        "2 of 2 entries"


def _call_attacks():
    from pacpriv.audit import evaluate_attack

    yield lambda: evaluate_attack(_bad_scores(), np.array([0.2, 0.4, 0.6])), "1 of 4"
    yield lambda: evaluate_attack(np.array([0.2, 0.4]), np.array([SENTINEL, np.inf])), "1 of 2"


def _call_bounds():
    from pacpriv.pac import (
        calibrate_variance_only,
        gaussian_mi_bound,
        mi_budget_for_accuracy,
        posterior_success_rate,
    )

    yield lambda: posterior_success_rate(np.array([0.1, -SENTINEL]), prior=0.5), "1 of 2"
    yield lambda: posterior_success_rate(0.1, prior=np.array([0.5, SENTINEL])), "1 of 2"
    yield lambda: mi_budget_for_accuracy(np.array([0.7, SENTINEL]), prior=0.5), "1 of 2"
    yield lambda: gaussian_mi_bound(np.array([1.0, -SENTINEL]), np.array([1.0, 1.0])), "1 of 2"
    yield lambda: calibrate_variance_only(np.array([-SENTINEL, 1.0]), mi_budget=0.1), "1 of 2"


def _call_dpsgd():
    from pacpriv.dpsgd import membership_inference_accuracy_bound

    yield lambda: membership_inference_accuracy_bound(
        np.array([1.0, -SENTINEL]), steps_per_epoch=10, epochs=1), "1 of 2"
    yield lambda: membership_inference_accuracy_bound(
        1.0, steps_per_epoch=np.array([10, SENTINEL]), epochs=1), "1 of 2"


def _call_data(tmp_path):
    import pacpriv

    bad = np.array([[1.0, SENTINEL], [np.nan, 2.0]])
    np.save(tmp_path / "bad.npy", bad)
    np.savez(tmp_path / "bad.npz", X=bad)
    yield lambda: pacpriv.load_dataset(tmp_path / "bad.npy"), r"1 of 4 entries \(at index"
    yield lambda: pacpriv.load_dataset(tmp_path / "bad.npz"), "1 of 4 entries"
    (tmp_path / "bad.csv").write_text(f"a,b\n1,{SENTINEL}\n2,{SENTINEL}x\n3,4\n")
    yield lambda: pacpriv.load_dataset(tmp_path / "bad.csv"), "line 3, column 2"
    pool = np.array([[SENTINEL, 1.0], [np.inf, 2.0], [3.0, np.nan]])
    yield lambda: pacpriv.run_pac(lambda s: s.sum(axis=0), pool, mi_budget=0.1, n_trials=10,
                                  execution=ExecutionOptions(progress=False)), \
        r"2 of 3 records have \(the first is record 1\)"


def _mech_nan(subset):
    return np.array([SENTINEL, np.nan])


def _mech_huge(subset):
    return np.array([SENTINEL * 1e200, 1.0])


class _Unconvertible:
    def __array__(self, *args, **kwargs):
        raise ValueError(f"cannot convert record {SENTINEL}")


def _mech_object(subset):
    return _Unconvertible()


def _mech_raises(subset):
    raise ValueError(f"record {SENTINEL} is out of range")


def _call_mechanisms():
    from pacpriv.pac.engine._simulate import simulate

    pool = np.arange(20.0).reshape(10, 2)
    for mech, words in ((_mech_nan, "NaN or inf at positions [1]"),
                        (_mech_huge, "output coordinate 0 has a magnitude above"),
                        (_mech_object, "could not be converted to an array (ValueError)"),
                        (_mech_raises, "raised ValueError in trial 0")):
        yield (lambda m=mech: simulate(m, pool, n_trials=3, rng=0,
                                       execution=ExecutionOptions(progress=False))), \
            re.escape(words)


def _call_builtin_labels():
    from pacpriv.mechanisms._common import class_indices

    yield lambda: class_indices(np.array([0, 1, int(SENTINEL)]), [0, 1]), \
        r"1 of 3 entries \(at index 2\) of the subset's labels"


def _cases(tmp_path):
    for source in (_call_validation(), _call_attacks(), _call_bounds(), _call_dpsgd(),
                   _call_data(tmp_path), _call_mechanisms(), _call_builtin_labels()):
        yield from source


def test_no_error_message_echoes_a_planted_value(tmp_path):
    n = 0
    for call, words in _cases(tmp_path):
        with pytest.raises((ValueError, TypeError, MechanismError)) as info:
            call()
        text = _assert_clean(info.value)
        assert re.search(words, text), f"expected {words!r} in: {text}"
        n += 1
    assert n >= 20  # every path above was exercised


def test_a_scalar_setting_is_still_shown_as_received():
    """A scalar argument is a setting, not data: the standard 'value received' stays."""
    from pacpriv._validation import check_array_real
    from pacpriv.pac import posterior_success_rate

    with pytest.raises(ValueError, match=r"got -2\.0\."):
        check_array_real(-2.0, "noise_multiplier", low=0.0)
    with pytest.raises(ValueError, match=r"got -0\.5\."):
        posterior_success_rate(-0.5, prior=0.5)
