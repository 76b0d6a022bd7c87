"""The sequential path: trials run in this process and write straight into the store."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from pacpriv.exceptions import MechanismError
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._simulate import simulate
from pacpriv.pac.samplers import ComplementaryPairsSampler, FixedSizeSampler, as_sampler

from . import _engine_mechs as mechs

QUIET = ExecutionOptions(progress=False)
POOL = np.linspace(-1.0, 2.0, 40)


class _Reused:
    """A mechanism that returns one buffer of its own, overwritten on every call."""

    def __init__(self) -> None:
        self.buf = np.zeros(2)

    def __call__(self, subset):
        self.buf[0], self.buf[1] = subset.sum(), len(subset)
        return self.buf


@pytest.mark.parametrize("sampler", [None, ComplementaryPairsSampler(), FixedSizeSampler(7)])
def test_in_process_rows_equal_the_workers_rows(sampler):
    """Outputs and masks of the in-process path equal, bit for bit, those of two threading
    workers (which return their batches to the parent) and of trial_mask per trial."""
    plain = simulate(mechs.noisy_sum, POOL, n_trials=23, rng=5, sampler=sampler, execution=QUIET)
    threads = simulate(mechs.noisy_sum, POOL, n_trials=23, rng=5, sampler=sampler,
                       execution=ExecutionOptions(n_jobs=2, backend="threading", progress=False))
    assert (plain.backend, plain.n_jobs) == ("sequential", 1)
    assert plain.outputs.tobytes() == threads.outputs.tobytes()
    assert np.array_equal(plain.masks, threads.masks)
    root = np.random.SeedSequence(**plain.root_seed)
    drawn = as_sampler(sampler)
    for i in range(23):
        assert np.array_equal(plain.masks[i], drawn.trial_mask(40, root=root, index=i))


def test_a_reused_output_buffer_is_copied_per_trial():
    """A mechanism that returns the same (overwritten) array every call still gives each
    trial its own row: the row is copied when the trial ends."""
    res = simulate(_Reused(), POOL, n_trials=9, rng=2, execution=QUIET)
    expected = np.stack([[POOL[m].sum(), m.sum()] for m in res.masks])
    np.testing.assert_array_equal(res.outputs, expected)
    assert len({row.tobytes() for row in res.outputs}) > 1


def test_failure_keeps_the_finished_rows_and_names_the_trial():
    """A failing trial on the in-process path stops the run at that trial, with its index."""
    flags = simulate(mechs.flag_value, POOL, n_trials=40, rng=3, execution=QUIET).outputs[:, 0]
    first = int(np.flatnonzero(flags < mechs.FAIL_RATE)[0])
    with pytest.raises(MechanismError) as info:
        simulate(mechs.fail_flagged, POOL, n_trials=40, rng=3, execution=QUIET)
    assert info.value.trial_index == first


def test_a_plain_sequential_run_does_not_import_joblib():
    """n_jobs=None without a joblib configuration: the trials run here and joblib (about
    0.07 s to import) is never loaded."""
    code = ("import sys, numpy as np\n"
            "from pacpriv.pac.engine import ExecutionOptions\n"
            "from pacpriv.pac.engine._simulate import simulate\n"
            "r = simulate(lambda s: np.array([s.sum()]), np.arange(30.0), n_trials=5, rng=0,\n"
            "             execution=ExecutionOptions(progress=False))\n"
            "print(r.backend, r.n_jobs, 'joblib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == ["sequential", "1", "False"]
