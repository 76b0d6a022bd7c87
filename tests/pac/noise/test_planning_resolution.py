"""Issue 35 (c3010): the trial planner never answers a target it cannot resolve.

``predicted_inflation`` is floored at 1; past the count where the model falls below the oracle
a target within round-off of 1 was "reached" by the floor (24,992 trials, "predicted 1.0000").
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacpriv.cli import main
from pacpriv.pac.noise import (
    InflationUnreachable,
    predicted_inflation,
    shown_inflation,
    trials_for_inflation,
)
from pacpriv.pac.noise._planning import _model_inflation

_KW = {"confidence": 0.95, "shape_fraction": None, "clip_margin": 1.0, "effective_dim": None,
       "clip_probability": 0.02}


@pytest.mark.parametrize("dim", [1, 4, 20])
def test_a_target_within_round_off_of_one_is_refused_with_the_smallest_reachable(dim):
    with pytest.raises(InflationUnreachable, match=r"smallest target .* reaches is") as info:
        trials_for_inflation(dim, target_inflation=1.0000000001)
    err = info.value
    assert not err.capped
    # the named target is reached where the model still resolves (>= 1), and is the smallest:
    # one trial more and the model has fallen below the oracle
    at = _model_inflation(err.n_trials, dim, **_KW)
    assert 1.0 <= at <= float(err.smallest) and err.smallest != "1"
    assert _model_inflation(err.n_trials + 1, dim, **_KW) < 1.0
    m = trials_for_inflation(dim, target_inflation=float(err.smallest))
    assert m <= err.n_trials and _model_inflation(m, dim, **_KW) >= 1.0


def test_a_target_past_the_trial_cap_names_the_cap_and_what_it_reaches():
    with pytest.raises(InflationUnreachable) as info:
        trials_for_inflation(12, target_inflation=1.2, max_trials=50)
    err = info.value
    assert err.capped and err.n_trials == 50
    assert Decimal(err.smallest) >= Decimal(repr(predicted_inflation(50, 12))) > Decimal("1.2")
    assert trials_for_inflation(12, target_inflation=float(err.smallest), max_trials=50) <= 50


@settings(max_examples=15, deadline=None)
@given(st.floats(1.00001, 1.5), st.sampled_from([1, 4, 12]))
def test_every_plan_is_resolved_and_reaches_its_target(target, dim):
    try:
        m = trials_for_inflation(dim, target_inflation=target)
    except InflationUnreachable as err:
        assert float(err.smallest) > target
        return
    raw = _model_inflation(m, dim, **_KW)
    assert 1.0 <= raw <= target  # never a floored (unresolved) value
    assert predicted_inflation(m, dim) == raw


@settings(max_examples=200, deadline=None)
@given(st.floats(1.0, 3.0), st.floats(1.0, 3.0))
def test_shown_inflation_rounds_up_and_keeps_the_verdict(value, target):
    text = shown_inflation(value, target)
    shown, t = Decimal(text), Decimal(repr(target))
    assert shown >= Decimal(repr(value))
    assert (shown <= t) == (value <= target)


def test_cli_refuses_in_one_line_naming_the_flag_and_the_smallest_target(capsys):
    rc = main(["pac", "trials", "--dim", "4", "--target-inflation", "1.0000000001"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "Traceback" not in err
    assert err.startswith("pacpriv: error: --target-inflation 1.0000000001")
    assert "--target-inflation >= 1.0000001" in err


def test_cli_prints_the_prediction_with_the_digits_that_show_it_reached(capsys):
    assert main(["pac", "trials", "--dim", "4", "--target-inflation", "1.000001"]) == 0
    _head, row = capsys.readouterr().out.strip().splitlines()
    _d, target, _, n, predicted = row.split()
    assert target == "1.000001" and Decimal(predicted) <= Decimal(target)
    assert Decimal(predicted) >= Decimal(repr(predicted_inflation(int(n), 4)))
    assert predicted != "1.0000" and Decimal(predicted) > 1
    assert main(["pac", "trials", "--dim", "4", "--target-inflation", "1.000001",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["n_trials"] == int(n)


def test_a_run_with_an_unreachable_target_inflation_notes_it_and_does_not_crash():
    """Sibling: the certified rule's trial note (after the simulation) asks the same planner."""
    import numpy as np

    from pacpriv.exceptions import UndersampledWarning
    from pacpriv.pac.engine import ExecutionOptions
    from pacpriv.pac.job import run_pac
    from pacpriv.pac.noise._registry import rule_with

    def mean0(subset):
        a = np.asarray(subset, dtype=float)[:, 0]
        return np.array([a.mean() if a.size else 0.0])

    x = np.linspace(0, 10, 30)[:, None]
    with pytest.warns(UndersampledWarning, match="below what the planning model"):
        run_pac(mean0, x, mi_budget=0.1, n_trials=20, rng=0, release=False,
                execution=ExecutionOptions(n_jobs=1, progress=False),
                rule=rule_with("certified", target_inflation=1.0000000001))
