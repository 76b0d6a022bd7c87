"""The timed probe before a run is bounded and never silent (issue 35, item 5).

``pac records --time-limit 5`` with a mechanism that never returns printed nothing until it
was killed: the probe that feeds the time estimate ran the mechanism without any bound.
Every mechanism here gives up on its own after a while, so a regression fails instead of
hanging the suite.
"""

from __future__ import annotations

import math
import re
import time
import warnings

import numpy as np
import pytest

from pacpriv.exceptions import StallWarning, TimeLimitError
from pacpriv.pac.engine import _probe
from pacpriv.pac.engine._probe import bounded_probe, probe_limit
from pacpriv.pac.per_record._estimate import estimate_per_record_time

_POOL = np.arange(40.0).reshape(20, 2)
_GIVE_UP_S = 20.0
#: the mechanisms that ran to their own give-up time (a probe that was not stopped)
_RAN_OUT: list[str] = []


def _hangs(subset):
    end = time.monotonic() + _GIVE_UP_S
    while time.monotonic() < end:
        time.sleep(0.02)
    _RAN_OUT.append("_hangs")
    return np.asarray(subset, float).mean(axis=0)


def _swallows_interrupts(subset):
    """Catches every exception (a broad ``except`` in user code) and goes on waiting."""
    end = time.monotonic() + _GIVE_UP_S
    caught = 0
    while time.monotonic() < end and caught < 3:
        try:
            time.sleep(0.02)
        except Exception:
            caught += 1
    if caught < 3:
        _RAN_OUT.append("_swallows_interrupts")
    return np.asarray(subset, float).mean(axis=0)


def _mean(subset):
    return np.asarray(subset, float).mean(axis=0)


def _estimate(mechanism, **kw):
    return estimate_per_record_time(mechanism, _POOL, np.arange(3), n_records=20, n_trials=10,
                                    **kw)


@pytest.mark.parametrize("mechanism", [_hangs, _swallows_interrupts])
def test_the_probe_stops_at_its_time_limit(mechanism):
    _RAN_OUT.clear()
    with pytest.raises(TimeLimitError) as err:  # run_pac's error for the same case
        _estimate(mechanism, time_limit=0.3)
    # stopped, not run to its end (not a wall-clock bound: a loaded machine may be slow)
    assert _RAN_OUT == []
    assert isinstance(err.value, TimeoutError)
    assert str(err.value) == ("the timed probe of the mechanism (before the run) did not "
                              "finish within 0.3 s (time_limit); nothing was run or charged")


def test_a_quick_probe_under_a_limit_estimates_as_before():
    free, limited = _estimate(_mean), _estimate(_mean, time_limit=60.0)
    assert free.evaluations_per_trial == limited.evaluations_per_trial == 3 + 1
    assert limited.probe_evaluations == 4 and limited.n_trials == 10
    assert limited.seconds > 0


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, "5"])
def test_a_bad_time_limit_is_refused_before_the_mechanism_runs(bad):
    calls = []
    with pytest.raises((ValueError, TypeError), match="time_limit"):
        _estimate(lambda s: calls.append(1) or _mean(s), time_limit=bad)
    assert calls == []


@pytest.mark.filterwarnings("default::pacpriv.exceptions.StallWarning")
def test_a_long_probe_without_a_limit_says_so(monkeypatch):
    monkeypatch.setattr(_probe, "PROBE_NOTE_S", 0.2)
    tic = time.monotonic()
    with pytest.warns(StallWarning) as record, bounded_probe(None, what="the probe",
                                                              hint="pass X to bound it"):
        time.sleep(0.9)
    elapsed = time.monotonic() - tic
    lines = [str(w.message) for w in record if issubclass(w.category, StallWarning)]
    # one line per doubling (0.2, 0.4, 0.8 s, ...), never a flood: the n-th line came once
    # the probe had run 0.2·2ⁿ⁻¹ s (3 lines here; more only if a loaded machine overslept)
    assert len(lines) >= 1 and 0.2 * 2 ** (len(lines) - 1) <= elapsed
    assert re.match(r"the probe has run \d+ s and not finished", lines[0]), lines[0]
    assert "pass X to bound it, or press Ctrl-C to stop" in lines[0]


def test_a_quick_probe_says_nothing(monkeypatch):
    monkeypatch.setattr(_probe, "PROBE_NOTE_S", 30.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with bounded_probe(None):
            time.sleep(0.01)


def test_interrupts_and_errors_of_the_probe_pass_through():
    with pytest.raises(KeyboardInterrupt), bounded_probe((30.0, "--time-limit")):
        raise KeyboardInterrupt
    with pytest.raises(ZeroDivisionError), bounded_probe((30.0, "--time-limit")):
        _ = 1 / 0


def test_an_earlier_timer_is_restored():
    import signal

    fired = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.6)
        with bounded_probe((5.0, "--time-limit")):
            pass
        # still armed, or (a loaded machine stalled past its 0.6 s) already fired once
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0 or fired == [1]
        deadline = time.monotonic() + 60
        while not fired and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.1)  # a timer restored with an interval would fire again here
        assert fired == [1]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_probe_limit_takes_the_smallest_given():
    assert probe_limit((None, "--time-limit"), (None, "--timeout")) is None
    assert probe_limit((5.0, "--time-limit"), (None, "--timeout")) == (5.0, "--time-limit")
    assert probe_limit((5.0, "--time-limit"), (2.0, "--timeout")) == (2.0, "--timeout")


_TINY_LIMITS_SCRIPT = '''
import signal, sys, time
from pacpriv.pac.engine._probe import ProbeTimeoutError, bounded_probe
from pacpriv.pac.engine._trial import _Alarm
orig = signal.getsignal(signal.SIGALRM)
leaks = 0
for _ in range(60):
    for limit in (1e-9, 1e-7, 1e-6, 2e-6, 1e-5):
        try:
            with bounded_probe((limit, "--time-limit")):
                time.sleep(0.002)
        except ProbeTimeoutError:
            pass
        try:
            with _Alarm(limit):
                time.sleep(0.002)
        except Exception:
            pass
        if (signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0)
                or signal.getsignal(signal.SIGALRM) is not orig):
            leaks += 1
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, orig)
print(leaks)
time.sleep(1.2)  # a timer left armed (re-firing every 0.5 s) would kill the process here
sys.exit(2)
'''


@pytest.mark.skipif(not hasattr(__import__("signal"), "setitimer"), reason="POSIX timers")
def test_tiny_limits_leave_no_timer_armed(tmp_path):
    """At limits of 1e-9 .. 1e-5 s the interrupt can arrive before the timer's ``__enter__``
    returns; the timer must still be disarmed and the old handler restored, else the process
    dies of SIGALRM (exit 142) after printing its error (sixth new-user pass, c9112/m11/m21)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "tiny.py"
    script.write_text(_TINY_LIMITS_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout.strip() == "0"
