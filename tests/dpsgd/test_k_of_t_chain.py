"""Soundness of the deterministic k-of-t chains (pacpriv.dpsgd._exact.koft_chain).

Independent references: the Gaussian shift at k = t, the certified k = 1 interval of the
dedicated machinery, and Monte-Carlo estimates (their own seeds, many draws).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import special

from pacpriv.dpsgd import exact_membership_inference_accuracy
from pacpriv.dpsgd._exact.koft_chain import ChainSettings, _keys, epoch_atoms, koft_chain_tv
from pacpriv.dpsgd.k_of_t import monte_carlo_total_variation

COARSE = ChainSettings(n_w=60, dln=0.1)


def _acc(tv: float) -> float:
    return 0.5 + 0.5 * tv


@pytest.mark.parametrize(("sigma", "t", "e"), [(1.0, 2, 1), (0.7, 3, 2), (2.0, 4, 3)])
def test_k_equal_t_brackets_the_gaussian_shift(sigma, t, e):
    """k = t: T = Π W_j, the pair is N(0, 1) vs N(√(tE)/σ, 1), accuracy Φ(√(tE)/(2σ))."""
    r = koft_chain_tv(sigma, t, t, e, COARSE)
    exact = special.ndtr(math.sqrt(t * e) / (2 * sigma))
    assert _acc(r["tv_lower"]) <= exact <= _acc(r["tv_upper"])
    assert _acc(r["tv_upper"]) - _acc(r["tv_lower"]) < 2e-3


@pytest.mark.parametrize(("sigma", "t", "e"), [(1.0, 10, 1), (0.8, 6, 3)])
def test_k_equal_one_overlaps_the_dedicated_certified_interval(sigma, t, e):
    """k = 1: both intervals are certified, so they intersect; the chain is within 3e-3."""
    r = koft_chain_tv(sigma, t, 1, e, COARSE)
    ref = exact_membership_inference_accuracy(sigma, steps_per_epoch=t, epochs=e,
                                              tolerance=1e-6)
    lo, hi = _acc(r["tv_lower"]), _acc(r["tv_upper"])
    assert lo <= ref.upper and ref.lower <= hi
    assert hi - ref.lower < 3e-3 and ref.upper - lo < 3e-3


@pytest.mark.parametrize(("sigma", "t", "k", "e", "n"), [
    (1.0, 4, 2, 1, 1_000_000), (0.7, 6, 2, 2, 400_000), (2.0, 8, 2, 3, 300_000),
    (1.2, 4, 3, 1, 600_000), (5.0, 6, 2, 2, 300_000),
])
def test_chain_brackets_an_independent_monte_carlo(sigma, t, k, e, n):
    """E_Q[(1 − e^{−L})_+] from n draws under Q (own seed) lies in the interval ± 4 SE."""
    r = koft_chain_tv(sigma, t, k, e, ChainSettings(n_w=60, dln=0.1 * min(1.0, 1.0 / sigma)))
    mc = monte_carlo_total_variation(sigma, steps_per_epoch=t, epochs=e, k=k, n_samples=n,
                                     rng=2024 + t)
    acc, se = _acc(mc["mean"]), 0.5 * mc["standard_error"]
    assert _acc(r["tv_lower"]) - 4 * se <= acc <= _acc(r["tv_upper"]) + 4 * se
    assert _acc(r["tv_upper"]) - _acc(r["tv_lower"]) < 3e-3


def test_chains_are_ordered_and_finer_grids_are_tighter():
    """lower ≤ upper; the default resolution is tighter than the coarse one."""
    coarse = koft_chain_tv(1.0, 6, 2, 1, COARSE)
    fine = koft_chain_tv(1.0, 6, 2, 1)
    for r in (coarse, fine):
        assert r["tv_lower"] <= r["tv_upper"]
    assert fine["tv_upper"] - fine["tv_lower"] < coarse["tv_upper"] - coarse["tv_lower"]


def test_upper_chain_keeps_the_mean_and_the_lower_chain_is_a_garbling():
    """Upper: E_P[T] ≤ 1 with the rest at +∞ (q_inf tiny); lower: E_P[T] = 1."""
    up = epoch_atoms(1.0, 6, 2, upper=True, settings=COARSE)
    low = epoch_atoms(1.0, 6, 2, upper=False, settings=COARSE)
    assert float(up["p"].sum()) == pytest.approx(1.0, abs=1e-12)
    assert float((up["p"] * up["T"]).sum()) == pytest.approx(1.0, abs=1e-8)
    assert 0 < up["q_inf"] < 1e-7
    assert float((low["p"] * low["T"]).sum()) == pytest.approx(1.0, abs=1e-12)


def test_lower_chain_drops_underflowed_cells():
    """t = 30: masses of far cells underflow to 0; every atom stays finite, mean 1."""
    low = epoch_atoms(1.0, 30, 2, upper=False, settings=COARSE)
    assert bool((low["p"] > 0).all()) and bool(((low["T"] > 0) & (low["T"] < 1e300)).all())
    assert float((low["p"] * low["T"]).sum()) == pytest.approx(1.0, abs=1e-12)


def test_work_budget_refuses_before_the_work():
    assert koft_chain_tv(0.5, 400, 2, 1, work_budget=1e6) is None
    with pytest.raises(OverflowError):  # cell labels that int64 keys cannot hold
        _keys(np.array([[0, 0], [2**40, 2**40]], dtype=np.int64))
    assert epoch_atoms(1.0, 10, 2, upper=True, settings=ChainSettings(max_atoms=1000)) is None


def test_public_interval_at_a_docs_point_is_narrow_and_deterministic():
    """(σ, t, k, E) = (1, 10, 2, 3): width ≤ 1e-3 (the stratified reduction gave 4.6e-3),
    both ends deterministic, the upper end not above the stratified one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = exact_membership_inference_accuracy(1.0, steps_per_epoch=10, epochs=3, k=2)
    assert r.width <= 1e-3 and r.lower_confidence == 1.0
    assert r.upper <= r.details["upper_stratified"] and r.details["upper_source"] == (
        "k-of-t chain")
    assert "k-of-t chain" in r.method
