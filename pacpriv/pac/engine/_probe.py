"""A timed probe before a run (a few mechanism or fit calls that feed a time estimate), bounded.

The probe runs user code before any trial, so the engine's per-trial ``timeout`` and its
watchdog (:mod:`pacpriv.pac.engine._parallel`) do not cover it: a mechanism that never
returns left ``pac records --time-limit 5`` silent until killed (issue 35, item 5).
:func:`bounded_probe` gives every probe the same two guards:

* with a limit (``--time-limit``, ``--timeout``, ``--max-minutes``), the probe is interrupted
  at the limit (SIGALRM, where the probe runs in a POSIX main thread; elsewhere it is checked
  when it returns) and :class:`ProbeTimeoutError` is raised: nothing was run or charged;
* while it runs longer than :data:`PROBE_NOTE_S` seconds, one line (a
  :class:`~pacpriv.exceptions.StallWarning`, which the command line prints at once) says the
  probe has not finished, how to bound it, and that Ctrl-C stops it.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Iterator

from pacpriv.pac.engine._stall import StallNotice

__all__ = ["PROBE_NOTE_S", "ProbeTimeoutError", "bounded_probe", "duration_text", "probe_limit"]

#: Seconds a probe runs before its "has not finished" line (then at each doubling).
PROBE_NOTE_S = 5.0
#: Longest timer armed (seconds, about 31 years): a longer limit is no limit.
_MAX_TIMER_S = 1e9
#: After the first interrupt the timer fires again this often, in case the probe's code
#: caught the first one and went on.
_REFIRE_S = 0.5


class ProbeTimeoutError(TimeoutError):
    """The timed probe before a run did not finish within its limit; nothing was run."""


def duration_text(seconds: float) -> str:
    """A predicted duration for the user: ``"4.2 s"``, ``"12 s"``, ``"3.2 min"``, ``"1.5 h"``,
    rounded **up** at the digit shown, so an estimate over a limit never reads as the limit
    ("about 12 s ... over --time-limit 12 s": ninth new-user pass, #1302)."""
    def up(value: float, digits: int) -> float:
        scale = 10**digits
        return math.ceil(value * scale * (1 - 1e-6)) / scale  # (float noise is not rounded up)

    if seconds < 120:
        return f"{up(seconds, 0):.0f} s" if seconds >= 10 else f"{up(seconds, 1):.1f} s"
    if seconds < 7200:
        return f"{up(seconds / 60, 1):.1f} min"
    return f"{up(seconds / 3600, 1):.1f} h"


def probe_limit(*limits: tuple[float | None, str]) -> tuple[float, str] | None:
    """The smallest of the given ``(seconds or None, name)`` limits, or None if none is set."""
    given = [(float(s), name) for s, name in limits if s is not None and s > 0]
    return min(given, key=lambda pair: pair[0]) if given else None


class _Timer:
    def __init__(self, seconds: float) -> None:
        self.seconds, self.fired, self.closing = seconds, False, False
        self.active = (hasattr(signal, "setitimer")
                       and threading.current_thread() is threading.main_thread()
                       and math.isfinite(seconds) and seconds < _MAX_TIMER_S)

    def _fire(self, signum, frame) -> None:
        self.fired = True
        if self.closing:  # a signal pending while the timer is put away: noted, not raised
            return
        raise ProbeTimeoutError(f"the timed probe exceeded {self.seconds:g} s (interrupted)")

    def __enter__(self) -> _Timer:
        if self.active:
            # the old timer is read before ours is armed: at a tiny limit the interrupt can
            # arrive before ``setitimer`` returns its value, i.e. inside ``__enter__``, where
            # no ``__exit__`` follows (a timer left re-firing killed the process with SIGALRM,
            # exit 142, after its one-line error: sixth new-user pass, c9112/m11/m21)
            self._old = signal.getitimer(signal.ITIMER_REAL)
            self._old_handler = signal.signal(signal.SIGALRM, self._fire)
            self._start = time.monotonic()
            try:
                signal.setitimer(signal.ITIMER_REAL, max(self.seconds, 1e-6), _REFIRE_S)
            except BaseException:
                self.__exit__()
                raise
        return self

    def __exit__(self, *exc) -> None:
        if self.active:
            self.closing = True
            signal.setitimer(signal.ITIMER_REAL, 0)  # disarmed first, then the old handler
            old = self._old_handler  # None if it was installed outside Python
            signal.signal(signal.SIGALRM, signal.SIG_DFL if old is None else old)
            delay, interval = self._old
            if delay > 0:  # a timer armed before (e.g. pytest-timeout), with its time left
                left = delay - (time.monotonic() - self._start)
                signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), interval)


class _Note(StallNotice):
    """One line when the probe has run :data:`PROBE_NOTE_S` s, then at each doubling."""

    def __init__(self, what: str, hint: str) -> None:
        super().__init__(PROBE_NOTE_S, name="pacpriv-probe-watchdog")
        self.what, self.hint = what, hint

    def text(self, idle: float) -> str:
        return (f"{self.what} has run {idle:.0f} s and not finished (a call may hang): "
                f"{self.hint}, or press Ctrl-C to stop (nothing has been run or charged yet).")


@contextlib.contextmanager
def bounded_probe(limit: tuple[float, str] | None, *, what: str = "the timed probe",
                  hint: str = "pass a time limit to bound it") -> Iterator[None]:
    """Run a timed probe under ``limit`` = ``(seconds, name of the limit)`` (or None).

    Raises
    ------
    ProbeTimeoutError
        When the probe ran past the limit, whatever the probe's code raised on the interrupt
        (a mechanism wrapper may turn it into its own error). Its message is one line:
        ``"<what> did not finish within T s (<name>); nothing was run or charged"``.
    """
    seconds = math.inf if limit is None else limit[0]
    timer = _Timer(seconds)
    if limit is not None:
        hint = (f"it is stopped after {seconds:g} s ({limit[1]})" if timer.active
                else f"it is refused if it returns after {seconds:g} s ({limit[1]})")
    tic = time.monotonic()
    try:
        with _Note(what, hint), timer:
            yield
    except BaseException as exc:
        if not (timer.fired or isinstance(exc, ProbeTimeoutError)):
            raise
        raise ProbeTimeoutError(_refusal(what, limit)) from None
    if timer.fired or (limit is not None and time.monotonic() - tic > seconds):
        # (fired as the probe returned, or code the signal could not interrupt)
        raise ProbeTimeoutError(_refusal(what, limit))


def _refusal(what: str, limit: tuple[float, str] | None) -> str:
    seconds, name = limit if limit is not None else (math.inf, "limit")
    return f"{what} did not finish within {seconds:g} s ({name}); nothing was run or charged"
