"""F11: composition in the ledger. The ledger's total equals an independent sum of the per-query
charges after restarts, refunds and concurrent writers (SQLite store; PostgreSQL in
tests/prediction/test_replicas.py)."""

from __future__ import annotations

import math
import multiprocessing
import sqlite3
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacpriv.exceptions import BudgetExceededError
from pacpriv.pac.bounds._ledger import PrivacyLedger
from pacpriv.storage import open_store

CHARGES = (0.1, 0.2, 1 / 3, 1e-7, 2.0**-8, 0.3)


def _independent_sum(path, scope="default") -> float:
    """fsum of charges minus refunds, read with sqlite3 directly (not through pacpriv)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT kind, nats FROM entries WHERE scope = ?", (scope,)).fetchall()
    return math.fsum(n if kind == "charge" else -n for kind, n in rows)


def _writer(path: str, worker: int, total: float, out) -> None:
    ledger = PrivacyLedger(total, store=open_store(path))
    accepted = []
    for i in range(12):
        mi = CHARGES[(worker + i) % len(CHARGES)]
        try:
            entry = ledger.charge(mi, label=f"w{worker}-{i}")
        except BudgetExceededError:
            continue
        if i % 5 == 4:  # the release failed after its charge: refunded
            ledger.refund(entry, label="not delivered")
        else:
            accepted.append(mi)
    out.put(accepted)


@pytest.mark.parametrize("total", [None, 3.0])
def test_total_equals_the_sum_of_charges_with_concurrent_writers_refunds_restarts(tmp_path,
                                                                                   total):
    path = str(tmp_path / "ledger.db")
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, w, total, out)) for w in range(4)]
    for p in procs:
        p.start()
    delivered = [mi for _ in procs for mi in out.get(timeout=120)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    reopened = PrivacyLedger(total, store=open_store(path))  # a restart: a fresh process view
    assert reopened.spent == _independent_sum(path) == math.fsum(delivered)
    entries = reopened.releases
    refunds = [e for e in entries if e.kind == "refund"]
    assert refunds and all(e.mi in CHARGES for e in refunds)
    assert len(entries) == len(delivered) + 2 * len(refunds)
    if total is not None:  # the cap held under four concurrent writers
        assert Fraction(reopened.spent) <= Fraction(total)
        assert len(entries) - 2 * len(refunds) < 4 * 12 - 4 * 2  # some charges were refused
    # a restart continues the same ledger: one more charge, the sums still agree
    if total is None or reopened.can_charge(1e-7):
        reopened.charge(1e-7)
        assert reopened.spent == _independent_sum(path) == math.fsum([*delivered, 1e-7])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10, allow_nan=False), st.booleans()), max_size=30))
def test_exact_total_equals_fsum_in_memory_and_in_sqlite(tmp_path_factory, ops):
    path = tmp_path_factory.mktemp("f11") / "ledger.db"
    for ledger in (PrivacyLedger(), PrivacyLedger(store=open_store(path))):
        kept = []
        for mi, refund in ops:
            entry = ledger.charge(mi)
            if refund:
                ledger.refund(entry)
            else:
                kept.append(mi)
        assert ledger.spent == math.fsum(kept)
        exact = sum((Fraction(e.mi) * (1 if e.kind == "charge" else -1)
                     for e in ledger.releases), Fraction(0))
        assert ledger.spent == float(exact)


def test_refund_needs_a_charge_and_scopes_are_separate(tmp_path):
    store = open_store(tmp_path / "l.db")
    a, b = PrivacyLedger(1.0, store=store, scope="a"), PrivacyLedger(1.0, store=store, scope="b")
    entry = a.charge(0.75)
    b.charge(0.5)
    with pytest.raises(ValueError, match="must be a charge"):
        a.refund(a.refund(entry))
    assert a.spent == 0.0 and b.spent == 0.5
    assert a.can_charge(1.0) and not b.can_charge(0.75)


def test_a_transaction_that_raises_records_nothing_and_one_that_ends_commits(tmp_path):
    """``transaction`` (on the store's one commit/rollback path, ``_raw``): an exception in the
    block rolls the charge back; a block that ends commits it, read back by sqlite3 directly."""
    path = tmp_path / "ledger.db"
    store = open_store(path)
    with pytest.raises(RuntimeError, match="release failed"):
        with store.transaction("s") as tx:
            tx.charge(0.25, rows=3, label="lost")
            assert tx.totals() == (0.25, 3)  # seen inside the open transaction
            raise RuntimeError("release failed")
    assert _independent_sum(path, "s") == 0.0
    with store.transaction("s") as tx:
        tx.charge(0.5, rows=1)
    assert _independent_sum(path, "s") == 0.5
    with store.transaction("s") as tx:
        assert tx.totals() == (0.5, 1)
        assert [e.label for e in tx.entries()] == [None]


def test_a_scopes_cap_is_fixed_when_created(tmp_path):
    """b66: reopening a full scope with a larger cap (or none) is refused in one line naming
    the recorded cap; the same cap reopens it, other scopes are independent, and a full
    SQLite ledger refuses even 5e-324 more (b65)."""
    path = tmp_path / "shared.db"
    ledger = PrivacyLedger(1.0, store=open_store(path), scope="s1")
    ledger.charge(1.0)
    for other in (2.0, 1.0000000000000002, 0.5, None):
        with pytest.raises(ValueError, match=r"created with total_budget=1\.0 nats") as err:
            PrivacyLedger(other, store=open_store(path), scope="s1")
        assert "\n" not in str(err.value)
    reopened = PrivacyLedger(1.0, store=open_store(path), scope="s1")
    for extra in (0.5, 1e-15, 5e-324):
        with pytest.raises(BudgetExceededError, match=r"0\.0 nats remain"):
            reopened.charge(extra)
    assert reopened.spent == _independent_sum(path, "s1") == 1.0
    PrivacyLedger(None, store=open_store(path), scope="s2").charge(3.0)  # uncapped, its own
    with pytest.raises(ValueError, match=r"created with no cap"):
        PrivacyLedger(5.0, store=open_store(path), scope="s2")


def test_double_refund_in_sqlite_is_refused(tmp_path):
    """A refund names a standing charge of the scope: a second refund frees nothing."""
    path = tmp_path / "ledger.db"
    ledger = PrivacyLedger(1.0, store=open_store(path))
    entry = ledger.charge(1.0)
    ledger.refund(entry)
    with pytest.raises(ValueError, match="not a standing charge"):
        PrivacyLedger(1.0, store=open_store(path)).refund(entry)
    ledger.charge(1.0)
    with pytest.raises(BudgetExceededError):
        ledger.charge(0.5)
    assert ledger.spent == _independent_sum(path) == 1.0
