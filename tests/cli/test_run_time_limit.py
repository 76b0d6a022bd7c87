"""``--time-limit`` on every command that runs trials (``pac run``, ``pac records``,
``audit``): refused before any trial with the estimate (exit 2, one line, no report folder or
checkpoint created), or stopped at the limit with the checkpoint kept and the way to resume
named in the command's own flags (issue 35 leftover: ``pac run`` had no limit)."""

from __future__ import annotations

import argparse
import json

import pytest

from pacpriv.cli.main import build_parser, main
from pacpriv.pac.engine import _limit

_FUNCS = '''
import time
import numpy as np


def slow(subset):
    X, y = subset
    time.sleep(0.01)
    return X.mean(axis=0) if len(X) else np.zeros(X.shape[1])
'''


@pytest.fixture
def funcs(tmp_path):
    path = tmp_path / "limit_funcs.py"
    path.write_text(_FUNCS)
    return str(path)


def _run(funcs, tmp_path, *extra):
    return main(["pac", "run", "--mechanism", f"{funcs}:slow", "--dataset", "iris",
                 "--mi-budget", "0.1", "--seed", "1", "--no-progress", "--out",
                 str(tmp_path / "rep"), *extra])


def test_pac_run_refuses_an_estimate_over_the_limit(funcs, tmp_path, capsys):
    rc = _run(funcs, tmp_path, "--trials", "1000", "--time-limit", "1",
              "--checkpoint", str(tmp_path / "ck"))
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err
    assert err.startswith("pacpriv: error: the run would take about ")
    assert "1000 trials" in err and "over --time-limit 1 s" in err and "--n-jobs" in err
    assert "nothing was run or charged" in err and "`" not in err
    assert not (tmp_path / "rep").exists() and not (tmp_path / "ck").exists()


def test_pac_run_stopped_at_the_limit_resumes_from_its_checkpoint(funcs, tmp_path, capsys,
                                                                 monkeypatch):
    monkeypatch.setattr(_limit, "_refuse_over", lambda *a, **k: None)  # the estimate passes
    ck = str(tmp_path / "ck")
    rc = _run(funcs, tmp_path, "--trials", "200", "--time-limit", "0.3", "--checkpoint", ck)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err
    assert "reached its time limit (--time-limit 0.3 s)" in err
    assert f"kept in the checkpoint {ck!r}" in err and "--time-limit, or none) to resume" in err
    assert "Nothing was released or charged" in err and "`" not in err
    assert not (tmp_path / "rep").exists()
    done = _limit.kept_trials(ck, 200)
    assert 0 < done < 200
    rc = _run(funcs, tmp_path, "--trials", "200", "--checkpoint", ck, "--json")
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["simulation"]["resumed_trials"] == done


@pytest.mark.parametrize("command", ["pac run", "pac records", "audit"])
def test_commands_that_run_trials_take_a_time_limit(command, tmp_path, capsys):
    sub = build_parser()
    for word in command.split():
        sub = next(a for a in sub._actions
                   if isinstance(a, argparse._SubParsersAction)).choices[word]
    assert "--time-limit" in {s for a in sub._actions for s in a.option_strings}
    argv = {"pac run": ["pac", "run", "--mechanism", "mean", "--dataset", "iris",
                        "--mi-budget", "0.1"],
            "pac records": ["pac", "records", "--mechanism", "mean", "--dataset", "iris",
                            "--noise-std", "1"],
            "audit": ["audit", "--dataset", "digits", "--noise-multiplier", "2"]}[command]
    for bad in ("0", "-1", "nan", "inf"):
        rc = main([*argv, "--time-limit", bad, "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and "\n" not in err, err
        assert "--time-limit must be a number of seconds in (0, inf)" in err
        assert not (tmp_path / "o").exists()
