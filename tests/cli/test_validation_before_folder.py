"""Every flag is checked before a command touches its report folder, and the stall warning is
one of the CLI's collected warnings (issue 35, items 4 and 5, leftovers of 0.4).

0.4 took (created and locked) ``--out`` before the command checked its flags: a bad flag
against a folder holding a report said "pass --force", against a folder in use "in use by
another run", and a fresh folder was created and removed again. The stall line was written
straight to stderr, outside the warnings the CLI collects.
"""

from __future__ import annotations

import os
import sys

import pytest

from pacpriv._files import LOCK_NAME
from pacpriv.cli.main import main
from pacpriv.exceptions import StallWarning
from pacpriv.pac.engine import _parallel

cli_main = sys.modules["pacpriv.cli.main"]  # (pacpriv.cli.main, the name, is the function)

#: Every report-writing command with a flag that only its handler can refuse (argparse
#: accepts it), and the flag the error must name.
BAD = [
    (["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
      "--confidence", "1.5"], "--confidence"),
    (["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--target-accuracy", "0.3"],
     "--target-accuracy"),
    (["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
      "--timeout", "-1"], "--timeout"),
    (["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--target-accuracy", "0.6",
      "--records", "99999"], "--records"),
    (["compare", "--dataset", "iris", "--target-accuracy", "0.6", "--epochs", "0"],
     "--epochs"),
    (["compare", "--dataset", "iris", "--target-accuracy", "0.6", "--trials", "1"], "--trials"),
    (["compare", "--dataset", "iris", "--target-accuracy", "0.6", "--components", "x"],
     "--components"),
    (["audit", "--dataset", "digits", "--non-private", "--confidence", "2"], "--confidence"),
    (["audit", "--dataset", "digits", "--non-private", "--augment", "shifts", "--columns",
      "0,1,2"], "--augment"),
    (["predict", "status", "--state", "/nonexistent-pacpriv-state"], "--state"),
]
IDS = [f"{a[0]}-{a[1]}-{flag}" for a, flag in BAD]


def _bad_flag_named(capsys, flag):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pacpriv: error: ") and flag in err[0], err
    assert "--force" not in err[0] and "another pacpriv run" not in err[0]


@pytest.mark.parametrize(("argv", "flag"), BAD, ids=IDS)
def test_a_bad_flag_is_named_before_a_folder_in_use(argv, flag, holder, capsys):
    assert main([*argv, "--out", str(holder)]) == 2
    _bad_flag_named(capsys, flag)
    assert sorted(os.listdir(holder)) == [LOCK_NAME]


@pytest.mark.parametrize(("argv", "flag"), BAD, ids=IDS)
def test_a_bad_flag_is_named_before_an_earlier_report(argv, flag, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text("{}\n")
    assert main([*argv, "--out", str(out)]) == 2
    _bad_flag_named(capsys, flag)
    assert sorted(os.listdir(out)) == ["report.json"]  # never locked, nothing written


@pytest.mark.parametrize(("argv", "flag"), BAD, ids=IDS)
def test_a_bad_flag_never_creates_the_folder(argv, flag, tmp_path, capsys, monkeypatch):
    made = []
    real_mkdir = type(tmp_path).mkdir

    def spy(self, *a, **k):
        made.append(str(self))
        return real_mkdir(self, *a, **k)

    monkeypatch.setattr(type(tmp_path), "mkdir", spy)
    out = tmp_path / "new"
    assert main([*argv, "--out", str(out)]) == 2
    _bad_flag_named(capsys, flag)
    assert not out.exists() and str(out) not in made


SLOW = '''
import time
import numpy as np

_state = {"slept": False}

def slow(X):
    X = X[0] if isinstance(X, tuple) else X
    if not _state["slept"]:
        _state["slept"] = True
        time.sleep(1.6)
    return np.clip(np.asarray(X, dtype=float), 0, 10).mean(axis=0)
'''


@pytest.mark.filterwarnings("default::pacpriv.exceptions.StallWarning")
def test_the_stall_warning_is_live_and_said_once(tmp_path, capsys, monkeypatch):
    """A stall is printed while the run goes on (one line per doubling) and not again in the
    closing list of warnings (ninth new-user pass: it read as news after the run)."""
    monkeypatch.setattr(_parallel, "STALL_WARN_S", 0.4)
    (tmp_path / "slowmech.py").write_text(SLOW)
    monkeypatch.syspath_prepend(str(tmp_path))
    collected = []
    real = cli_main._print_warnings
    monkeypatch.setattr(cli_main, "_print_warnings",
                        lambda caught: (collected.extend(caught), real(caught))[1])
    code = main(["pac", "run", "--mechanism", "slowmech:slow", "--dataset", "iris",
                 "--mi-budget", "0.5", "--trials", "12", "--n-jobs", "1", "--no-progress",
                 "--rule", "isotropic", "--out", str(tmp_path / "out"), "--format", "json"])
    assert code == 0
    assert not [w for w in collected if issubclass(w.category, StallWarning)]
    err = capsys.readouterr().err.splitlines()
    lines = [x for x in err if "no trial has finished for" in x]
    assert lines and len(set(lines)) == len(lines)  # each doubling once, none repeated
    assert all(x.startswith("pacpriv: warning: ") for x in lines)
    assert all("pass --timeout SECONDS to bound each trial" in x for x in lines)  # its flag


@pytest.mark.filterwarnings("default::pacpriv.exceptions.StallWarning")
def test_library_use_gets_a_stall_warning(monkeypatch):
    from pacpriv.pac import ExecutionOptions, simulate

    monkeypatch.setattr(_parallel, "STALL_WARN_S", 0.4)
    ns: dict = {}
    exec(SLOW, ns)
    with pytest.warns(StallWarning, match="no trial has finished for .*timeout="):
        simulate(ns["slow"], __import__("numpy").arange(20.0).reshape(10, 2), n_trials=3,
                 rng=0, execution=ExecutionOptions(n_jobs=1, progress=False))
