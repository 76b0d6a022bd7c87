"""A user's ``--mechanism file.py:f`` that fails on a labelled pool (every bundled dataset)
is told that it receives ``(X, y)`` (issue 35, new-user log #100); no record value shown."""

from __future__ import annotations

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
