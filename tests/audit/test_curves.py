"""pacpriv.audit._curves: the accuracy (TV) curve and the MI-budget curve, checked independently."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from scipy import stats

from pacpriv.audit import accuracy_curve, binary_test_information, curve_value, mi_curve
from pacpriv.audit._curves import curve_grid, trivial_curve
from pacpriv.pac.bounds import posterior_success_rate

GRID = curve_grid((1e-4, 1e-3, 1e-2, 1e-1))


def test_grid_contains_the_reported_fprs_and_spans_1e6_to_1():
    assert {1e-4, 1e-3, 1e-2, 1e-1} <= set(GRID.tolist())
    assert GRID[0] == pytest.approx(1e-6) and GRID[-1] == 1.0 and np.all(np.diff(GRID) > 0)


def test_accuracy_curve_is_fpr_plus_total_variation():
    c = accuracy_curve(0.6, GRID, label="x")
    np.testing.assert_allclose(c.tpr, np.minimum(1.0, GRID + 0.2))
    assert c.label.startswith("certified: x") and c.certified and c.confidence is None
    assert accuracy_curve(0.6, GRID, label="y", confidence=0.95).label.startswith(
        "certified (1−γ = 0.95): y")
    assert accuracy_curve(0.6, GRID, label="z", certified=False).label.startswith("estimated")


def test_accuracy_curve_dominates_the_exact_gaussian_curve():
    """M = 1 DP-SGD is a Gaussian shift μ = √E/σ: exact accuracy Φ(μ/2), exact trade-off
    β = Φ(Φ⁻¹(α) + μ) (Dong, Roth & Su): the TV line from the accuracy lies above it."""
    mu = np.sqrt(10) / 1.0
    a = stats.norm.cdf(mu / 2)
    c = accuracy_curve(a, GRID, label="gauss")
    exact = stats.norm.cdf(stats.norm.ppf(GRID) + mu)
    assert np.all(c.tpr >= exact - 1e-12)
    # and touches it where the Gaussian curve has slope 1 (α = Φ(−μ/2))
    alpha = stats.norm.cdf(-mu / 2)
    assert alpha + 2 * a - 1 == pytest.approx(stats.norm.cdf(stats.norm.ppf(alpha) + mu))


def _mi_mp(a, b, q=0.5):
    """I(b; D) with mpmath (50 digits)."""
    mpmath.mp.dps = 50

    def h(p):
        p = mpmath.mpf(p)
        return -(p * mpmath.log(p) if p > 0 else 0) - ((1 - p) * mpmath.log(1 - p) if p < 1
                                                        else 0)
    q = mpmath.mpf(q)
    return h(q * b + (1 - q) * a) - q * h(b) - (1 - q) * h(a)


@pytest.mark.parametrize("q", [0.5, 0.2])
def test_binary_test_information_matches_mpmath(q):
    for a, b in [(0.01, 0.3), (1e-6, 0.02), (0.4, 0.9), (0.0, 1.0)]:
        assert float(binary_test_information(a, b, prior=q)) == pytest.approx(
            float(_mi_mp(a, b, q)), rel=1e-10, abs=1e-15)


@pytest.mark.parametrize("v", [0.001, 0.05, 0.3, np.log(2) - 1e-3])
def test_mi_curve_meets_the_budget_with_equality_and_from_above(v):
    c = mi_curve(v, GRID, label="pac", certified=True, confidence=0.95)
    below_one = c.tpr < 1
    info = binary_test_information(GRID[below_one], c.tpr[below_one])
    np.testing.assert_allclose(info, v, rtol=1e-9)
    # on the safe side: the exact root (mpmath bisection) is never above the stored value
    for k in np.flatnonzero(below_one)[::40]:
        root = mpmath.findroot(lambda b, a=GRID[k]: _mi_mp(a, b) - v,
                               (mpmath.mpf(GRID[k]) + mpmath.mpf(10) ** -30, 1 - 1e-30),
                               solver="bisect")
        assert float(root) <= c.tpr[k] + 1e-15
    assert np.all(np.diff(c.tpr) >= 0)
    assert c.label.startswith("certified (1−γ = 0.95): pac")


def test_mi_curve_best_accuracy_is_the_pac_posterior_bound():
    """Max over α of ½(1 + β*(α) − α) equals PAC Thm 1's posterior bound at prior ½."""
    v = 0.05
    grid = np.linspace(0, 1, 20001)
    c = mi_curve(v, grid, label="pac", certified=True, confidence=None)
    best = np.max(0.5 * (1 + c.tpr - grid))
    assert best == pytest.approx(float(posterior_success_rate(v, prior=0.5)), abs=1e-6)


def test_mi_curve_is_tight_against_a_brute_force_region():
    """Every (α, β) on a fine grid with I <= v has β <= the curve; the curve is attained."""
    v, q = 0.02, 0.3
    alphas = np.array([1e-3, 0.05, 0.2, 0.5])
    c = mi_curve(v, alphas, prior=q, label="pac", certified=False, confidence=None)
    betas = np.linspace(0, 1, 200001)
    for a, bound in zip(alphas, c.tpr, strict=True):
        feasible = betas[(betas >= a) & (binary_test_information(a, betas, prior=q) <= v)]
        assert feasible.max() <= bound + 1e-12
        assert bound - feasible.max() < 1e-5
    assert c.label.startswith("estimated: pac")


def test_curve_value_reads_the_next_grid_point_up():
    c = accuracy_curve(0.55, np.array([0.001, 0.01, 0.1, 1.0]), label="x")
    assert curve_value(c, 0.01) == pytest.approx(0.11)
    assert curve_value(c, 0.011) == pytest.approx(0.2)  # never below the curve in between
    assert curve_value(c, 1.0) == 1.0


def test_trivial_curve():
    c = trivial_curve(GRID, reason="non-private")
    assert np.all(c.tpr == 1) and "trivial: non-private" in c.label
    d = c.to_dict()
    assert list(d)[:3] == ["label", "fpr", "tpr"]


def _mp_root(a, v, q):
    """The exact curve at FPR ``a`` (mpmath, 50 digits): largest b in [a, 1] with I <= v."""
    lo, hi = mpmath.mpf(a), mpmath.mpf(1)
    if _mi_mp(a, hi, q) <= v:
        return hi
    for _ in range(70):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _mi_mp(a, mid, q) <= v else (lo, mid)
    return lo


def test_mi_curve_is_never_below_the_exact_curve_not_even_by_round_off():
    """Was 28/72 of this grid below the mpmath curve by <= 6e-16 (bisection on float round-off),
    e.g. v = 0.001, FPR 0.1, q = 0.1: 0.147839150874304 < 0.14783915087430461."""
    fprs = np.array([1e-6, 1e-4, 1e-3, 0.01, 0.1, 0.3])
    below, gaps = 0, []
    for v in (0.0, 0.001, 0.02, 0.3):
        for q in (0.1, 0.5, 0.8):
            c = mi_curve(v, fprs, prior=q, label="x", certified=False, confidence=None)
            for a, bound in zip(fprs, c.tpr, strict=True):
                exact = _mp_root(a, mpmath.mpf(v), q)
                below += int(mpmath.mpf(float(bound)) < exact)
                gaps.append((v, float(mpmath.mpf(float(bound)) - exact)))
    assert below == 0
    # and the safety margin stays tiny (it grows like the square root of the slack at v = 0)
    assert max(g for v, g in gaps if v > 0) < 1e-10
    assert max(g for v, g in gaps if v == 0) < 2e-6
    c = mi_curve(0.001, [0.1], prior=0.1, label="x", certified=False, confidence=None)
    assert c.tpr[0] >= 0.14783915087430461
