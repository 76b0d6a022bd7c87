"""A checkpoint (un-noised outputs of every trial and their subset masks) is refused inside the
report folder, which users share (new-user pass 6, c8100/c8101: ``--out rJ1 --checkpoint rJ1``
and ``--checkpoint rJ2/ck`` ran and left the trials beside the report); ``--release-seed -1``
names its flag, not the API's ``release_rng`` (c8203).
"""

from __future__ import annotations

import os

import pytest

from pacpriv.cli.main import main

COMMANDS = {
    "pac run": ["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
                "--trials", "200", "--seed", "0", "--no-progress"],
    "pac records": ["pac", "records", "--mechanism", "mean", "--dataset", "iris",
                    "--noise-std", "1", "--no-progress"],
    "compare": ["compare", "--dataset", "breast_cancer", "--no-progress"],
    "audit": ["audit", "--dataset", "iris", "--non-private", "--no-progress"],
}


@pytest.mark.parametrize("where", ["rep", "rep/ck", "rep/a/b", "./rep/."])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_checkpoint_inside_out_is_refused_before_work(command, where, tmp_path, monkeypatch,
                                                      capsys):
    monkeypatch.chdir(tmp_path)
    rc = main([*COMMANDS[command], "--out", "rep", "--checkpoint", where])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err == ("pacpriv: error: --checkpoint must lie outside --out: the report folder may "
                   "be shared, and --checkpoint holds every trial's un-noised output and subset; "
                   "give another folder")
    assert os.listdir(tmp_path) == []


def test_checkpoint_beside_out_is_fine(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = main([*COMMANDS["pac run"], "--out", "rep", "--checkpoint", "ck", "--format", "json"])
    assert rc == 0, capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["ck", "rep"]


def test_release_seed_names_its_flag(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = main([*COMMANDS["pac run"], "--out", "rep", "--release-seed", "-1"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err == "pacpriv: error: --release-seed must be a non-negative integer seed; got -1."


@pytest.mark.parametrize("inside", ["rep", "rep/ck"])
def test_api_write_report_refuses_the_checkpoint_folder(inside, tmp_path):
    import numpy as np

    import pacpriv
    from pacpriv.pac import ExecutionOptions

    X = np.random.default_rng(0).normal(size=(40, 2))
    res = pacpriv.run_pac(lambda d: np.asarray(d).mean(axis=0), X, mi_budget=0.5,
                          n_trials=200, rng=0, rule="anisotropic", release=False,
                          execution=ExecutionOptions(checkpoint=tmp_path / inside,
                                                     progress=False))
    with pytest.raises(ValueError, match=r"`out_dir` must lie outside the run's checkpoint"):
        pacpriv.write_report(res, tmp_path / "rep")
    assert not (tmp_path / "rep" / "report.json").exists()
    pacpriv.write_report(res, tmp_path / "elsewhere")  # beside it is fine
    assert (tmp_path / "elsewhere" / "report.json").exists()
