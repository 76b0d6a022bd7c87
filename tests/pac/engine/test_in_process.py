"""A sequential run loops in process without importing joblib (engine ``_parallel._InProcess``).

Only when nothing could ask for another backend: ``n_jobs`` 1 or None, no backend named, and
joblib not imported (so no ``joblib.parallel_config`` is active). The outputs, masks and
backend name are those of joblib's sequential backend, bit for bit.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from pacpriv.pac.engine import _parallel

CODE = """
import sys, warnings, numpy as np
warnings.simplefilter("ignore")
from pacpriv.pac.engine import ExecutionOptions, simulate
def f(s):
    return np.array([s.sum(), len(s), float(np.sin(s).sum())])
pool = np.arange(50.0)
a = simulate(f, pool, n_trials=24, rng=3, execution=ExecutionOptions(progress=False,
             batch_size=5))
first = "joblib" in sys.modules
import joblib
b = simulate(f, pool, n_trials=24, rng=3, execution=ExecutionOptions(progress=False,
             batch_size=5))
with joblib.parallel_config(backend="threading", n_jobs=2):
    c = simulate(f, pool, n_trials=24, rng=3, execution=ExecutionOptions(progress=False))
print(first, a.backend, b.backend, c.backend,
      np.array_equal(a.outputs, b.outputs) and np.array_equal(a.outputs, c.outputs),
      np.array_equal(a.masks, b.masks) and np.array_equal(a.masks, c.masks))
"""


def test_sequential_run_without_joblib_equals_joblib_runs():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         check=True)
    first, a, b, c, same_outputs, same_masks = out.stdout.split()
    assert first == "False"  # the in-process loop never imported joblib
    assert a == b == "sequential" and c != "sequential"  # a config, once joblib is there, wins
    assert same_outputs == "True" and same_masks == "True"


def test_in_process_only_where_nothing_else_can_be_asked(monkeypatch):
    monkeypatch.delitem(sys.modules, "joblib", raising=False)
    assert _parallel._in_process(None, None) and _parallel._in_process(1, None)
    assert not _parallel._in_process(2, None) and not _parallel._in_process(-1, None)
    assert not _parallel._in_process(1, "loky")
    monkeypatch.setitem(sys.modules, "joblib", object())
    assert not _parallel._in_process(1, None)


def test_in_process_runs_each_batch_when_asked():
    calls = []

    def batch(i):
        calls.append(i)
        return i * i

    gen = _parallel._InProcess()((batch, (i,), {}) for i in range(3))
    assert calls == []  # lazily, as joblib's streamed sequential backend
    assert next(gen) == 0 and calls == [0]
    assert list(gen) == [1, 4] and calls == [0, 1, 2]
    name, workers = _parallel._describe(_parallel._InProcess())
    assert (name, workers) == ("sequential", 1)
    assert np.isscalar(workers)
