"""Betting upper bounds (Waudby-Smith & Ramdas 2024) and the every-record scale certificate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.stats import norm

from pacpriv.pac.per_record._betting import betting_upper, log_capital, predictable_bets
from pacpriv.pac.per_record._certificate import (
    certify_scale,
    check_betting_feasible,
    plug_in_scale,
)
from pacpriv.pac.per_record._math import bernstein_upper


def _wsr(x: np.ndarray, delta: float, **kw) -> np.ndarray:
    bets = predictable_bets(x, delta=delta, horizon=x.shape[0], prior_mean=0.5,
                            prior_variance=0.25, **kw)
    return betting_upper(x, bets, delta)


# ----------------------------------------------------------------------------- the bound
def test_constant_data_closed_form():
    """X_t ≡ x with saturated bets: ln K_T(m) = T ln(1 + c(m − x)/(1 − m)), solved exactly."""
    T, delta, c, x = 80, 0.01, 0.75, 0.3
    u = betting_upper(np.full((T, 1), x), np.full((T, 1), 1e12), delta, cap=c)[0]
    r = math.expm1(math.log(1 / delta) / T)  # c(m − x)/(1 − m) = r
    exact = (r + c * x) / (r + c)
    assert u == pytest.approx(exact, abs=1e-11) and u >= exact


@pytest.mark.parametrize("law", ["bernoulli", "beta", "spike"])
def test_coverage_binomial(law):
    """400 independent bounds at δ = 0.1: misses are consistent with a rate <= δ (one-sided
    binomial test at 1e-3)."""
    rng = np.random.default_rng(17)
    T, R, delta = 60, 400, 0.1
    if law == "bernoulli":
        mu, x = 0.2, (rng.random((T, R)) < 0.2).astype(float)
    elif law == "beta":
        mu, x = 2 / 7, rng.beta(2.0, 5.0, size=(T, R))
    else:  # mostly 0.1, rarely 1: a small variance hides a heavy right tail
        mu, x = 0.1 + 0.9 * 0.03, np.where(rng.random((T, R)) < 0.03, 1.0, 0.1)
    misses = int(np.sum(_wsr(x, delta) < mu))
    assert stats.binomtest(misses, R, delta, alternative="greater").pvalue > 1e-3


def test_monotone_in_the_data_and_in_m():
    """Larger values give a larger bound (fixed bets); the capital grows with m."""
    rng = np.random.default_rng(3)
    x = rng.beta(2, 8, size=(50, 5))
    bets = predictable_bets(x, delta=0.05, horizon=50, prior_mean=0.5, prior_variance=0.25)
    lo = betting_upper(x, bets, 0.05)
    hi = betting_upper(np.minimum(x + 0.05 * rng.random(x.shape), 1.0), bets, 0.05)
    assert np.all(hi >= lo)
    caps = [log_capital(x, bets, m) for m in np.linspace(0.0, 0.95, 40)]
    assert np.all(np.diff(np.array(caps), axis=0) >= -1e-12)


def test_bets_are_predictable():
    """Row t of the bets depends on rows < t only."""
    rng = np.random.default_rng(5)
    x = rng.random((30, 3))
    y = x.copy()
    y[10:] = rng.random((20, 3))
    a = predictable_bets(x, delta=0.05, horizon=30, prior_mean=0.4, prior_variance=0.1)
    b = predictable_bets(y, delta=0.05, horizon=30, prior_mean=0.4, prior_variance=0.1)
    np.testing.assert_array_equal(a[:11], b[:11])
    assert not np.array_equal(a[11:], b[11:])


def test_tighter_than_maurer_pontil_at_low_variance():
    rng = np.random.default_rng(9)
    x = np.clip(0.15 + 0.02 * rng.standard_normal((200, 4)), 0, 1)
    assert np.all(_wsr(x, 0.01 / 569) < bernstein_upper(x, low=0.0, high=1.0,
                                                          delta=0.01 / 569))


# ----------------------------------------------------------------------------- certificate
X_SUM = np.array([[1.0, 0.0], [2.0, 1.0], [0.5, -0.5], [0.0, 3.0], [0.2, 0.1]])


@pytest.mark.parametrize("with_range", [False, True])
def test_linear_sum_is_certified_exactly(with_range):
    """f(S) = Σ_{j∈S} x_j: Δᵢ = xᵢ in every trial, so Aᵢ(s) = Φ(‖xᵢ‖/(2s)) exactly (exact
    enumeration is trivial). Every record is below the target at the certified scale, which
    is within 40 % (20 % with the range) of the exact threshold max‖xᵢ‖/(2Φ⁻¹(a))."""
    a = 0.6
    norms = np.linalg.norm(X_SUM, axis=1)
    d = np.tile(norms, (300, 1))
    cert = certify_scale(d[:40], d[40:], target_accuracy=a, prior=0.5, confidence=0.95,
                         distance_bound=norms if with_range else None)
    exact = norm.cdf(norms / (2 * cert.scale))
    assert np.all(exact <= a)
    s_star = norms.max() / (2 * norm.ppf(a))
    assert 1.0 <= cert.scale / s_star <= (1.2 if with_range else 1.4)
    assert plug_in_scale(d, a, 0.5) == pytest.approx(s_star, rel=1e-5)
    assert np.all(cert.accuracy_upper >= exact - 1e-12) and np.all(cert.accuracy_upper <= a)


def _exact_mean_accuracy(c: float, s: float) -> float:
    """E Φ(c U/(2s)), U ~ Uniform(0, 1), by quadrature."""
    return integrate.quad(lambda u: norm.cdf(c * u / (2 * s)), 0, 1, epsabs=1e-13)[0]


@pytest.mark.slow
@pytest.mark.parametrize("with_range", [False, True])
def test_every_record_coverage(with_range):
    """Distances d_{t,i} = cᵢ Uᵢₜ (U uniform): the exact Aᵢ(ŝ) of every record is <= the
    target in >= 1 − γ of 300 seeded calibrations (one-sided binomial test at 1e-3). The same
    test rejects the plug-in scale (no confidence margin), so it has power."""
    rng = np.random.default_rng(2024)
    c = np.array([1.3, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1])
    a, gamma, R = 0.6, 0.2, 300
    fails = plug_fails = 0
    for _ in range(R):
        d = c * rng.random((90, c.size))
        cert = certify_scale(d[:20], d[20:], target_accuracy=a, prior=0.5,
                             confidence=1 - gamma, distance_bound=c if with_range else None)
        fails += _exact_mean_accuracy(c.max(), cert.scale) > a  # Aᵢ grows with cᵢ
        plug_fails += _exact_mean_accuracy(c.max(), plug_in_scale(d[20:], a, 0.5)) > a
    assert stats.binomtest(fails, R, gamma, alternative="greater").pvalue > 1e-3
    assert stats.binomtest(plug_fails, R, gamma, alternative="greater").pvalue < 1e-3


def test_declared_range_violation_raises():
    d = np.tile([1.0, 2.0], (40, 1))
    with pytest.raises(ValueError, match="exceeds the mechanism's declared sensitivity"):
        certify_scale(d[:10], d[10:], target_accuracy=0.6, prior=0.5, confidence=0.95,
                      distance_bound=np.array([1.0, 1.5]))


def test_records_whose_range_lies_below_the_target_need_no_trials():
    """With a declared range so small that acc(range/s_lo) < a, a record is fine whatever
    the trials say; the record with a real range sets the scale."""
    d = np.column_stack([np.full(60, 1.0), np.full(60, 1e-3)])
    cert = certify_scale(d[:20], d[20:], target_accuracy=0.6, prior=0.5, confidence=0.95,
                         distance_bound=np.array([1.0, 1e-3]))
    assert cert.accuracy_upper[1] == pytest.approx(norm.cdf(1e-3 / (2 * cert.lowest_scale)),
                                                   rel=1e-9)


def test_feasibility_floor():
    """(1 + c x*/(1 − x*))^T >= 2n/γ: the smallest T is refused one below."""
    x = 0.2
    need = math.ceil(math.log(569 / (0.5 * 0.05)) / math.log1p(0.9 * x / (1 - x)))
    check_betting_feasible(0.6, need, 569, 0.5, 0.95)
    with pytest.raises(ValueError, match=f"at least {need} certification trials"):
        check_betting_feasible(0.6, need - 1, 569, 0.5, 0.95)
