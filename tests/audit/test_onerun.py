"""pacpriv.audit._onerun and _accountant: the one-run ε lower bound and the accountant's ε."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import stats

from pacpriv.audit import OneRunSpec, one_run_epsilon, one_run_p_value
from pacpriv.audit._accountant import dpsgd_epsilon, gaussian_epsilon
from pacpriv.audit._onerun import best_guess


def _p_naive(m, r, v, eps, delta):
    """The p-value of Steinke, Nasr & Jagielski with exact mpmath binomial sums."""
    mpmath.mp.dps = 40
    q = mpmath.e ** eps / (1 + mpmath.e ** eps)

    def tail(k):  # P[Binom(r, q) >= k]
        return mpmath.fsum(mpmath.binomial(r, j) * q**j * (1 - q) ** (r - j)
                           for j in range(max(k, 0), r + 1))

    beta = tail(v)
    alpha = max([(tail(v - i) - beta) / i for i in range(1, v + 1)] or [0])
    return float(min(beta + 2 * m * delta * alpha, 1))


@pytest.mark.parametrize(("m", "r", "v", "eps", "delta"), [
    (100, 30, 25, 1.0, 1e-5), (100, 30, 30, 2.5, 1e-3), (50, 20, 12, 0.2, 0.0),
    (1000, 40, 40, 3.0, 1e-5), (10, 10, 0, 0.5, 0.01),
])
def test_p_value_matches_exact_binomial_sums(m, r, v, eps, delta):
    assert one_run_p_value(m, r, v, epsilon=eps, delta=delta) == pytest.approx(
        _p_naive(m, r, v, eps, delta), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("r", [10, 100, 1000])
def test_all_correct_without_delta_has_the_closed_form(r):
    """δ = 0 and v = r: p(ε) = q^r, so ε̂ = logit(β^{1/r}) (rounded down to 0.01)."""
    beta = 0.05
    q = beta ** (1 / r)
    exact = math.log(q / (1 - q))
    got = one_run_epsilon(r, r, r, delta=0.0, confidence=1 - beta)
    assert exact - 0.01 - 1e-9 <= got <= exact
    # e.g. 100 correct guesses out of 100 certify ε >= 3.49 at 95%
    if r == 100:
        assert got == pytest.approx(3.49)


def test_bound_is_valid_against_the_extremal_mechanism():
    """Randomized response with ε is the worst ε-DP case: each of r guesses is right w.p.
    e^ε/(1 + e^ε). The probability (exact, over V ~ Binom) that ε̂ > ε is at most β."""
    r, eps, beta = 60, 1.2, 0.05
    q = 1 / (1 + math.exp(-eps))
    bounds = np.array([one_run_epsilon(r, r, v, delta=0.0, confidence=1 - beta)
                       for v in range(r + 1)])
    p_exceed = float(np.sum(stats.binom.pmf(np.arange(r + 1), r, q)[bounds > eps]))
    assert 0 < p_exceed <= beta
    assert np.all(np.diff(bounds) >= 0)  # more correct guesses never lower the bound


def test_delta_only_lowers_the_bound():
    for v in (45, 50):
        assert (one_run_epsilon(1000, 50, v, delta=1e-4, confidence=0.95)
                <= one_run_epsilon(1000, 50, v, delta=1e-6, confidence=0.95)
                <= one_run_epsilon(1000, 50, v, delta=0.0, confidence=0.95))
    assert one_run_epsilon(100, 20, 10, delta=0.0, confidence=0.95) == 0.0  # chance level


def test_best_guess_is_bonferroni_corrected_over_fractions():
    """Perfect separation of 200 canaries: the bound is that of the best single fraction at
    level 1 − β/5, not at 1 − β."""
    scores = np.r_[np.linspace(10, 11, 100), np.linspace(0, 1, 100)]
    included = np.r_[np.ones(100, dtype=bool), np.zeros(100, dtype=bool)]
    spec = OneRunSpec(canaries=200, delta=1e-5)
    eps, r, v, frac = best_guess(scores, included, spec)
    assert v == r == 100 and frac == 0.5
    assert eps == one_run_epsilon(200, 100, 100, delta=1e-5, confidence=1 - 0.05 / 5)
    assert eps < one_run_epsilon(200, 100, 100, delta=1e-5, confidence=0.95)


def test_gaussian_epsilon_matches_dp_accounting():
    """μ-GDP ε(δ) equals dp-accounting's Gaussian-mechanism ε at σ = 1/μ (sensitivity 1)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    for mu, delta in [(0.5, 1e-5), (2.0, 1e-5), (np.sqrt(10), 1e-6)]:
        ref = pld.from_gaussian_mechanism(standard_deviation=1 / mu, sensitivity=1.0,
                                          value_discretization_interval=1e-3)
        got = gaussian_epsilon(mu, delta)
        assert got == pytest.approx(ref.get_epsilon_for_delta(delta), rel=5e-3)
        d = stats.norm.cdf(-got / mu + mu / 2) - math.exp(got) * stats.norm.cdf(-got / mu - mu / 2)
        assert d <= delta  # on the safe side


def test_dpsgd_epsilon_uses_the_smaller_certified_bound():
    """M = 1 is the Gaussian mechanism: the PLD's ε and the exact GDP ε agree; with M = 10 the
    random-allocation PLD is smaller (amplification); σ = 0 is not private."""
    from pacpriv.dpsgd import tradeoff_curve

    eps, _ = dpsgd_epsilon(1.0, steps_per_epoch=1, epochs=4, delta=1e-5)
    pld = tradeoff_curve(noise_multiplier=1.0, steps_per_epoch=1, epochs=4).get_epsilon(1e-5)
    assert eps == pytest.approx(min(pld, gaussian_epsilon(2.0, 1e-5)), rel=1e-8)
    assert pld == pytest.approx(gaussian_epsilon(2.0, 1e-5), rel=1e-2)
    eps_ra, label_ra = dpsgd_epsilon(1.0, steps_per_epoch=10, epochs=5, delta=1e-5)
    assert eps_ra < gaussian_epsilon(math.sqrt(5), 1e-5) and "random-allocation PLD" in label_ra
    eps_small, label_small = dpsgd_epsilon(0.3, steps_per_epoch=5, epochs=50, delta=1e-5)
    assert math.isfinite(eps_small) and "without amplification" in label_small
    assert dpsgd_epsilon(0.0, steps_per_epoch=5, epochs=2, delta=1e-5)[0] == math.inf


@pytest.mark.parametrize(("kw", "match"), [
    ({"canaries": 1}, r"`canaries` must be an integer in \[2, inf\); got 1"),
    ({"delta": 0.0}, r"`delta` must be in \(0.0, 1.0\)"),
    ({"guess_fractions": ()}, "at least one fraction"),
    ({"guess_fractions": (0.1, 1.5)}, r"`guess_fractions\[1\]`"),
])
def test_spec_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        OneRunSpec(**kw)


def test_counts_are_validated():
    with pytest.raises(ValueError, match=r"`v` must be an integer in \[0, 5\]; got 6"):
        one_run_p_value(10, 5, 6, epsilon=1.0, delta=0.0)
