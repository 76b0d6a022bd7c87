"""A report folder never holds a private pacpriv artefact, whichever command made either
(sixth new-user pass, c9207 and m23): ``--out`` that is, or holds at any depth, a prediction
state, a checkpoint, a ledger, a private index list or a disk-backed run's outputs is refused
before any work, ``--force`` or not; and a private path inside an earlier report folder is
refused (the converse). The check lives in the report-folder helper, so the API's
``write_report`` gets it too."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from pacpriv import _files
from pacpriv.cli.main import main
from pacpriv.pac import ExecutionOptions, simulate
from pacpriv.storage._sqlite import SQLiteStore

pytestmark = pytest.mark.filterwarnings("ignore")

RUN = ["pac", "run", "--no-progress", "--mechanism", "mean", "--dataset", "iris",
       "--mi-budget", "0.1", "--trials", "20", "--seed", "0"]
FIT = ["predict", "fit", "--no-progress", "--estimator", "logistic", "--dataset", "iris",
       "--n-worlds", "4", "--seed", "0", "--per-query-budget", "2^-10", "--total-budget", "0.01"]


def _mean(x):
    return np.asarray(x, dtype=float).mean(axis=0)


def _checkpoint(where):
    simulate(_mean, np.arange(20.0).reshape(10, 2), n_trials=3, rng=0,
             execution=ExecutionOptions(n_jobs=1, progress=False, checkpoint=str(where)))


def _outputs(where):
    where.mkdir(parents=True, exist_ok=True)
    simulate(_mean, np.arange(20.0).reshape(10, 2), n_trials=3, rng=0,
             execution=ExecutionOptions(n_jobs=1, progress=False,
                                        output_path=str(where / "outs.npy")))


def _ledger(where):
    where.mkdir(parents=True, exist_ok=True)
    SQLiteStore(where / "budget.sqlite").close()


def _index_list(where):
    where.mkdir(parents=True, exist_ok=True)
    (where / "exposed.json").write_text(json.dumps({"private": _files.INDEX_LIST_MARKER,
                                                    "records": []}))


MAKERS = {"checkpoint": _checkpoint, "outputs": _outputs, "ledger": _ledger,
          "index list": _index_list}


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    where = tmp_path_factory.mktemp("st") / "st9"
    assert main([*FIT, "--state", str(where)]) == 0
    return where


@pytest.mark.parametrize("force", [[], ["--force"]])
@pytest.mark.parametrize("depth", ["", "a/b/c"])
@pytest.mark.parametrize("kind", [*MAKERS, "state"])
def test_out_holding_a_private_artefact_is_refused_before_any_work(tmp_path, capsys, state,
                                                                  kind, depth, force):
    out = tmp_path / "rep"
    where = out / depth if depth else out
    if kind == "state":
        shutil.copytree(state, where)
    else:
        MAKERS[kind](where)
    before = sorted(p.name for p in out.rglob("*"))
    rc = main([*RUN, "--out", str(out), *force])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.strip().count("\n") == 0 and "--out" in err and "private" in err
    assert sorted(p.name for p in out.rglob("*")) == before  # no report, no lock left


def test_a_state_inside_an_earlier_report_folder_is_refused(tmp_path, capsys):
    """m23: the report first, then a state (or checkpoint, ledger, index list) inside it."""
    out = tmp_path / "rS1"
    assert main([*RUN, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main([*FIT, "--state", str(out / "state")]) == 2
    assert "lies inside the report folder" in capsys.readouterr().err
    assert main([*RUN, "--out", str(tmp_path / "r2"), "--checkpoint", str(out / "ck")]) == 2
    assert "--checkpoint" in capsys.readouterr().err
    for kind in ("checkpoint", "outputs", "ledger"):  # the library's writers refuse too
        with pytest.raises(PermissionError, match="inside the report folder"):
            MAKERS[kind](out / "deep" / kind)
    assert sorted(p.name for p in out.iterdir()) == ["deep", "report.html", "report.json",
                                                      "report.md"]
    assert not any((out / "deep").rglob("*.*"))


def test_api_write_report_refuses_a_folder_with_a_checkpoint(tmp_path):
    from pacpriv.pac import run_pac
    from pacpriv.report import write_report

    _checkpoint(tmp_path / "rep" / "ck")
    result = run_pac(_mean, np.arange(40.0).reshape(20, 2), mi_budget=0.5, n_trials=20, rng=0,
                     execution=ExecutionOptions(progress=False))
    with pytest.raises(PermissionError, match="holds a checkpoint"):
        write_report(result, tmp_path / "rep", overwrite=True)
    assert not (tmp_path / "rep" / "report.json").exists()


def test_a_folder_too_large_to_check_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(_files, "SCAN_LIMIT", 5)
    for i in range(6):
        (tmp_path / f"f{i}.txt").write_text("public")
    with pytest.raises(PermissionError, match="too large to check"):
        _files.check_no_private_files(tmp_path, "--out")
    monkeypatch.setattr(_files, "SCAN_LIMIT", 6)
    _files.check_no_private_files(tmp_path, "--out")  # within the bound: ordinary files pass


def test_ordinary_files_and_an_earlier_report_pass(tmp_path, capsys):
    out = tmp_path / "rep"
    (out / "notes").mkdir(parents=True)
    (out / "notes" / "manifest.json").write_text('{"name": "my notes"}')
    (out / "data.json").write_text('{"private": "no"}')
    assert main([*RUN, "--out", str(out)]) == 0
    assert main([*RUN, "--out", str(out), "--force"]) == 0
    assert (out / "report.json").exists()


def test_a_users_own_report_md_is_not_a_report_folder(tmp_path):
    (tmp_path / "report.md").write_text("# my project notes\n")
    _files.check_not_in_report(tmp_path / "st", "--state")  # passes
    (tmp_path / "report.md").write_text("# PAC report\nmade by pacpriv 0.4.0\n")
    with pytest.raises(PermissionError, match="inside the report folder"):
        _files.check_not_in_report(tmp_path / "st", "--state")


def test_a_ledger_flag_inside_out_or_a_report_is_refused(tmp_path, capsys, state):
    out = tmp_path / "rep"
    assert main([*RUN, "--out", str(out)]) == 0
    capsys.readouterr()
    rc = main(["predict", "status", "--state", str(state), "--ledger", str(out / "l.db")])
    assert rc == 2 and "--ledger" in capsys.readouterr().err
    rc = main(["predict", "status", "--state", str(state), "--ledger",
               str(tmp_path / "r2" / "l.db"), "--out", str(tmp_path / "r2")])
    assert rc == 2 and "--ledger must lie outside --out" in capsys.readouterr().err
    assert not (out / "l.db").exists() and not (tmp_path / "r2").exists()


def test_a_users_own_database_is_not_a_ledger(tmp_path):
    import sqlite3

    conn = sqlite3.connect(tmp_path / "mine.db")
    conn.execute("CREATE TABLE results (x REAL)")
    conn.commit()
    conn.close()
    _files.check_no_private_files(tmp_path, "--out")  # passes
    _ledger(tmp_path / "sub")
    with pytest.raises(PermissionError, match="holds a ledger"):
        _files.check_no_private_files(tmp_path, "--out")
