"""One daemon thread that says when something has not progressed for a while: the shared base
of the engine's watchdog (:mod:`pacpriv.pac.engine._parallel`: no trial finished), the timed
probe's note (:mod:`pacpriv.pac.engine._probe`: the probe has not returned) and the note of a
long calibration after the trials (:mod:`pacpriv.pac._pipeline`).

A subclass says what to say (:meth:`StallNotice.text`) and, if progress resets the wait, how
long it has waited (:meth:`StallNotice.idle`; default: since it was made). The thread issues
one :class:`~pacpriv.exceptions.StallWarning` when the wait reaches ``first_s`` seconds, then
at each doubling of it (issue 35, item 5). Under an "error" warning filter the thread writes
the line to stderr itself and goes on.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import warnings
from typing import TypeVar

from pacpriv.exceptions import StallWarning, in_user_terms

__all__ = ["StallNotice"]

_S = TypeVar("_S", bound="StallNotice")


class StallNotice:
    """Context manager: a daemon thread named ``name`` that says :meth:`text` once
    :meth:`idle` reaches ``first_s`` seconds, then at each doubling; it looks at least every
    ``poll_s`` seconds (``inf``: only when the wait is due, for an ``idle`` that never
    resets)."""

    def __init__(self, first_s: float, *, name: str, poll_s: float = math.inf) -> None:
        self.first_s, self.poll_s = first_s, poll_s
        self.start = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name=name)

    def idle(self) -> float:
        """Seconds without progress so far (default: since this object was made)."""
        return time.monotonic() - self.start

    def text(self, idle: float) -> str:
        """The line to say after ``idle`` seconds without progress."""
        raise NotImplementedError

    def __enter__(self: _S) -> _S:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)

    def _watch(self) -> None:
        wait = self.first_s
        while not self._stop.wait(min(self.poll_s, max(0.0, wait - self.idle()))):
            idle = self.idle()
            if idle < wait:
                continue
            text = self.text(idle)
            try:
                warnings.warn(text, StallWarning, stacklevel=1)
            except StallWarning:  # an "error" filter: this thread says it, and goes on
                sys.stderr.write(f"pacpriv: warning: {in_user_terms(text)}\n")
            wait *= 2.0


class CountNotice(StallNotice):
    """A loop over ``total`` items done before any work that is run or charged (e.g. the
    class check of every world's public mask): one line once it has run ``first_s`` seconds,
    then at each doubling, saying how far it got and about how long is left. The loop sets
    :attr:`done`."""

    def __init__(self, total: int, what: str, *, first_s: float = 3.0) -> None:
        super().__init__(first_s, name="pacpriv-count-notice")
        self.total, self.what, self.done = int(total), what, 0

    def text(self, idle: float) -> str:
        rate = self.done / idle if idle > 0 else 0.0
        left = (f"about {(self.total - self.done) / rate:.0f} s left" if rate > 0
                else "none done yet")
        return (f"{self.what}: {self.done} of {self.total} in {idle:.0f} s ({left}; nothing "
                "has been run or charged yet), or press Ctrl-C to stop.")
