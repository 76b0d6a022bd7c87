"""Regressions from the fourteenth fresh new-user pass (issue 35), each a kind with siblings."""

from __future__ import annotations

import json

import pytest

from pacpriv.cli import main

MEAN = "def mean(subset):\n    X, y = subset\n    return X.mean(axis=0)\n"


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
@pytest.mark.parametrize("flags, noted", [
    (["--backend", "threading"], True),  # the default --n-jobs 1
    (["--backend", "loky", "--n-jobs", "1"], True),
    (["--backend", "threading", "--n-jobs", "2"], False),
    (["--backend", "sequential"], False),
    ([], False),
])
def test_a_named_backend_with_one_job_says_it_runs_in_this_process(tmp_path, monkeypatch,
                                                                     capsys, flags, noted):
    """`--backend ray` (or any parallel backend) with the default one job ran sequentially and
    the report said 'sequential' with no word about the flag: a one-line note says so."""
    (tmp_path / "mech.py").write_text(MEAN)
    monkeypatch.chdir(tmp_path)
    assert main(["pac", "run", "--mechanism", "mech.py:mean", "--dataset", "iris",
                 "--mi-budget", "0.5", "--trials", "20", "--seed", "0", "--no-progress",
                 "--out", "r", "--format", "json", *flags]) == 0
    err = capsys.readouterr().err
    assert ("runs every trial in this process" in err) is noted
    if noted:
        assert f"to use {flags[1]}" in err and "--n-jobs 2 or more" in err
    backend = json.loads((tmp_path / "r" / "report.json").read_text())["simulation"]["backend"]
    assert backend == ("threading" if "2" in flags else "sequential")
