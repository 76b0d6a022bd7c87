"""A ledger of mutual-information budgets spent by successive noisy releases.

Releases ``Y_1, Y_2, ...`` of the same secret subset, each with its own independent Gaussian noise
calibrated to a budget ``v_t``, are conditionally independent given the subset, so
``MI(X; Y_1, ..., Y_T) <= Σ_t v_t`` (chain rule of mutual
information). :class:`PrivacyLedger` adds the budgets up and refuses, *all or nothing*, a release
that would take the sum over a total cap.

The ledger's rows live in memory by default, or in a transactional store
(:func:`pacpriv.storage.open_store`: SQLite, or PostgreSQL for several processes or hosts): then
every charge is one transaction that checks the cap and appends the row under the store's
write lock, a refund is a row of its own, and the total is kept as an exact fraction, equal to
:func:`math.fsum` of the rows after any number of restarts, refunds and concurrent writers.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, §4 (composition of
   releases with independent noise).
"""

from __future__ import annotations

import contextlib
import math
import numbers
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from pacpriv._numbers import format_bound
from pacpriv._validation import check_real
from pacpriv.exceptions import BudgetExceededError
from pacpriv.pac.bounds._posterior import check_membership_prior, posterior_success_rate
from pacpriv.storage._store import Entry, LedgerStore, Transaction

__all__ = ["LedgerEntry", "PrivacyLedger"]

_CAP_BLOB = "ledger_total_budget"  # the scope's cap, recorded when the scope is created
_FLOAT_MAX = Fraction(sys.float_info.max)


def _check_prior(prior) -> float:
    """A scalar blind-guess prior in ``[0.5, 1)`` (the same rule as ``posterior_success_rate``)."""
    if isinstance(prior, bool) or not isinstance(prior, numbers.Real):
        raise TypeError(f"`prior` must be a real number in [0.5, 1); got {type(prior).__name__}.")
    return float(check_membership_prior(prior))


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded release.

    Attributes
    ----------
    mi : float
        Mutual-information budget charged, nats (``>= 0``).
    label : str or None
        Caller's description of the release.
    timestamp : float
        ``time.time()`` (seconds since the epoch, UTC) when it was recorded.
    """

    mi: float
    label: str | None
    timestamp: float
    kind: str = "charge"
    entry_id: int | None = None
    key_id: str | None = None
    rows: int = 0
    idempotency_key: str | None = None

    def to_dict(self) -> dict:
        """JSON-serialisable dictionary of the fields."""
        body = {"mi": self.mi, "label": self.label, "timestamp": self.timestamp}
        if self.kind != "charge":
            body["kind"] = self.kind
        return body

    @classmethod
    def _of(cls, entry: Entry) -> LedgerEntry:
        return cls(mi=entry.nats, label=entry.label, timestamp=entry.timestamp, kind=entry.kind,
                   entry_id=entry.id, key_id=entry.key_id, rows=entry.rows,
                   idempotency_key=entry.idempotency_key)

    def _entry(self, scope: str) -> Entry:
        return Entry(self.entry_id or 0, scope, self.kind, self.mi, self.rows, self.key_id,
                     self.label, self.idempotency_key, None, self.timestamp)


def _float_text(value: Fraction, *, up: bool) -> str:
    """``repr`` of ``value`` as a float; if inexact, the next float toward ``up``, saying so."""
    x = float(value)
    if Fraction(x) == value:
        return repr(x)
    if (Fraction(x) < value) == up:
        x = math.nextafter(x, math.inf if up else -math.inf)
    return f"{x!r} (rounded {'up' if up else 'down'})"


class _MemoryTransaction:
    """The in-memory ledger's rows, with the operations of a store transaction."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        self._entries: list[Entry] = []
        self._total = Fraction(0)
        self._rows = 0
        self._blobs: dict[str, bytes] = {}
        self._responses: dict[tuple[str, str], tuple[float, bytes]] = {}  # (key, idem): ts, body

    def totals(self) -> tuple[float, int]:
        return float(self._total), self._rows

    def spent_exact(self) -> Fraction:
        return self._total

    def standing_charge(self, entry_id: int) -> Entry | None:
        refunded = {e.refund_of for e in self._entries if e.kind == "refund"}
        return next((e for e in self._entries if e.id == entry_id and e.kind == "charge"
                     and e.id not in refunded), None)

    def entries(self) -> list[Entry]:
        return list(self._entries)

    def _append(self, kind: str, nats: float, rows: int, key_id, label, idem, refund_of):
        entry = Entry(len(self._entries) + 1, self.scope, kind, float(nats), int(rows), key_id,
                      label, idem, refund_of, time.time())
        sign = 1 if kind == "charge" else -1
        self._entries.append(entry)
        self._total += sign * Fraction(nats)
        self._rows += sign * int(rows)
        return entry

    def charge(self, nats: float, *, rows: int = 0, key_id: str | None = None,
               label: str | None = None, idempotency_key: str | None = None) -> Entry:
        return self._append("charge", nats, rows, key_id, label, idempotency_key, None)

    def refund(self, charge: Entry, *, label: str | None = None) -> Entry:
        return self._append("refund", charge.nats, charge.rows, charge.key_id, label,
                            charge.idempotency_key, charge.id)

    # the rest of a store transaction's operations (named blobs, answers; no keys, no audit)
    def get_state(self, name: str) -> bytes | None:
        return self._blobs.get(name)

    def put_state(self, name: str, body: bytes) -> None:
        self._blobs[name] = bytes(body)

    def key(self, key_id: str) -> None:
        return None

    def response(self, key_id: str | None, idem: str) -> bytes | None:
        found = self._responses.get((key_id or "", idem))
        return None if found is None else found[1]

    def put_response(self, key_id: str | None, idem: str, body: bytes) -> None:
        self._responses[(key_id or "", idem)] = (time.time(), bytes(body))

    def charged(self, key_id: str | None, idem: str) -> bool:
        refunded = {e.refund_of for e in self._entries if e.kind == "refund"}
        return any(e.kind == "charge" and e.idempotency_key == idem
                   and (e.key_id or "") == (key_id or "") and e.id not in refunded
                   for e in self._entries)

    def prune_responses(self, *, older_than: float, keep: int) -> int:
        kept = sorted(((ts, k) for k, (ts, _) in self._responses.items() if ts >= older_than),
                      reverse=True)[:max(int(keep), 0)]
        keep_keys = {k for _, k in kept}
        gone = [k for k in self._responses if k not in keep_keys]
        for k in gone:
            del self._responses[k]
        return len(gone)

    def audit(self, key_id: str | None, rows: int, nats: float, outcome: str) -> None:
        return None


class PrivacyLedger:
    """Cumulative mutual-information budget of releases about one secret (composition adds).

    Parameters
    ----------
    total_budget : float or None, default None
        Cap on the summed budget, nats, ``> 0``; ``None`` records without a cap.
    prior : float or None, default None
        Blind-guess success rate ``p0`` in ``[0.5, 1)`` of the secret the releases are about
        (``max(q, 1 − q)`` for inclusion probability ``q``). A
        :class:`~pacpriv.pac.wrapper.PacPrivateFunction` sets it from its sampler when it is
        calibrated; see :meth:`use_prior`.
    store : LedgerStore or None, default None
        Where the rows live: None keeps them in this object; a store from
        :func:`pacpriv.storage.open_store` (SQLite file, PostgreSQL) keeps them durably, shared
        by every ledger opened on it with the same ``scope`` (across threads, processes and,
        with PostgreSQL, hosts).
    scope : str, default "default"
        The secret the rows are about, inside ``store`` (1–200 characters).

    Raises
    ------
    TypeError, ValueError
        For an invalid argument, or when ``store`` already holds ``scope`` with another
        ``total_budget`` (a scope's cap, or its absence, is recorded when the scope is created
        and is fixed: reopening with a larger cap would silently allow more spending; the
        message names the recorded cap). Scopes created by pacpriv 0.4.0 have no recorded cap:
        the first reopening records its ``total_budget``.

    Notes
    -----
    Budgets are summed exactly (a running :class:`fractions.Fraction` of the float charges,
    whose rounding to float is :func:`math.fsum` of the rows). A charge is accepted iff the
    exact sum ``spent + mi <= total_budget``: there is no round-off slack, so the spend never
    exceeds the cap, not even by an ulp. Charges that sum exactly to the cap fit (0.25 + 0.75
    fit 1.0), but decimal fractions need not: in float64, 0.2 + 0.1 is more than 0.3, so a
    third of them is refused. Without a cap, a charge that would take the sum past float64's
    range (about 1.8e308 nats) is refused. A refused charge leaves the ledger unchanged. A
    :meth:`refund` appends a row that cancels a standing charge of this ledger whose release
    was never delivered (once).

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, §4 (composition: budgets add).

    Examples
    --------
    >>> ledger = PrivacyLedger(total_budget=0.1)
    >>> _ = ledger.charge(0.06, label="first")
    >>> round(ledger.remaining, 10)
    0.04
    """

    def __init__(self, total_budget: float | None = None, *, prior: float | None = None,
                 store: LedgerStore | None = None, scope: str = "default") -> None:
        if total_budget is not None:
            total_budget = check_real(total_budget, "total_budget", low=0.0, low_inclusive=False)
        if store is not None and not isinstance(store, LedgerStore):
            raise TypeError(f"`store` must be a LedgerStore or None; got {type(store).__name__}.")
        if not isinstance(scope, str) or not 0 < len(scope) <= 200:
            raise ValueError("`scope` must be a str of 1 to 200 characters.")
        self._total = total_budget
        self._store, self._scope = store, scope
        self._memory = _MemoryTransaction(scope) if store is None else None
        self._lock = threading.RLock()
        self._prior = None if prior is None else _check_prior(prior)
        if store is not None:
            self._check_recorded_cap()

    def _check_recorded_cap(self) -> None:
        """Record the cap of a new scope; refuse another cap for an existing one."""
        mine = "none" if self._total is None else float.hex(self._total)
        with self.transaction() as tx:
            stored = tx.get_state(_CAP_BLOB)
            if stored is None:
                tx.put_state(_CAP_BLOB, mine.encode())
                return
        text = stored.decode(errors="replace")
        if text == mine:
            return
        try:
            was = "no cap (total_budget=None)" if text == "none" else \
                f"total_budget={float.fromhex(text)!r} nats"
        except ValueError:
            was = "an unreadable cap"
        raise ValueError(
            f"`total_budget` {self._total!r} differs from the cap of scope {self._scope!r} in "
            f"this store, which was created with {was}; a scope's cap is fixed when it is "
            "created: reopen it with that value (or use a new scope).")

    def __getstate__(self) -> dict:
        if self._store is not None:
            raise TypeError("a PrivacyLedger on a store cannot be pickled; open the store again "
                            "in the other process (the rows are shared through it).")
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    @property
    def store(self) -> LedgerStore | None:
        """The store holding the rows (None: in memory)."""
        return self._store

    @property
    def scope(self) -> str:
        """The scope of the rows inside the store."""
        return self._scope

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One transaction on the ledger's rows, holding its write lock (serialised across
        threads, and across processes and replicas with a store); committed when the block
        ends without an exception, rolled back otherwise. Pass it as ``tx=`` to
        :meth:`charge` and :meth:`refund` to group them with other work."""
        with self._lock:
            if self._memory is not None:
                yield self._memory  # type: ignore[misc]  # the same operations, in memory
                return
            assert self._store is not None
            with self._store.transaction(self._scope) as tx:
                yield tx

    @property
    def prior(self) -> float | None:
        """Blind-guess prior ``p0`` of the posterior bound (``None`` until known)."""
        return self._prior

    def use_prior(self, prior: float) -> None:
        """Record the blind-guess prior of a release (the wrappers call this when calibrated).

        Functions sharing a ledger release about one secret; if they report different priors,
        the largest is kept (the posterior bound grows with the prior: the safe side).

        Raises
        ------
        TypeError, ValueError
            If ``prior`` is not a real number in ``[0.5, 1)``.
        """
        p = _check_prior(prior)
        self._prior = p if self._prior is None else max(self._prior, p)

    @property
    def total_budget(self) -> float | None:
        """The cap in nats (``None``: no cap)."""
        return self._total

    @property
    def releases(self) -> list[LedgerEntry]:
        """Recorded rows (charges, and refunds with ``kind="refund"``), oldest first."""
        with self.transaction() as tx:
            return [LedgerEntry._of(e) for e in tx.entries()]

    @property
    def spent(self) -> float:
        """Charges minus refunds, nats (an upper bound on the MI of all releases)."""
        with self.transaction() as tx:
            return tx.totals()[0]

    @property
    def remaining(self) -> float:
        """``total_budget − spent`` in nats, the exact difference rounded down (``inf``
        without a cap; never negative): a charge of ``remaining`` always fits."""
        if self._total is None:
            return math.inf
        with self.transaction() as tx:
            left = Fraction(self._total) - tx.spent_exact()
        x = float(left)
        return max(math.nextafter(x, -math.inf) if Fraction(x) > left else x, 0.0)

    def _fits(self, spent: Fraction, mi: float) -> bool:
        after = spent + Fraction(mi)
        return after <= (_FLOAT_MAX if self._total is None else Fraction(self._total))

    def can_charge(self, mi: float) -> bool:
        """Whether a charge of ``mi`` nats would be accepted (records nothing)."""
        mi = check_real(mi, "mi", low=0.0)
        with self.transaction() as tx:
            return self._fits(tx.spent_exact(), mi)

    def charge(self, mi: float, *, label: str | None = None, key_id: str | None = None,
               rows: int = 0, idempotency_key: str | None = None,
               tx: Transaction | None = None) -> LedgerEntry:
        """Record a release of budget ``mi`` nats, or refuse it without recording anything.

        Parameters
        ----------
        mi : float
            Budget of the release, nats, ``>= 0`` (finite).
        label : str or None
            Description stored with the entry.
        key_id : str or None
            The analyst's key id (served releases).
        rows : int, default 0
            Query rows the charge pays for (the private predictor's unit).
        idempotency_key : str or None
            The request's ``Idempotency-Key`` (served releases).
        tx : Transaction or None
            An open :meth:`transaction` to charge in (None: a transaction of its own).

        Returns
        -------
        LedgerEntry

        Raises
        ------
        TypeError, ValueError
            If ``mi`` is not a finite number ``>= 0`` or ``label`` is not a str.
        pacpriv.exceptions.BudgetExceededError
            If the exact sum ``spent + mi`` would exceed ``total_budget`` or, without a cap,
            float64's range (the ledger is left unchanged).
        """
        mi = check_real(mi, "mi", low=0.0)
        if label is not None and not isinstance(label, str):
            raise TypeError(f"`label` must be a str or None; got {type(label).__name__}.")
        if tx is None:
            with self.transaction() as own:
                return self.charge(mi, label=label, key_id=key_id, rows=rows,
                                   idempotency_key=idempotency_key, tx=own)
        spent = tx.spent_exact()
        if not self._fits(spent, mi):
            raise BudgetExceededError(self._refusal(spent, mi))
        return LedgerEntry._of(tx.charge(mi, rows=rows, key_id=key_id, label=label,
                                         idempotency_key=idempotency_key))

    def _refusal(self, spent: Fraction, mi: float) -> str:
        """The one-line refusal: the charge, the spend (rounded up) and the cap."""
        shown = _float_text(spent, up=True)
        if self._total is None:
            return (f"release of {mi!r} nats refused: {shown} nats are spent and this "
                    "ledger without a cap sums its charges in float64, whose range ends at "
                    f"{sys.float_info.max!r}.")
        remaining = _float_text(Fraction(self._total) - spent, up=False)
        return (f"release of {mi!r} nats refused: {shown} of the total budget "
                f"{self._total!r} nats is spent, {remaining} nats remain (charges are summed "
                "exactly; the cap has no round-off slack).")

    def refund(self, entry: LedgerEntry, *, label: str | None = None,
               tx: Transaction | None = None) -> LedgerEntry:
        """Append a refund row cancelling the charge ``entry`` (a release never delivered).

        Raises
        ------
        ValueError
            If ``entry`` is not a standing charge of this ledger (not a charge, not one of its
            rows, or already refunded): a refund frees budget, so it is never taken on trust.
        """
        if not isinstance(entry, LedgerEntry) or entry.kind != "charge":
            raise ValueError("`entry` must be a charge of this ledger (a LedgerEntry with "
                             "kind 'charge').")
        if tx is None:
            with self.transaction() as own:
                return self.refund(entry, label=label, tx=own)
        standing = None if entry.entry_id is None else tx.standing_charge(entry.entry_id)
        if standing is None or standing.nats != entry.mi or standing.rows != entry.rows:
            raise ValueError(f"`entry` (entry_id {entry.entry_id!r}) is not a standing charge "
                             "of this ledger: it is another ledger's row, or already refunded; "
                             "nothing was refunded.")
        return LedgerEntry._of(tx.refund(standing, label=label))

    def posterior_success_bound(self, *, prior: float | None = None) -> float:
        """Posterior-success bound of an adversary seeing every recorded release.

        ``posterior_success_rate(spent, prior=p0)`` ([1]_ Thm 1), with ``p0`` the given
        ``prior`` or else the ledger's own (:attr:`prior`, set by the calibrated wrapper):
        never an assumed ½.

        Raises
        ------
        ValueError
            If no prior is given and the ledger has none, or ``prior`` is outside ``[0.5, 1)``.
        """

        if prior is None:
            if self._prior is None:
                raise ValueError(
                    "`prior` is required: this ledger has no membership prior yet (calibrate "
                    "a PacPrivateFunction that uses it, or pass prior=max(q, 1 - q) for "
                    "inclusion probability q)."
                )
            prior = self._prior
        return float(posterior_success_rate(self.spent, prior=_check_prior(prior)))

    def to_dict(self) -> dict:
        """JSON-serialisable summary: cap, spent, remaining and every entry."""
        return {
            "total_budget": self._total,
            "prior": self._prior,
            "spent": self.spent,
            "remaining": None if self._total is None else self.remaining,
            "releases": [e.to_dict() for e in self.releases],
        }

    def __repr__(self) -> str:
        return (
            f"PrivacyLedger(total_budget={self._total!r}, spent={format_bound(self.spent)}, "
            f"n_releases={len(self.releases)})"
        )
