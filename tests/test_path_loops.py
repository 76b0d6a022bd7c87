"""A loop of symbolic links given as any path argument of the API is refused in one line
that names the loop, before any work (issue 35, fix10a item 3): not "already exists", not
"a link to a missing path", never pathlib's RuntimeError."""

from __future__ import annotations

import os

import numpy as np
import pytest

import pacpriv
from pacpriv.pac.engine import ExecutionOptions

pytestmark = pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")

X = np.random.default_rng(0).normal(size=(20, 2))
Y = np.repeat([0, 1], 10)


def _mean(S):
    return S.mean(axis=0)


@pytest.fixture
def loops(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.symlink("loopB", "loopA")
    os.symlink("loopA", "loopB")
    os.symlink("loopF.npy", "loopE.npy")
    os.symlink("loopE.npy", "loopF.npy")
    return tmp_path


def _run(**options):
    pacpriv.run_pac(_mean, X, mi_budget=0.1, n_trials=20, rng=0,
                    execution=ExecutionOptions(progress=False, **options))


def _predictor(state):
    from sklearn.naive_bayes import GaussianNB

    from pacpriv.prediction import PrivatePredictor
    PrivatePredictor(GaussianNB(), (X, Y), n_worlds=4, per_query_budget=0.01,
                     total_budget=1.0, state=state)


def _report(out):
    r = pacpriv.run_pac(_mean, X, mi_budget=0.1, n_trials=20, rng=0,
                        execution=ExecutionOptions(progress=False))
    pacpriv.write_report(r, out)


def _ledger(path):
    from pacpriv.storage import check_location, open_store
    with pytest.raises(OSError, match=r"^`ledger` location 'loopA/l.db' cannot be used"):
        check_location(path)
    open_store(path)


def _load(state):
    from pacpriv.prediction import PrivatePredictor
    PrivatePredictor.load(state)


CASES = [
    ("`output_path` 'loopE.npy'", "loopE.npy", lambda p: _run(output_path=p)),
    ("`output_path` 'loopE.npy'", "loopE.npy",
     lambda p: _run(output_path=p, overwrite_output=True)),
    ("`output_path` 'loopA/x.npy'", "loopA/x.npy", lambda p: _run(output_path=p)),
    ("`checkpoint` 'loopA'", "loopA", lambda p: _run(checkpoint=p)),
    ("`checkpoint` 'loopA/sub'", "loopA/sub", lambda p: _run(checkpoint=p)),
    ("`state` 'loopA'", "loopA", _predictor),
    ("`state` 'loopA/sub'", "loopA/sub", _predictor),
    ("`state` 'loopA'", "loopA", _load),
    ("`out_dir` 'loopA'", "loopA", _report),
    ("`out_dir` 'loopA/sub'", "loopA/sub", _report),
    ("`ledger` location 'loopA/l.db'", "loopA/l.db", _ledger),
    ("dataset file 'loopA/x.csv'", "loopA/x.csv", pacpriv.load_dataset),
]


@pytest.mark.parametrize(("named", "path", "call"), CASES)
def test_a_link_loop_is_named(loops, named, path, call):
    with pytest.raises(OSError) as info:
        call(path)
    text = str(info.value)
    assert text.startswith(f"{named} cannot be used")
    assert "loop of symbolic links" in text and "\n" not in text
    assert "already exists" not in text and "missing path" not in text
    assert not (loops / "loopA").exists() and (loops / "loopA").is_symlink()  # nothing made


def test_run_audit_out_names_the_loop(loops):
    from sklearn.linear_model import LogisticRegression

    from pacpriv.audit import EstimatorModel, run_audit
    with pytest.raises(OSError, match=r"`out` 'loopA' cannot be used: it is a loop of symbolic"):
        run_audit(np.tile(X, (3, 1)), np.tile(Y, 3), model=EstimatorModel(LogisticRegression()),
                  reference_models=4, rng=0, out="loopA")


def test_a_plain_missing_link_keeps_its_own_words(loops):
    os.symlink("nowhere", "dangling")
    with pytest.raises(FileNotFoundError, match=r"symbolic link to a missing path"):
        _run(checkpoint="dangling")


def test_predictor_ledger_location_refused_before_any_world(loops):
    from sklearn.naive_bayes import GaussianNB

    from pacpriv.prediction import PrivatePredictor
    for ledger in ("loopA/l.db", "loopE.npy"):
        with pytest.raises(OSError, match=r"^`ledger` location .* loop of symbolic links"):
            PrivatePredictor(GaussianNB(), (X, Y), n_worlds=4, per_query_budget=0.01,
                             total_budget=1.0, state="st", ledger=ledger)
        assert not (loops / "st").exists()  # no world was fitted, no state written


@pytest.mark.parametrize(("flag", "argv"), [
    ("--out 'loopA'", ["pac", "run", "--mechanism", "mean", "--dataset", "iris",
                       "--mi-budget", "0.1", "--trials", "60", "--out", "loopA"]),
    ("--checkpoint 'loopA/x'", ["pac", "run", "--mechanism", "mean", "--dataset", "iris",
                                "--mi-budget", "0.1", "--trials", "60", "--checkpoint",
                                "loopA/x", "--out", "t1"]),
    ("--private-index-list 'loopA'", ["pac", "records", "--mechanism", "mean", "--dataset",
                                      "iris", "--noise-std", "1", "--private-index-list",
                                      "loopA", "--out", "t2"]),
    ("--state 'loopA'", ["predict", "status", "--state", "loopA"]),
])
def test_the_cli_names_the_flag_of_the_loop(loops, capsys, flag, argv):
    from pacpriv.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"pacpriv: error: {flag} cannot be used") and "\n" not in err
    assert "loop of symbolic links" in err
