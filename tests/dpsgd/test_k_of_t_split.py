"""Soundness of the partially stratified upper end of k of t (pacpriv.dpsgd._exact.koft_split).

Independent references: Monte-Carlo estimates under Q (their own seeds, 10⁶ draws), the
Gaussian shift at k = t, and the previous upper ends (chi-square, full stratification).
"""

from __future__ import annotations

import math
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import special

from pacpriv.dpsgd import exact_membership_inference_accuracy
from pacpriv.dpsgd._exact.koft_chain import ChainSettings
from pacpriv.dpsgd._exact.koft_split import split_blocks, split_upper_tv
from pacpriv.dpsgd.k_of_t import _chain_settings, monte_carlo_total_variation


def _acc(tv: float) -> float:
    return 0.5 + 0.5 * tv


@given(st.integers(1, 400), st.integers(1, 60))
def test_split_is_a_partition_of_k_and_t(t, k):
    """Σ k_j = k, Σ t_j = t, 1 ≤ k_j ≤ 2, k_j ≤ t_j, and the sizes are near-proportional."""
    if k > t:
        k, t = t, k
    blocks = split_blocks(t, k)
    assert sum(kj for _, kj in blocks) == k and sum(tj for tj, _ in blocks) == t
    assert all(1 <= kj <= 2 and kj <= tj for tj, kj in blocks)
    assert all(abs(tj - kj * t / k) < 2 for tj, kj in blocks)
    assert split_blocks(t, k) == blocks  # a function of (t, k) only


def test_split_of_the_docs_points():
    assert split_blocks(12, 3) == ((8, 2), (4, 1))
    assert split_blocks(20, 4) == ((10, 2), (10, 2))
    assert split_blocks(7, 3) == ((5, 2), (2, 1))
    assert split_blocks(10, 5) == ((4, 2), (4, 2), (2, 1))


@pytest.mark.parametrize(("sigma", "t", "k", "e"), [
    (1.5, 12, 3, 2), (1.0, 8, 4, 1), (0.8, 7, 3, 1), (2.0, 10, 5, 1),
])
def test_split_upper_end_lies_above_an_independent_monte_carlo(sigma, t, k, e):
    """E_Q[(1 − e^{−L})_+] of the exact k-of-t pair, 10⁶ draws (own seed): the split upper
    end is above it + 4 SE, and within 6e-3 of it (it is useful, not only sound)."""
    blocks = split_blocks(t, k)
    r = split_upper_tv(sigma, blocks, e, ChainSettings(n_w=60, dln=0.1 * min(1.0, 1 / sigma)))
    mc = monte_carlo_total_variation(sigma, steps_per_epoch=t, epochs=e, k=k,
                                     n_samples=1_000_000, rng=7_000 + 10 * t + k)
    acc, se = _acc(mc["mean"]), 0.5 * mc["standard_error"]
    assert _acc(r["tv_upper"]) >= acc - 4 * se
    assert _acc(r["tv_upper"]) - acc < 6e-3


@pytest.mark.parametrize(("sigma", "t", "e"), [(1.0, 3, 2), (2.0, 4, 3)])
def test_k_equal_t_split_contains_the_gaussian_shift(sigma, t, e):
    """k = t: blocks k_j of k_j, the pair is N(0, 1) vs N(√(tE)/σ, 1)."""
    exact = special.ndtr(math.sqrt(t * e) / (2 * sigma))
    r = split_upper_tv(sigma, split_blocks(t, t), e, _chain_settings(sigma, e, 1e-4))
    assert exact <= _acc(r["tv_upper"]) < exact + 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iv = exact_membership_inference_accuracy(sigma, steps_per_epoch=t, epochs=e, k=t)
    assert "split" in iv.details
    assert iv.lower <= exact <= iv.upper


def test_interval_upper_end_is_the_minimum_and_tighter_at_a_docs_point():
    """(1.5, 12, 3, 2): upper = min(chi-square, stratified, split, pruned k-of-t chain);
    never above the previous ones, and the split (2-of-8 × 1-of-4) is tighter than the full
    stratification there."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = exact_membership_inference_accuracy(1.5, steps_per_epoch=12, epochs=2, k=3)
    d = r.details
    previous = min(d["upper_stratified"], d["chi_square_accuracy"])
    assert d["split"]["blocks"] == [[8, 2], [4, 1]]
    assert d["split"]["accuracy_upper"] < previous - 5e-4
    assert r.upper == min(previous, d["split"]["accuracy_upper"],
                          d["chain"].get("accuracy_upper", 1.0))
    assert d["upper_source"] in ("split k-of-t chains", "k-of-t chain")
    assert r.lower <= r.upper and "2-of-8 x 1-of-4" in r.method
    # the pruned k-of-t chains (tests/dpsgd/test_k_of_t_pruned.py) make it deterministic
    # and at most 1e-3 wide there (issue 32, deliverable 5)
    assert d["upper_source"] == "k-of-t chain" and d["lower_source"] == "k-of-t chain"
    assert r.lower_confidence == 1.0 and r.upper - r.lower <= 1e-3
    assert "monte_carlo" not in d


def test_no_split_when_it_is_the_full_stratification_or_k_is_small():
    """k ≤ 2: the full k-of-t chain runs and no split is tried (it would be 1-of-3 × 1-of-3)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = exact_membership_inference_accuracy(1.0, steps_per_epoch=6, epochs=1, k=2,
                                                tolerance=0.01)
    assert "split" not in r.details
