"""Issue 12 item 3 (priors come from the sampler or are bounded, never a silent ½) and
issue 14 item 6 (degenerate samplers are refused before any trial runs)."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from pacpriv.pac.bounds._ledger import PrivacyLedger
from pacpriv.pac.bounds._posterior import (
    mi_budget_for_accuracy,
    pinsker_bound,
    posterior_success_rate,
)
from pacpriv.pac.bounds._prior import blind_guess_upper_bound, resolve_membership_prior
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.job import run_pac
from pacpriv.pac.samplers import (
    CallableSampler,
    ComplementaryPairsSampler,
    FixedSizeSampler,
    PoissonSampler,
    as_sampler,
)
from pacpriv.pac.wrapper import PacPrivateFunction

QUIET = ExecutionOptions(progress=False)

POOL = np.linspace(0.0, 1.0, 200).reshape(-1, 1)


class CountingMean:
    """Mechanism that counts its calls (to prove no trial ran)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, subset):
        self.calls += 1
        return np.array([subset.mean() if len(subset) else 0.5])


def include_90(n_records, rng):
    """Each record independently with probability 0.9 (declares nothing)."""
    return rng.random(n_records) < 0.9


def _run(sampler, mech=None, **kw):
    mech = mech or CountingMean()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_pac(mech, POOL, mi_budget=0.05, n_trials=kw.pop("n_trials", 300), rng=1,
                       sampler=sampler, execution=QUIET, release=False, **kw)


# --- issue 12 item 3: priors ---------------------------------------------------------------


def test_declared_inclusion_probability_09_gives_prior_09_and_bound_09792():
    """A callable that declares q = 0.9 gets p0 = 0.9 and the bound 0.9792 at v = 0.05."""
    res = _run(CallableSampler(include_90, inclusion_probability=0.9))
    assert res.membership_prior == 0.9 and res.blind_guess_prior == 0.9
    assert res.prior_source == "sampler"
    assert "max(q, 1 - q) = 0.9 " in res.prior_explanation
    assert res.posterior_success_bound == pytest.approx(0.97924449, abs=1e-8)
    assert res.posterior_success_bound > 0.9  # never below the blind guess
    d = json.loads(json.dumps(res.to_dict()))
    assert d["blind_guess_prior"] == 0.9 and d["prior_source"] == "sampler"


def test_declared_by_attribute_and_poisson_09():
    """`func.inclusion_probability` is read by as_sampler; PoissonSampler(0.9) matches."""
    def f(n_records, rng):
        return rng.random(n_records) < 0.9

    f.inclusion_probability = 0.9
    assert as_sampler(f).inclusion_probability == 0.9
    res = _run(PoissonSampler(0.9))
    assert res.blind_guess_prior == 0.9
    assert res.posterior_success_bound == pytest.approx(
        float(posterior_success_rate(0.05, prior=0.9)), rel=1e-15)


def test_undeclared_callable_gets_upper_bounded_prior_not_one_half():
    """Undeclared q = 0.9: the prior is a Clopper–Pearson upper bound >= 0.9, and says so."""
    res = _run(include_90, n_trials=400)
    assert res.prior_source == "estimated"
    assert 0.9 < res.blind_guess_prior < 0.99
    assert res.posterior_success_bound >= 0.9792
    assert any("membership prior" in note and "estimated" in note for note in res.notes)
    assert "Clopper-Pearson" in res.prior_explanation
    # the bound is the exact one-sided CP limit of the most extreme count at level γ/(2N):
    # P[Bin(T, p_u) <= x] = γ/(2N) (independent check of the definition)
    masks = res.simulation.masks
    t, n = masks.shape
    k = masks.sum(axis=0)
    x = max(k.max(), t - k.min())
    assert stats.binom.cdf(x, t, res.blind_guess_prior) == pytest.approx(0.01 / (2 * n),
                                                                         rel=1e-6)


def test_a_bound_on_an_estimated_prior_states_the_joint_confidence():
    """The posterior bound rests on the certificate (1 − γ) and on the prior's Clopper–Pearson
    bound (0.99): by a union bound it holds with 1 − γ − 0.01, which its label now states (it
    said "1−γ = 0.95"); the MI claim keeps the certificate's own label; a declared prior
    changes nothing (new-user pass 10)."""
    res = _run(include_90, n_trials=400)
    assert res.label == "certified (1−γ = 0.95)"
    assert res.posterior_label.startswith("certified (1−γ = 0.94: 0.95 for the MI certificate "
                                          "and 0.99 for the estimated membership prior")
    assert res.to_dict()["posterior_success_bound_label"] == res.posterior_label
    assert dict((k, v) for k, v, _ in res.summary().rows)["bound is"] == res.posterior_label
    declared = _run(CallableSampler(include_90, inclusion_probability=0.9), n_trials=400)
    assert declared.posterior_label == declared.label == "certified (1−γ = 0.95)"


def test_estimated_prior_covers_the_truth():
    """Over 200 simulated mask sets with q = 0.9, the bound is >= 0.9 in every one."""
    rng = np.random.default_rng(0)
    bounds = [blind_guess_upper_bound(rng.random((100, 50)) < 0.9) for _ in range(200)]
    assert min(bounds) >= 0.9


def test_pairs_and_fixed_declare_their_prior():
    """Complementary pairs: ½; fixed size k of N: max(k/N, 1 - k/N)."""
    masks = ComplementaryPairsSampler().masks(30, n_trials=20, rng=0)
    assert resolve_membership_prior(ComplementaryPairsSampler(), masks,
                                    n_records=30).blind_guess == 0.5
    masks = FixedSizeSampler(6).masks(30, n_trials=50, rng=0)
    info = resolve_membership_prior(FixedSizeSampler(6), masks, n_records=30)
    assert info.blind_guess == pytest.approx(0.8) and info.source == "sampler"


def test_wrong_declaration_is_refused():
    """A callable that declares ½ but includes 90% of records is refused, naming the fix."""
    with pytest.raises(ValueError, match=r"declares inclusion probability 0\.5.*"
                                         r"`inclusion_probability`"):
        _run(CallableSampler(include_90, inclusion_probability=0.5))


def test_undeclared_always_included_record_is_refused():
    """Undeclared, and one record is in every trial: the blind guess cannot be bounded."""
    def always_first(n_records, rng):
        mask = rng.random(n_records) < 0.5
        mask[0] = True
        return mask

    with pytest.raises(ValueError, match=r"declares no inclusion probability.*every one"):
        _run(always_first)


def test_posterior_functions_need_an_explicit_prior():
    """No public posterior function assumes ½ silently."""
    for func in (posterior_success_rate, pinsker_bound, mi_budget_for_accuracy):
        with pytest.raises(TypeError, match="prior"):
            func(0.6)


def test_ledger_takes_its_prior_from_the_wrapper():
    """The wrapper hands its blind-guess prior to the ledger; a bare ledger refuses to guess."""
    f = PacPrivateFunction(lambda s: np.array([s.mean() if len(s) else 0.5]), mi_budget=0.05)
    f.calibrate(POOL, n_trials=200, sampler=PoissonSampler(0.9), rng=0)
    assert f.blind_guess_prior == 0.9 and f.ledger.prior == 0.9
    assert "q = 0.9" in f.prior_explanation
    f(POOL[:150], rng=1)
    assert f.ledger.posterior_success_bound() == pytest.approx(0.97924449, abs=1e-8)
    assert f.posterior_success_bound == pytest.approx(0.97924449, abs=1e-8)
    with pytest.raises(ValueError, match="`prior` is required"):
        PrivacyLedger().posterior_success_bound()
    shared = PrivacyLedger(prior=0.5)
    shared.use_prior(0.7)
    shared.use_prior(0.6)
    assert shared.prior == 0.7  # the largest (safe side) is kept


# --- issue 14 item 6: degenerate samplers fail before any trial ----------------------------


# (PoissonSampler(0) and (1): tests/pac/test_samplers.py::test_poisson_degenerate_rates_refused)


@pytest.mark.parametrize("q", [0.0, 1.0])
def test_callable_degenerate_declared_probability(q):
    """A callable declaring probability 0 or 1 is refused, also through run_pac (f not run)."""
    with pytest.raises(ValueError, match=rf"`inclusion_probability` must be in \(0, 1\) "
                                         rf"exclusive; got {q}"):
        CallableSampler(include_90, inclusion_probability=q)

    def f(n_records, rng):
        return np.ones(n_records, bool)

    f.inclusion_probability = q
    mech = CountingMean()
    with pytest.raises(ValueError, match="`inclusion_probability` must be in"):
        _run(f, mech)
    assert mech.calls == 0


@pytest.mark.parametrize(("size", "why"), [(200, "every record would always be included"),
                                           (201, "larger than the pool")])
def test_fixed_size_equal_to_pool_refused_before_any_trial(size, why):
    """Fixed size >= pool: run_pac and the wrapper refuse before f is ever called."""
    mech = CountingMean()
    msg = rf"`subset_size` must be in \[1, n_records - 1\] = \[1, 199\]; got {size}: {why}"
    with pytest.raises(ValueError, match=msg):
        _run(FixedSizeSampler(size), mech)
    with pytest.raises(ValueError, match=msg):
        PacPrivateFunction(mech, mi_budget=0.1).calibrate(POOL, n_trials=50,
                                                          sampler=FixedSizeSampler(size))
    assert mech.calls == 0


def test_fixed_size_zero_refused():
    """FixedSizeSampler(0): every subset empty, refused at construction."""
    with pytest.raises(ValueError, match=r"`subset_size` must be >= 1; got 0: every subset "
                                         r"would be empty"):
        FixedSizeSampler(0)


def test_bound_never_below_blind_guess_for_any_rate():
    """For rates across (0, 1), run_pac's bound is >= max(q, 1 - q) (and finite)."""
    for q in (0.05, 0.3, 0.5, 0.8, 0.97):
        res = _run(PoissonSampler(q), n_trials=60)
        assert res.blind_guess_prior == max(q, 1 - q)
        assert max(q, 1 - q) <= res.posterior_success_bound <= 1.0
        assert math.isfinite(res.pinsker_success_bound)


def test_membership_counts_equal_the_column_sums_across_blocks():
    """membership_counts (column blocks of 65,536 records, byte sums of 255 trials) is
    masks.sum(axis=0), also when the pool ends inside a block, for a read-only array, and past
    255 trials."""
    from pacpriv.pac.bounds._prior import membership_counts

    rng = np.random.default_rng(4)
    for n in (1, 65_535, 65_536, 65_537, 140_001):
        masks = rng.random((7, n)) < 0.3
        masks.setflags(write=False)
        counts = membership_counts(masks)
        assert counts.dtype == np.int64 and counts.shape == (n,)
        np.testing.assert_array_equal(counts, masks.sum(axis=0))
    # more than 255 trials: the byte sums of 255 trials at a time must not wrap around
    full = np.ones((600, 70_000), dtype=bool)
    full[599, 3] = False
    counts = membership_counts(full)
    assert counts[0] == 600 and counts[3] == 599
