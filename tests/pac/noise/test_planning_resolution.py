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
from pacpriv.pac.noise._planning import _model_inflation, _model_terms, gaussian_floor

_KW = {"confidence": 0.95, "shape_fraction": None, "clip_margin": 1.0, "effective_dim": None,
       "clip_probability": 0.02}


def _terms(m, dim):
    return _model_terms(m, dim, **_KW)


@pytest.mark.parametrize("dim", [1, 4, 20])
def test_a_target_within_round_off_of_one_is_refused_with_the_smallest_reachable(dim):
    with pytest.raises(InflationUnreachable, match=r"smallest target .* resolves is") as info:
        trials_for_inflation(dim, target_inflation=1.0000000001)
    err = info.value
    assert not err.capped
    # the named target is reached where the model still resolves, and is the smallest: one
    # trial more and its clip correction exceeds half its leading terms
    at, deficit = _terms(err.n_trials, dim)
    assert 1.0 + deficit <= at <= float(err.smallest) and err.smallest != "1"
    after, deficit_after = _terms(err.n_trials + 1, dim)
    assert after < 1.0 + deficit_after
    m = trials_for_inflation(dim, target_inflation=float(err.smallest))
    assert m <= err.n_trials and _model_inflation(m, dim, **_KW) >= 1.0


# (the Gaussian floor, gaussian_floor, lifts the smallest resolved target at d = 1 and 4)
@pytest.mark.parametrize("dim, smallest", [(1, 1.0476), (4, 1.0141), (20, 1.0035)])
@pytest.mark.parametrize("target", [1.01, 1.001, 1.0001, 1.00001])
def test_targets_on_the_models_floor_are_refused(dim, smallest, target):
    """Issue 35 m12/c9116: d = 4 gave 7695, 21329, 24583, 24950 trials for 1.01 … 1.00001 (100×
    tighter for 5% more trials: the model's floor). Refused where the clip deficit exceeds half
    of the model's leading terms, naming the smallest target it resolves."""
    if target >= smallest:
        assert trials_for_inflation(dim, target_inflation=target) > 0
        return
    with pytest.raises(InflationUnreachable) as info:
        trials_for_inflation(dim, target_inflation=target)
    assert smallest < float(info.value.smallest) < smallest + 1e-3
    assert not info.value.capped


@settings(max_examples=12, deadline=None)
@given(st.floats(1.0, 1.5, exclude_min=True), st.floats(1.0, 1.5, exclude_min=True),
       st.sampled_from([1, 4, 20]))
def test_plans_above_the_range_are_monotone_and_resolved(a, b, dim):
    """A tighter target never costs fewer trials; every plan is where the model resolves, and
    halving the excess over the smallest resolved target costs more trials (no floor)."""
    lo_t, hi_t = sorted((a, b))
    try:
        m_lo = trials_for_inflation(dim, target_inflation=lo_t)
    except InflationUnreachable as err:
        assert float(err.smallest) > lo_t
        return
    m_hi = trials_for_inflation(dim, target_inflation=hi_t)
    assert m_lo >= m_hi
    for m, t in ((m_lo, lo_t), (m_hi, hi_t)):
        value, deficit = _terms(m, dim)
        assert 1.0 + deficit <= value <= t


@pytest.mark.parametrize("dim", [1, 4, 20])
def test_near_the_range_edge_a_tighter_target_still_costs_clearly_more(dim):
    with pytest.raises(InflationUnreachable) as info:
        trials_for_inflation(dim, target_inflation=1.0000001)
    edge = float(info.value.smallest)
    m_edge = trials_for_inflation(dim, target_inflation=edge)
    m_twice = trials_for_inflation(dim, target_inflation=1.0 + 2.0 * (edge - 1.0))
    assert m_edge > 1.5 * m_twice  # the certificate width ~ 1/sqrt(n): about 2-4x


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
    # the prediction is the model or, where higher, the exact Gaussian floor; either way the
    # plan reaches its target
    assert predicted_inflation(m, dim) == max(raw, gaussian_floor(m, dim, 0.95)) <= target


@settings(max_examples=200, deadline=None)
@given(st.floats(1.0, 3.0), st.floats(1.0, 3.0))
def test_shown_inflation_rounds_up_and_keeps_the_verdict(value, target):
    text = shown_inflation(value, target)
    shown, t = Decimal(text), Decimal(repr(target))
    assert shown >= Decimal(repr(value))
    assert (shown <= t) == (value <= target)


def test_cli_refuses_in_one_line_naming_the_flag_and_the_smallest_target(capsys):
    for target in ("1.0000000001", "1.0001"):  # c9116: 1.0001 gave "24583 predicted 1.0001"
        rc = main(["pac", "trials", "--dim", "4", "--target-inflation", target])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and "\n" not in err and "Traceback" not in err
        assert err.startswith(f"pacpriv: error: --target-inflation {target}")
        assert "--target-inflation >= 1.0141729" in err


def test_cli_prints_the_prediction_with_the_digits_that_show_it_reached(capsys):
    assert main(["pac", "trials", "--dim", "20", "--target-inflation", "1.004"]) == 0
    _head, row = capsys.readouterr().out.strip().splitlines()
    _d, target, _, n, predicted = row.split()
    assert target == "1.004" and Decimal(predicted) <= Decimal(target)
    assert Decimal(predicted) >= Decimal(repr(predicted_inflation(int(n), 20)))
    assert predicted != "1.0000" and Decimal(predicted) > 1
    assert main(["pac", "trials", "--dim", "20", "--target-inflation", "1.004",
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


@pytest.mark.parametrize("dim", [1, 4, 20])
def test_the_model_never_predicts_below_the_gaussian_floor(dim):
    """Bound check (session 35): at d = 1 the model predicted 1.0438 at 2,000 trials against
    the exact Gaussian floor (n − 1)/χ²₀.₀₅(n − 1) = 1.0542, and 1.0001 at 8,722 trials."""
    from scipy import stats

    from pacpriv.pac.noise._planning import predicted_inflation

    for n in (64, 500, 2000, 8722, 10**5):
        k = (n - 1) * dim
        assert predicted_inflation(n, dim) >= k / stats.chi2.ppf(0.05, k) * (1 - 1e-12)
    assert predicted_inflation(2000, 1) == pytest.approx(1999 / stats.chi2.ppf(0.05, 1999))


@pytest.mark.parametrize("dim,cap", [(10**8, 10**8), (10**4, 2 * 10**4), (10**9, 10**8)])
def test_no_plan_is_past_the_trial_cap(dim, cap):
    """The search starts at about 2·d trials: a dimension near the cap returned a count past it
    (``pac trials --dim 1e8``: 114285715 > 1e8) instead of refusing."""
    try:
        m = trials_for_inflation(dim, target_inflation=100.0, max_trials=cap)
    except InflationUnreachable as err:
        assert err.n_trials <= cap
    else:
        assert m <= cap


def test_cli_plans_past_the_library_cap(capsys):
    """``pac trials`` plans any count a run takes: --dim 1e9 answered "pass --target-inflation
    >= inf" (its count is past the library's default cap of 1e8)."""
    rc = main(["pac", "trials", "--dim", "1000000000", "--target-inflation", "1.01", "--json"])
    assert rc == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["n_trials"] > 10**9 and row["predicted_inflation"] <= 1.01
    assert row["n_trials"] == trials_for_inflation(10**9, target_inflation=1.01,
                                                   max_trials=2**62)
