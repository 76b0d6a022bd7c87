"""Idempotent answers are kept for a retention, never forever, and never charged twice
(a leftover of issue 34).

0.4 kept every stored answer forever. Now an answer is kept ``idempotency_ttl`` seconds and at
most ``idempotency_max_rows`` answers per predictor (``pacpriv serve --idempotency-ttl``,
``--idempotency-max-rows``). A retry after its answer was dropped is refused (410 over HTTP),
spending nothing: the key's charge stays in the append-only ledger, so the same request is
never answered and charged a second time; a new key is a new, charged request.
"""

from __future__ import annotations

import sqlite3
import time
import warnings

import pytest
from starlette.exceptions import StarletteDeprecationWarning

from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction import PrivatePredictor, create_app
from pacpriv.prediction._ledger import Caller, IdempotencyExpiredError
from pacpriv.prediction._limits import ServeLimits

from ._helpers import cancer, logreg

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

QUIET = ExecutionOptions(progress=False)
B = 2.0**-8
X = cancer()[0]


@pytest.fixture(scope="module")
def fitted_state(tmp_path_factory):
    X_, y = cancer()
    state = tmp_path_factory.mktemp("retention") / "s"
    PrivatePredictor(logreg(), (X_, y), n_worlds=4, per_query_budget=B, total_budget=20 * B,
                     state=state, rng=3, secret_rng=30).fit(execution=QUIET)
    return state


@pytest.fixture(params=["sqlite", "memory"])
def predictor(request, fitted_state, tmp_path):
    if request.param == "memory":
        X_, y = cancer()
        return PrivatePredictor(logreg(), (X_, y), n_worlds=4, per_query_budget=B,
                                total_budget=20 * B, rng=3, secret_rng=30).fit(execution=QUIET)
    from ._helpers import copy_state

    copy_state(fitted_state, tmp_path / "s")
    return PrivatePredictor.load(tmp_path / "s")


def _ask(pp, rows, idem, **retention):
    return pp.answer_for(rows, Caller(idempotency_key=idem, **retention))[0]


def test_a_retry_within_the_retention_replays(predictor):
    first = _ask(predictor, X[:2], "a")
    assert (_ask(predictor, X[:2], "a") == first).all() and predictor.n_answered == 2


def test_an_expired_answer_is_dropped_and_its_retry_refused_not_charged_twice(predictor):
    _ask(predictor, X[:2], "old")
    time.sleep(0.05)
    _ask(predictor, X[2:3], "new", idempotency_ttl=0.01)  # its transaction drops "old"
    spent, answered = predictor.spent, predictor.n_answered
    with pytest.raises(IdempotencyExpiredError, match=r"expired.*Nothing was spent"):
        _ask(predictor, X[:2], "old", idempotency_ttl=0.01)
    assert (predictor.spent, predictor.n_answered) == (spent, answered) == (3 * B, 3)
    again = _ask(predictor, X[:2], "old-2")  # a new key is a new request: charged once
    assert again.shape[0] == 2 and predictor.n_answered == 5


def test_an_answer_past_its_retention_is_not_replayed_even_with_no_answer_since(predictor):
    """Seventh new-user pass #610: the retention was enforced only when a new answer was
    stored, so a retry 3 s after a 2 s TTL still replayed (no other answer in between)."""
    _ask(predictor, X[:2], "lone")
    time.sleep(0.05)
    with pytest.raises(IdempotencyExpiredError):
        _ask(predictor, X[:2], "lone", idempotency_ttl=0.01)
    assert predictor.n_answered == 2 and predictor.spent == 2 * B


def test_at_most_max_rows_answers_are_kept(predictor):
    for i in range(5):
        _ask(predictor, X[i:i + 1], f"k{i}", idempotency_max_rows=2)
    for i in (3, 4):  # the two newest replay
        _ask(predictor, X[i:i + 1], f"k{i}", idempotency_max_rows=2)
    assert predictor.n_answered == 5
    for i in (0, 1, 2):  # the older ones are refused, never charged again
        with pytest.raises(IdempotencyExpiredError):
            _ask(predictor, X[i:i + 1], f"k{i}", idempotency_max_rows=2)
    assert predictor.n_answered == 5 and predictor.spent == 5 * B


def test_a_refunded_request_is_answered_on_retry(predictor, monkeypatch):
    """A charge that was refunded (the answer failed) released nothing: its retry is new."""
    import pacpriv.prediction._predictor as module

    real = module.answer_in_ledger

    def failing(*args, compute, **kwargs):
        def broken(*a):
            raise ValueError("the models could not evaluate these rows")
        return real(*args, compute=broken, **kwargs)

    monkeypatch.setattr(module, "answer_in_ledger", failing)
    with pytest.raises(ValueError):
        _ask(predictor, X[:1], "r")
    monkeypatch.setattr(module, "answer_in_ledger", real)
    assert _ask(predictor, X[:1], "r").shape[0] == 1 and predictor.n_answered == 1


def test_http_410_and_the_sqlite_rows(fitted_state, tmp_path):
    from ._helpers import copy_state

    copy_state(fitted_state, tmp_path / "s")
    pp = PrivatePredictor.load(tmp_path / "s")
    client = TestClient(create_app(pp, ServeLimits(idempotency_max_rows=1)))
    rows = {"rows": X[:1].tolist()}
    assert client.post("/predict", json=rows, headers={"Idempotency-Key": "a"}).status_code == 200
    assert client.post("/predict", json={"rows": X[1:2].tolist()},
                       headers={"Idempotency-Key": "b"}).status_code == 200
    r = client.post("/predict", json=rows, headers={"Idempotency-Key": "a"})
    assert r.status_code == 410 and "new Idempotency-Key" in r.json()["detail"]
    assert pp.n_answered == 2
    with sqlite3.connect(tmp_path / "s" / "ledger.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 1
        assert conn.execute("SELECT COUNT(*) FROM entries WHERE kind = 'charge'"
                            ).fetchone()[0] == 2
    outcomes = [row[4] for row in pp.ledger.store.audit_rows()]
    assert outcomes[-1] == "refused: idempotency key expired"


def test_the_settings_are_checked():
    with pytest.raises(ValueError, match="idempotency_ttl"):
        ServeLimits(idempotency_ttl=0)
    with pytest.raises(ValueError, match="idempotency_max_rows"):
        ServeLimits(idempotency_max_rows=0)
    assert ServeLimits().idempotency_ttl == 86400.0
    assert ServeLimits().idempotency_max_rows == 100_000
