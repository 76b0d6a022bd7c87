"""A mechanism with the engine's block form runs a trial's 1 + k subsets through run_block."""

from __future__ import annotations

import numpy as np

from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.per_record import simulate_differences

POOL = np.random.default_rng(2).normal(size=(30, 3))


class NoisyMean:
    """Mean plus noise from ``rng`` (so θ must be shared by the pair), with ``run_block``."""

    block_size = 7

    def __init__(self) -> None:
        self.block_calls = 0
        self.sizes: list[int] = []

    def __call__(self, subset, rng):
        return subset.sum(axis=0) / 15.0 + rng.normal(size=3)

    def run_block(self, pool, masks, *, seeds):
        self.block_calls += 1
        self.sizes.append(len(masks))
        return np.stack([self(pool[m], np.random.default_rng(s)) for m, s in
                         zip(masks, seeds, strict=True)])


def test_block_path_equals_one_call_per_subset():
    """Same differences (the noise cancels in every pair: θ shared), in ⌈(1 + k)/B⌉ calls a
    trial; ``ensemble=False`` keeps the one-call path."""
    q = ExecutionOptions(progress=False)
    mech = NoisyMean()
    blocks = simulate_differences(mech, POOL, n_trials=4, records=np.arange(0, 30, 3), rng=9,
                                  execution=q)
    # every trial (the engine also re-runs some to check reproducibility): 1 + 10 subsets in
    # blocks of 7 and 4
    assert mech.block_calls >= 8 and sorted(set(mech.sizes)) == [4, 7]
    assert mech.sizes.count(7) == mech.sizes.count(4)
    plain = NoisyMean()
    ones = simulate_differences(plain, POOL, n_trials=4, records=np.arange(0, 30, 3), rng=9,
                                execution=ExecutionOptions(progress=False, ensemble=False))
    assert plain.block_calls == 0
    np.testing.assert_allclose(blocks.differences, ones.differences, atol=1e-12)
    np.testing.assert_allclose(blocks.outputs, ones.outputs, atol=1e-12)
    # the noise cancels: Δ_i = ±x_i / 15 exactly (up to round-off)
    recs = np.arange(0, 30, 3)
    np.testing.assert_allclose(np.abs(blocks.differences),
                               np.broadcast_to(np.abs(POOL[recs]) / 15.0, (4, 10, 3)),
                               atol=1e-12)
