"""A user's ``--mechanism file.py:f`` that fails on a labelled pool (every bundled dataset)
is told that it receives ``(X, y)`` (issue 35, new-user log #100); no record value shown."""

from __future__ import annotations

import pytest

from pacpriv.cli.main import main

MECH = """
import numpy as np
def ok(X, rng):
    return np.asarray(X).mean(axis=0)  # fails on (X, y): ragged tuple
"""


def test_bundled_labelled_dataset_hint(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mech.py").write_text(MECH)
    rc = main(["pac", "run", "--mechanism", "mech.py:ok", "--dataset", "iris",
               "--mi-budget", "0.5", "--trials", "20", "--no-progress", "--out", "r"])
    err = capsys.readouterr().err
    assert rc in (1, 2), err[-300:]
    assert "this dataset is labelled: f receives (X, y)" in err
    assert "Traceback" not in err and "5.1" not in err  # no record value (iris row 0)


FAILS = """
import time
def hangs(S):
    time.sleep(20)
def no_memory(S):
    raise MemoryError
def exits(S):
    raise SystemExit(2)
def as_array(S):
    return S.mean(axis=0)
"""


@pytest.mark.parametrize("func,hinted", [("hangs", False), ("no_memory", False),
                                         ("exits", False), ("as_array", True)])
def test_the_hint_only_where_a_tuple_was_used_as_an_array(tmp_path, monkeypatch, capsys,
                                                          func, hinted):
    """A timeout, MemoryError or sys.exit on a labelled dataset got the "(X, y)" hint too
    (seventh new-user pass, #247): only what using the tuple as an array raises gets it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fails.py").write_text(FAILS)
    rc = main(["pac", "run", "--mechanism", f"fails.py:{func}", "--dataset", "iris",
               "--mi-budget", "0.5", "--trials", "20", "--timeout", "0.5", "--no-progress",
               "--out", "r"])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert ("this dataset is labelled" in err) == hinted, err
