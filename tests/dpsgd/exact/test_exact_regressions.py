"""Issue 13 / 14.8 regressions: bounded resources, valid intervals, no warnings, arrays, screens."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from pacpriv.dpsgd import exact as exact_mod
from pacpriv.dpsgd import (
    exact_membership_inference_accuracy,
    membership_inference_accuracy_bound,
    noise_multiplier_for_accuracy,
)
from pacpriv.dpsgd._exact.screens import gaussian_upper_tv, spike_lower_tv, sum_lower_tv

from ._memory_cap import assert_runs_under_memory_cap

#: The failure table of issue 13 (σ, M, E), plus issue 14 item 8 (M=1, E=1000, σ=1).
FAILURES = [
    (0.05, 100, 10),  # 59 s, no progress output
    (0.3, 100, 10),  # 64 s
    (0.05, 10, 1),  # tried to allocate 25.7 GiB
    (0.05, 2, 1),  # OverflowError from math.ceil(inf)
    (0.05, 3, 1),
    (0.2, 1000, 10),  # killed for memory
    (0.05, 1, 100_000),  # lower = upper = 1.0000000144 > 1 (FFT round-off)
    (1.0, 10, 100),  # E > 64: spurious RuntimeWarning
    (1.0, 1, 1000),  # issue 14.8: "invalid value" RuntimeWarning
]

#: Cells of the issue-13 grid (and corners) that warned "width exceeds tolerance" before.
FORMER_WARNINGS = [
    (0.3, 10**6, 10),
    (0.5, 10**4, 10**4),
    (1.0, 10**6, 10**4),
    (2.0, 10**6, 10**4),
    (0.2, 10**8, 1),
    (0.2, 10**8, 100),
    (1.0, 10**7, 10**4),
    (4.0, 10**4, 10**5),
]


def _exact(sigma, m, e, **kw):
    kw.setdefault("progress", False)
    return exact_membership_inference_accuracy(sigma, steps_per_epoch=m, epochs=e, **kw)


@pytest.mark.parametrize(("sigma", "m", "e"), FAILURES + FORMER_WARNINGS)
def test_failure_table_valid_interval_no_warning(sigma, m, e):
    """Each former failure or warning cell gives ½ ≤ lower ≤ upper ≤ chi-square bound (≤ 1)
    within tolerance, under -W error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = _exact(sigma, m, e)
    assert 0.5 <= res.lower <= res.upper <= 1.0
    assert res.converged and res.width <= 1e-4
    chi2 = membership_inference_accuracy_bound(sigma, steps_per_epoch=m, epochs=e).accuracy
    assert res.upper <= chi2


def test_m1_long_run_is_below_one_and_contains_truth():
    """M=1, E=1e5, σ=0.05: the exact value Φ(sqrt(E)/(2σ)) is 1 to double precision; ≤ 1."""
    res = _exact(0.05, 1, 100_000)
    assert res.upper <= 1.0
    assert res.lower > 1.0 - 1e-9


def test_m1_e1000_contains_closed_form():
    """Issue 14.8 case: the interval contains Φ(sqrt(1000)/2) (M=1 is a Gaussian shift)."""
    res = _exact(1.0, 1, 1000)
    truth = norm.cdf(math.sqrt(1000) / 2)
    assert res.lower <= truth <= res.upper




def test_memory_cap_subprocess():
    """Former memory failures run under a 2 GiB address-space cap (resource.setrlimit)."""
    cases = [(0.05, 10, 1), (0.2, 1000, 10), (0.3, 100, 10), (0.2, 10_000, 1), (0.5, 10_000, 10)]
    assert_runs_under_memory_cap(cases)


def test_array_sigma_agrees_with_scalar_calls():
    """Array σ (and broadcast M) gives elementwise the scalar intervals, deduplicated."""
    sig = np.array([0.3, 1.0, 2.0, 1.0])
    res = _exact(sig, 10, 3)
    assert res.lower.shape == (4,)
    for i, s in enumerate(sig):
        one = _exact(float(s), 10, 3)
        assert res.lower[i] == one.lower and res.upper[i] == one.upper
    grid = _exact(np.array([[1.0], [2.0]]), np.array([1, 10]), 2)
    assert grid.lower.shape == (2, 2)
    assert grid.upper[1, 1] == _exact(2.0, 10, 2).upper


def test_array_targets_exact_calibration_agree_with_scalar():
    """noise_multiplier_for_accuracy(method="exact") on an array equals the scalar calls."""
    # (elementwise identical: a search started from a neighbour's σ used to end elsewhere
    # within rtol, e.g. 0.87665 against 0.87673 at (100, 10, 0.6))
    for m, e, targets in ((10, 2, np.array([0.56, 0.6])), (100, 10, np.array([0.55, 0.6]))):
        arr = noise_multiplier_for_accuracy(targets, steps_per_epoch=m, epochs=e, method="exact")
        for t, s in zip(targets, arr, strict=True):
            one = noise_multiplier_for_accuracy(float(t), steps_per_epoch=m, epochs=e,
                                                method="exact")
            assert s == one
            assert _exact(float(s), m, e).upper <= t


@pytest.mark.parametrize(("sigma", "e"), [(0.3, 1), (0.7, 3), (1.5, 10), (4.0, 50)])
def test_screens_bracket_the_m1_closed_form(sigma, e):
    """M=1: spike and sum lower bounds ≤ exact TV = erf(sqrt(E)/(2√2σ)) ≤ Gaussian upper."""
    truth = math.erf(math.sqrt(e) / (2 * sigma) / math.sqrt(2))
    assert spike_lower_tv(sigma, 1, e) <= truth + 1e-15
    assert sum_lower_tv(sigma, 1, e) <= truth + 1e-15
    assert gaussian_upper_tv(sigma, e) >= truth


@pytest.mark.parametrize(("sigma", "m", "e"), [(0.3, 10, 1), (0.5, 10, 3), (1.0, 100, 10)])
def test_screens_bracket_the_numerical_interval(sigma, m, e):
    """Screens never contradict the discretised interval (both certified: they overlap)."""
    res = _exact(sigma, m, e, tolerance=1e-5)
    lo = 0.5 + 0.5 * max(spike_lower_tv(sigma, m, e), sum_lower_tv(sigma, m, e))
    up = 0.5 + 0.5 * gaussian_upper_tv(sigma, e)
    assert lo <= res.upper and res.lower <= up


def test_geometric_and_linear_grids_agree(monkeypatch):
    """The heavy-tail (geometric) and light-tail (linear) discretisations overlap."""
    case = (0.7, 10, 4)
    lin = exact_mod._numeric_once(
        *case, c=40.0, c_epoch=40.0, extra=0.0, direction="add", method="linear",
        tail=1e-6, tol=1e-4, tick=None,
    )
    geo = exact_mod._numeric_once(
        *case, c=48.0, c_epoch=40.0, extra=0.0, direction="add", method="geometric",
        tail=1e-6, tol=1e-4, tick=None,
    )
    assert lin["tv_lower_numerical"] <= geo["tv_upper_numerical"]
    assert geo["tv_lower_numerical"] <= lin["tv_upper_numerical"]
    assert geo["tv_upper_numerical"] - geo["tv_lower_numerical"] < 1e-3


def test_roundoff_is_derived_and_reported():
    """The round-off allowance is a derived, case-dependent bound (not a constant)."""
    a = _exact(1.0, 100, 10).details
    b = _exact(1.0, 1000, 100).details
    assert 0 < a["roundoff_upper"] < b["roundoff_upper"] < 1e-4


def test_tiny_sigma_is_fast_and_pinned():
    """σ = 0.05: accuracy 1 to many digits from the certified screens, no discretisation."""
    res = _exact(0.05, 10**6, 10**4)
    assert res.details["method"] == "screen"
    assert res.lower >= 1 - 1e-9 and res.upper == 1.0


def test_progress_argument_checked():
    """`progress` must be None or a bool."""
    with pytest.raises(TypeError, match="progress"):
        _exact(1.0, 10, 1, progress="yes")
