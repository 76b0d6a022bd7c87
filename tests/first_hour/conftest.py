"""Shared setup of the first-hour tests (issue 15): a user's folder with a CSV and user
functions, and an in-process CLI runner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pacpriv.cli import main

SENTINEL = 987654.321123
ROOT = Path(__file__).resolve().parents[2]

FUNCS = '''
import numpy as np

def clipped_mean(X):
    return np.clip(X, -3.0, 3.0).mean(axis=0)

def label_rate(data):
    X, y = data
    return np.array([np.clip(X, -3, 3).mean(), y.mean()])

def forgot_return(X):
    np.clip(X, -3.0, 3.0).mean(axis=0)

def counted(X):
    import os
    with open(os.environ["PACPRIV_TEST_CALLS"], "a") as fh:
        fh.write("x")
    return np.clip(X, -3.0, 3.0).mean(axis=0)
'''


@pytest.fixture()
def user(tmp_path, monkeypatch):
    """A user's folder: data.csv (40 records, a `label` column, one sentinel value) and
    myfuncs.py; the current folder is that folder."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(40, 3))
    X[11, 1] = SENTINEL
    y = (X[:, 0] > 0).astype(int)
    lines = ["a,b,c,label"] + [",".join(repr(float(v)) for v in r) + f",{c}"
                               for r, c in zip(X, y, strict=True)]
    (tmp_path / "data.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "myfuncs.py").write_text(FUNCS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


BASE = ("pac", "run", "--dataset", "data.csv", "--mi-budget", "0.1", "--trials", "12",
        "--no-progress", "--seed", "3", "--rule", "anisotropic")
