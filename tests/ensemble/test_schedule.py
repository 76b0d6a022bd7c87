"""Batch orders: the torch definitions they claim to follow, and the synchronous step plan."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pacpriv._random import trial_seed  # noqa: E402
from pacpriv.dpsgd.allocation import random_allocation  # noqa: E402
from pacpriv.ensemble import (  # noqa: E402
    BATCH_STREAM,
    FullBatch,
    RandomAllocation,
    Shuffled,
    torch_generator,
)
from pacpriv.ensemble._schedule import Schedule, batch_positions  # noqa: E402


def test_shuffled_batches_are_randperm_slices():
    """Epoch 1 equals torch's BatchSampler(RandomSampler(generator=g), b, drop_last=False);
    each later epoch is the next torch.randperm(n) of the same generator (RandomSampler itself
    would draw one extra permutation per pass, and a DataLoader one seed per iterator)."""
    n, b = 23, 5
    ours = torch.Generator().manual_seed(3)
    sampler = torch.utils.data.BatchSampler(
        torch.utils.data.RandomSampler(range(n), generator=torch.Generator().manual_seed(3)),
        batch_size=b, drop_last=False)
    first = [p.tolist() for p in batch_positions(n, Shuffled(b), ours)]
    assert first == list(sampler)
    assert [len(p) for p in first] == [5, 5, 5, 5, 3]
    theirs = torch.Generator().manual_seed(3)
    torch.randperm(n, generator=theirs)
    second = torch.randperm(n, generator=theirs).tolist()
    assert [p.tolist() for p in batch_positions(n, Shuffled(b), ours)] == [
        second[i:i + b] for i in range(0, n, b)]


def test_random_allocation_batches_are_those_of_the_dpsgd_sampler():
    n, m = 31, 4
    ours, theirs = torch.Generator().manual_seed(8), torch.Generator().manual_seed(8)
    for _ in range(3):
        mine = [p.tolist() for p in batch_positions(n, RandomAllocation(m), ours)]
        assert mine == [t.tolist() for t in random_allocation(n, steps_per_epoch=m,
                                                              generator=theirs)]


@pytest.mark.parametrize("batching", [FullBatch(), Shuffled(4), RandomAllocation(3)],
                         ids=["full", "shuffled", "allocation"])
def test_the_step_plan_holds_each_models_own_batches(batching):
    """Each model's rows of the synchronous plan are its reference batches (as sets; pool
    indices), padding has weight 0, and a model with fewer batches sits the rest out."""
    rng = np.random.default_rng(0)
    subsets = [np.flatnonzero(rng.random(30) < q) for q in (0.5, 0.2, 0.9)] + [np.zeros(0, int)]
    seeds = [trial_seed(np.random.SeedSequence(4), k) for k in range(4)]
    plan = Schedule(batching, subsets, seeds).epoch()
    for k, (subset, seed) in enumerate(zip(subsets, seeds, strict=True)):
        if subset.size == 0:
            assert not plan.active[k].any()
            continue
        gen = None if isinstance(batching, FullBatch) else torch_generator(
            trial_seed(seed, BATCH_STREAM))
        expected = [set(subset[p].tolist()) for p in batch_positions(subset.size, batching, gen)]
        got = []
        for j in range(plan.n_steps):
            index, weight = plan.step(j)
            if plan.active[k, j]:
                got.append(set(index[k][weight[k] == 1].tolist()))
            else:
                assert weight[k].sum() == 0
        assert got == expected
