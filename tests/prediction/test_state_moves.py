"""A copy of a prediction state whose original is then deleted is not taken for a move
(issue 35, fix10a item 5): the original's later answers are missing from the copy's ledger.
A rename keeps the ledger file and is accepted; anything else needs ``--moved``."""

from __future__ import annotations

import json
import shutil

import pytest

from pacpriv.cli import main
from pacpriv.exceptions import CheckpointError
from pacpriv.prediction import PrivatePredictor

from ._helpers import fitted_state_fixtures

FIT = ["predict", "fit", "--estimator", "naive_bayes", "--dataset", "iris", "--n-worlds", "4",
       "--per-query-budget", "2^-10", "--total-budget", "2^-6", "--seed", "0", "--no-progress"]


fitted, state = fitted_state_fixtures(FIT, "moves")


def _query(state, rows="0:3") -> int:
    return main(["predict", "query", "--state", str(state), "--dataset", "iris", "--rows",
                 rows, "--json"])


def _answered(state) -> int:
    return int(PrivatePredictor.load(state).budget()["n_answered"])


def test_a_copy_whose_original_answered_then_vanished_is_refused(state, tmp_path, capsys):
    copy = tmp_path / "copy"
    assert _query(state) == 0  # the original is opened (and records its ledger file) ...
    shutil.copytree(state, copy)  # ... copied (cp -a) ...
    assert _query(state, "3:8") == 0  # ... answers 5 more rows ...
    assert _answered(state) == 8
    shutil.rmtree(state)  # ... and is deleted: the copy knows of 3 answers only
    capsys.readouterr()
    assert _query(copy) == 2
    err = capsys.readouterr().err
    assert "is not the file recorded there" in err and "--moved" in err
    assert err.count("\n") == 1
    with pytest.raises(CheckpointError, match=r"answers the original gave after this copy"):
        PrivatePredictor.load(copy)
    # the refusal spent nothing; a confirmed move re-records the folder, once
    assert main(["predict", "status", "--state", str(copy), "--moved", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_answered"] == 3
    assert _query(copy) == 0 and _answered(copy) == 6


def test_a_rename_is_a_move_without_confirmation(state, tmp_path):
    assert _query(state) == 0
    moved = tmp_path / "elsewhere"
    state.rename(moved)  # mv: the same ledger file
    assert _query(moved) == 0 and _answered(moved) == 6


def test_the_api_confirms_with_moved(state, tmp_path):
    assert _query(state) == 0
    copy = tmp_path / "restored"
    shutil.copytree(state, copy)
    shutil.rmtree(state)
    pp = PrivatePredictor.load(copy, moved=True)
    assert pp.budget()["n_answered"] == 3
    assert _answered(copy) == 3  # recorded: later opens need no confirmation
