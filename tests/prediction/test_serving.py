"""Serving for several analysts: keys, quotas, idempotent retries, refunds, limits, the audit."""

from __future__ import annotations

import sqlite3
import warnings

import numpy as np
import pytest
from starlette.exceptions import StarletteDeprecationWarning

from pacpriv.cli.main import main
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction import PrivatePredictor, create_app
from pacpriv.prediction._limits import ServeLimits
from pacpriv.storage import add_key

from ._helpers import cancer, logreg

QUIET = ExecutionOptions(progress=False)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

B = 2.0**-8


@pytest.fixture(scope="module")
def fitted_state(tmp_path_factory):
    X, y = cancer()
    state = tmp_path_factory.mktemp("serving") / "s"
    PrivatePredictor(logreg(), (X, y), n_worlds=4, per_query_budget=B, total_budget=10 * B,
                     state=state, rng=3, secret_rng=30).fit(execution=QUIET)
    return state


@pytest.fixture
def state(fitted_state, tmp_path):
    """A fresh copy of the fitted state (nothing answered, no keys)."""
    from ._helpers import copy_state

    return copy_state(fitted_state, tmp_path / "s")


def _client(state, **limits):
    pp = PrivatePredictor.load(state)
    return pp, TestClient(create_app(pp, ServeLimits(**limits)))


def _auth(token):
    return {"Authorization": f"Bearer {token}"}


def test_keys_are_required_once_added_and_stored_only_as_salted_hashes(state):
    pp, client = _client(state)
    _, token = add_key(pp.ledger.store, "alice", quota=3 * B)
    row = {"rows": cancer()[0][:1].tolist()}
    # a tampered token differs in its last character (a random token may already end in "A")
    tampered = token[:-1] + ("B" if token[-1] == "A" else "A")
    for headers in ({}, _auth("pp_00000000_" + "x" * 43), _auth(tampered),
                    {"Authorization": token}):
        r = client.post("/predict", json=row, headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert pp.n_answered == 0 and pp.ledger.spent == 0.0
    r = client.post("/predict", json=row, headers=_auth(token))
    assert r.status_code == 200 and r.json()["key"]["spent"] == B
    with sqlite3.connect(state / "ledger.db") as conn:
        dump = "\n".join(conn.iterdump())
    # only the hash is stored (the secret is URL-safe base64 and may itself hold "_")
    assert token.split("_", 2)[2] not in dump and token not in dump


def test_quota_revocation_and_global_cap_spend_nothing(state):
    pp, client = _client(state)
    alice_id, alice = add_key(pp.ledger.store, "alice", quota=3 * B)
    bob_id, bob = add_key(pp.ledger.store, "bob")
    X = cancer()[0]
    assert client.post("/predict", json={"rows": X[:2].tolist()}, headers=_auth(alice)
                       ).status_code == 200
    r = client.post("/predict", json={"rows": X[:2].tolist()}, headers=_auth(alice))
    assert r.status_code == 429 and "quota" in r.json()["detail"]
    budget = client.get("/budget", headers=_auth(alice)).json()
    assert budget["key"] == {"key_id": alice_id, "name": "alice", "spent": 2 * B,
                             "remaining": B, "quota": 3 * B, "n_answered": 2}
    assert "colluding" in budget["threat_model_analysts"]
    assert client.post("/predict", json={"rows": X[:8].tolist()}, headers=_auth(bob)
                       ).status_code == 200  # 2 + 8 = the global cap of 10 rows
    r = client.post("/predict", json={"rows": X[:1].tolist()}, headers=_auth(bob))
    assert r.status_code == 429 and "total_budget" in r.json()["detail"]
    assert pp.ledger.store.revoke_key(alice_id)
    r = client.post("/predict", json={"rows": X[:1].tolist()}, headers=_auth(alice))
    assert r.status_code == 403
    assert pp.budget()["n_answered"] == 10 and pp.ledger.spent == 10 * B
    outcomes = [row[4] for row in pp.ledger.store.audit_rows()]
    assert outcomes == ["answered", "refused: QuotaExceededError", "answered",
                        "refused: BudgetExceededError"]
    assert {k.key_id: k.rows for k in pp.ledger.store.keys()} == {alice_id: 2, bob_id: 8}


def test_idempotent_retry_returns_the_same_answer_and_spends_nothing(state):
    pp, client = _client(state)
    X = cancer()[0]
    headers = {"Idempotency-Key": "req-1"}
    first = client.post("/predict", json={"rows": X[:2].tolist()}, headers=headers).json()
    again = client.post("/predict", json={"rows": X[:2].tolist()}, headers=headers).json()
    assert again["outputs"] == first["outputs"] and pp.n_answered == 2
    assert [e.rows for e in pp.ledger.releases] == [2]
    r = client.post("/predict", json={"rows": X[2:4].tolist()}, headers=headers)
    assert r.status_code == 422 and "Idempotency-Key" in r.json()["detail"]
    assert pp.budget()["n_answered"] == 2


def test_failure_after_the_charge_is_refunded_with_a_refund_row(state, monkeypatch):
    import pacpriv.prediction._predictor as module

    pp, client = _client(state)
    X = cancer()[0]
    client.post("/predict", json={"rows": X[:1].tolist()})
    lp = pp.log_posterior

    def broken(*args, **kwargs):
        raise ValueError("boom while answering")

    monkeypatch.setattr(module, "answer_rows", broken)
    r = client.post("/predict", json={"rows": X[:3].tolist()})
    assert r.status_code == 422
    kinds = [(e.kind, e.rows) for e in pp.ledger.releases]
    assert kinds == [("charge", 1), ("charge", 3), ("refund", 3)]
    assert pp.budget()["n_answered"] == 1 and pp.ledger.spent == B
    np.testing.assert_array_equal(pp.log_posterior, lp)
    assert [row[4] for row in pp.ledger.store.audit_rows()] == ["answered",
                                                               "refunded: ValueError"]


def test_past_the_deadline_the_charge_is_refunded(state):
    pp, client = _client(state, timeout=1e-9)
    r = client.post("/predict", json={"rows": cancer()[0][:1].tolist()})
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert [e.kind for e in pp.ledger.releases] == ["charge", "refund"]
    assert pp.budget()["n_answered"] == 0


def test_oversized_bodies_and_too_many_rows_get_413_before_parsing(state):
    pp, client = _client(state, max_body_bytes=4096, max_rows=3)
    r = client.post("/predict", content=b"[" * 10_000, headers={"content-type":
                                                                 "application/json"})
    assert r.status_code == 413 and "max-body-bytes" in r.json()["detail"]
    r = client.post("/predict", json={"rows": cancer()[0][:4].tolist()})
    assert r.status_code == 413 and "max-rows" in r.json()["detail"]

    def chunks():  # no Content-Length: counted while streaming
        for _ in range(100):
            yield b" " * 1000

    r = client.post("/predict", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert pp.budget()["n_answered"] == 0


@pytest.mark.parametrize("body", [
    b'{"rows": ' + b"[" * 200 + b"1" + b"]" * 200 + b"}",          # deep lists
    b'{"rows": [[1, 2]], "x": ' + b'{"a": ' * 50 + b"1" + b"}" * 50 + b"}",  # deep objects
    b"[" * 3000 + b"]" * 3000,                                      # a bare deep list
])
def test_deeply_nested_bodies_get_422_naming_the_shape(state, body):
    """A deeply nested body got 413 "more than N query rows"; it is a shape error."""
    pp, client = _client(state, max_body_bytes=1 << 16, max_rows=3)
    r = client.post("/predict", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert "nested too deeply" in detail and '{"rows": [[x_11, ..., x_1k], ...]}' in detail
    assert "rows in one request" not in detail
    assert pp.budget()["n_answered"] == 0 and pp.ledger.releases == []


def test_brackets_inside_strings_are_not_rows_or_depth(state):
    from pacpriv.prediction._limits import body_shape

    assert body_shape(b'{"rows": [[1, 2], [3, 4]], "note": "[[[[[[x]]]]]]"}') == (3, 2)
    assert body_shape(b'{"rows": [[1], [2]], "n": "\\"}') == (3, 2)
    _, client = _client(state, max_rows=3)
    X = cancer()[0][:2].tolist()
    r = client.post("/predict", json={"rows": X, "note": "[" * 40})
    assert r.status_code != 413 and "nested" not in r.text


def test_rate_limit_gives_429_with_retry_after(state):
    pp, client = _client(state, rate=0.01, burst=2)
    row = {"rows": cancer()[0][:1].tolist()}
    codes = [client.post("/predict", json=row).status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    r = client.post("/predict", json=row)
    assert int(r.headers["retry-after"]) >= 1
    assert pp.budget()["n_answered"] == 2


def test_audit_table_is_append_only_and_holds_no_query(state):
    _, client = _client(state)
    X = cancer()[0]
    client.post("/predict", json={"rows": X[:1].tolist()})
    with sqlite3.connect(state / "ledger.db") as conn:
        for statement in ("UPDATE audit SET nats = 0", "DELETE FROM audit",
                          "DELETE FROM entries", "UPDATE entries SET nats = 0"):
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                conn.execute(statement)
        columns = [r[1] for r in conn.execute("PRAGMA table_info(audit)")]
    assert columns == ["id", "scope", "key_id", "ts", "nrows", "nats", "outcome"]


def test_cli_keys_add_list_revoke(state, capsys):
    assert main(["serve", "keys", "add", "--state", str(state), "--name", "carol",
                 "--quota", "0.5"]) == 0
    out = capsys.readouterr().out
    key_id = out.split()[2]
    assert "pp_" + key_id in out
    assert main(["serve", "keys", "list", "--state", str(state)]) == 0
    listing = capsys.readouterr().out
    assert key_id in listing and "carol" in listing and "active" in listing
    assert "pp_" not in listing
    assert main(["serve", "keys", "revoke", "--state", str(state), key_id]) == 0
    assert main(["serve", "keys", "revoke", "--state", str(state), key_id]) == 2
    assert "not an active key" in capsys.readouterr().err
    assert main(["serve", "keys", "add", "--state", str(state), "--name", "d",
                 "--quota", "-1"]) == 2
    assert "--quota" in capsys.readouterr().err


def test_cli_keys_are_refused_on_a_copy_and_an_unfitted_state(state, tmp_path, capsys):
    """``serve keys`` makes the checks ``serve`` makes (twelfth new-user pass, H0n): a key
    added to a ``cp -r`` copy of a state was accepted, though the copy cannot be served."""
    import shutil

    assert main(["serve", "keys", "list", "--state", str(state)]) == 0  # the original opens
    copy = tmp_path / "copy"
    shutil.copytree(state, copy)
    capsys.readouterr()
    for action in (["add", "--name", "carol"], ["list"]):
        assert main(["serve", "keys", *action[:1], "--state", str(copy), *action[1:]]) == 2
        err = capsys.readouterr().err
        assert "is a copy of" in err and err.count("\n") == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["serve", "keys", "add", "--state", str(empty), "--name", "carol"]) == 2
    assert "no fitted worlds yet" in capsys.readouterr().err
    assert not (empty / "ledger.db").exists()


def test_a_03_state_is_migrated_not_reinterpreted(state):
    import json
    import os

    X = cancer()[0]
    pp = PrivatePredictor.load(state)
    pp.answer(X[:3])
    lp = pp.log_posterior
    # make it look like 0.3 left it: ledger.json, config version 1, no database
    config = json.loads((state / "config.json").read_text())
    config.pop("ledger_scope")
    config["version"] = 1
    (state / "config.json").write_text(json.dumps(config))
    (state / "ledger.json").write_text(json.dumps({"n_answered": 3, "spent": 3 * B,
                                                   "log_posterior": lp.tolist()}))
    for name in ("ledger.db", "ledger.db-wal", "ledger.db-shm"):
        if (state / name).exists():
            os.remove(state / name)
    old = PrivatePredictor.load(state)
    assert old.n_answered == 3 and old.spent == 3 * B
    np.testing.assert_array_equal(old.log_posterior, lp)
    assert [e.label for e in old.ledger.releases] == ["migrated from 0.3 ledger.json"]
    assert not (state / "ledger.json").exists() and (state / "ledger.json.migrated").exists()
    assert json.loads((state / "config.json").read_text())["version"] == 2
    # a ledger.json next to a database with answers: refused, never guessed
    old.answer(X[:1])
    (state / "ledger.json").write_text(json.dumps({"n_answered": 0, "log_posterior": [0] * 4}))
    from pacpriv.exceptions import CheckpointError

    with pytest.raises(CheckpointError, match=r"both a 0\.3 ledger\.json"):
        PrivatePredictor.load(state)


def test_a_state_refuses_a_ledger_other_than_the_one_holding_its_answers(state, tmp_path):
    from pacpriv.exceptions import CheckpointError
    from pacpriv.storage import open_store

    other = tmp_path / "other.db"
    pp = PrivatePredictor.load(state, ledger=open_store(other))  # nothing answered yet: moves
    pp.answer(cancer()[0][:2])
    with pytest.raises(CheckpointError) as err:
        PrivatePredictor.load(state)  # the default ledger.db would start the spend at 0
    # the path as given, never an internal repr (twelfth new-user pass, AH3)
    assert str(err.value) == (
        f"state directory {str(state)!r} records its answers in {str(other)!r}, not in its own "
        f"ledger.db (`ledger` not given): another store would start the spend at 0; give "
        f"`ledger` {str(other)!r}.")
    assert PrivatePredictor.load(state, ledger=str(other)).n_answered == 2


@pytest.mark.parametrize("method, path, body", [
    ("post", "/predict", b'{"rows": [[1, 2]]}'),           # wrong row length (names d)
    ("post", "/predict", b'{"rows": [[1, true]]}'),         # not numbers
    ("post", "/predict", b"{not json"),                      # malformed JSON
    ("post", "/predict", b'{"rows": ' + b"[" * 50 + b"]"),  # too deep
    ("post", "/predict", b" " * 5000),                       # over max-body-bytes
    ("get", "/budget", None),
    ("get", "/openapi.json", None),                          # its schema names d
    ("get", "/docs", None),
    ("get", "/no-such-path", None),
])
def test_the_key_is_checked_before_the_body_on_every_endpoint(state, method, path, body):
    """h61/h62: with keys, no key / a bad one gets 401 and a revoked one 403, before any body
    parsing, sizing or validation: no row count, no schema, nothing charged."""
    pp, client = _client(state, max_body_bytes=4096)
    revoked_id, revoked = add_key(pp.ledger.store, "mallory")
    pp.ledger.store.revoke_key(revoked_id)
    add_key(pp.ledger.store, "alice")
    for headers, status in (({}, 401), (_auth("pp_00000000_" + "x" * 43), 401),
                            ({"Authorization": "Basic abc"}, 401), (_auth(revoked), 403)):
        kwargs = {} if body is None else {"content": body}
        r = getattr(client, method)(path, headers={"content-type": "application/json",
                                                   **headers}, **kwargs)
        assert r.status_code == status, (headers, r.text)
        detail = r.json()["detail"]
        assert set(r.json()) == {"detail"} and "expected" not in detail
        assert detail == (f"key {revoked_id} is revoked" if status == 403 else
                          "a valid API key is required: Authorization: Bearer <token>")
    assert pp.budget()["n_answered"] == 0 and pp.ledger.spent == 0.0
    assert all(outcome != "answered" for *_, outcome in pp.ledger.store.audit_rows())


def test_with_a_valid_key_the_body_is_validated_as_before(state):
    pp, client = _client(state)
    _, token = add_key(pp.ledger.store, "alice")
    r = client.post("/predict", json={"rows": [[1, 2]]}, headers=_auth(token))
    assert r.status_code == 422 and "expected 4" in r.text
    assert client.get("/openapi.json", headers=_auth(token)).status_code == 200
    assert pp.ledger.spent == 0.0


def test_a_reissued_key_states_the_spend_of_the_revoked_one(state, capsys):
    """A name re-added after a revocation gets a key of its own, saying so: the earlier
    keys' spend and that the new quota comes on top (explicit, and in keys list)."""
    pp, client = _client(state)
    key_id, token = add_key(pp.ledger.store, "erin", quota=2 * B)
    assert client.post("/predict", json={"rows": cancer()[0][:2].tolist()},
                       headers=_auth(token)).status_code == 200
    assert main(["serve", "keys", "revoke", "--state", str(state), key_id]) == 0
    capsys.readouterr()
    assert main(["serve", "keys", "add", "--state", str(state), "--name", "erin",
                 "--quota", str(2 * B)]) == 0
    err = capsys.readouterr().err
    assert "'erin' had 1 revoked key(s), which spent 0.0078125 nats" in err
    assert "comes on top of that spend" in err


def test_a_key_id_an_existing_key_has_is_redrawn(state, monkeypatch):
    """Key ids are 32 random bits: a draw that collides with a stored key's id is redrawn,
    never inserted (the insert would fail, by chance, once in ~4e9 pairs of keys)."""
    import secrets

    from pacpriv.storage import _keys

    store = PrivatePredictor.load(state).ledger.store
    first, _ = add_key(store, "alice")
    ids = iter([first, first, "0badc0de"])

    class Ids:
        token_urlsafe = staticmethod(secrets.token_urlsafe)
        token_bytes = staticmethod(secrets.token_bytes)

        @staticmethod
        def token_hex(n):
            assert n == 4
            return next(ids)

    monkeypatch.setattr(_keys, "secrets", Ids)
    key_id, token = add_key(store, "bob")
    assert key_id == "0badc0de" and token.startswith("pp_0badc0de_")
    assert sorted(k.key_id for k in store.keys()) == sorted([first, "0badc0de"])
