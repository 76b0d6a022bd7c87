"""Counts beyond float64 (``10**400``) answer the closed forms in log space, or are refused in
one line naming the argument (new-user log #359: a bare OverflowError naming nothing)."""

from __future__ import annotations

import mpmath
import pytest

from pacpriv.dpsgd.bounds import closed_form_noise_multiplier, membership_inference_accuracy_bound
from pacpriv.dpsgd.epsilon import epsilon_bound
from pacpriv.dpsgd.exact import exact_membership_inference_accuracy

BIG = 10**400


def _reference(sigma, m, e):
    with mpmath.workdps(80):
        total = mpmath.mpf(e) * mpmath.log1p(mpmath.expm1(1 / mpmath.mpf(sigma) ** 2) / m)
        if total >= mpmath.log(5):
            return 1.0
        return float(0.5 + 0.25 * mpmath.sqrt(mpmath.expm1(total)))


@pytest.mark.parametrize(("sigma", "m", "e"), [
    (3.0, BIG, BIG), (1.0, BIG, 10), (1.0, 100, BIG), (1e200, 1, BIG), (1e200, 3, BIG),
    (0.5, BIG, BIG // 10), (3.0, 2**1001, 2**1001), (0.03, BIG, BIG),
])
def test_bound_at_huge_counts_is_the_exact_value_rounded_up(sigma, m, e):
    got = membership_inference_accuracy_bound(sigma, steps_per_epoch=m, epochs=e).accuracy
    ref = _reference(sigma, m, e)
    assert ref <= got <= ref + 1e-11
    assert got > 0.5  # χ² > 0: never the blind guess itself


def test_huge_path_agrees_with_the_float_path_at_the_boundary():
    at = membership_inference_accuracy_bound(3.0, steps_per_epoch=2**999, epochs=2**999)
    above = membership_inference_accuracy_bound(3.0, steps_per_epoch=2**1001, epochs=2**1001)
    assert above.accuracy == pytest.approx(at.accuracy, abs=1e-12)


@pytest.mark.parametrize(("m", "e"), [(BIG, BIG), (BIG, 10), (1, BIG), (2**1001, 3)])
def test_sigma_round_trip_at_huge_counts(m, e):
    sigma = closed_form_noise_multiplier(0.6, steps_per_epoch=m, epochs=e)
    bound = membership_inference_accuracy_bound(sigma, steps_per_epoch=m, epochs=e).accuracy
    assert 0.6 - 1e-9 <= bound <= 0.6


def test_epsilon_answers_at_huge_counts():
    assert epsilon_bound(1.0, steps_per_epoch=BIG, epochs=10, delta=1e-5).epsilon == 0.0
    b = epsilon_bound(1.0, steps_per_epoch=BIG, epochs=BIG, delta=1e-5)
    assert b.epsilon > 0 and "PLD unavailable" in b.pld_note and "401 digits" in b.pld_note
    assert epsilon_bound(1.0, steps_per_epoch=100, epochs=BIG, delta=1e-5).epsilon == float("inf")


def test_refusals_name_the_argument():
    with pytest.raises(ValueError, match=r"`epochs` must be an integer in \[1, .*401 digits"):
        exact_membership_inference_accuracy(1.0, steps_per_epoch=10, epochs=BIG)
    with pytest.raises(ValueError, match="`k` must be 1"):
        membership_inference_accuracy_bound(1.0, steps_per_epoch=BIG, epochs=1, k=2)
    with pytest.raises(ValueError, match=r"`steps_per_epoch` must be an integer in \[1"):
        membership_inference_accuracy_bound(1.0, steps_per_epoch=0, epochs=BIG)
