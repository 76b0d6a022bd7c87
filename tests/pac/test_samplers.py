"""Tests of pacpriv.pac.samplers: the data distribution D as membership masks."""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pacpriv._random import MECHANISM_STREAM, SAMPLER_STREAM, stream_seed, trial_seed
from pacpriv.pac.samplers import (
    SAMPLERS,
    CallableSampler,
    ComplementaryPairsSampler,
    FixedSizeSampler,
    PoissonSampler,
    Sampler,
    as_sampler,
)


def _third(n_records, rng):
    """A user sampler: records whose uniform draw is below 1/3 (0/1 int mask)."""
    return (rng.random(n_records) < 1 / 3).astype(int)


class SamplerContract:
    """Checks every sampler must pass (skipped on its own, reused by subclasses)."""

    def make(self) -> Sampler:
        raise NotImplementedError

    def test_mask_shape_and_dtype(self):
        """A trial mask is a bool array of shape (n_records,)."""
        mask = self.make().trial_mask(17, root=np.random.SeedSequence(1), index=3)
        assert mask.shape == (17,) and mask.dtype == bool

    def test_same_seed_same_mask(self):
        """The mask depends only on (root seed, index)."""
        s = self.make()
        a = s.trial_mask(64, root=np.random.SeedSequence(5), index=7)
        b = s.trial_mask(64, root=np.random.SeedSequence(5), index=7)
        assert np.array_equal(a, b)

    def test_other_index_or_seed_differs(self):
        """Different trials or root seeds give different masks (64 records: collision ~0)."""
        s = self.make()
        a = s.trial_mask(64, root=np.random.SeedSequence(5), index=2)
        assert not np.array_equal(a, s.trial_mask(64, root=np.random.SeedSequence(5), index=4))
        assert not np.array_equal(a, s.trial_mask(64, root=np.random.SeedSequence(6), index=2))

    def test_masks_stack_trial_masks(self):
        """masks() stacks trial_mask(i) for i < n_trials with the same root."""
        s = self.make()
        stacked = s.masks(20, n_trials=6, rng=9)
        root = np.random.SeedSequence(9)
        expected = np.stack([s.trial_mask(20, root=root, index=i) for i in range(6)])
        assert np.array_equal(stacked, expected)

    def test_to_dict_json_and_pickle(self):
        """to_dict is JSON-serialisable and the sampler survives pickling unchanged."""
        s = self.make()
        assert json.loads(json.dumps(s.to_dict()))["name"] == s.name
        assert pickle.loads(pickle.dumps(s)).to_dict() == s.to_dict()

    @pytest.mark.parametrize("n", [1, 8_191, 8_192, 8_193, 3 * 8_192 + 5])
    def test_trial_mask_into_is_trial_mask(self, n):
        """trial_mask_into writes trial_mask's mask, bit for bit, into the row it is given
        (the engine's in-process trials draw straight into the stored row), for pool sizes
        around the block of uniforms the Poisson samplers draw at a time."""
        s = self.make_for_size(n)
        root = np.random.SeedSequence(11)
        for index in (0, 1, 6, 7):
            row = np.ones(n, dtype=bool)
            got = s.trial_mask_into(row, root=root, index=index)
            assert got is row
            assert np.array_equal(row, np.asarray(s.trial_mask(n, root=root, index=index),
                                                  dtype=bool))

    def make_for_size(self, n: int) -> Sampler:
        return self.make()

    def make_for_empty_pool(self) -> Sampler:
        return self.make()

    def test_empty_pool(self):
        """A pool of zero records gives an empty mask."""
        s = self.make_for_empty_pool()
        assert s.trial_mask(0, root=np.random.SeedSequence(0), index=0).shape == (0,)


class TestPoissonContract(SamplerContract):
    def make(self):
        return PoissonSampler(0.5)


class TestFixedSizeContract(SamplerContract):
    def make(self):
        return FixedSizeSampler(10)

    def make_for_size(self, n):
        return FixedSizeSampler(max(1, n // 3))

    def test_empty_pool(self):
        """No subset size >= 1 fits a pool of zero records: a ValueError naming both."""
        with pytest.raises(ValueError, match=r"`subset_size` must be <= n_records = 0; got 1"):
            FixedSizeSampler(1).trial_mask(0, root=np.random.SeedSequence(0), index=0)


class TestPairsContract(SamplerContract):
    def make(self):
        return ComplementaryPairsSampler()


class TestCallableContract(SamplerContract):
    def make(self):
        return CallableSampler(_third)


@dataclass(frozen=True)
class _EveryOther(PoissonSampler):
    """A Poisson subclass with its own draw: every other record (deterministic)."""

    def draw(self, n_records, rng):
        return np.arange(n_records) % 2 == 0


def test_trial_mask_into_keeps_a_subclass_draw():
    """A subclass that overrides draw keeps it in trial_mask_into (the block-wise fast path
    is PoissonSampler's own draw only), and a Poisson rate other than ½ is honoured."""
    root = np.random.SeedSequence(3)
    row = np.zeros(10, dtype=bool)
    _EveryOther().trial_mask_into(row, root=root, index=0)
    assert row.tolist() == [True, False] * 5
    low = PoissonSampler(0.1).trial_mask_into(np.zeros(50_000, dtype=bool), root=root, index=2)
    assert 0.09 < low.mean() < 0.11
    assert np.array_equal(low, PoissonSampler(0.1).trial_mask(50_000, root=root, index=2))


def test_stream_seed_is_child_of_trial_seed():
    """stream_seed(root, i, s) is SeedSequence(entropy, spawn_key=(i, s))."""
    root = np.random.SeedSequence(123)
    for stream in (SAMPLER_STREAM, MECHANISM_STREAM):
        ss = stream_seed(root, 4, stream)
        assert ss.spawn_key == (4, stream) and ss.entropy == 123
        fresh = np.random.SeedSequence(123)  # spawn() is stateful: use a fresh root
        expected = fresh.spawn(5)[4].spawn(2)[stream].generate_state(4)
        assert np.array_equal(ss.generate_state(4), expected)


def test_poisson_mask_matches_explicit_draw():
    """Poisson mask = default_rng(sampler stream).random(n) < rate (independent oracle)."""
    root = np.random.SeedSequence(77)
    mask = PoissonSampler(0.3).trial_mask(50, root=root, index=11)
    expected = np.random.default_rng(root.spawn(12)[11].spawn(1)[0]).random(50) < 0.3
    assert np.array_equal(mask, expected)


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_poisson_inclusion_frequency(rate):
    """Inclusion frequency over 200 x 100 draws is consistent with the rate (binomial test)."""
    masks = PoissonSampler(rate).masks(100, n_trials=200, rng=2024)
    result = stats.binomtest(int(masks.sum()), masks.size, rate)
    assert result.pvalue > 1e-3


@pytest.mark.parametrize(("rate", "why"), [(0.0, "no record would ever be included"),
                                           (1.0, "every record would always be included")])
def test_poisson_degenerate_rates_refused(rate, why):
    """Rates 0 and 1 make membership public: refused at construction, saying why."""
    with pytest.raises(ValueError, match=rf"^`sampling_rate` must be in \(0, 1\) exclusive; "
                                         rf"got {rate}: {why}, so membership is not secret"):
        PoissonSampler(rate)


def test_poisson_prior_and_dict():
    """The Poisson prior is the sampling rate, also in to_dict."""
    s = PoissonSampler(0.25)
    assert s.prior == 0.25 and s.membership_prior(10) == 0.25
    assert s.to_dict() == {"name": "poisson", "sampling_rate": 0.25, "prior": 0.25}


def test_poisson_rejects_rate_out_of_range():
    """sampling_rate outside [0, 1] is a ValueError naming it."""
    with pytest.raises(ValueError,
                       match=r"`sampling_rate` must be in \(0, 1\) exclusive; got 1.5\.$"):
        PoissonSampler(1.5)


def test_fixed_size_exact_count_and_uniformity():
    """Every fixed-size mask has exactly k records; inclusion frequency is k/n (chi-square)."""
    masks = FixedSizeSampler(5).masks(20, n_trials=400, rng=3)
    assert (masks.sum(axis=1) == 5).all()
    counts = masks.sum(axis=0)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_fixed_size_prior():
    """The fixed-size prior is subset_size / n_records and unknown without n."""
    s = FixedSizeSampler(3)
    assert s.prior is None and s.membership_prior(12) == 0.25


def test_fixed_size_too_large():
    """subset_size > n_records is a ValueError naming both."""
    with pytest.raises(ValueError, match=r"`subset_size` must be <= n_records = 4; got 5"):
        FixedSizeSampler(5).trial_mask(4, root=np.random.SeedSequence(0), index=0)


def test_fixed_size_negative():
    """A negative subset_size is rejected."""
    with pytest.raises(ValueError, match=r"`subset_size` must be >= 1; got -1\.$"):
        FixedSizeSampler(-1)
    with pytest.raises(ValueError, match=r"`subset_size` must be >= 1; got 0: every subset "
                                         r"would be empty, so membership is not secret"):
        FixedSizeSampler(0)


def test_pairs_are_complements():
    """Trial 2k+1 is the complement of trial 2k; each record is in exactly half the trials."""
    masks = ComplementaryPairsSampler().masks(40, n_trials=10, rng=8)
    assert np.array_equal(masks[1::2], ~masks[0::2])
    assert (masks.sum(axis=0) == 5).all()


def test_pairs_odd_last_unpaired():
    """With odd n_trials the last trial is pair k's first member, a Poisson-½ draw."""
    root = np.random.SeedSequence(8)
    masks = ComplementaryPairsSampler().masks(40, n_trials=5, rng=8)
    expected = np.random.default_rng(stream_seed(root, 4, SAMPLER_STREAM)).random(40) < 0.5
    assert np.array_equal(masks[4], expected)
    assert ComplementaryPairsSampler().prior == 0.5


def test_callable_accepts_01_ints():
    """A 0/1 integer mask is converted to bool."""
    mask = CallableSampler(_third).trial_mask(30, root=np.random.SeedSequence(0), index=0)
    assert mask.dtype == bool and 0 < mask.sum() < 30


def test_callable_wrong_shape_names_trial():
    """A mask of the wrong shape is a ValueError naming the trial."""
    s = CallableSampler(lambda n, rng: np.ones(n + 1, dtype=bool))
    with pytest.raises(ValueError, match=r"shape \(5,\) in trial 3; got shape \(6,\)"):
        s.trial_mask(5, root=np.random.SeedSequence(0), index=3)


def test_callable_non_binary_values():
    """A mask with values other than 0/1 is a TypeError naming the trial."""
    s = CallableSampler(lambda n, rng: np.full(n, 0.5))
    with pytest.raises(TypeError, match=r"boolean \(or 0/1\) mask in trial 2"):
        s.trial_mask(5, root=np.random.SeedSequence(0), index=2)


def test_callable_draw_without_trial():
    """draw() validates too, without a trial index in the message."""
    s = CallableSampler(lambda n, rng: np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match=r"shape \(5,\); got shape \(3,\)"):
        s.draw(5, np.random.default_rng(0))


def test_callable_not_callable():
    """CallableSampler needs a callable."""
    with pytest.raises(TypeError, match="`func` must be callable; got int"):
        CallableSampler(3)


def test_callable_to_dict_names_function():
    """to_dict of a callable sampler names the function and hashes its source."""
    d = CallableSampler(_third, prior=1 / 3).to_dict()
    assert d["func"].endswith("._third") and len(d["source_sha256"]) == 64
    assert d["prior"] == pytest.approx(1 / 3)


def test_as_sampler_normalises():
    """None -> Poisson-½, names -> built-ins, callables -> CallableSampler, samplers -> same."""
    assert as_sampler(None) == PoissonSampler(0.5)
    assert as_sampler("poisson") == PoissonSampler(0.5)
    assert isinstance(as_sampler("pairs"), ComplementaryPairsSampler)
    s = FixedSizeSampler(2)
    assert as_sampler(s) is s
    assert isinstance(as_sampler(_third), CallableSampler)


def test_as_sampler_unknown_name():
    """An unknown sampler name lists the registered ones; a name whose sampler needs
    parameters says which object to give."""
    with pytest.raises(ValueError, match=r"must be one of poisson, fixed, pairs.*; got 'uniform'"):
        as_sampler("uniform")
    with pytest.raises(ValueError, match=r"'fixed' needs its parameters: give FixedSizeSampler"):
        as_sampler("fixed")
    assert as_sampler("complementary_pairs") == ComplementaryPairsSampler()


def test_as_sampler_bad_type():
    """A non-callable, non-sampler object is a TypeError."""
    with pytest.raises(TypeError, match="`sampler` must be None, a Sampler, a callable"):
        as_sampler(0.5)


@pytest.mark.parametrize(
    "s", [PoissonSampler(0.3), FixedSizeSampler(4), ComplementaryPairsSampler()]
)
def test_sampler_from_dict_round_trip(s):
    """Built-in samplers are rebuilt from their to_dict description through the registry."""
    assert SAMPLERS.from_dict(s.to_dict()) == s


def test_sampler_from_dict_callable():
    """A callable sampler cannot be rebuilt from its description (not registered)."""
    with pytest.raises(ValueError, match="`sampler` must be one of poisson, fixed, pairs"):
        SAMPLERS.from_dict(CallableSampler(_third).to_dict())


@pytest.mark.parametrize("n_trials", [0, 1, 6, 7])
def test_independent_rows(n_trials):
    """Every trial of an i.i.d. sampler; one of each complementary pair (the even ones)."""
    np.testing.assert_array_equal(PoissonSampler().independent_rows(n_trials),
                                  np.arange(n_trials))
    rows = ComplementaryPairsSampler().independent_rows(n_trials)
    np.testing.assert_array_equal(rows, np.arange(0, n_trials, 2))
    masks = ComplementaryPairsSampler().masks(8, n_trials=n_trials, rng=3)
    if n_trials > 1:  # the kept rows are not complements of one another
        assert not np.array_equal(masks[rows[0]], ~masks[rows[-1]]) or rows.size == 1


def test_declared_properties():
    """Only Poisson draws independent Bernoulli memberships; pairs come two trials a draw."""
    built_in = ("poisson", "fixed", "pairs")
    assert [SAMPLERS[n].independent_memberships for n in built_in] == [True, False, False]
    assert [SAMPLERS[n].trials_per_draw for n in built_in] == [1, 1, 2]
    assert CallableSampler(_third).trials_per_draw == 1


def test_describe():
    """The report wording of each registered sampler names its parameters."""
    assert "probability 0.3 (about 30% of the pool)" in PoissonSampler(0.3).describe()
    assert FixedSizeSampler(7).describe() == "a random secret subset of 7 records"
    assert "complementary pairs" in ComplementaryPairsSampler().describe()
    assert Sampler.describe_dict({"name": "unknown"}).endswith("sampler 'unknown'")
    assert Sampler.describe_dict(PoissonSampler(0.25).to_dict()) == PoissonSampler(0.25).describe()


def test_trial_seed_consistency():
    """The sampler stream is trial_seed(trial_seed(root, i), 0) (documented contract)."""
    root = np.random.SeedSequence(31)
    a = stream_seed(root, 6, SAMPLER_STREAM).generate_state(2)
    b = trial_seed(trial_seed(root, 6), 0).generate_state(2)
    assert np.array_equal(a, b)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    k=st.integers(1, 40),
    index=st.integers(0, 10**6),
    seed=st.integers(0, 2**63),
)
def test_fixed_size_invariants(n, k, index, seed):
    """Fixed-size masks have exactly min(k, n) records and are reproducible (size 1 too)."""
    k = min(k, n)
    s = FixedSizeSampler(k)
    root = np.random.SeedSequence(seed)
    mask = s.trial_mask(n, root=root, index=index)
    assert mask.shape == (n,) and mask.sum() == k
    assert np.array_equal(mask, s.trial_mask(n, root=np.random.SeedSequence(seed), index=index))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 40), pair=st.integers(0, 10**6), seed=st.integers(0, 2**63))
def test_pairs_invariant(n, pair, seed):
    """For any pool size and pair index the two masks are complements."""
    s, root = ComplementaryPairsSampler(), np.random.SeedSequence(seed)
    a = s.trial_mask(n, root=root, index=2 * pair)
    b = s.trial_mask(n, root=root, index=2 * pair + 1)
    assert np.array_equal(a, ~b)


@pytest.mark.parametrize("size", [2**62 + 1, 10**400])
def test_huge_subset_size_is_one_line_error_naming_it(size):
    """A new user's --subset-size 10**400 ended in OverflowError (subset_size / n_records)."""
    from pacpriv.pac.samplers import FixedSizeSampler

    with pytest.raises(ValueError, match=r"subset_size.*at most"):
        FixedSizeSampler(subset_size=size)


def test_the_smallest_rate_message_states_a_limit_above_the_refused_value():
    """``5.55e-17`` was refused with "must be in [5.55e-17, 1)": the limit rounded to the value."""
    import re

    with pytest.raises(ValueError) as info:
        PoissonSampler(5.55e-17)
    low = float(re.search(r"must be in \[([^,]+), 1\)", str(info.value)).group(1))
    assert low > 5.55e-17 and 1.0 - low < 1.0 and 1.0 - 5.55e-17 == 1.0
