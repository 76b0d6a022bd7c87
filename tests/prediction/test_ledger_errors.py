"""A ``--ledger`` / ``ledger=`` that cannot be used: one line naming the argument and the path
as the user gave it, never an internal repr nor a bare ``[Errno 2]`` (twelfth new-user pass,
AH3 and AH4), for every command that takes ``--ledger`` and for the API."""

from __future__ import annotations

import pytest

from pacpriv.cli import main
from pacpriv.exceptions import CheckpointError
from pacpriv.prediction import PrivatePredictor

from ._helpers import fitted_state_fixtures

FIT = ["predict", "fit", "--estimator", "naive_bayes", "--dataset", "iris", "--n-worlds", "4",
       "--per-query-budget", "2^-10", "--total-budget", "2^-6", "--seed", "0", "--no-progress"]

fitted, state = fitted_state_fixtures(FIT, "ledger_errors")


def _commands(state) -> dict[str, list[str]]:
    s = str(state)
    return {
        "serve": ["serve", "--state", s, "--port", "18397"],
        "serve keys": ["serve", "keys", "list", "--state", s],
        "predict query": ["predict", "query", "--state", s, "--dataset", "iris", "--rows", "0:1"],
        "predict status": ["predict", "status", "--state", s],
    }


def _error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1
    return err[-1]


@pytest.mark.parametrize("command", ["serve", "serve keys", "predict query", "predict status"])
@pytest.mark.parametrize("ledger, why", [
    ("/nonexistent-pacpriv-dir/sub/l.db", "its folder does not exist"),
    ("/etc/passwd/l.db", "a part of its path is a file, not a folder"),
])
def test_an_unopenable_ledger_path_names_the_flag_and_the_path(state, capsys, command, ledger,
                                                              why):
    capsys.readouterr()
    assert main([*_commands(state)[command], "--ledger", ledger]) == 2
    line = _error(capsys)
    assert line.startswith(f"pacpriv: error: --ledger {ledger!r}: cannot open or create a "
                           f"SQLite ledger there ({why})")
    assert "Errno" not in line and "Store(" not in line


@pytest.mark.parametrize("command", ["serve", "serve keys", "predict query", "predict status"])
def test_another_ledger_is_refused_by_the_path_as_given(state, tmp_path, monkeypatch, capsys,
                                                       command):
    assert main(["predict", "query", "--state", str(state), "--dataset", "iris", "--rows",
                 "0:1", "--json"]) == 0  # answers in the state's own ledger.db
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pq").mkdir()
    capsys.readouterr()
    assert main([*_commands(state)[command], "--ledger", "./pq//ledger.db"]) == 2
    assert _error(capsys) == (
        f"pacpriv: error: state directory {str(state)!r} records its answers in ledger.db, not "
        "in './pq//ledger.db' given as --ledger: another store would start the spend at 0; "
        "omit --ledger (its own ledger.db is the default).")


def test_a_file_that_is_not_a_ledger_names_the_flag(state, tmp_path, capsys):
    bogus = tmp_path / "notes.txt"
    bogus.write_text("not a database " * 100)
    capsys.readouterr()
    assert main([*_commands(state)["predict status"], "--ledger", str(bogus)]) == 2
    assert _error(capsys).startswith(
        f"pacpriv: error: --ledger: {str(bogus)!r} is not a pacpriv ledger database")


def test_the_api_names_the_ledger_argument(state):
    with pytest.raises(CheckpointError) as err:
        PrivatePredictor.load(state, ledger="/nonexistent-pacpriv-dir/l.db")
    assert str(err.value) == (
        "`ledger` '/nonexistent-pacpriv-dir/l.db': cannot open or create a SQLite ledger there "
        "(its folder does not exist); give the path of a ledger file in an existing folder, or "
        "a postgresql:// URL.")
