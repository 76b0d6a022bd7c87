"""Tests of pacpriv.pac.bounds._ledger: composition (budgets add) and all-or-nothing refusal."""

from __future__ import annotations

import json
import math
import sys
from fractions import Fraction

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
    # in float64 0.2 + 0.1 > 0.3: the exact remainder is 0.3 - 0.2, and it fits exactly
    assert Fraction(0.2) + Fraction(0.1) > Fraction(0.3)
    with pytest.raises(BudgetExceededError, match=r"0.09999999999999998 nats remain"):
        ledger.charge(0.1)
    ledger.charge(0.09999999999999998)
    assert Fraction(0.2) + Fraction(0.09999999999999998) == Fraction(0.3)
    assert ledger.remaining == 0.0
    with pytest.raises(BudgetExceededError):
        ledger.charge(1e-9)


def test_exact_fill_with_float_sums():
    """Charges summing exactly to the cap fit; ten float 0.1s sum to more than 1.0 (exactly
    1 + 5.55e-17), so the tenth is refused, and nothing fits a full ledger."""
    ledger = PrivacyLedger(total_budget=1.0)
    for mi in (0.25, 0.5, 0.125, 0.125):
        ledger.charge(mi)
    assert ledger.spent == 1.0 and ledger.remaining == 0.0
    assert not ledger.can_charge(5e-324)
    tenths = PrivacyLedger(total_budget=1.0)
    for _ in range(9):
        tenths.charge(0.1)
    assert 9 * Fraction(0.1) + Fraction(0.1) > 1
    with pytest.raises(BudgetExceededError):
        tenths.charge(0.1)
    assert tenths.spent == math.fsum([0.1] * 9)


@pytest.mark.parametrize("total", [0.1, 1.0, 1 / 3, 7e-5, 1e300])
@pytest.mark.parametrize("extra", [5e-324, 1e-300, 1e-15, 1e-12])
def test_no_charge_past_a_full_cap(total, extra):
    """b39r/b65: once the cap is reached exactly, no charge fits, however small, and a
    charge taking the exact sum one ulp over the cap is refused, in memory and in SQLite."""
    ledger = PrivacyLedger(total)
    ledger.charge(total)
    with pytest.raises(BudgetExceededError, match=r"is spent, 0.0 nats remain"):
        ledger.charge(extra)
    assert ledger.spent == total and len(ledger.releases) == 1
    half = PrivacyLedger(total)
    half.charge(total / 2)
    with pytest.raises(BudgetExceededError):  # one ulp over the exact remainder total / 2
        half.charge(math.nextafter(total / 2, math.inf))
    half.charge(total / 2)
    assert half.spent == total


@given(st.lists(st.floats(min_value=0.0, max_value=0.4), max_size=30),
       st.floats(min_value=1e-6, max_value=2.0))
def test_exact_sum_never_exceeds_cap(charges, total):
    """Whatever is attempted, the exact sum of accepted charges <= cap, and a charge is
    refused only when the exact sum would exceed it."""
    ledger = PrivacyLedger(total_budget=total)
    accepted: list[float] = []
    for mi in charges:
        fits = sum(map(Fraction, accepted)) + Fraction(mi) <= Fraction(total)
        try:
            ledger.charge(mi)
            accepted.append(mi)
            assert fits
        except BudgetExceededError:
            assert not fits
    assert sum(map(Fraction, accepted), Fraction(0)) <= Fraction(total)
    assert ledger.spent == math.fsum(accepted)


def test_uncapped_ledger_refuses_a_sum_past_float64():
    """b54: without a cap, a charge whose sum overflows float64 is refused in one line and
    the ledger stays readable."""
    ledger = PrivacyLedger(None)
    ledger.charge(1e308)
    with pytest.raises(BudgetExceededError, match=r"float64, whose range ends at 1.79769"):
        ledger.charge(1e308)
    ledger.charge(sys.float_info.max - 1e308)
    assert ledger.spent == sys.float_info.max
    assert json.loads(json.dumps(ledger.to_dict()))["spent"] == sys.float_info.max
    assert not ledger.can_charge(1e300)
    for bad in (math.inf, math.nan, -1.0, -5e-324):
        with pytest.raises(ValueError, match="`mi` must be"):
            ledger.charge(bad)


def test_refund_only_a_standing_charge_once():
    """A refund frees budget: refunding twice, or a row of another ledger, is refused."""
    ledger = PrivacyLedger(1.0)
    first = ledger.charge(1.0)
    ledger.refund(first)
    with pytest.raises(ValueError, match="not a standing charge"):
        ledger.refund(first)
    foreign = PrivacyLedger(1.0).charge(1.0)  # entry_id 1 there, a refunded row here
    with pytest.raises(ValueError, match="not a standing charge"):
        ledger.refund(foreign)
    second = ledger.charge(0.5)
    with pytest.raises(ValueError, match="not a standing charge"):  # another amount
        ledger.refund(LedgerEntry(mi=0.75, label=None, timestamp=0.0,
                                  entry_id=second.entry_id))
    assert ledger.spent == 0.5
    with pytest.raises(BudgetExceededError):
        ledger.charge(0.75)


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
    assert ledger.spent <= 1.0
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


@given(st.lists(st.floats(min_value=1e-9, max_value=0.3), min_size=1, max_size=8),
       st.floats(min_value=1e-3, max_value=2.0))
def test_remaining_always_fits_and_nothing_more(charges, total):
    """`remaining` is the exact room rounded down: charging it fits, one ulp more does not
    (unless it rounded down)."""
    ledger = PrivacyLedger(total)
    for mi in charges:
        if ledger.can_charge(mi):
            ledger.charge(mi)
    left = ledger.remaining
    assert Fraction(left) <= Fraction(total) - sum(
        (Fraction(e.mi) for e in ledger.releases), Fraction(0))
    ledger.charge(left)
    assert not ledger.can_charge(math.nextafter(0.0, 1.0)) or ledger.remaining > 0
