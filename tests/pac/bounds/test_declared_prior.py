"""Issue 35 (b61): a sampler's declared inclusion probability is checked against its own masks.

A sampler declaring ``q = 0.5`` that includes records at rate 0.3 used to get a posterior
bound of 0.6568, below the real blind guess 0.7. The pooled Chernoff test over all ``T · n``
memberships (and the per-record binomial test) now refuses it before any bound is computed;
honest samplers pass (the test's false-alarm level is 1e-9, and its bound is proven ≥ the exact
binomial tail).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats

from pacpriv.pac.bounds._posterior import posterior_success_rate
from pacpriv.pac.bounds._prior import (
    DECLARED_PRIOR_TEST_LEVEL,
    _pooled_prior_pvalue,
    resolve_membership_prior,
)
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.job import run_pac
from pacpriv.pac.samplers import (
    SAMPLERS,
    CallableSampler,
    ComplementaryPairsSampler,
    FixedSizeSampler,
    PoissonSampler,
    Sampler,
)
from pacpriv.pac.wrapper import PacPrivateFunction
from pacpriv.registry import MECHANISMS

QUIET = ExecutionOptions(progress=False)
X = np.random.default_rng(0).normal(size=(60, 3))


def _rate(r: float):
    def draw(n, rng):
        return rng.random(n) < r
    return draw


def _mean(S):
    return S.mean(0) if len(S) else np.zeros(3)


@pytest.mark.parametrize(("declared", "true"), [(0.5, 0.3), (0.5, 0.7), (0.3, 0.5),
                                                 (0.9, 0.97), (0.1, 0.02)])
def test_run_pac_refuses_a_declaration_its_masks_contradict(declared, true):
    """The b61 reproduction and siblings (both sides, both tails): no result is returned."""
    s = _rate(true)
    s.inclusion_probability = declared  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=rf"CallableSampler\(.*draw\) declares inclusion "
                                         rf"probability {declared:g}, but .* overall rate "
                                         rf"of 0\.\d+"):
        run_pac(_mean, X, mi_budget=0.05, n_trials=64, rng=0, sampler=s, execution=QUIET)


def test_wrapper_refuses_before_any_release_or_charge():
    f = PacPrivateFunction(_mean, mi_budget=0.05)
    with pytest.raises(ValueError, match=r"declares inclusion probability 0\.5.*overall rate"):
        f.calibrate(X, n_trials=64, sampler=CallableSampler(_rate(0.3),
                                                             inclusion_probability=0.5), rng=0)
    assert f.plan is None and f.ledger.spent == 0


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_honest_declarations_pass():
    """Built-in and honest callable samplers are never refused (0.5, 0.3, 0.9, fixed size,
    complementary pairs), and the bound of the honest run is unchanged."""
    for sampler, blind in ((PoissonSampler(0.3), 0.7), (PoissonSampler(0.9), 0.9),
                           (FixedSizeSampler(17), 1 - 17 / 60), (ComplementaryPairsSampler(), 0.5),
                           (CallableSampler(_rate(0.3), inclusion_probability=0.3), 0.7)):
        res = run_pac(_mean, X, mi_budget=0.05, n_trials=64, rng=0, sampler=sampler,
                      execution=QUIET)
        assert res.prior_source == "sampler" and res.blind_guess_prior == pytest.approx(blind)
        assert res.posterior_success_bound == pytest.approx(
            posterior_success_rate(0.05, prior=blind), rel=1e-12)


@pytest.mark.parametrize("q", [0.01, 0.3, 0.5, 0.9])
def test_pooled_pvalue_of_honest_masks_is_far_above_the_level(q):
    rng = np.random.default_rng(1)
    worst = min(_pooled_prior_pvalue(rng.random((64, 60)) < q, q) for _ in range(200))
    assert worst > 1e-4 > DECLARED_PRIOR_TEST_LEVEL


@pytest.mark.parametrize(("n", "k", "q"), [(3840, 1145, 0.5), (3840, 1850, 0.5),
                                            (1000, 320, 0.3), (500, 499, 0.97), (64, 0, 0.02)])
def test_pooled_pvalue_bounds_the_exact_binomial_tail(n, k, q):
    """The Chernoff bound is a valid p-value: at least the exact two-sided binomial tail."""
    masks = np.zeros((1, n), dtype=bool)
    masks[0, :k] = True
    exact = 2 * min(stats.binom.sf(k - 1, n, q), stats.binom.cdf(k, n, q))
    assert _pooled_prior_pvalue(masks, q) >= min(1.0, exact) * (1 - 1e-12)  # (k = 0: equal)


def test_resolve_names_the_rate_not_records():
    masks = np.random.default_rng(2).random((64, 60)) < 0.3
    with pytest.raises(ValueError) as info:
        resolve_membership_prior(PoissonSampler(0.5), masks, n_records=60)
    text = str(info.value)
    assert "PoissonSampler declares inclusion probability 0.5" in text
    assert f"{np.count_nonzero(masks)} of 3840 memberships" in text


class _LyingPoisson(PoissonSampler):
    """Declares (and claims independent memberships at) its rate, draws at 0.2."""

    def draw(self, n_records, rng):
        return rng.random(n_records) < 0.2


@pytest.mark.parametrize("fast", [False, True])
def test_per_record_refuses_a_rate_its_masks_contradict(fast):
    from pacpriv.pac.per_record import simulate_differences

    class Mean:
        def __call__(self, S):
            return _mean(S)

    class FastMean(Mean):
        def per_record_differences(self, pool, mask, records):
            m = int(mask.sum())
            diffs = np.zeros((len(records), 3))
            return (pool[mask].mean(0) if m else np.zeros(3)), diffs

    mech = FastMean() if fast else Mean()
    with pytest.raises(ValueError, match=r"_LyingPoisson declares inclusion probability 0\.5"):
        simulate_differences(mech, X, n_trials=64, sampler=_LyingPoisson(0.5), rng=0,
                             execution=QUIET)
    honest = simulate_differences(mech, X, n_trials=64, sampler=PoissonSampler(0.2), rng=0,
                                  execution=QUIET)
    assert honest.sampling_rate == 0.2


@dataclass(frozen=True)
class HalfClaimingSampler(Sampler):
    """A CLI plugin that claims q = ½ and draws at 0.2 (module level: workers unpickle it)."""

    name = "half-claiming"

    def draw(self, n_records, rng):
        return rng.random(n_records) < 0.2

    @property
    def prior(self):
        return 0.5

    def describe(self):
        return "claims one half"


def test_cli_sampler_plugin_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    from pacpriv.cli import main

    monkeypatch.chdir(tmp_path)
    np.savetxt(tmp_path / "pool.csv", X, delimiter=",", header="a,b,c", comments="")
    with SAMPLERS.temporary(), MECHANISMS.temporary():
        SAMPLERS.register("half-claiming", HalfClaimingSampler)
        code = main(["pac", "run", "--mechanism", "mean", "--dataset", "pool.csv",
                     "--sampler", "half-claiming", "--mi-budget", "0.05", "--trials", "64",
                     "--seed", "0", "--no-progress", "--out", "rep"])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "HalfClaimingSampler declares inclusion probability 0.5" in err
    assert "overall rate of 0.2" in err
    assert not (tmp_path / "rep" / "report.json").exists()
