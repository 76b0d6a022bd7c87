"""Module-level mechanisms for the engine tests (picklable for loky/Dask workers).

Registered with cloudpickle *by value*, so worker processes need not import this module
(pytest's importlib mode does not put the repository on their ``sys.path``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import cloudpickle
import numpy as np

FAIL_RATE = 0.15  # fraction of trials flagged by `flag` below


def mean_mech(subset):
    """Column means, zeros for an empty subset; shape (d,) for a pool (n, d)."""
    if len(subset) == 0:
        return np.zeros(subset.shape[1])
    return subset.mean(axis=0)


def noisy_sum(subset, *, rng):
    """Sum of a 1-D subset plus one standard normal from the trial's mechanism stream."""
    return np.array([subset.sum(), rng.normal()])


def xy_mech(subset):
    """Tuple pool (X, y): [n, sum(y), mean(X[:, 0]) or 0]."""
    x, y = subset
    return np.array([len(y), y.sum(), x[:, 0].mean() if len(y) else 0.0])


def count_mech(subset):
    """Scalar output (d = 1): number of records in the subset."""
    return float(len(subset))


def flag(rng) -> bool:
    """Whether this trial is flagged (consumes the first draw of the mechanism stream)."""
    return bool(rng.random() < FAIL_RATE)


def flag_value(subset, *, rng):
    """The draw `flag` looks at, so tests can predict which trials are flagged."""
    return np.array([rng.random()])


def fail_flagged(subset, *, rng, flag_file: str | None = None):
    """Raise ValueError on flagged trials (only while ``flag_file`` exists, if given)."""
    if flag(rng) and (flag_file is None or Path(flag_file).exists()):
        raise ValueError("boom")
    return np.array([subset.sum(), rng.normal()])


def interrupt_flagged(subset, *, rng, flag_file: str):
    """A real Ctrl-C (SIGINT to this process) on flagged trials while ``flag_file`` exists."""
    if flag(rng) and Path(flag_file).exists():
        signal.raise_signal(signal.SIGINT)
    return np.array([subset.sum(), rng.normal()])


def crash_flagged(subset, *, rng, flag_file: str):
    """Kill the worker process (os._exit) on flagged trials while ``flag_file`` exists."""
    if flag(rng) and Path(flag_file).exists():
        time.sleep(0.05)
        os._exit(3)
    return np.array([subset.sum(), rng.normal()])


_SEEN: set = set()


def flaky(subset, *, rng):
    """Fail the first attempt of every trial, succeed on the retry (same seed, same value)."""
    key = repr(rng.bit_generator.state["state"])
    if key not in _SEEN:
        _SEEN.add(key)
        raise ConnectionError("transient")
    return np.array([subset.sum(), rng.normal()])


#: Per-trial limit of the timeout tests, seconds: generous for an unflagged trial (microseconds of
#: work) on a loaded machine, so only the trials `sleepy` slows on purpose exceed it (V1 F6).
SLEEPY_TIMEOUT_S = 1.0


def sleepy(subset, *, rng):
    """Sleep 2x ``SLEEPY_TIMEOUT_S`` on flagged trials (to exercise timeouts)."""
    if flag(rng):
        time.sleep(2 * SLEEPY_TIMEOUT_S)
    return np.array([subset.sum()])


def bad_output(subset, *, rng, kind: str):
    """Return an invalid output of the given ``kind`` on flagged trials."""
    if not flag(rng):
        return np.array([1.0, 2.0])
    return {
        "nan": np.array([1.0, np.nan]),
        "inf": np.array([np.inf, 2.0]),
        "2d": np.ones((2, 2)),
        "complex": np.array([1.0 + 1j, 2.0]),
        "empty": np.array([]),
        "string": np.array(["a", "b"]),
        "length": np.array([1.0, 2.0, 3.0]),
        "huge": np.array([1e100, 2.0]),  # overflows float32, not float64's variances
        "tiny": np.array([1.0, 1e-170]),  # a variance that underflows float64
        "enormous": np.array([1e300, 2.0]),
    }[kind]


def global_normal(subset):
    """Ignores its seed: draws from the global numpy.random state (the contract forbids it)."""
    return np.array([subset.sum() + np.random.normal()])


cloudpickle.register_pickle_by_value(sys.modules[__name__])
