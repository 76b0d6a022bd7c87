"""The timed probe before a run obeys the command's time limit (issue 35, item 5; fifth
new-user pass, c3119): ``pac records --time-limit`` and ``predict fit --max-minutes`` stop a
probe that does not return and refuse in one line; without a limit a long probe says so."""

from __future__ import annotations

import re

import pytest

from pacpriv.cli.main import main
from pacpriv.pac.engine import _probe

_FUNCS = '''
import pathlib
import time
import numpy as np

_GIVE_UP_S = 30.0  # a regression fails, never hangs
#: written when a call ran to its give-up time: the probe did not stop it
RAN_OUT = pathlib.Path(__file__).with_suffix(".ran_out")


def _wait_then_give_up():
    end = time.monotonic() + _GIVE_UP_S
    while time.monotonic() < end:
        time.sleep(0.02)
    RAN_OUT.touch()
    raise RuntimeError("gave up")


def hangs(subset):
    _wait_then_give_up()


def fit_hangs(data):
    _wait_then_give_up()


_SLOW = [2.0]  # the note is due at 0.3 s: a late-woken note thread still says it


def slow_first(subset):
    if _SLOW:
        time.sleep(_SLOW.pop())
    x = subset[0] if isinstance(subset, tuple) else subset  # (X, y) of a labelled dataset
    return np.asarray(x, float).mean(axis=0)
'''


@pytest.fixture
def funcs(tmp_path):
    path = tmp_path / "probe_funcs.py"
    path.write_text(_FUNCS)
    return str(path)


@pytest.mark.parametrize("limit", ["1", "0.25"])
def test_pac_records_time_limit_bounds_the_probe(funcs, tmp_path, capsys, limit):
    out = tmp_path / "rep"
    rc = main(["pac", "records", "--mechanism", f"{funcs}:hangs", "--dataset", "iris",
               "--target-accuracy", "0.6", "--trials", "20", "--time-limit", limit,
               "--out", str(out), "--no-progress"])
    # stopped, not run until it gave up (not a wall-clock bound: a loaded machine is slow)
    assert not (tmp_path / "probe_funcs.ran_out").exists()
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err == (f"pacpriv: error: the timed probe of the mechanism (before the run) did not "
                   f"finish within {float(limit):g} s (--time-limit); nothing was run or "
                   "charged")
    assert not out.exists()  # the folder taken for the run is given back untouched


@pytest.mark.filterwarnings("default::pacpriv.exceptions.StallWarning")
def test_pac_records_without_a_limit_says_the_probe_is_slow(funcs, tmp_path, capsys,
                                                             monkeypatch):
    monkeypatch.setattr(_probe, "PROBE_NOTE_S", 0.3)
    rc = main(["pac", "records", "--mechanism", f"{funcs}:slow_first", "--dataset", "iris",
               "--noise-std", "0.05", "--trials", "30", "--records", "0-4", "--seed", "1",
               "--n-jobs", "1", "--out", str(tmp_path / "rep"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 0, err
    line = next(x for x in err.splitlines() if "has run" in x)
    # "has run 0 s" at 0.3 s, or more if a loaded machine woke the note's thread late
    assert re.match(r"pacpriv: warning: the timed probe of the mechanism \(before the run\) "
                    r"has run \d+ s and not finished", line), line
    assert "pass --time-limit SECONDS to bound it, or press Ctrl-C to stop" in line


def test_predict_fit_max_minutes_bounds_the_probe(funcs, tmp_path, capsys):
    state = tmp_path / "state"
    rc = main(["predict", "fit", "--estimator", f"{funcs}:fit_hangs", "--dataset", "iris",
               "--state", str(state), "--n-worlds", "8", "--per-query-budget", "0.01",
               "--total-budget", "1", "--max-minutes", "0.01"])
    assert not (tmp_path / "probe_funcs.ran_out").exists()  # stopped, not run to its end
    err = capsys.readouterr().err.strip()
    assert rc == 2 and not state.exists()
    assert err == ("pacpriv: error: the timed probe (one world's fit, before the others) did "
                   "not finish within 0.6 s (--max-minutes 0.01); nothing was run or charged")


_TINY_CLI = '''
import sys, time
from pacpriv.cli.main import main
codes = []
for limit in ("1e-9", "1e-7", "1e-6") * 2:
    codes.append(main(["pac", "records", "--mechanism", "mean", "--dataset", "iris",
                       "--noise-std", "1", "--records", "0-4", "--trials", "60", "--seed", "0",
                       "--time-limit", limit, "--out", sys.argv[1] + "/r", "--no-progress"]))
    codes.append(main(["predict", "fit", "--no-progress", "--estimator", "logistic",
                       "--dataset", "iris", "--n-worlds", "8", "--seed", "0",
                       "--state", sys.argv[1] + "/st", "--per-query-budget", "2^-10",
                       "--total-budget", "0.01", "--max-minutes", limit]))
print(codes)
time.sleep(1.2)  # a timer left re-firing every 0.5 s would kill the process here
sys.exit(2 if set(codes) == {2} else 1)
'''


def test_tiny_limits_exit_2_not_sigalrm(tmp_path):
    """Sixth new-user pass c9112/m11/m21: the one-line error, then death by SIGALRM (142)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "tiny_cli.py"
    script.write_text(_TINY_CLI)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr[-1500:])
    assert done.stderr.count("nothing was run or charged") == 12


@pytest.mark.filterwarnings("default::pacpriv.exceptions.StallWarning")
@pytest.mark.parametrize("command", ["run", "records"])
def test_a_live_note_is_said_once_and_nothing_after_the_error(funcs, tmp_path, capsys,
                                                               monkeypatch, command):
    """Ninth new-user pass #48: the probe's "has not finished" note, printed while the probe
    ran, was printed again in the closing list, after the error. A live note is said once,
    when it is due; the error is the last line."""
    monkeypatch.setattr(_probe, "PROBE_NOTE_S", 0.2)
    target = ["--mi-budget", "0.1"] if command == "run" else ["--target-accuracy", "0.6"]
    rc = main(["pac", command, "--mechanism", f"{funcs}:hangs", "--dataset", "iris", *target,
               "--trials", "50", "--time-limit", "1.5", "--out", str(tmp_path / "rep"),
               "--no-progress"])
    assert not (tmp_path / "probe_funcs.ran_out").exists()  # stopped, not run to its end
    lines = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    notes = [x for x in lines if "has run" in x and "not finished" in x]
    assert notes  # said while the probe ran (each doubling once), never after the error
    assert lines[-1].startswith("pacpriv: error: the timed probe")
    assert all(x.startswith("pacpriv: warning: ") for x in lines[:-1])
