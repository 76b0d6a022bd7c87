"""Tests for pacpriv.dpsgd.allocation: the random-allocation law and its generators."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

torch = pytest.importorskip("torch")

from pacpriv.dpsgd.allocation import (  # noqa: E402
    RandomAllocationSampler,
    random_allocation,
    secure_generator,
    torch_generator,
    torch_generators,
)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 200), m=st.integers(1, 40), seed=st.integers(0, 2**32))
def test_every_record_exactly_once_per_epoch(n, m, seed):
    """Each epoch's steps partition range(n): every record once, M steps, sorted indices."""
    batches = random_allocation(n, steps_per_epoch=m, generator=_gen(seed))
    assert len(batches) == m
    allocated = torch.cat(batches).sort().values
    assert torch.equal(allocated, torch.arange(n))
    for b in batches:
        assert b.dtype == torch.int64
        assert torch.all(b[1:] > b[:-1])


def test_batch_sizes_binomial_chi_square():
    """Batch sizes follow Binomial(n, 1/M): chi-square goodness of fit on independent draws."""
    n, m, epochs = 60, 6, 4000
    g = _gen(12345)
    # One step per epoch (rotating) so the sampled sizes are independent Binomial(n, 1/M).
    sizes = np.array(
        [random_allocation(n, steps_per_epoch=m, generator=g)[e % m].numel() for e in range(epochs)]
    )
    binom = stats.binom(n, 1 / m)
    edges = [0, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, n + 1]  # cells with expected count >= 5
    observed = np.array([np.sum((sizes >= a) & (sizes < b)) for a, b in itertools.pairwise(edges)])
    expected = np.array([binom.cdf(b - 1) - binom.cdf(a - 1) for a, b in itertools.pairwise(edges)])
    assert np.all(expected * epochs >= 5)
    p = stats.chisquare(observed, expected * epochs).pvalue
    assert p > 1e-3
    # The test has power: a Binomial(n, 1/(M+1)) law is rejected on the same sample size.
    wrong = np.array(
        [stats.binom(n, 1 / (m + 1)).cdf(b - 1) - stats.binom(n, 1 / (m + 1)).cdf(a - 1)
         for a, b in itertools.pairwise(edges)]
    )
    assert stats.chisquare(observed, wrong / wrong.sum() * epochs).pvalue < 1e-6


def test_each_record_step_is_uniform():
    """A fixed record's step is uniform over the M steps (chi-square), independent per epoch."""
    n, m, epochs = 7, 5, 3000
    g = _gen(7)
    steps = []
    for _ in range(epochs):
        batches = random_allocation(n, steps_per_epoch=m, generator=g)
        steps.append(next(j for j, b in enumerate(batches) if 3 in b.tolist()))
    counts = np.bincount(steps, minlength=m)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_empty_steps_are_kept():
    """With more steps than records, empty steps appear as empty tensors, not dropped."""
    batches = random_allocation(3, steps_per_epoch=50, generator=_gen(0))
    assert len(batches) == 50
    assert sum(b.numel() == 0 for b in batches) >= 47


def test_same_generator_seed_same_allocation():
    """Same seed gives the same allocation; a different seed gives a different one."""
    a = random_allocation(100, steps_per_epoch=10, generator=_gen(1))
    b = random_allocation(100, steps_per_epoch=10, generator=_gen(1))
    c = random_allocation(100, steps_per_epoch=10, generator=_gen(2))
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a, c, strict=True))


def test_allocation_does_not_touch_global_torch_rng():
    """Allocation draws only from the injected generator, never torch's global state."""
    state = torch.random.get_rng_state()
    random_allocation(100, steps_per_epoch=10, generator=_gen(1))
    list(RandomAllocationSampler(10, steps_per_epoch=3, generator=_gen(2)))
    assert torch.equal(state, torch.random.get_rng_state())


def test_sampler_yields_fresh_epoch_each_iteration():
    """The batch sampler yields M lists per pass, a partition each time, re-randomised."""
    sampler = RandomAllocationSampler(40, steps_per_epoch=4, generator=_gen(3))
    assert len(sampler) == 4
    first, second = list(sampler), list(sampler)
    for epoch in (first, second):
        assert len(epoch) == 4
        assert sorted(i for b in epoch for i in b) == list(range(40))
    assert first != second


def test_sampler_with_dataloader():
    """The sampler works as a DataLoader batch_sampler (no empty steps here)."""
    data = torch.utils.data.TensorDataset(torch.arange(30.0))
    loader = torch.utils.data.DataLoader(
        data, batch_sampler=RandomAllocationSampler(30, steps_per_epoch=2, generator=_gen(0))
    )
    seen = torch.cat([batch[0] for batch in loader]).sort().values
    assert torch.equal(seen, torch.arange(30.0))


def test_torch_generators_reproducible_and_independent():
    """Generators from the same seed agree; the allocation and noise children differ."""
    a1, n1 = torch_generators(5)
    a2, _ = torch_generators(np.random.SeedSequence(5))
    x = torch.rand(4, generator=a1)
    assert torch.equal(x, torch.rand(4, generator=a2))
    assert not torch.equal(torch.rand(4, generator=n1), torch.rand(4, generator=_gen(0)))
    assert a1.initial_seed() != n1.initial_seed()
    seed = np.random.SeedSequence(9)
    assert torch_generator(seed).initial_seed() == torch_generator(seed).initial_seed()


def test_secure_generator_is_fresh():
    """Two secure generators have different seeds (64 bits of OS entropy each)."""
    assert secure_generator().initial_seed() != secure_generator().initial_seed()


def test_error_negative_records():
    """n_records < 0 is rejected with a message naming the argument."""
    with pytest.raises(ValueError, match="n_records"):
        random_allocation(-1, steps_per_epoch=2, generator=_gen(0))


def test_error_zero_steps():
    """steps_per_epoch < 1 is rejected with a message naming the argument."""
    with pytest.raises(ValueError, match="steps_per_epoch"):
        random_allocation(5, steps_per_epoch=0, generator=_gen(0))


def test_error_generator_type():
    """A numpy Generator instead of a torch.Generator is a TypeError."""
    with pytest.raises(TypeError, match=r"torch\.Generator"):
        random_allocation(5, steps_per_epoch=2, generator=np.random.default_rng(0))


def test_error_sampler_generator_type():
    """The sampler rejects a generator that is not a torch.Generator."""
    with pytest.raises(TypeError, match=r"torch\.Generator or None"):
        RandomAllocationSampler(5, steps_per_epoch=2, generator=0)


def test_error_seed_type():
    """torch_generator needs a SeedSequence."""
    with pytest.raises(TypeError, match="SeedSequence"):
        torch_generator(3)
