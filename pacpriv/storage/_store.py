"""The one storage interface of privacy budgets: ledger rows, totals, keys, answers, audit.

A :class:`LedgerStore` is a small SQL database (SQLite by default, PostgreSQL for replicas)
holding, for one or more *scopes* (a scope is one secret whose releases compose, e.g. one
private predictor):

* ``entries`` — one row per charge and per refund (append-only): nats, rows, analyst key id,
  label, idempotency key, time. A refund row points at the charge it cancels.
* ``totals`` — the scope's running total, kept as an **exact** dyadic fraction (text
  ``"numerator/denominator"``): every float charge is added exactly, so the total equals the
  correctly rounded sum of the entries (:func:`math.fsum`) bit for bit, whatever the order,
  the restarts or the writers.
* ``state`` — named blobs of a scope (the predictor's posterior over worlds).
* ``keys`` — analysts' API keys, stored as salted scrypt hashes only, with an optional quota.
* ``responses`` — the released answer of each ``(key, Idempotency-Key)``, so that a retry
  returns it and spends nothing more; kept for a retention (:meth:`Transaction.prune_responses`:
  an age and a row count). An expired key's charge stays in ``entries``
  (:meth:`Transaction.charged`), so a retry after expiry is refused, never charged twice.
* ``audit`` — append-only (updates and deletes are refused by triggers): key id, time, rows,
  nats, outcome; never query contents or outputs.

Every change runs in one transaction that holds the scope's write lock
(:meth:`LedgerStore.transaction`): SQLite's ``BEGIN IMMEDIATE`` (one writer per database
file, across processes), PostgreSQL's ``SELECT ... FOR UPDATE`` on the scope's totals row
(across replicas). A process killed mid-transaction leaves no trace (the transaction rolls
back); a committed charge is durable.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["SCHEMA_VERSION", "Entry", "KeyRecord", "LedgerStore", "Transaction", "exact_add"]

SCHEMA_VERSION = 1


def exact_add(total: str, value: float, sign: int = 1) -> str:
    """``total ± value`` exactly, as ``"numerator/denominator"`` text."""
    out = Fraction(total) + sign * Fraction(value)
    return f"{out.numerator}/{out.denominator}"


@dataclass(frozen=True)
class Entry:
    """One ledger row: a charge, or a refund of one."""

    id: int
    scope: str
    kind: str  # "charge" | "refund"
    nats: float
    rows: int
    key_id: str | None
    label: str | None
    idempotency_key: str | None
    refund_of: int | None
    timestamp: float


@dataclass(frozen=True)
class KeyRecord:
    """An analyst's API key as stored: public facts and the salted hash only."""

    key_id: str
    name: str
    quota: float | None
    spent: float
    rows: int
    created: float
    revoked: float | None
    salt: bytes
    digest: bytes

    @property
    def active(self) -> bool:
        """Whether the key is not revoked."""
        return self.revoked is None

    def public(self) -> dict:
        """The key's public facts (no salt, no hash)."""
        return {"key_id": self.key_id, "name": self.name, "quota": self.quota,
                "spent": self.spent, "rows": self.rows, "created": self.created,
                "revoked": self.revoked}


_ENTRY_COLUMNS = ("id, scope, kind, nats, nrows, key_id, label, idem, refund_of, ts")
_KEY_COLUMNS = "key_id, name, quota, spent, nrows, created, revoked, salt, digest"


class Transaction:
    """The operations of one open transaction (see :meth:`LedgerStore.transaction`)."""

    def __init__(self, store: LedgerStore, cursor, scope: str) -> None:
        self._store, self._cur, self.scope = store, cursor, scope

    def _q(self, sql: str, args: tuple = ()) -> list[tuple]:
        self._cur.execute(self._store.sql(sql), args)
        return list(self._cur.fetchall()) if self._cur.description else []

    # -- totals and entries ------------------------------------------------------------
    def totals(self) -> tuple[float, int]:
        """``(spent nats, rows)`` of the scope: charges minus refunds."""
        (spent, rows), = self._q("SELECT spent, nrows FROM totals WHERE scope = ?", (self.scope,))
        return float(Fraction(spent)), int(rows)

    def spent_exact(self) -> Fraction:
        """The scope's spend (charges minus refunds) as the exact sum of its float rows."""
        (spent,), = self._q("SELECT spent FROM totals WHERE scope = ?", (self.scope,))
        return Fraction(spent)

    def standing_charge(self, entry_id: int) -> Entry | None:
        """The scope's charge row ``entry_id`` if no refund row cancels it yet (else None)."""
        found = self._q(
            f"SELECT {_ENTRY_COLUMNS} FROM entries e WHERE e.scope = ? AND e.id = ? AND "
            "e.kind = 'charge' AND NOT EXISTS (SELECT 1 FROM entries r WHERE r.scope = e.scope "
            "AND r.refund_of = e.id)", (self.scope, int(entry_id)))
        return None if not found else Entry(*found[0])

    def entries(self) -> list[Entry]:
        """The scope's rows, oldest first."""
        rows = self._q(f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE scope = ? ORDER BY id",
                       (self.scope,))
        return [Entry(*r) for r in rows]

    def _insert_entry(self, kind: str, nats: float, rows: int, key_id: str | None,
                      label: str | None, idem: str | None, refund_of: int | None) -> Entry:
        ts = time.time()
        args = (self.scope, kind, float(nats), int(rows), key_id, label, idem, refund_of, ts)
        (entry_id,), = self._q(
            "INSERT INTO entries (scope, kind, nats, nrows, key_id, label, idem, refund_of, ts) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id", args)
        sign = 1 if kind == "charge" else -1
        (spent,), = self._q("SELECT spent FROM totals WHERE scope = ?", (self.scope,))
        self._q("UPDATE totals SET spent = ?, nrows = nrows + ? WHERE scope = ?",
                (exact_add(spent, nats, sign), sign * int(rows), self.scope))
        if key_id is not None:
            found = self._q("SELECT spent FROM keys WHERE key_id = ?", (key_id,))
            if found:
                self._q("UPDATE keys SET spent = ?, nrows = nrows + ? WHERE key_id = ?",
                        (exact_add(found[0][0], nats, sign), sign * int(rows), key_id))
        return Entry(int(entry_id), self.scope, kind, float(nats), int(rows), key_id, label,
                     idem, refund_of, ts)

    def charge(self, nats: float, *, rows: int = 0, key_id: str | None = None,
               label: str | None = None, idempotency_key: str | None = None) -> Entry:
        """Append a charge row and add it to the scope's (and the key's) totals."""
        return self._insert_entry("charge", nats, rows, key_id, label, idempotency_key, None)

    def refund(self, charge: Entry, *, label: str | None = None) -> Entry:
        """Append a refund row cancelling ``charge`` (its nats and rows)."""
        return self._insert_entry("refund", charge.nats, charge.rows, charge.key_id, label,
                                  charge.idempotency_key, charge.id)

    # -- named state blobs -------------------------------------------------------------
    def get_state(self, name: str) -> bytes | None:
        """A named blob of the scope (None if absent)."""
        found = self._q("SELECT body FROM state WHERE scope = ? AND name = ?", (self.scope, name))
        return None if not found else bytes(found[0][0])

    def put_state(self, name: str, body: bytes) -> None:
        """Create or replace a named blob of the scope."""
        self._q("DELETE FROM state WHERE scope = ? AND name = ?", (self.scope, name))
        self._q("INSERT INTO state (scope, name, body) VALUES (?, ?, ?)",
                (self.scope, name, self._store.blob(body)))

    # -- keys, idempotent responses, audit ---------------------------------------------
    def key(self, key_id: str) -> KeyRecord | None:
        """The stored key ``key_id`` (None if unknown)."""
        found = self._q(f"SELECT {_KEY_COLUMNS} FROM keys WHERE key_id = ?", (key_id,))
        return None if not found else _key_record(found[0])

    def response(self, key_id: str | None, idem: str) -> bytes | None:
        """The stored answer of ``(key_id, idem)`` (None if none)."""
        found = self._q("SELECT body FROM responses WHERE scope = ? AND key_id = ? AND idem = ?",
                        (self.scope, key_id or "", idem))
        return None if not found else bytes(found[0][0])

    def put_response(self, key_id: str | None, idem: str, body: bytes) -> None:
        """Store the released answer of ``(key_id, idem)``."""
        self._q("INSERT INTO responses (scope, key_id, idem, body, ts) VALUES (?, ?, ?, ?, ?)",
                (self.scope, key_id or "", idem, self._store.blob(body), time.time()))

    def charged(self, key_id: str | None, idem: str) -> bool:
        """Whether a charge with ``(key_id, idem)`` stands in the scope (not refunded): its
        answer was released, whether or not it is still stored."""
        found = self._q(
            "SELECT COUNT(*) FROM entries e WHERE e.scope = ? AND e.kind = 'charge' AND "
            "e.idem = ? AND COALESCE(e.key_id, '') = ? AND NOT EXISTS (SELECT 1 FROM entries r "
            "WHERE r.scope = e.scope AND r.refund_of = e.id)", (self.scope, idem, key_id or ""))
        return int(found[0][0]) > 0

    def prune_responses(self, *, older_than: float, keep: int) -> int:
        """Delete the stored answers written before ``older_than`` (``time.time()`` seconds)
        and all but the ``keep`` newest; returns how many were deleted. The ledger rows stay."""
        self._q("DELETE FROM responses WHERE scope = ? AND ts < ?", (self.scope, older_than))
        n = self._cur.rowcount if self._cur.rowcount is not None else 0
        edge = self._q("SELECT ts FROM responses WHERE scope = ? ORDER BY ts DESC LIMIT 1 "
                       "OFFSET ?", (self.scope, int(keep)))
        if edge:
            self._q("DELETE FROM responses WHERE scope = ? AND ts <= ?", (self.scope, edge[0][0]))
            n += self._cur.rowcount if self._cur.rowcount is not None else 0
        return max(int(n), 0)

    def audit(self, key_id: str | None, rows: int, nats: float, outcome: str) -> None:
        """Append an audit row (never query contents or outputs)."""
        self._q("INSERT INTO audit (scope, key_id, ts, nrows, nats, outcome) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (self.scope, key_id, time.time(), int(rows), float(nats), outcome))


def _key_record(row: tuple) -> KeyRecord:
    key_id, name, quota, spent, rows, created, revoked, salt, digest = row
    return KeyRecord(key_id, name, None if quota is None else float(quota),
                     float(Fraction(spent)), int(rows), float(created),
                     None if revoked is None else float(revoked), bytes(salt), bytes(digest))


class LedgerStore:
    """Base of the SQL stores: the schema and every query, written once.

    Subclasses give a connection (:meth:`_connect`), the write lock (:meth:`_begin`), the
    placeholder style (:attr:`placeholder`) and the DDL types; the public methods are the
    whole interface.
    """

    placeholder = "?"
    url: str = ""

    def __init__(self) -> None:
        self._local = threading.local()
        self._scopes: set[str] = set()

    # -- backend hooks -----------------------------------------------------------------
    def _connect(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _begin(self, cur, scope: str | None, write: bool = True) -> None:  # pragma: no cover
        raise NotImplementedError

    def blob(self, body: bytes):
        """The driver's value for a binary column."""
        return body

    def sql(self, text: str) -> str:
        """``text`` with the backend's placeholders."""
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)

    # -- connections and transactions --------------------------------------------------
    def _connection(self):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    def close(self) -> None:
        """Close this thread's connection (others close when their thread ends)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def ensure_scope(self, scope: str) -> None:
        """Create the scope's totals row if absent (idempotent, safe under concurrency)."""
        if scope in self._scopes:
            return
        with self._raw() as cur:
            cur.execute(self.sql("SELECT 1 FROM totals WHERE scope = ?"), (scope,))
            if not cur.fetchall():
                cur.execute(self.sql("INSERT INTO totals (scope, spent, nrows) VALUES (?, ?, 0) "
                                     "ON CONFLICT (scope) DO NOTHING"), (scope, "0/1"))
        self._scopes.add(scope)

    @contextlib.contextmanager
    def _raw(self, write: bool = True, scope: str | None = None) -> Iterator:
        """A plain transaction, holding ``scope``'s write lock when a scope is named (no lock
        for None): its cursor, committed on success, rolled back on error."""
        conn = self._connection()
        cur = conn.cursor()
        try:
            self._begin(cur, scope, write)
            yield cur
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        finally:
            cur.close()

    @contextlib.contextmanager
    def transaction(self, scope: str) -> Iterator[Transaction]:
        """One transaction holding ``scope``'s write lock; committed when the block ends
        without an exception, rolled back (nothing recorded) otherwise."""
        self.ensure_scope(scope)
        with self._raw(scope=scope) as cur:
            yield Transaction(self, cur, scope)

    def read(self, scope: str) -> tuple[float, int]:
        """``(spent, rows)`` of ``scope`` (one short transaction)."""
        with self.transaction(scope) as tx:
            return tx.totals()

    # -- keys --------------------------------------------------------------------------
    def add_key(self, key_id: str, name: str, salt: bytes, digest: bytes,
                quota: float | None) -> None:
        """Store a new key's salted hash (the token itself is never stored)."""
        with self._raw() as cur:
            cur.execute(self.sql(f"INSERT INTO keys ({_KEY_COLUMNS}) VALUES "
                                 "(?, ?, ?, ?, 0, ?, NULL, ?, ?)"),
                        (key_id, name, quota, "0/1", time.time(), self.blob(salt),
                         self.blob(digest)))

    def keys(self) -> list[KeyRecord]:
        """Every stored key, oldest first."""
        with self._raw(write=False) as cur:
            cur.execute(f"SELECT {_KEY_COLUMNS} FROM keys ORDER BY created, key_id")
            return [_key_record(r) for r in cur.fetchall()]

    def key(self, key_id: str) -> KeyRecord | None:
        """One stored key (None if unknown)."""
        with self._raw(write=False) as cur:
            cur.execute(self.sql(f"SELECT {_KEY_COLUMNS} FROM keys WHERE key_id = ?"), (key_id,))
            found = cur.fetchall()
            return None if not found else _key_record(found[0])

    def revoke_key(self, key_id: str) -> bool:
        """Revoke ``key_id``; False if unknown or already revoked."""
        with self._raw() as cur:
            cur.execute(self.sql("UPDATE keys SET revoked = ? WHERE key_id = ? AND revoked IS "
                                 "NULL"), (time.time(), key_id))
            return cur.rowcount == 1

    def has_keys(self) -> bool:
        """Whether any key was ever added."""
        with self._raw(write=False) as cur:
            cur.execute("SELECT COUNT(*) FROM keys")
            return int(cur.fetchall()[0][0]) > 0

    def audit_rows(self, scope: str | None = None) -> list[tuple]:
        """The audit table ``(key_id, ts, rows, nats, outcome)``, oldest first."""
        with self._raw(write=False) as cur:
            if scope is None:
                cur.execute("SELECT key_id, ts, nrows, nats, outcome FROM audit ORDER BY id")
            else:
                cur.execute(self.sql("SELECT key_id, ts, nrows, nats, outcome FROM audit WHERE "
                                     "scope = ? ORDER BY id"), (scope,))
            return [tuple(r) for r in cur.fetchall()]
