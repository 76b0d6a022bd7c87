"""A black box's per-record trial runs as record blocks on the engine (pac/per_record/_units)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from pacpriv.exceptions import MechanismError, NotReproducibleWarning
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.per_record import simulate_differences
from pacpriv.pac.per_record._distances import simulate_distances
from pacpriv.pac.per_record._math import NoiseGeometry
from pacpriv.pac.samplers import PoissonSampler

pytestmark = pytest.mark.usefixtures("one_native_thread")

POOL = np.random.default_rng(4).normal(size=(23, 2))
RECORDS = np.array([0, 3, 4, 7, 8, 11, 15, 16, 19, 22])
_STOP = "PACPRIV_TEST_STOP_AFTER"


def noisy_sum(subset, rng):
    """Sum plus noise from ``rng`` (θ must be shared by a pair: the noise cancels in Δ)."""
    return subset.sum(axis=0) + rng.normal(size=2)


def interrupted_sum(subset, rng):
    """``noisy_sum``, raising once the call budget in the environment runs out (no state in
    the function, so the checkpoint fingerprint is the same with and without the budget)."""
    left = os.environ.get(_STOP)
    if left is not None:
        if int(left) <= 0:
            raise RuntimeError("stopped")
        os.environ[_STOP] = str(int(left) - 1)
    return subset.sum(axis=0) + rng.normal(size=2)


def _opts(**kw) -> ExecutionOptions:
    return ExecutionOptions(progress=False, **kw)


def test_blocks_are_bit_identical_for_n_jobs_backend_and_block_size():
    runs = [simulate_differences(noisy_sum, POOL, n_trials=4, records=RECORDS, rng=11,
                                 execution=_opts(**kw))
            for kw in ({}, {"record_block": 3}, {"record_block": 4, "n_jobs": 2},
                       {"record_block": 1, "n_jobs": 2, "backend": "threading"})]
    for other in runs[1:]:
        np.testing.assert_array_equal(runs[0].differences, other.differences)
        np.testing.assert_array_equal(runs[0].outputs, other.outputs)
        np.testing.assert_array_equal(runs[0].simulation.masks, other.simulation.masks)
        assert other.simulation.reproducible is True
    assert runs[2].simulation.n_jobs == 2


def test_blocks_equal_an_independent_computation():
    """Each trial's mask is the Poisson sampler's, and Δᵢ = ±xᵢ (the shared noise cancels),
    with the sign of record i's membership; f(S_t) matches a direct call with the trial's
    mechanism seed."""
    from pacpriv._random import MECHANISM_STREAM, stream_seed

    res = simulate_differences(noisy_sum, POOL, n_trials=3, records=RECORDS, rng=5,
                               execution=_opts(record_block=4))
    root = np.random.SeedSequence(**res.simulation.root_seed)
    smp = PoissonSampler(0.5)
    for t in range(3):
        mask = smp.trial_mask(POOL.shape[0], root=root, index=t)
        np.testing.assert_array_equal(res.simulation.masks[t], mask)
        gen = np.random.default_rng(stream_seed(root, t, MECHANISM_STREAM))
        np.testing.assert_array_equal(res.outputs[t], noisy_sum(POOL[mask], gen))
        np.testing.assert_allclose(res.differences[t], POOL[RECORDS], atol=1e-12)


def test_distances_are_bit_identical_across_blocks_and_workers():
    geom = NoiseGeometry.from_spec(np.array([1.0, 4.0]), 2)
    kw = dict(n_trials=3, sampler=PoissonSampler(0.5), records=RECORDS, n_records=23, rng=2)
    a = simulate_distances(noisy_sum, POOL, geom, execution=_opts(), **kw)
    b = simulate_distances(noisy_sum, POOL, geom, execution=_opts(record_block=3, n_jobs=2),
                           **kw)
    np.testing.assert_array_equal(a.distances, b.distances)
    np.testing.assert_array_equal(a.outputs, b.outputs)
    expect = np.sqrt(POOL[RECORDS, 0] ** 2 + POOL[RECORDS, 1] ** 2 / 4.0)
    np.testing.assert_allclose(a.distances, np.broadcast_to(expect, (3, RECORDS.size)),
                               atol=1e-12)


def test_interrupted_run_resumes_by_block_with_identical_result(tmp_path, monkeypatch):
    """Blocks of 3, 3, 3 and 1 records (4 + 4 + 4 + 2 = 14 calls a trial): stop after 40 calls
    (trials 0 and 1 and three blocks of trial 2; the 41st call is in its last block), resume
    from the checkpoint and get the uninterrupted result. Kept blocks are not re-run: the
    resume calls f 2 + 28 times for the 11 missing blocks plus at most 4 + 4 + 4 for the
    checks (two recorded blocks, the first new one), under the 42 of trial granularity."""
    from pacpriv.pac.engine import _reproducibility

    monkeypatch.setattr(_reproducibility, "_RERUN_BUDGET_S", 0.0)  # one re-run after the run
    ck = tmp_path / "ck"
    opts = _opts(record_block=3, checkpoint=ck, batch_size=1)
    monkeypatch.setenv(_STOP, "40")
    with pytest.raises(MechanismError,
                       match=r"in trial 2, record block 3 of 4 \(blocks of 3 audited records; "):
        simulate_differences(interrupted_sum, POOL, n_trials=5, records=RECORDS, rng=8,
                             execution=opts)
    budget = 10**6
    monkeypatch.setenv(_STOP, str(budget))
    resumed = simulate_differences(interrupted_sum, POOL, n_trials=5, records=RECORDS, rng=8,
                                   execution=opts)
    calls = budget - int(os.environ[_STOP])
    assert 30 + 2 <= calls <= 30 + 12
    assert resumed.simulation.resumed_trials == 2  # whole trials among the 11 blocks kept
    monkeypatch.delenv(_STOP)
    fresh = simulate_differences(interrupted_sum, POOL, n_trials=5, records=RECORDS, rng=8,
                                 execution=_opts(record_block=5))
    np.testing.assert_array_equal(resumed.differences, fresh.differences)
    np.testing.assert_array_equal(resumed.outputs, fresh.outputs)


def test_a_changed_block_size_is_not_the_same_checkpoint(tmp_path):
    from pacpriv.exceptions import CheckpointError

    ck = tmp_path / "ck"
    simulate_differences(noisy_sum, POOL, n_trials=2, records=RECORDS, rng=1,
                         execution=_opts(record_block=3, checkpoint=ck))
    with pytest.raises(CheckpointError):
        simulate_differences(noisy_sum, POOL, n_trials=2, records=RECORDS, rng=1,
                             execution=_opts(record_block=4, checkpoint=ck))


def test_randomness_outside_rng_is_caught_across_blocks():
    def leaky(subset):
        return subset.sum(axis=0) + np.random.normal(size=2)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = simulate_differences(leaky, POOL, n_trials=2, records=RECORDS, rng=0,
                                   execution=_opts(record_block=3))
    assert res.simulation.reproducible is False
    assert any(issubclass(w.category, NotReproducibleWarning) for w in caught)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True])
def test_record_block_is_validated(bad):
    with pytest.raises((TypeError, ValueError), match="record_block"):
        ExecutionOptions(record_block=bad)


@pytest.mark.parametrize("solver", ["logistic", "linear_svm"])
def test_certified_fast_distances_bound_the_exact_ones(solver):
    """Independent: the same mechanism as a black box (exact fits through record blocks) on
    the same seeds; the fast path's certified distances (difference_error added) are never
    below the exact distances and differ from them by at most that error."""
    from pacpriv.mechanisms import make_linear_svm, make_logistic

    rng = np.random.default_rng(6)
    X = rng.normal(size=(40, 2))
    y = (X[:, 0] + 0.3 * rng.normal(size=40) > 0).astype(int)
    make = make_logistic if solver == "logistic" else make_linear_svm
    mech = make(classes=(0, 1), C=0.5, solver="newton")

    def black_box(subset):
        return mech(subset)

    geom = NoiseGeometry.from_spec(0.01, 3)
    kw = dict(n_trials=3, sampler=PoissonSampler(0.5), records=np.arange(40), n_records=40,
              rng=4)
    fast = simulate_distances(mech, (X, y), geom, execution=_opts(), **kw)
    exact = simulate_distances(black_box, (X, y), geom, execution=_opts(record_block=16),
                               **kw)
    np.testing.assert_array_equal(fast.simulation.masks, exact.simulation.masks)
    pad = mech.difference_error / 0.1
    assert np.all(fast.distances >= exact.distances)
    assert np.all(fast.distances - exact.distances <= 2 * pad)
