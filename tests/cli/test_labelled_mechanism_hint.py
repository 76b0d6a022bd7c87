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
def str_output(S):
    return "abc"
def unpacks_then_raises(S):
    X, y = S
    raise KeyError("zz")
def indexes_a_tuple(S):
    return S[:, 0]
"""


@pytest.mark.parametrize("func,hinted", [("hangs", False), ("no_memory", False),
                                         ("exits", False), ("as_array", True),
                                         ("str_output", False),
                                         ("unpacks_then_raises", False),
                                         ("indexes_a_tuple", True)])
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


def test_no_hint_for_a_corrupt_checkpoint(tmp_path, monkeypatch, capsys):
    """A corrupt checkpoint manifest on a labelled dataset got the "(X, y)" hint (eighth new-user
    pass): the hint is for what f raised, never for pacpriv's own checks."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mech.py").write_text("import numpy as np\ndef f(S):\n    return S[0].mean(0)\n")
    args = ["pac", "run", "--mechanism", "mech.py:f", "--dataset", "iris", "--mi-budget", "0.5",
            "--trials", "200", "--no-progress", "--seed", "0", "--checkpoint", "ck"]
    assert main([*args, "--out", "r1"]) == 0
    capsys.readouterr()
    with open(tmp_path / "ck" / "manifest.json", "a") as fh:
        fh.write("garbage")
    rc = main([*args, "--out", "r2"])
    err = capsys.readouterr().err
    assert rc != 0 and "corrupt" in err and "this dataset is labelled" not in err, err


INTERRUPTS = """
import os, signal, time
def f(S):
    os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C during the first trial
    time.sleep(5)
"""


@pytest.mark.parametrize("checkpoint,expected", [
    (True, "no trial had finished: --checkpoint holds nothing yet"),
    (False, "pass --checkpoint DIR to keep finished trials next time")])
def test_ctrl_c_before_any_trial_says_what_the_checkpoint_holds(tmp_path, monkeypatch, capsys,
                                                                checkpoint, expected):
    """Ctrl-C before any trial finished said "finished trials are kept in --checkpoint" though
    no checkpoint folder existed (eighth new-user pass)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ctrl.py").write_text(INTERRUPTS)
    extra = ["--checkpoint", "ck"] if checkpoint else []
    rc = main(["pac", "run", "--mechanism", "ctrl.py:f", "--dataset", "iris", "--mi-budget",
               "0.5", "--trials", "200", "--no-progress", "--out", "r", *extra])
    err = capsys.readouterr().err
    assert rc == 130 and expected in err and "are kept" not in err, err


@pytest.mark.parametrize("argv", [
    ["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
     "--trials", "60", "--seed", "0", "--no-progress", "--out", "loopA"],
    ["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
     "--trials", "60", "--seed", "0", "--no-progress", "--out", "loopA/sub"],
    ["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
     "--trials", "60", "--seed", "0", "--no-progress", "--checkpoint", "loopA", "--out", "t"],
    ["compare", "--dataset", "iris", "--target-accuracy", "0.6", "--out", "loopA"],
    ["audit", "--dataset", "iris", "--model", "logistic", "--non-private",
     "--reference-models", "4", "--seed", "0", "--out", "loopA"],
])
def test_a_symlink_loop_at_any_path_flag_is_one_line(tmp_path, monkeypatch, capsys, argv):
    """A loop of symbolic links at --out/--checkpoint ended in pathlib's raw RuntimeError
    traceback (eighth new-user pass): one line, exit 2, nothing run."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loopA").symlink_to(tmp_path / "loopB")
    (tmp_path / "loopB").symlink_to(tmp_path / "loopA")
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "loop" in err.lower()


@pytest.mark.parametrize("argv,expected", [
    (["predict", "fit", "--estimator", "kinds.py:clusters", "--dataset", "iris", "--state", "s",
      "--n-worlds", "4", "--per-query-budget", "2^-12", "--total-budget", "0.01",
      "--no-progress"], "predict fit needs a classifier or a regressor"),
    (["audit", "--dataset", "iris", "--model", "kinds.py:regression", "--non-private",
      "--reference-models", "4", "--seed", "0", "--out", "a"], "need a classifier"),
    (["audit", "--dataset", "iris", "--model", "kinds.py:clusters", "--non-private",
      "--reference-models", "4", "--seed", "0", "--out", "a"], "need a classifier"),
])
def test_an_estimator_of_the_wrong_kind_is_refused_before_any_work(tmp_path, monkeypatch, capsys,
                                                                  argv, expected):
    """A KMeans in predict fit ignored the labels and released cluster ids as predictions; a
    Ridge or KMeans in audit failed in trial 0 with a withheld error (eighth new-user pass)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kinds.py").write_text(
        "from sklearn.cluster import KMeans\nfrom sklearn.linear_model import Ridge\n"
        "clusters = KMeans(n_clusters=2, n_init=2)\nregression = Ridge()\n")
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "s").exists() and not (tmp_path / "a").exists()


def test_a_report_never_lands_beside_checkpoint_chunks_without_their_manifest(
        tmp_path, monkeypatch, capsys):
    """With the manifest deleted, a checkpoint's trials_*.npz chunks (un-noised outputs and
    masks) no longer stopped a report from being written beside them (eighth new-user pass)."""
    monkeypatch.chdir(tmp_path)
    args = ["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.5",
            "--trials", "200", "--seed", "0", "--no-progress"]
    assert main([*args, "--checkpoint", "ck", "--out", "r"]) == 0
    (tmp_path / "ck" / "manifest.json").unlink()
    assert any(p.name.startswith("trials_") for p in (tmp_path / "ck").iterdir())
    capsys.readouterr()
    rc = main([*args, "--out", "ck"])
    err = capsys.readouterr().err
    assert rc == 2 and "a checkpoint's trials" in err, err
    assert not (tmp_path / "ck" / "report.json").exists()
