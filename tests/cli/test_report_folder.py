"""One report folder, one run (issue 35, item 4): a folder in use is refused, an earlier report
is replaced only with --force (and the user is told), for every command that writes a report."""

import json
import os
import subprocess
import sys

import pytest

from pacpriv._files import LOCK_NAME, report_folder
from pacpriv.cli.main import main

BASE = ["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
        "--trials", "160", "--no-progress", "--format", "json,md"]
PAC = [*BASE, "--seed", "0"]

#: Every command that writes a report, with the least it needs to parse (refused before work).
COMMANDS = [
    PAC,
    ["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--target-accuracy", "0.6"],
    ["compare", "--dataset", "iris", "--target-accuracy", "0.6"],
    ["audit", "--dataset", "digits", "--non-private"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_folder_in_use_is_refused_before_any_work(argv, holder, capsys):
    assert main([*argv, "--out", str(holder)]) == 2
    err = capsys.readouterr().err
    assert "in use by another pacpriv run" in err and "Traceback" not in err
    assert sorted(os.listdir(holder)) == [LOCK_NAME]  # nothing written


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_an_earlier_report_is_kept_without_force(argv, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text('{"earlier": true}\n')
    assert main([*argv, "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert (out / "report.json").read_text() == '{"earlier": true}\n'


def test_force_replaces_and_says_so(tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*PAC, "--out", str(out)]) == 0
    first = (out / "report.json").read_text()
    capsys.readouterr()
    assert main([*PAC, "--out", str(out)]) == 2  # the default folder too: never silent
    assert (out / "report.json").read_text() == first
    assert main([*PAC, "--out", str(out), "--force"]) == 0
    assert "replaces the earlier one" in capsys.readouterr().err
    assert sorted(os.listdir(out)) == ["report.json", "report.md"]  # lock released, removed


def test_concurrent_runs_never_mix(tmp_path):
    """Three runs at once into one folder: one writes, the others are refused; the files
    that exist all come from the one run (its seed is in both)."""
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-m", "pacpriv", *BASE, "--seed", str(s), "--out",
                               str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=env) for s in (1, 2, 3)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(rc for rc, _ in results)
    assert codes[0] == 0 and all(c == 2 for c in codes[1:]), results
    winner = next(i for i, (rc, _) in enumerate(results) if rc == 0) + 1
    report = json.loads((out / "report.json").read_text())
    assert report["simulation"]["root_seed"]["entropy"] == winner
    assert f'`{{"entropy": {winner}, "spawn_key": []}}`' in (out / "report.md").read_text()


def test_report_folder_api_removes_an_empty_folder_after_a_refusal(tmp_path):
    out = tmp_path / "new"
    with pytest.raises(RuntimeError), report_folder(out, "`out_dir`"):
        raise RuntimeError("the run failed before writing")
    assert not out.exists()
