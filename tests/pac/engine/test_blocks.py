"""The engine's block path (ensemble mechanisms): canonical blocks, same seeds per trial,
bit-identical for any n_jobs and batch size, equal to the one-trial path to float tolerance."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._blocks import DEFAULT_BLOCK_SIZE, block_size_of
from pacpriv.pac.engine._simulate import simulate

POOL = np.random.default_rng(0).normal(size=(30, 3))


class BlockMean:
    """``run_block`` evaluates every subset of a block at once; the seeds add a draw, so a row
    carries its trial's seed. Counts the calls of each form."""

    block_size = 4

    def __init__(self) -> None:
        self.blocks: list[int] = []

    def run_block(self, pool, masks, *, seeds):
        self.blocks.append(len(masks))
        w = masks.astype(float)
        means = (w @ pool) / np.maximum(w.sum(axis=1, keepdims=True), 1.0)
        noise = np.array([np.random.default_rng(s).normal() for s in seeds])
        return np.column_stack([means, noise])

    def __call__(self, subset, *, rng):
        mean = subset.mean(axis=0) if len(subset) else np.zeros(3)
        return np.append(mean, np.random.default_rng(rng.bit_generator.seed_seq).normal())


def _run(mech, **options):
    return simulate(mech, POOL, n_trials=10, rng=7,
                    execution=ExecutionOptions(progress=False, **options)).outputs


def test_blocks_match_the_one_trial_path_and_any_batching():
    mech = BlockMean()
    by_blocks = _run(mech)
    assert mech.blocks and max(mech.blocks) <= 4 and sum(mech.blocks) >= 10
    one_by_one = _run(BlockMean(), ensemble=False)
    np.testing.assert_allclose(by_blocks, one_by_one, rtol=0, atol=1e-12)
    for options in ({"batch_size": 1}, {"batch_size": 3}, {"n_jobs": 2, "backend": "threading"}):
        np.testing.assert_array_equal(_run(BlockMean(), **options), by_blocks)


def test_batches_end_on_block_boundaries():
    mech = BlockMean()
    _run(mech, batch_size=3)  # batches of 3 rounded up to 4: blocks [0,4), [4,8), [8,10)
    assert mech.blocks[-3:] == [4, 4, 2]


def test_block_size_of():
    assert block_size_of(BlockMean(), True) == 4
    assert block_size_of(BlockMean(), False) == 0
    assert block_size_of(lambda s: s, True) == 0

    class Default(BlockMean):
        block_size = None

    assert block_size_of(Default(), True) == DEFAULT_BLOCK_SIZE

    class Off(BlockMean):
        block_size = 0

    assert block_size_of(Off(), True) == 0

    class Bad(BlockMean):
        block_size = -1

    with pytest.raises(ValueError, match="block_size"):
        block_size_of(Bad(), True)


def test_a_block_of_the_wrong_shape_names_the_trial():
    class Short(BlockMean):
        def run_block(self, pool, masks, *, seeds):
            return super().run_block(pool, masks, seeds=seeds)[:-1]

    with pytest.raises(Exception, match=r"run_block returned an array of shape .* in trial 0"):
        _run(Short())


def test_a_mechanism_exit_inside_a_block_is_an_error():
    class Exits(BlockMean):
        def run_block(self, pool, masks, *, seeds):
            raise SystemExit(3)

    with pytest.raises(Exception, match="trial 0"):
        _run(Exits())


def test_the_ensemble_logistic_regression_simulates_by_blocks():
    """A real ensemble mechanism: the block path equals one training per trial (1e-12 in
    float64) and is bit-identical across n_jobs."""
    pytest.importorskip("torch")
    from pacpriv.ensemble import EnsembleLogisticRegression

    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(40, 4)), rng.integers(0, 3, size=40)
    mech = EnsembleLogisticRegression(n_features=4, n_classes=3, epochs=3, learning_rate=0.3,
                                      steps_per_epoch=2, public_seed=2)

    def run(**options):
        return simulate(mech, (X, y), n_trials=12, rng=3,
                        execution=ExecutionOptions(progress=False, **options)).outputs

    blocks = run()
    np.testing.assert_allclose(blocks, run(ensemble=False), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(blocks, run(n_jobs=2, batch_size=5))
