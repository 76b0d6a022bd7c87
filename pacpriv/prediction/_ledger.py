"""The private predictor's budget on the project's one ledger type (:class:`PrivacyLedger`).

One transaction per answer (:func:`answer_in_ledger`): under the ledger's write lock, a retry
with a known ``Idempotency-Key`` gets the stored answer and spends nothing; otherwise the
global cap and the analyst's quota are checked, the charge row is appended (charge before
release), the answers are computed from the posterior read in the same transaction, and the
new posterior, the answer (for retries) and an audit row are written; the transaction commits
before anything is returned. An answer that fails after the charge (an error, or the request's
deadline passed) appends a refund row instead and returns nothing. A process killed before the
commit leaves no trace.

The cap is counted in rows (``n_answered + n <= max_queries``: exact integers); the rows and
their nats (``rows · per_query_budget``) are both in the ledger's rows and totals.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pacpriv.exceptions import BudgetExceededError, CheckpointError
from pacpriv.pac.bounds._ledger import PrivacyLedger
from pacpriv.prediction._answers import check_budget
from pacpriv.prediction._settings import BUDGET_TOLERANCE

__all__ = ["IDEMPOTENCY_MAX_ROWS", "IDEMPOTENCY_TTL_S", "AnswerTimeoutError", "Caller",
           "IdempotencyConflictError", "IdempotencyExpiredError", "KeyRevokedError",
           "QuotaExceededError", "answer_in_ledger", "check_recorded_budget", "read_posterior"]


class QuotaExceededError(BudgetExceededError):
    """The analyst's quota would be exceeded (nothing spent)."""


class KeyRevokedError(PermissionError):
    """The analyst's key is unknown or revoked (nothing spent)."""


class AnswerTimeoutError(TimeoutError):
    """The answer was not ready before the request's deadline (charged, then refunded)."""


class IdempotencyConflictError(ValueError):
    """An ``Idempotency-Key`` reused with other query rows (nothing spent)."""


class IdempotencyExpiredError(ValueError):
    """An ``Idempotency-Key`` whose answer was released and charged, but is no longer stored
    (past the retention): refused, nothing spent; a new request needs a new key."""


#: Default retention of stored idempotent answers: 24 hours, at most 100,000 per predictor.
IDEMPOTENCY_TTL_S = 86400.0
IDEMPOTENCY_MAX_ROWS = 100_000


@dataclass(frozen=True)
class Caller:
    """Who asks: the analyst's key id, the request's idempotency key and its deadline
    (``time.monotonic()`` seconds), all optional (the Python API passes none)."""

    key_id: str | None = None
    idempotency_key: str | None = None
    deadline: float | None = None
    #: Seconds a stored idempotent answer is kept, and the most kept (newest first).
    idempotency_ttl: float = IDEMPOTENCY_TTL_S
    idempotency_max_rows: int = IDEMPOTENCY_MAX_ROWS


def read_posterior(tx, n_worlds: int) -> tuple[int, np.ndarray]:
    """``(n_answered, log_posterior)`` from an open ledger transaction.

    Raises
    ------
    CheckpointError
        If the stored posterior is corrupt or does not have ``n_worlds`` entries.
    """
    _, rows = tx.totals()
    blob = tx.get_state("log_posterior")
    lp = np.zeros(n_worlds) if blob is None else np.frombuffer(blob, dtype="<f8").copy()
    if rows < 0 or lp.shape != (n_worlds,) or not np.all(np.isfinite(lp)):
        raise CheckpointError(f"the ledger's posterior is corrupt or does not have {n_worlds} "
                              "worlds (the ledger belongs to another predictor?).")
    return int(rows), lp


_BUDGET_BLOB = "predictor_budget"


def check_recorded_budget(ledger: PrivacyLedger, per_query_budget: float,
                          total_budget: float) -> None:
    """Record the predictor's budgets in its ledger scope when first opened; refuse others.

    The budgets are fixed when a predictor is fitted: a ``config.json`` edited, copied from
    another fit, or a replica's copy that says otherwise would silently raise the cap of the
    shared ledger, so it is refused.

    Raises
    ------
    CheckpointError
        One line naming the recorded budgets and the ones given.
    """
    mine = f"{float.hex(float(per_query_budget))} {float.hex(float(total_budget))}"
    with ledger.transaction() as tx:
        stored = tx.get_state(_BUDGET_BLOB)
        if stored is None:
            tx.put_state(_BUDGET_BLOB, mine.encode())
            return
    if stored.decode(errors="replace") == mine:
        return
    try:
        b, total = (float.fromhex(x) for x in stored.decode().split())
        was = f"per_query_budget={b!r}, total_budget={total!r} nats"
    except ValueError:
        was = "unreadable budgets"
    raise CheckpointError(
        f"the ledger of this predictor records {was}, but its config.json says "
        f"per_query_budget={float(per_query_budget)!r}, total_budget={float(total_budget)!r}: "
        "a predictor's budgets are fixed when it is fitted (fit a new state to change them).")


def _check_quota(tx, key_id: str | None, n: int, per_query_budget: float) -> None:
    if key_id is None:
        return
    key = tx.key(key_id)
    if key is None or not key.active:
        raise KeyRevokedError(f"key {key_id} is unknown or revoked.")
    if key.quota is None:
        return
    allowed = math.floor(key.quota / per_query_budget * (1.0 + BUDGET_TOLERANCE))
    if key.rows + n > allowed:
        raise QuotaExceededError(
            f"{n} query row(s) would take key {key_id} over its quota of {key.quota!r} nats "
            f"({allowed} rows; {max(allowed - key.rows, 0)} remain). Nothing was spent.")


def _encode(digest: bytes, answers: np.ndarray) -> bytes:
    return digest + np.asarray(answers, dtype="<f8").tobytes()


def _decode(body: bytes, digest: bytes, d: int) -> np.ndarray:
    if body[:32] != digest:
        raise IdempotencyConflictError("this Idempotency-Key was used with other query rows; "
                                       "use a new key for a new request. Nothing was spent.")
    return np.frombuffer(body[32:], dtype="<f8").reshape(-1, d).copy()


def answer_in_ledger(ledger: PrivacyLedger, X: np.ndarray, *, per_query_budget: float,
                     total_budget: float, max_queries: int, n_worlds: int, d: int, caller: Caller,
                     compute: Callable[[int, np.ndarray], tuple[np.ndarray, np.ndarray]]
                     ) -> tuple[np.ndarray, int, np.ndarray]:
    """Answer the rows ``X`` in one ledger transaction (see the module docstring).

    ``compute(first_index, log_posterior) -> (answers (n, d), log_posterior)``.

    Returns
    -------
    answers, n_answered (after), log_posterior (after)

    Raises
    ------
    BudgetExceededError, QuotaExceededError, KeyRevokedError, IdempotencyConflictError
        Nothing spent (an audit row says so).
    AnswerTimeoutError, or what ``compute`` raised
        The charge is refunded by a refund row.
    """
    n = X.shape[0]
    digest = hashlib.sha256(np.ascontiguousarray(X, dtype="<f8").tobytes()).digest()
    error: BaseException | None = None
    key_id, idem = caller.key_id, caller.idempotency_key
    with ledger.transaction() as tx:
        n_answered, lp = read_posterior(tx, n_worlds)
        if idem is not None:  # an answer past its retention is gone, even with no new answer
            tx.prune_responses(older_than=time.time() - caller.idempotency_ttl,
                               keep=caller.idempotency_max_rows)
        cached = None if idem is None else tx.response(key_id, idem)
        if cached is not None:
            try:
                answers = _decode(cached, digest, d)
                tx.audit(key_id, n, 0.0, "replayed (idempotent retry)")
                return answers, n_answered, lp
            except IdempotencyConflictError as err:
                tx.audit(key_id, n, 0.0, "refused: idempotency key reused")
                error = err
        elif idem is not None and tx.charged(key_id, idem):  # answered once, since pruned
            tx.audit(key_id, n, 0.0, "refused: idempotency key expired")
            error = IdempotencyExpiredError(
                "this Idempotency-Key was answered and charged before, but its stored answer "
                f"has expired (kept {caller.idempotency_ttl:g} s, at most "
                f"{caller.idempotency_max_rows} answers): it is not answered or charged again. "
                "Send the request with a new Idempotency-Key to be answered (and charged) "
                "anew. Nothing was spent.")
        if error is None:
            try:
                check_budget(n, n_answered=n_answered, max_queries=max_queries,
                             per_query_budget=per_query_budget,
                             total_budget=total_budget)
                _check_quota(tx, key_id, n, per_query_budget)
            except (BudgetExceededError, KeyRevokedError) as err:
                tx.audit(key_id, n, 0.0, f"refused: {type(err).__name__}")
                error = err
        if error is None:
            charge = ledger.charge(n * per_query_budget, rows=n, key_id=key_id,
                                   idempotency_key=idem, label="answer", tx=tx)
            try:
                answers, new_lp = compute(n_answered, lp)
                if caller.deadline is not None and time.monotonic() > caller.deadline:
                    raise AnswerTimeoutError("the answer was not ready before the request's "
                                             "deadline; its charge was refunded.")
            except Exception as err:  # charged, not released: refund with a row of its own
                ledger.refund(charge, label=f"refund: {type(err).__name__}", tx=tx)
                tx.audit(key_id, n, 0.0, f"refunded: {type(err).__name__}")
                error = err
            else:
                tx.put_state("log_posterior", np.asarray(new_lp, dtype="<f8").tobytes())
                if idem is not None:
                    tx.prune_responses(older_than=time.time() - caller.idempotency_ttl,
                                       keep=max(caller.idempotency_max_rows - 1, 0))
                    tx.put_response(key_id, idem, _encode(digest, answers))
                tx.audit(key_id, n, n * per_query_budget, "answered")
    if error is not None:
        raise error
    return answers, n_answered + n, new_lp
