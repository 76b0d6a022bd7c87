"""Tests for pacpriv.pac.bounds._posterior (MI budget -> posterior success rate, [PAC] Thm 1)."""

from __future__ import annotations

import csv
import math

import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pacpriv.pac.bounds._posterior import (
    _kl_root,
    individual_mi_bound,
    membership_inference_accuracy_bound,
    mi_budget_for_accuracy,
    pinsker_bound,
    posterior_success_rate,
)

priors = st.floats(min_value=0.5, max_value=1 - 1e-6)
budgets = st.floats(min_value=0.0, max_value=20.0)


def _kl_mp(p, p0):
    p, p0 = mpmath.mpf(p), mpmath.mpf(p0)
    out = p * mpmath.log(p / p0)
    if p < 1:
        out += (1 - p) * mpmath.log((1 - p) / (1 - p0))
    return out


def _root_mp(v, p0):
    """Exact KL inversion at 50 digits (independent oracle)."""
    mpmath.mp.dps = 50
    if v >= -math.log(p0):
        return mpmath.mpf(1)
    lo, hi = mpmath.mpf(p0), mpmath.mpf(1)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _kl_mp(mid, p0) <= v else (lo, mid)
    return hi


def test_reference_csv_rows(reference_dir):
    """Every row of mi_posterior.csv is reproduced to 1e-9."""
    with open(reference_dir / "mi_posterior.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) >= 20
    for row in rows:
        v, p0 = float(row["mi_budget_nats"]), float(row["prior"])
        # priors below ½ (a k-ary secret) are refused by the public function (a membership
        # prior is max(q, 1 - q)); the Thm 1 root itself is checked through the kernel
        got = (posterior_success_rate(v, prior=p0) if p0 >= 0.5
               else float(_kl_root(np.float64(v), np.float64(p0))))
        assert got == pytest.approx(float(row["posterior_success_bound"]), abs=1e-9), row


def test_vectorised_csv_matches_scalar(reference_dir):
    """The vectorised call over all CSV rows equals the row-by-row scalar calls."""
    with open(reference_dir / "mi_posterior.csv") as fh:
        rows = list(csv.DictReader(fh))
    v = np.array([float(r["mi_budget_nats"]) for r in rows])
    p0 = np.array([float(r["prior"]) for r in rows])
    keep = p0 >= 0.5
    v, p0, rows = v[keep], p0[keep], [r for r, k in zip(rows, keep, strict=True) if k]
    got = posterior_success_rate(v, prior=p0)
    assert got.shape == v.shape
    scalar = [posterior_success_rate(a, prior=b) for a, b in zip(v, p0, strict=True)]
    assert np.array_equal(got, scalar)


@pytest.mark.parametrize(("v", "p0"), [(1e-8, 0.5), (0.3, 0.8), (1e-4, 0.999), (2.0, 0.95)])
def test_never_understates_mpmath_root(v, p0):
    """The returned p is >= the exact (50-digit) root and within 1e-13 of it."""
    exact = _root_mp(v, p0)
    got = posterior_success_rate(v, prior=p0)
    assert mpmath.mpf(got) >= exact - mpmath.mpf("1e-16")
    assert abs(mpmath.mpf(got) - exact) < 1e-13


def test_edges():
    """v = 0 gives the prior, v >= ln(1/p0) and v = inf give 1."""
    assert posterior_success_rate(0.0, prior=0.7) == 0.7
    assert posterior_success_rate(math.log(1 / 0.7), prior=0.7) == 1.0
    assert posterior_success_rate(math.inf, prior=0.5) == 1.0
    assert membership_inference_accuracy_bound(math.log(2)) == 1.0


def test_broadcasting_shape():
    """mi_budget (3, 1) and prior (4,) broadcast to (3, 4)."""
    v = np.array([[0.01], [0.1], [1.0]])
    p0 = np.array([0.5, 0.6, 0.5, 0.9])
    got = posterior_success_rate(v, prior=p0)
    assert got.shape == (3, 4)
    assert got[1, 2] == posterior_success_rate(0.1, prior=0.5)


@settings(max_examples=200, deadline=None)
@given(v=budgets, p0=priors)
def test_pinsker_dominates_exact(v, p0):
    """Pinsker's bound is never below the exact KL inversion."""
    # 1e-13: the exact bound is nudged up by 32 ulps (safe side); Pinsker is looser by O(v^1.5).
    assert pinsker_bound(v, prior=p0) >= posterior_success_rate(v, prior=p0) - 1e-13


@settings(max_examples=200, deadline=None)
@given(v1=budgets, v2=budgets, p0=priors)
def test_monotone_in_budget(v1, v2, p0):
    """A larger budget never gives a smaller bound."""
    lo, hi = sorted((v1, v2))
    assert posterior_success_rate(lo, prior=p0) <= posterior_success_rate(hi, prior=p0)


@settings(max_examples=200, deadline=None)
@given(v=st.floats(min_value=1e-6, max_value=5.0), p0=priors)
@example(v=1e-06, p0=0.9999989999999999)  # near p = 1 a few ulps of p move the KL by 1e-7
def test_round_trip_budget(v, p0):
    """mi_budget_for_accuracy inverts posterior_success_rate: the bound sits just past the root.

    The bound is nudged up by 32 ulps (safe side) and the inverse comes back to at most p and
    within a few hundred ulps of it; 64 ulps lower the budget is <= v: the bound is within a
    few ulps of the exact inverse.
    """
    p = posterior_success_rate(v, prior=p0)
    if p < 1.0:
        back = posterior_success_rate(mi_budget_for_accuracy(p, prior=p0), prior=p0)
        assert p * (1 - 512 * np.finfo(np.float64).eps) <= back <= p
        below = p * (1 - 64 * np.finfo(np.float64).eps)
        if below > p0:
            assert mi_budget_for_accuracy(below, prior=p0) <= v * (1 + 1e-9) + 1e-15


@settings(max_examples=200, deadline=None)
@given(a=st.floats(min_value=1e-6, max_value=1.0), p0=priors)
@example(a=0.6, p0=0.5)  # the forward bound rounds up: 0.6000000000000001 before the fix
@example(a=0.7276467284509456, p0=0.6484375)  # mirror of a case lowered 531 ulps before
def test_budget_for_a_target_never_exceeds_it_in_floating_point(a, p0):
    """posterior_success_rate(mi_budget_for_accuracy(a)) <= a in float, within ~512 ulps of a."""
    if a < p0:
        return
    v = mi_budget_for_accuracy(a, prior=p0)
    back = posterior_success_rate(v, prior=p0)
    assert a * (1 - 512 * np.finfo(np.float64).eps) <= back <= a
    assert v <= float(_kl_mp(a, p0)) * (1 + 1e-12)  # never above the exact KL


def test_round_trip_accuracy_and_entropy_form():
    """Prior ½: the inverse equals ln 2 − H(a) and maps back to a."""
    a = np.array([0.5, 0.55, 0.7, 0.9, 0.999])
    h = -(a * np.log(a) + (1 - a) * np.log(1 - a))
    v = mi_budget_for_accuracy(a, prior=0.5)
    assert np.allclose(v, np.log(2) - h, atol=1e-15)
    assert np.allclose(posterior_success_rate(v, prior=0.5), a, atol=1e-12)
    assert mi_budget_for_accuracy(1.0, prior=0.75) == pytest.approx(math.log(4 / 3))


def test_pinsker_value():
    """Pinsker: p0 + sqrt(v/2), capped at 1."""
    assert pinsker_bound(0.02, prior=0.5) == pytest.approx(0.6)
    assert pinsker_bound(3.0, prior=0.5) == 1.0


def test_individual_mi_bound():
    """[PAC Thm 2]: v/n per record."""
    assert individual_mi_bound(0.5, n_records=10) == pytest.approx(0.05)
    assert np.allclose(individual_mi_bound([1.0, 2.0], n_records=4), [0.25, 0.5])


def test_error_negative_budget():
    """A negative budget names the argument and range."""
    with pytest.raises(ValueError, match=r"`mi_budget` must be in \[0, inf\]"):
        posterior_success_rate(-0.1, prior=0.5)


def test_error_nan_budget():
    """NaN budget is rejected."""
    with pytest.raises(ValueError, match="`mi_budget`"):
        pinsker_bound(float("nan"), prior=0.5)


def test_error_budget_type():
    """A non-numeric budget is a TypeError."""
    with pytest.raises(TypeError, match=r"`mi_budget` must be (numeric|real numbers)"):
        posterior_success_rate("0.5", prior=0.5)


@pytest.mark.parametrize("p0", [0.0, 1.0, -0.2])
def test_error_prior_range(p0):
    """The prior must be in [0.5, 1), and every invalid prior is told that range."""
    with pytest.raises(ValueError, match=r"`prior` is the blind-guess .* must be in \[0\.5, 1\)"):
        posterior_success_rate(0.1, prior=p0)


_PRIOR_USERS = [
    lambda p: posterior_success_rate(0.1, prior=p),
    lambda p: posterior_success_rate([0.0, 0.1], prior=[0.5, p]),
    lambda p: pinsker_bound(0.1, prior=p),
    lambda p: mi_budget_for_accuracy(0.9, prior=p),
]


@pytest.mark.parametrize("p0", [0.3, 0.01, 0.4999999])
@pytest.mark.parametrize("call", range(len(_PRIOR_USERS)))
def test_prior_below_half_refused_everywhere(p0, call):
    """A prior below ½ (an inclusion probability q < ½, not max(q, 1 − q)) would give a bound
    below the blind guess 1 − q (0.5146 < 0.7 at v = 0.1, prior 0.3): refused, as by the CLI."""
    with pytest.raises(ValueError, match=r"`prior` .* must be in \[0.5, 1\)"):
        _PRIOR_USERS[call](p0)


def test_prior_below_half_refused_by_ledger_and_plot():
    """The ledger and the posterior plot take the same prior and refuse the same values."""
    from pacpriv.pac.bounds import PrivacyLedger
    from pacpriv.plotting.pac import plot_posterior_curve
    with pytest.raises(ValueError, match=r"prior=0.7"):
        PrivacyLedger(1.0, prior=0.3)
    ledger = PrivacyLedger(1.0)
    with pytest.raises(ValueError, match=r"\[0.5, 1\)"):
        ledger.use_prior(0.2)
    with pytest.raises(ValueError, match=r"\[0.5, 1\)"):
        ledger.posterior_success_bound(prior=0.2)
    with pytest.raises(ValueError, match=r"\[0.5, 1\)"):
        plot_posterior_curve(0.1, prior=0.3)


@settings(max_examples=100, deadline=None)
@given(v=st.floats(min_value=0.0, max_value=5.0), p0=priors)
def test_bound_never_below_blind_guess(v, p0):
    """Every accepted prior gives a bound >= max(p0, 1 − p0)."""
    assert posterior_success_rate(v, prior=p0) >= max(p0, 1 - p0)


def test_error_accuracy_below_prior():
    """A target accuracy below the prior has no budget."""
    with pytest.raises(ValueError, match=r"`target_accuracy` must be in \[prior, 1\]"):
        mi_budget_for_accuracy(0.4, prior=0.5)


def test_error_accuracy_above_one():
    """A target accuracy above 1 is rejected."""
    with pytest.raises(ValueError, match="`target_accuracy` must be in"):
        mi_budget_for_accuracy(1.1, prior=0.5)


def test_error_n_records():
    """n_records must be a positive integer."""
    with pytest.raises(ValueError, match="`n_records` must be an integer in"):
        individual_mi_bound(1.0, n_records=0)


@settings(max_examples=300, deadline=None)
@given(v=st.floats(min_value=0.0, max_value=3.0), p0=priors, n=st.integers(1, 10**9))
@example(v=0.02, p0=0.7, n=150)  # V2 review: Pinsker printed 0.8, 1e-18 below its exact value
def test_pinsker_and_average_bounds_round_up(v, p0, n):
    with mpmath.workdps(50):
        pinsker = min(mpmath.mpf(1), mpmath.mpf(p0) + mpmath.sqrt(mpmath.mpf(v) / 2))
        assert mpmath.mpf(pinsker_bound(v, prior=p0)) >= pinsker
        assert mpmath.mpf(individual_mi_bound(v, n_records=n)) >= mpmath.mpf(v) / n
    assert pinsker_bound(v, prior=p0) <= float(pinsker) * (1 + 1e-14) + 1e-15


@pytest.mark.parametrize("func", [posterior_success_rate, pinsker_bound])
def test_integer_mi_budget_beyond_float64_is_one_line_value_error(func):
    """10**400 is a ValueError naming `mi_budget` (as check_array_real gives), not a TypeError
    about an object dtype; an int beyond int64 but within float64 still works."""
    with pytest.raises(ValueError, match=r"^`mi_budget` must be at most .* integer of 401 digits"):
        func(10**400, prior=0.5)
    assert func(2**70, prior=0.5) == func(float(2**70), prior=0.5)


@pytest.mark.parametrize("prior", [0.5, 0.6, 0.9])
@pytest.mark.parametrize("target", [0.55, 0.8, 0.95])
def test_accuracy_for_mi_budget_takes_the_prior_of_its_inverse(prior, target):
    """``accuracy_for_mi_budget`` was an alias without ``prior=`` (a TypeError), while its
    inverse ``mi_budget_for_accuracy`` requires it (seventh new-user pass, #177)."""
    from pacpriv.pac import accuracy_for_mi_budget, mi_budget_for_accuracy, posterior_success_rate

    if target < prior:
        return
    v = mi_budget_for_accuracy(target, prior=prior)
    back = accuracy_for_mi_budget(v, prior=prior)
    assert back == posterior_success_rate(v, prior=prior)
    assert back <= target and back == pytest.approx(target, abs=1e-9)
    assert accuracy_for_mi_budget(v) == posterior_success_rate(v, prior=0.5)  # default ½
