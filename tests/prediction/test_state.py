"""Crash safety: a process killed (SIGKILL) between queries resumes the same posterior and spend."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction import PrivatePredictor
from pacpriv.prediction._state import atomic_write

from ._helpers import cancer, logreg

QUIET = ExecutionOptions(progress=False)

B = 2.0**-8
ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from pacpriv.prediction import PrivatePredictor
    X = np.load(sys.argv[2])
    pp = PrivatePredictor.load(sys.argv[1])
    for i in range(pp.n_answered, len(X)):
        pp.answer(X[i:i + 1])
        print(i, flush=True)   # the answer was recorded durably before predict returned
        time.sleep(30)         # killed here, between queries
    """
)


def _predictor(state):
    X, y = cancer()
    return PrivatePredictor(logreg(), (X, y), n_worlds=4, per_query_budget=B,
                            total_budget=1.0, state=state, rng=7, secret_rng=70)


@pytest.mark.slow
def test_sigkill_between_queries_then_resume(tmp_path):
    X, _ = cancer()
    queries = X[:6]
    qfile = tmp_path / "q.npy"
    np.save(qfile, queries)
    state = tmp_path / "state"
    _predictor(state).fit(execution=QUIET)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for expected in (0, 1):  # two processes, each killed after answering one query
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(state), str(qfile)],
                                stdout=subprocess.PIPE, text=True, env=env)
        try:
            line = proc.stdout.readline()
            assert line.strip() == str(expected)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stdout.close()
        assert proc.returncode == -signal.SIGKILL
    resumed = PrivatePredictor.load(state)
    assert resumed.n_answered == 2 and resumed.spent == 2 * B
    tail = resumed.answer(queries[2:])
    # reference: the same predictor and the same batches, without a crash: bit-identical
    ref = _predictor(tmp_path / "ref").fit(execution=QUIET)
    want = np.vstack([ref.answer(queries[:1]), ref.answer(queries[1:2]),
                      ref.answer(queries[2:])])
    np.testing.assert_array_equal(tail, want[2:])
    np.testing.assert_array_equal(resumed.log_posterior, ref.log_posterior)
    ledger = PrivatePredictor.load(state).ledger
    assert ledger.spent == 6 * B and sum(e.rows for e in ledger.releases) == 6


def test_atomic_write_leaves_old_file_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "f.json"
    atomic_write(path, b"old")

    def boom(*_a):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, b"new")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]  # no temp file left behind


def test_corrupt_ledger_is_refused(tmp_path):
    _predictor(tmp_path / "s").fit(execution=QUIET).answer(cancer()[0][:1])
    import sqlite3

    with sqlite3.connect(tmp_path / "s" / "ledger.db") as conn:  # a posterior of 1 world, not 4
        conn.execute("UPDATE state SET body = ? WHERE name = 'log_posterior'", (b"\0" * 8,))
    from pacpriv.exceptions import CheckpointError

    with pytest.raises(CheckpointError, match="ledger"):
        PrivatePredictor.load(tmp_path / "s")


def test_fit_interrupted_after_secret_resumes_same_worlds_and_secret(tmp_path):
    # unseeded: the world seed is recorded in config.json, J comes from OS entropy
    X, y = cancer()
    state = tmp_path / "s"

    def make():
        return PrivatePredictor(logreg(), (X, y), n_worlds=4, per_query_budget=B,
                                total_budget=1.0, state=state)

    first = make().fit(execution=QUIET)
    digests = np.load(state / "worlds.npz")["digests"]
    j = first._secret_index
    # simulate a crash after the secret was written but before the worlds/ledger were
    (state / "worlds.npz").unlink()
    (state / "evaluator.joblib").unlink()
    again = make()
    assert not again.is_fitted
    again.fit(execution=QUIET)  # the engine resumes every world from its checkpoint
    np.testing.assert_array_equal(np.load(state / "worlds.npz")["digests"], digests)
    assert again._secret_index == j  # never redrawn: a second draw would leak through answers
    assert again.n_answered == 0


def test_budget_reads_answers_given_by_another_instance_of_the_same_state(tmp_path):
    """GET /budget's source: a second process's answers show without a POST here."""
    X, _ = cancer()
    state = tmp_path / "state"
    server = _predictor(state)
    server.fit(execution=QUIET)
    assert server.budget()["n_answered"] == 0
    other = PrivatePredictor.load(state)  # e.g. `pacpriv predict query` in another process
    other.answer(X[:3])
    seen = server.budget()
    assert seen["n_answered"] == 3
    assert seen["spent"] == pytest.approx(3 * B)
    assert seen["membership_bound"] == other.budget()["membership_bound"]


def test_state_directory_is_owner_only(tmp_path):
    """Worlds, models and the engine checkpoint are pool-derived: 0700 dirs, 0600 files (F5)."""
    old = os.umask(0)
    try:
        state = tmp_path / "state"
        _predictor(state).fit(execution=QUIET)
    finally:
        os.umask(old)
    dirs = [state, *(p for p in state.rglob("*") if p.is_dir())]
    files = [p for p in state.rglob("*") if p.is_file()]
    assert {p.name for p in dirs} >= {"state", "checkpoint"}
    assert {p.name for p in files} >= {"config.json", "worlds.npz", "secret.json", "ledger.db",
                                       "manifest.json"}
    assert {str(p.relative_to(tmp_path)): os.stat(p).st_mode & 0o777 for p in dirs} == {
        str(p.relative_to(tmp_path)): 0o700 for p in dirs}
    assert {str(p.relative_to(tmp_path)): os.stat(p).st_mode & 0o777 for p in files} == {
        str(p.relative_to(tmp_path)): 0o600 for p in files}
    assert PrivatePredictor.load(state).n_answered == 0


@pytest.mark.parametrize("text", ["[1, 2]", '"a string"', "3", "null"])
def test_a_config_that_is_json_but_not_an_object_is_refused(tmp_path, text):
    """Valid JSON of another shape ended in an AttributeError traceback."""
    from pacpriv.exceptions import CheckpointError
    from pacpriv.prediction._state import StateDir

    state = StateDir(tmp_path / "s")
    state.write_config({"total_budget": 1.0})
    (tmp_path / "s" / "config.json").write_text(text)
    with pytest.raises(CheckpointError, match=r"config.json is not a JSON object \(line 1"):
        state.read_config()
    state.write_config({"total_budget": 2.0})  # a rewrite over it works, with a fresh scope
    assert state.read_config()["total_budget"] == 2.0


@pytest.mark.parametrize("field, factor", [("total_budget", 2.0), ("per_query_budget", 0.5)])
def test_a_config_with_other_budgets_than_the_ledger_recorded_is_refused(tmp_path, field,
                                                                         factor):
    """b66's sibling for serving: the budgets are recorded in the ledger at the first fit; a
    config.json that says otherwise (edited, or a replica's stale copy) cannot raise the cap of
    `pacpriv serve`, `predict query` or PrivatePredictor.load."""
    import json

    from pacpriv.exceptions import CheckpointError

    state = tmp_path / "s"
    _predictor(state).fit(execution=QUIET).answer(cancer()[0][:1])
    config = json.loads((state / "config.json").read_text())
    config[field] *= factor
    atomic_write(state / "config.json", json.dumps(config).encode())
    with pytest.raises(CheckpointError, match=r"records per_query_budget=0\.00390625, "
                                              r"total_budget=1\.0 nats") as err:
        PrivatePredictor.load(state)
    assert "\n" not in str(err.value)
    config[field] /= factor
    atomic_write(state / "config.json", json.dumps(config).encode())
    assert PrivatePredictor.load(state).n_answered == 1
