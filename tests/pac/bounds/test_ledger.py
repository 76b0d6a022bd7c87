"""Tests of pacpriv.pac.bounds._ledger: composition (budgets add) and all-or-nothing refusal."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pacpriv.exceptions import BudgetExceededError
from pacpriv.pac.bounds._ledger import LedgerEntry, PrivacyLedger
from pacpriv.pac.bounds._posterior import posterior_success_rate


def test_charges_add_up_and_remaining_decreases():
    """Spent is the sum of the charges; remaining is the cap minus it."""
    ledger = PrivacyLedger(total_budget=1.0)
    ledger.charge(0.25, label="a")
    ledger.charge(0.5, label="b")
    assert ledger.spent == 0.75
    assert ledger.remaining == 0.25
    assert [(e.mi, e.label) for e in ledger.releases] == [(0.25, "a"), (0.5, "b")]
    assert all(isinstance(e, LedgerEntry) and e.timestamp > 0 for e in ledger.releases)


def test_refusal_records_nothing():
    """A charge over the cap raises BudgetExceededError and leaves the ledger unchanged."""
    ledger = PrivacyLedger(total_budget=0.3)
    ledger.charge(0.2)
    before = ledger.to_dict()
    with pytest.raises(BudgetExceededError, match=r"refused: 0.2 of the total budget 0.3"):
        ledger.charge(0.2, label="too much")
    assert ledger.to_dict() == before
    assert len(ledger.releases) == 1
    ledger.charge(0.1)  # the remainder still fits (0.2 + 0.1 > 0.3 only by round-off)
    assert ledger.remaining == 0.0
    with pytest.raises(BudgetExceededError):
        ledger.charge(1e-9)


def test_exact_fill_with_float_sums():
    """Ten charges of 0.1 fit a cap of 1.0 exactly (fsum), an eleventh does not."""
    ledger = PrivacyLedger(total_budget=1.0)
    for _ in range(10):
        ledger.charge(0.1)
    assert ledger.spent == 1.0
    with pytest.raises(BudgetExceededError):
        ledger.charge(1e-9)


@given(st.lists(st.floats(min_value=0.0, max_value=0.2), max_size=30))
def test_spent_never_exceeds_cap(charges):
    """Whatever is attempted, spent <= cap and equals the fsum of accepted charges."""
    ledger = PrivacyLedger(total_budget=1.0)
    accepted = []
    for mi in charges:
        try:
            ledger.charge(mi)
            accepted.append(mi)
        except BudgetExceededError:
            pass
    assert ledger.spent <= 1.0 + 1e-12
    assert ledger.spent == math.fsum(accepted)


def test_no_cap_and_posterior_bound():
    """Without a cap nothing is refused; the composed bound is p*(spent)."""
    ledger = PrivacyLedger(prior=0.5)
    for _ in range(5):
        ledger.charge(0.2)
    assert ledger.remaining == math.inf
    assert ledger.posterior_success_bound() == pytest.approx(
        posterior_success_rate(1.0, prior=0.5))
    assert ledger.posterior_success_bound() == 1.0  # 1 nat > ln 2: vacuous for prior 1/2
    json.dumps(ledger.to_dict())


def test_invalid_total_budget():
    """A non-positive cap is rejected, naming the argument."""
    with pytest.raises(ValueError, match=r"`total_budget` must be in \(0.0, inf\)"):
        PrivacyLedger(total_budget=0.0)


def test_invalid_charge():
    """A negative charge and a non-str label are rejected."""
    ledger = PrivacyLedger(1.0)
    with pytest.raises(ValueError, match=r"`mi` must be in \[0.0, inf\)"):
        ledger.charge(-0.1)
    with pytest.raises(TypeError, match="`label` must be a str"):
        ledger.charge(0.1, label=3)
    assert ledger.spent == 0.0
