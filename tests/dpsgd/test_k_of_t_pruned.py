"""Soundness of the pruned k-of-t chains at k ≥ 3 (pacpriv.dpsgd._exact.koft_chain, prune).

Independent references: Monte-Carlo estimates under Q (their own seeds, 10⁶ draws), the
Gaussian shift at k = t, the expectation of e_k with the later coordinates at their mean
(a binomial convolution). The interval at the docs point (1.5, 12, 3, 2), deterministic and
≤ 1e-3 wide, is checked in tests/dpsgd/test_k_of_t_split.py (it computes it once).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from pacpriv.dpsgd._exact.koft_chain import (
    ChainSettings,
    _corners,
    _future_mean,
    _prune,
    _regrid,
    epoch_atoms,
    koft_chain_tv,
)
from pacpriv.dpsgd.k_of_t import monte_carlo_total_variation

COARSE = ChainSettings(n_w=40, dln=0.08, prune=1e-4, max_atoms=120_000_000)


def _acc(tv: float) -> float:
    return 0.5 + 0.5 * tv


@given(st.integers(2, 30), st.integers(1, 5), st.data(), st.floats(0.5, 2.0))
def test_future_mean_is_the_binomial_convolution(t, k, data, m):
    """e_k(W_1..W_t) = Σ_i e_i(W_1..W_j) e_{k−i}(W_{j+1}..W_t); with the later W at m the
    second factor is C(t − j, k − i) m^{k−i}, so r_i = C(j, i) C(t − j, k − i) m^{k−i}/C(t, k)."""
    k = min(k, t)
    j = data.draw(st.integers(0, t - 2))  # the loop's index: the states are s(j + 1)
    r = _future_mean(j, t, k, m)
    jj = j + 1
    ref = np.array([special.comb(jj, i) * special.comb(t - jj, k - i) * m ** (k - i)
                    for i in range(k + 1)]) / special.comb(t, k)
    np.testing.assert_allclose(r, ref, rtol=1e-12, atol=1e-15)


@settings(max_examples=30)
@given(st.integers(3, 300), st.integers(1, 4), st.floats(1e-6, 0.5), st.integers(0, 2**31))
def test_prune_keeps_the_mass_and_the_mean(n, d, budget, seed):
    """Lower: merging keeps the P-mass and Σ p·s (a conditional mean). Upper: what is cut
    is at most the budget in Q-mass, and kept + cut is everything."""
    rng = np.random.default_rng(seed)
    states = rng.lognormal(size=(n, d))
    p = rng.dirichlet(np.full(n, 0.3))
    r = rng.random(d + 1)
    s2, p2, cq, cp = _prune(states, p, r, 1, budget, upper=False)
    assert (cq, cp) == (0.0, 0.0)
    assert math.isclose(p2.sum(), p.sum(), rel_tol=1e-12)
    np.testing.assert_allclose(p2 @ s2, p @ states, rtol=1e-10)
    s3, p3, cq, cp = _prune(states, p, r, 1, budget, upper=True)
    q_all = p * (r[0] + states @ r[1:])
    assert cq <= budget * (1 + 1e-12)
    assert math.isclose(cp + p3.sum(), p.sum(), rel_tol=1e-12)
    assert math.isclose(cq + float(p3 @ (r[0] + s3 @ r[1:])), q_all.sum(), rel_tol=1e-10)


@settings(max_examples=30)
@given(st.integers(1, 2_000), st.integers(1, 4), st.floats(0.01, 0.3), st.integers(0, 2**31))
def test_corner_split_keeps_every_axis_mean(n, d, dln, seed):
    """The upper split (in chunks, then summed again) keeps the P-mass and Σ p·s on every
    axis, and its corners are the cell corners e^{aΔ}: a mean-preserving spread."""
    rng = np.random.default_rng(seed)
    states = rng.lognormal(sigma=1.0, size=(n, d))
    p = rng.dirichlet(np.full(n, 0.5))
    widths = np.full(d, dln)
    cells, mass = _corners(states, p, widths)
    corner_values = np.exp(cells * widths)
    assert math.isclose(mass.sum(), 1.0, rel_tol=1e-12)
    np.testing.assert_allclose(mass @ corner_values, p @ states, rtol=1e-11)
    s2, p2 = _regrid(states, p, widths, upper=True)
    np.testing.assert_allclose(p2 @ s2, p @ states, rtol=1e-11)
    lo = np.floor(np.log(states) / widths)
    assert np.all(np.isclose(np.log(s2) / widths, np.round(np.log(s2) / widths)))
    assert np.log(s2).min() >= (lo.min() * dln) - 1e-9


def test_pruned_upper_chain_carries_the_pruned_q_mass_at_infinity():
    """Upper chain: the pruned states' Q-mass is at +∞ and their P-mass at T = 0."""
    at = epoch_atoms(1.0, 6, 3, upper=True, settings=ChainSettings(n_w=30, dln=0.1,
                                                                   prune=1e-3))
    assert 0.0 < at["pruned_q"] <= 1e-3 * (1 + 1e-9)
    assert at["q_inf"] >= at["pruned_q"]
    assert at["T"][-1] == 0.0 and math.isclose(at["p"].sum(), 1.0, rel_tol=1e-9)
    # without pruning the same chain exceeds the default cap on one step's atoms
    assert epoch_atoms(1.0, 6, 3, upper=True, settings=ChainSettings(n_w=30, dln=0.1)) is None


@pytest.mark.parametrize(("sigma", "t", "k", "e"), [
    (1.5, 12, 3, 2), (0.8, 7, 3, 1), (2.0, 10, 4, 3),
])
def test_pruned_chains_bracket_an_independent_monte_carlo(sigma, t, k, e):
    """E_Q[(1 − e^{−L})_+] of the exact k-of-t pair, 10⁶ draws (own seed): the pruned
    upper chain lies above it + 4 SE, the pruned lower chain below it − 4 SE, and both are
    within 5e-3 of it (useful, not only sound). Pruning budget 1e-4 per epoch."""
    r = koft_chain_tv(sigma, t, k, e, COARSE, ends=(True, False))
    mc = monte_carlo_total_variation(sigma, steps_per_epoch=t, epochs=e, k=k,
                                     n_samples=1_000_000, rng=9_100 + 10 * t + k)
    acc, se = _acc(mc["mean"]), 0.5 * mc["standard_error"]
    assert acc - 4 * se <= _acc(r["tv_upper"]) < acc + 5e-3
    assert acc - 5e-3 < _acc(r["tv_lower"]) <= acc + 4 * se


@pytest.mark.parametrize(("sigma", "t", "e"), [(1.0, 3, 2), (2.0, 4, 3)])
def test_pruned_chains_at_k_equal_t_contain_the_gaussian_shift(sigma, t, e):
    """k = t: the pair is N(0, 1) vs N(√(tE)/σ, 1); the pruned chains bracket Φ(√(tE)/(2σ))."""
    exact = special.ndtr(math.sqrt(t * e) / (2 * sigma))
    r = koft_chain_tv(sigma, t, t, e, ChainSettings(n_w=60, dln=0.05, prune=1e-5),
                      ends=(True, False))
    assert _acc(r["tv_lower"]) <= exact <= _acc(r["tv_upper"])
    assert _acc(r["tv_upper"]) - _acc(r["tv_lower"]) < 2e-3
