"""Tests of pacpriv.audit._empirical: membership attack on simulated outputs vs the PAC bound."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from pacpriv.audit._empirical import empirical_membership_attack
from pacpriv.mechanisms import make_clipped_mean
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._simulate import simulate
from pacpriv.pac.noise._calibration import calibrate_noise, calibrate_variance_only
from pacpriv.pac.spectrum._covariance import estimate_output_spectrum

TINY_POOL = np.linspace(0.0, 1.0, 8)[:, None]  # 8 records, 1-D: the mean leaks membership


@pytest.fixture(scope="module")
def tiny_simulation():
    """2000 Poisson-½ trials of the mean of a tiny 1-D pool."""
    mech = make_clipped_mean(low=0.0, high=1.0)
    return simulate(mech, TINY_POOL, n_trials=2000, rng=0,
                    execution=ExecutionOptions(progress=False))


def test_leaky_mechanism_without_noise_beats_guessing(tiny_simulation):
    """Raw means of a tiny pool: the lower CI limits (mean and best record) exceed ½."""
    res = empirical_membership_attack(tiny_simulation, None, rng=1)
    assert not res.noise_applied and res.posterior_success_bound is None
    assert res.ci_low > 0.55
    assert res.max_ci_low > 0.6  # Bonferroni over the 8 records
    assert res.max_target in (0, 7)  # an extreme record is the most exposed
    assert res.n_targets == 8 and res.n_holdout == 1000 and res.n_train == 1000


def test_calibrated_noise_stays_below_posterior_bound(tiny_simulation):
    """With the calibrated noise (v = 0.05) even the upper CI limits stay below p*(v)."""
    spectrum = estimate_output_spectrum(tiny_simulation.outputs)
    plan = calibrate_noise(spectrum, mi_budget=0.05)
    res = empirical_membership_attack(tiny_simulation, plan, rng=1)
    assert res.noise_applied
    assert res.posterior_success_bound == pytest.approx(0.657, abs=0.01)
    assert res.posterior_success_bound_label.startswith("estimated")
    assert res.to_dict()["posterior_success_bound_label"] == res.posterior_success_bound_label
    assert res.ci_high < res.posterior_success_bound - 0.05
    assert res.max_ci_high < res.posterior_success_bound
    json.dumps(res.to_dict())


def test_gaussian_oracle_single_target():
    """Output = bit + N(0,1): accuracy near the Bayes rate Φ(½), exact Clopper–Pearson CI."""
    gen = np.random.default_rng(2)
    masks = gen.random((4000, 3)) < 0.5
    outputs = masks[:, :1] + gen.standard_normal((4000, 1))
    res = empirical_membership_attack((masks, outputs), None, targets=[0], rng=3)
    bayes = stats.norm.cdf(0.5)
    assert res.ci_method == "clopper-pearson"
    assert res.ci_low < bayes < res.ci_high + 0.01  # the fitted rule is at most Bayes-optimal
    k = round(res.accuracy * res.n_holdout)
    ci = stats.binomtest(k, res.n_holdout).proportion_ci(0.95, method="exact")
    assert (res.ci_low, res.ci_high) == pytest.approx((ci.low, ci.high))


def test_unrelated_outputs_give_chance_accuracy():
    """Outputs independent of the masks: accuracy within 0.03 of ½ and the CI covers ½."""
    gen = np.random.default_rng(4)
    masks = gen.random((2000, 10)) < 0.5
    outputs = gen.standard_normal((2000, 3))
    res = empirical_membership_attack((masks, outputs), None, rng=5)
    assert abs(res.accuracy - 0.5) < 0.03
    assert res.ci_low < 0.5 < res.ci_high


def test_tuple_input_and_target_sample(tiny_simulation):
    """(masks, outputs) gives the same result as the SimulationResult; int targets sample."""
    a = empirical_membership_attack(tiny_simulation, None, rng=6)
    b = empirical_membership_attack(
        (tiny_simulation.masks, tiny_simulation.outputs), None, rng=6
    )
    assert a.to_dict() == b.to_dict()
    c = empirical_membership_attack(tiny_simulation, None, targets=3, rng=6)
    assert c.n_targets == 3 and len(set(c.targets.tolist())) == 3


def test_invalid_arguments(tiny_simulation):
    """Bad inputs are rejected with messages naming the argument."""
    with pytest.raises(TypeError, match="`simulation` must be a SimulationResult"):
        empirical_membership_attack(np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"`holdout` must be in \(0.0, 1.0\)"):
        empirical_membership_attack(tiny_simulation, holdout=1.0)
    with pytest.raises(ValueError, match="`targets` indices must be in"):
        empirical_membership_attack(tiny_simulation, targets=[8])
    with pytest.raises(ValueError, match="`targets` as a count"):
        empirical_membership_attack(tiny_simulation, targets=0)
    with pytest.raises(ValueError, match="`plan` has dim 2"):
        empirical_membership_attack(tiny_simulation, calibrate_variance_only([1.0, 1.0],
                                                                             mi_budget=0.1))
    with pytest.raises(TypeError, match="`plan` must be a NoisePlan"):
        empirical_membership_attack(tiny_simulation, "plan")
    with pytest.raises(ValueError, match="need at least 2 training and 2 held-out"):
        empirical_membership_attack((np.zeros((3, 2), bool), np.zeros((3, 1))))
    with pytest.raises(ValueError, match="`masks` must be a 2-D bool array"):
        empirical_membership_attack((np.zeros((3, 2)), np.zeros((3, 1))))
