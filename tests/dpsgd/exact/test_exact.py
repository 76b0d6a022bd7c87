"""Tests for pacpriv.dpsgd.exact (certified exact accuracy interval)."""

from __future__ import annotations

import csv
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from pacpriv.dpsgd import exact_membership_inference_accuracy, membership_inference_accuracy_bound


def _exact(sigma, m, e, **kw):
    return exact_membership_inference_accuracy(sigma, steps_per_epoch=m, epochs=e, **kw)


@pytest.mark.parametrize(("sigma", "epochs"), [(1.0, 10), (0.3, 1), (5.0, 100), (2.0, 3)])
def test_m1_equals_gaussian_closed_form(sigma, epochs):
    """M = 1: the interval contains Φ(sqrt(E)/(2σ)) (M=1, E=10, σ=1 → 0.9430769; the math
    reference's worked example prints 0.943095, a typo: Φ(1.5811) = 0.94308)."""
    res = _exact(sigma, 1, epochs)
    truth = norm.cdf(math.sqrt(epochs) / (2 * sigma))
    assert res.lower <= truth <= res.upper
    assert res.width <= 1e-4


def test_contains_monte_carlo_reference(reference_dir):
    """Every ra_exact_accuracy_mc.csv row lies in [lower − 4 se, upper + 4 se]."""
    with open(reference_dir / "ra_exact_accuracy_mc.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        res = _exact(float(r["noise_multiplier"]), int(r["steps_per_epoch"]), int(r["epochs"]))
        mc, se = float(r["exact_accuracy_mc"]), float(r["standard_error"])
        assert res.lower - 4 * se <= mc <= res.upper + 4 * se, r
        assert res.width <= 1e-4
        assert res.upper <= float(r["chi2_accuracy_bound"])


def test_tolerance_controls_width():
    """A tighter tolerance gives a narrower interval nested within error of the coarse one."""
    coarse = _exact(1.0, 10, 1, tolerance=1e-3)
    fine = _exact(1.0, 10, 1, tolerance=1e-5)
    assert fine.width <= 1e-5 < coarse.tolerance
    assert coarse.lower <= fine.upper and fine.lower <= coarse.upper


@settings(max_examples=8, deadline=None)
@given(st.floats(0.8, 8.0), st.integers(2, 300), st.integers(1, 30))
@example(1.125, 7, 9)
def test_directions_agree(sigma, m, e):
    """P→Q ("add") and Q→P ("remove") certify the same TV (symmetry): the intervals overlap.

    The two directions discretise different privacy-loss laws, so their bounds differ within
    the tolerance (hypothesis found σ=1.125, M=7, E=9: lowers 0.720631 vs 0.720620); what
    symmetry guarantees is that both intervals contain the one true value.
    """
    a = _exact(sigma, m, e, direction="add")
    b = _exact(sigma, m, e, direction="remove")
    assert max(a.lower, b.lower) <= min(a.upper, b.upper)
    assert abs(a.lower - b.lower) <= 1e-4 and abs(a.upper - b.upper) <= 1e-4


@settings(max_examples=8, deadline=None)
@given(st.floats(0.8, 8.0), st.integers(2, 300), st.integers(1, 30))
def test_below_chi_square_and_valid(sigma, m, e):
    """½ ≤ lower ≤ upper ≤ chi-square bound, also before capping the upper by it."""
    res = _exact(sigma, m, e)
    bound = membership_inference_accuracy_bound(sigma, steps_per_epoch=m, epochs=e).accuracy
    assert 0.5 <= res.lower <= res.upper <= bound
    assert res.details["upper_numerical"] <= bound or res.details["upper_numerical"] - bound < 1e-4


@settings(max_examples=8, deadline=None)
@given(st.floats(0.8, 6.0), st.integers(2, 200), st.integers(1, 20))
def test_monotone(sigma, m, e):
    """Certified intervals are consistent with monotonicity in σ (↓), E (↑) and M (↓)."""
    base = _exact(sigma, m, e)
    more_noise = _exact(sigma * 1.3, m, e)
    more_epochs = _exact(sigma, m, 2 * e)
    more_steps = _exact(sigma, 2 * m, e)
    assert more_noise.lower <= base.upper and more_noise.estimate < base.estimate
    assert more_epochs.upper >= base.lower and more_epochs.estimate > base.estimate
    assert more_steps.lower <= base.upper and more_steps.estimate < base.estimate


def test_large_steps_regime_is_fast_and_tight():
    """M = 10⁶: close to the Gaussian approximation Φ(sqrt(E·χ²)/2), width ≤ 1e-4."""
    res = _exact(1.0, 10**6, 100)
    mu = math.sqrt(100 * math.expm1(1.0) / 10**6)
    assert res.width <= 1e-4
    assert res.lower - 1e-4 <= norm.cdf(mu / 2) <= res.upper + 1e-4


def test_to_dict_json():
    """ExactAccuracy.to_dict is JSON-serialisable and carries the width."""
    import json

    d = _exact(2.0, 10, 3).to_dict()
    json.dumps(d)
    assert d["width"] == pytest.approx(d["upper"] - d["lower"])


def test_error_direction():
    """Unknown direction is rejected."""
    with pytest.raises(ValueError, match="direction"):
        _exact(1.0, 10, 1, direction="sideways")


def test_error_tolerance():
    """Tolerance outside [1e-8, 0.5] is rejected."""
    with pytest.raises(ValueError, match="tolerance"):
        _exact(1.0, 10, 1, tolerance=0.0)


def test_error_sigma_type():
    """A string σ is a TypeError naming the argument."""
    with pytest.raises(TypeError, match="noise_multiplier"):
        _exact("1", 10, 1)


def test_error_epochs():
    """epochs < 1 is rejected."""
    with pytest.raises(ValueError, match="epochs"):
        _exact(1.0, 10, 0)


def test_exact_refuses_steps_beyond_memory_cap():
    """M above MAX_EXACT_STEPS_PER_EPOCH is a clear ValueError, not a memory blow-up."""
    from pacpriv.dpsgd.exact import MAX_EXACT_STEPS_PER_EPOCH

    with pytest.raises(ValueError, match="chi-square bound"):
        exact_membership_inference_accuracy(
            1.0, steps_per_epoch=MAX_EXACT_STEPS_PER_EPOCH + 1, epochs=10
        )
