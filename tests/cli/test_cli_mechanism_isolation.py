"""A mechanism cannot break the CLI's output or its exit status (issue 25, item 2).

``--json`` stays valid JSON when the mechanism prints (every backend, ``pac run`` and ``pac
records``); ``sys.exit(3)`` in a mechanism is one ``pacpriv: error:`` line naming the trial and
exit status 1, not a silent exit with the mechanism's status.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from pacpriv.cli import main
from pacpriv.cli._resources import shutdown_workers

MARK = "printed-by-the-mechanism-51c2"

FUNCS = f'''
import sys
import numpy as np

def chatty(X):
    print("{MARK}")
    return np.clip(X, -3, 3).mean(axis=0)

def exits(X):
    sys.exit(3)

def chatty_fit(data):
    print("{MARK}")
    from sklearn.naive_bayes import GaussianNB
    return GaussianNB().fit(*data)
'''


@pytest.fixture()
def user(tmp_path, monkeypatch):
    X = np.random.default_rng(5).normal(size=(30, 2))
    y = (X[:, 0] > 0).astype(int)
    rows = ["a,b,label"] + [f"{float(r[0])!r},{float(r[1])!r},{c}"
                            for r, c in zip(X, y, strict=True)]
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "myfuncs.py").write_text(FUNCS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


RUN = ["pac", "run", "--dataset", "data.csv", "--mi-budget", "0.2", "--trials", "30",
       "--seed", "1", "--no-progress", "--rule", "anisotropic", "--out", "rep"]


@pytest.mark.parametrize("backend", ["sequential", "loky", "threading", "multiprocessing"])
def test_pac_run_json_stays_valid_when_the_mechanism_prints(user, capfd, backend):
    shutdown_workers()  # new workers write to the captured descriptors
    capfd.readouterr()
    code = main([*RUN, "--mechanism", "myfuncs.py:chatty", "--json", "--backend", backend,
                 "--n-jobs", "1" if backend == "sequential" else "2"])
    out, err = capfd.readouterr()
    assert code == 0, err
    report = json.loads(out)  # nothing but the report on stdout
    assert report["kind"] == "pac" and MARK not in out
    assert MARK in err


def test_pac_records_json_stays_valid_when_the_mechanism_prints(user, capfd):
    capfd.readouterr()
    code = main(["pac", "records", "--mechanism", "myfuncs.py:chatty", "--dataset", "data.csv",
                 "--noise-std", "0.5", "--trials", "10", "--records", "0-1", "--seed", "1",
                 "--no-progress", "--json", "--out", "rec"])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert json.loads(out)["kind"] == "analytic" and MARK in err


def test_predict_fit_output_is_not_mixed_with_the_fit_functions_prints(user, capfd):
    capfd.readouterr()
    code = main(["predict", "fit", "--estimator", "myfuncs.py:chatty_fit", "--dataset",
                 "data.csv", "--label-column", "label", "--state", "st", "--n-worlds", "4",
                 "--per-query-budget", "2^-10", "--total-budget", "2^-8", "--seed", "1",
                 "--no-progress"])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert MARK not in out and MARK in err and "queries answered" in out


@pytest.mark.parametrize("backend", ["sequential", "loky"])
def test_sys_exit_in_a_mechanism_is_one_line_and_status_1(user, capfd, backend):
    capfd.readouterr()
    code = main([*RUN, "--mechanism", "myfuncs.py:exits", "--backend", backend,
                 "--n-jobs", "1" if backend == "sequential" else "2"])
    _, err = capfd.readouterr()
    assert code == 1
    lines = [ln for ln in err.splitlines() if ln.strip() and "note: column" not in ln]
    assert len(lines) == 1 and lines[0].startswith("pacpriv: error: Mechanism ")
    assert "called sys.exit(3) in trial" in lines[0] and "Traceback" not in err
