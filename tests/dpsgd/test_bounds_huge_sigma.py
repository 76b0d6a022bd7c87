"""At huge σ (1/σ² underflows past ~1e154) every printed bound stays above its true value."""

from __future__ import annotations

import math

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacpriv.dpsgd.bounds import log1p_chi_square, membership_inference_accuracy_bound
from pacpriv.dpsgd.exact import exact_membership_inference_accuracy
from pacpriv.dpsgd.tradeoff import tradeoff_curve
from pacpriv.pac import posterior_success_rate


def _true_accuracy(sigma: float, m: int, e: int) -> mpmath.mpf:
    mpmath.mp.dps = 60
    x = 1 / mpmath.mpf(sigma) ** 2
    chi2 = (1 + mpmath.expm1(x) / m) ** e - 1
    return min(mpmath.mpf(1), mpmath.mpf("0.5") + mpmath.sqrt(chi2) / 4)


@settings(max_examples=60, deadline=None)
@given(log_sigma=st.floats(100.0, 307.0), m=st.integers(1, 10**6), e=st.integers(1, 10**4))
def test_accuracy_never_below_mpmath_at_huge_sigma(log_sigma, m, e):
    sigma = 10.0**log_sigma
    b = membership_inference_accuracy_bound(sigma, steps_per_epoch=m, epochs=e)
    assert mpmath.mpf(b.accuracy) >= _true_accuracy(sigma, m, e)
    assert b.accuracy > 0.5  # the true value is > ½ at every finite σ
    assert b.log1p_chi_square > 0.0


@pytest.mark.parametrize("sigma", [1e150, 1e155, 1e200, 1e300, 1.7e308])
def test_api_siblings_above_half(sigma):
    b = membership_inference_accuracy_bound(sigma, steps_per_epoch=100, epochs=10)
    assert b.accuracy == math.nextafter(0.5, 1.0) or b.accuracy > 0.5
    assert log1p_chi_square(sigma, steps_per_epoch=100, epochs=10) > 0.0
    ex = exact_membership_inference_accuracy(sigma, steps_per_epoch=100, epochs=10)
    assert ex.upper > 0.5
    assert posterior_success_rate(1e-300, prior=0.5) > 0.5


def test_array_input_above_half():
    import numpy as np
    acc = membership_inference_accuracy_bound(
        np.array([1e100, 1e200, 1e300]), steps_per_epoch=100, epochs=10).accuracy
    assert np.all(acc > 0.5)


@pytest.mark.parametrize("sigma", [1e50, 1e300])
def test_tradeoff_curve_at_huge_sigma_does_not_claim_too_little_noise(sigma):
    with pytest.raises(ValueError, match="too large"):
        tradeoff_curve(noise_multiplier=sigma, steps_per_epoch=100, epochs=10)


@pytest.mark.parametrize("sigma", ["1e155", "1e300"])
def test_cli_json_accuracy_above_half(sigma, capsys):
    import json

    from pacpriv.cli import main
    rc = main(["dpsgd", "bound", "--steps-per-epoch", "100", "--epochs", "10",
               "--noise-multiplier", sigma, "--json"])
    assert rc in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert out["accuracy"] > 0.5
    assert out["log1p_chi_square"] > 0.0
