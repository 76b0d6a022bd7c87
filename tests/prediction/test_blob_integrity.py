"""Pickles in a state folder are checked before they are unpickled (SHA-256 in the ledger
store, owner-only files), and ``predict fit`` / ``serve keys add`` refuse unusable settings."""

from __future__ import annotations

import io
import os
import shutil

import joblib
import pytest

from pacpriv.cli import main
from pacpriv.exceptions import CheckpointError
from pacpriv.prediction import PrivatePredictor

from ._helpers import fitted_state_fixtures

FIT = ["predict", "fit", "--estimator", "naive_bayes", "--dataset", "iris", "--n-worlds", "4",
       "--per-query-budget", "2^-10", "--total-budget", "2^-6", "--seed", "0", "--no-progress"]


class _Payload:
    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))  # creates the file when unpickled


fitted, state = fitted_state_fixtures(FIT, "blobs")


def _query(state) -> int:
    return main(["predict", "query", "--state", str(state), "--dataset", "iris", "--rows",
                 "0:1", "--json"])


def _tamper(path, marker) -> None:
    buf = io.BytesIO()
    joblib.dump(_Payload(str(marker)), buf)
    path.write_bytes(buf.getvalue())
    os.chmod(path, 0o600)


def test_the_fit_records_the_blobs_sha256_in_the_ledger_store(state):
    import hashlib
    import json

    from pacpriv.storage import open_store

    store = open_store(state / "ledger.db")
    scope = json.loads((state / "config.json").read_text())["ledger_scope"]
    with store.transaction(scope) as tx:
        hashes = json.loads(tx.get_state("blob_sha256"))
        assert tx.get_state("blob_sha256_note") is None  # fitted here: no note
    for name in ("evaluator.joblib", "worlds.npz"):
        assert hashes[name] == hashlib.sha256((state / name).read_bytes()).hexdigest()


@pytest.mark.parametrize("name", ["evaluator.joblib", "models"])
def test_a_swapped_pickle_is_refused_before_it_is_unpickled(state, tmp_path, capsys, name):
    marker = tmp_path / "pwned.txt"
    path = state / name if name != "models" else sorted((state / "models").iterdir())[0]
    _tamper(path, marker)
    assert _query(state) == 2
    err = capsys.readouterr().err
    assert not marker.exists()
    assert "does not match the SHA-256" in err and path.name in err
    assert err.count("\n") == 1 and "Traceback" not in err
    with pytest.raises(CheckpointError, match="does not match the SHA-256"):
        PrivatePredictor.load(state)
    assert not marker.exists()


def test_a_swapped_worlds_file_cannot_point_at_another_model(state, fitted, capsys):
    (state / "worlds.npz").write_bytes((state / "worlds.npz").read_bytes() + b"\0")
    assert _query(state) == 2
    assert "worlds.npz does not match the SHA-256" in capsys.readouterr().err


def test_blobs_readable_by_others_are_refused(state, capsys):
    os.chmod(state / "evaluator.joblib", 0o644)
    assert _query(state) == 2
    assert "evaluator.joblib' has mode 644" in capsys.readouterr().err


def test_a_state_fitted_before_the_hashes_records_them_once_with_a_note(state, capsys):
    import json

    from pacpriv.storage import open_store

    config = json.loads((state / "config.json").read_text())
    scope = config["ledger_scope"]
    store = open_store(state / "ledger.db")
    with store.transaction(scope) as tx:  # what a 0.3 (or early 0.4) state looks like
        tx._q("DELETE FROM state WHERE scope = ? AND name = ?", (scope, "blob_sha256"))
    del config["ledger_store"]  # never opened by a version that records its store
    (state / "config.json").write_text(json.dumps(config))
    assert _query(state) == 0
    with store.transaction(scope) as tx:
        assert b"recorded when first opened" in tx.get_state("blob_sha256_note")
    capsys.readouterr()
    _tamper(state / "evaluator.joblib", state / "x")  # from then on: checked
    assert _query(state) == 2 and "does not match" in capsys.readouterr().err


@pytest.mark.parametrize(("estimator", "output", "d"), [
    ("naive_bayes", "proba", 3), ("naive_bayes", "label", 3), ("logistic", "logits", 3),
    ("ridge", "value", 1)])
def test_a_per_query_budget_too_small_for_the_grid_is_refused_before_the_state(
        tmp_path, capsys, estimator, output, d):
    from pacpriv.pac._sampling import grid_overhead

    state = tmp_path / "s"
    fit = [a if a != "naive_bayes" else estimator for a in FIT]
    base = [a if a != "2^-10" else "2^-1000" for a in fit]
    assert main([*base, "--state", str(state), "--output", output]) == 2
    err = capsys.readouterr().err
    assert "--per-query-budget" in err and f"{d} output coordinate" in err
    assert err.count("\n") == 1 and not state.exists()
    smallest = float(err.split("use more than ")[1].split(" nats")[0])
    assert smallest >= 2 * grid_overhead(d)  # the release's own condition, rounded up
    # just above the smallest value: fitted, and a query is answered
    ok = [a if a != "2^-10" else repr(smallest * 1.01) for a in fit]
    assert main([*ok, "--state", str(state), "--output", output]) == 0
    assert _query(state) == 0


def test_a_single_class_label_column_is_refused_up_front(tmp_path, capsys):
    import numpy as np

    data = tmp_path / "one.csv"
    rng = np.random.default_rng(0)
    rows = [",".join(f"{v:.3f}" for v in rng.normal(size=3)) + ",1" for _ in range(20)]
    data.write_text("a,b,c,y\n" + "\n".join(rows) + "\n")
    state = tmp_path / "s"
    args = [a for a in FIT]
    args[args.index("iris")] = str(data)
    assert main([*args, "--label-column", "y", "--state", str(state)]) == 2
    err = capsys.readouterr().err
    assert "needs >= 2 classes" in err and "got 1" in err and not state.exists()


def test_keys_add_refuses_a_duplicate_active_name_and_warns_on_an_unreachable_quota(
        state, capsys):
    keys = ["serve", "keys", "add", "--state", str(state)]
    assert main([*keys, "--name", "alice", "--quota", "0.001"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert main([*keys, "--name", "alice"]) == 2
    assert "'alice' is already the name of an active key" in capsys.readouterr().err
    assert main([*keys, "--name", "bob", "--quota", "1"]) == 0  # total is 2^-6
    err = capsys.readouterr().err
    assert "above the total budget 0.015625" in err and "never be reached" in err
    from pacpriv.storage import add_key, open_store

    store = open_store(state / "ledger.db")
    with pytest.raises(ValueError, match="already the name of an active key"):
        add_key(store, "bob")
    (bob,) = [k for k in store.keys() if k.name == "bob"]
    assert store.revoke_key(bob.key_id)
    assert main([*keys, "--name", "bob"]) == 0  # a revoked name may be reused


@pytest.mark.parametrize("how", ["deleted", "emptied", "hashes dropped"])
def test_a_fitted_state_that_lost_its_ledger_is_refused(state, capsys, how):
    """Seventh new-user pass #507-#509: with ledger.db deleted or emptied the spend restarted at
    0 while the secret world index was reused (the total released could exceed the budget)."""
    import json

    from pacpriv.storage import open_store

    assert _query(state) == 0  # something is spent
    capsys.readouterr()
    if how == "hashes dropped":  # the store no longer knows this state (replaced, restored)
        scope = json.loads((state / "config.json").read_text())["ledger_scope"]
        with open_store(state / "ledger.db").transaction(scope) as tx:
            tx._q("DELETE FROM state WHERE scope = ?", (scope,))
    else:
        for f in state.glob("ledger.db*"):
            f.unlink()
        if how == "emptied":
            (state / "ledger.db").write_bytes(b"")
            os.chmod(state / "ledger.db", 0o600)
    for argv in (["predict", "status", "--state", str(state), "--json"],
                 ["predict", "query", "--state", str(state), "--dataset", "iris", "--rows",
                  "0:1", "--json"]):
        assert main(argv) == 2
        out = capsys.readouterr()
        assert "holds no record of this fitted state" in out.err and out.out == ""
        assert out.err.count("\n") == 1
    with pytest.raises(CheckpointError, match="restore the ledger"):
        PrivatePredictor.load(state)


def test_a_lost_ledger_cannot_be_swapped_for_a_fresh_store(state, tmp_path, capsys):
    """ledger.db deleted, then another (empty) store named: still refused (the state's
    answers were in the lost one), not a move of an unanswered state."""
    assert _query(state) == 0
    for f in state.glob("ledger.db*"):
        f.unlink()
    capsys.readouterr()
    assert main(["predict", "query", "--state", str(state), "--dataset", "iris", "--rows",
                 "0:1", "--ledger", str(tmp_path / "fresh.db")]) == 2
    assert "holds no record of this fitted state" in capsys.readouterr().err


def test_a_refused_ledger_file_is_not_left_behind(state, tmp_path, capsys):
    """Seventh new-user pass #567: `serve --ledger fresh.db` was refused but left a new
    64 KiB fresh.db; a refused store this call created is removed (one that existed stays)."""
    assert _query(state) == 0
    fresh = tmp_path / "fresh.db"
    assert main(["predict", "query", "--state", str(state), "--dataset", "iris", "--rows",
                 "0:1", "--ledger", str(fresh)]) == 2
    assert "records its answers in ledger.db" in capsys.readouterr().err
    assert not list(tmp_path.glob("fresh.db*"))
    for f in state.glob("ledger.db*"):  # a lost ledger: the file the open recreated goes too
        f.unlink()
    assert _query(state) == 2 and not list(state.glob("ledger.db*"))


def test_a_copy_beside_its_original_is_refused_a_move_is_not(state, tmp_path, capsys):
    """Seventh new-user pass #516: `cp -a S S2` gave two folders that each spent the full
    budget about the same secret world index."""
    assert _query(state) == 0
    twin = tmp_path / "twin"
    shutil.copytree(state, twin)  # cp -a: the ledger file comes along
    capsys.readouterr()
    assert main(["predict", "query", "--state", str(twin), "--dataset", "iris", "--rows",
                 "0:1"]) == 2
    err = capsys.readouterr().err
    assert "is a copy of" in err and err.count("\n") == 1
    with pytest.raises(CheckpointError, match="is a copy of"):
        PrivatePredictor.load(twin)
    assert _query(state) == 0  # the original answers
    shutil.rmtree(twin)
    moved = tmp_path / "moved"
    state.rename(moved)  # a move keeps one folder: it answers, and is re-recorded
    assert _query(moved) == 0


def test_status_refuses_a_bad_out_before_printing(state, capsys):
    """`predict status --out STATE/models` printed the budget table, then refused --out: a bad
    flag is refused before any output."""
    assert main(["predict", "status", "--state", str(state), "--out",
                 str(state / "models")]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "holds a prediction state" in out.err
