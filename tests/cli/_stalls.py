"""A mechanism that stalls once, shared by the CLI tests of the stall watchdog (imported as
``from ._stalls import SlowFirst``)."""

from __future__ import annotations

import time

import numpy as np


class SlowFirst:
    """The mean of a subset; the first call sleeps ``sleep_s`` seconds first (a stalled trial:
    with ``n_jobs=1`` it is the first trial, whose subset is the largest seen so far)."""

    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s
        self.slept = False

    def __call__(self, x) -> np.ndarray:
        if not self.slept:
            self.slept = True
            time.sleep(self.sleep_s)
        return np.asarray(x, dtype=float).mean(axis=0)
