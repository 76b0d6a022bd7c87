"""Issue 35 (sixth pass m13): ε at tiny δ keeps the allocation's amplification.

``dpsgd sigma --steps-per-epoch 100 --epochs 5 --target-epsilon 1`` gave σ = 3.20 at δ = 1e-20
and 22.42 at 1e-25 (a 7× jump: the Chernoff bound of the adding direction stopped at order 48,
so ε fell back to Gaussian dominance), labelled "certified PLD". The orders (and the removal
bound's λ grid) now grow with ln(1/δ); the σ is labelled with the bound it was calibrated
against.
"""

from __future__ import annotations

import itertools
import json
import math

import pytest
from scipy import optimize, special

from pacpriv.cli import main
from pacpriv.dpsgd import _chernoff_epsilon as chernoff
from pacpriv.dpsgd.epsilon import epsilon_bound
from pacpriv.dpsgd.epsilon_calibration import calibrate_epsilon


def _gaussian_epsilon(mu: float, delta: float) -> float:
    """Exact ε of the Gaussian mechanism with ``μ = √E/σ`` at ``delta`` (log space):
    ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2)``."""
    def log_delta(eps: float) -> float:
        a = special.log_ndtr(-eps / mu + mu / 2.0)
        b = special.log_ndtr(-eps / mu - mu / 2.0)
        return a + math.log1p(-math.exp(eps + b - a))

    target = math.log(delta)
    if log_delta(0.0) <= target:
        return 0.0
    hi = 1.0
    while log_delta(hi) > target:
        hi *= 2.0
    return optimize.brentq(lambda e: log_delta(e) - target, 0.0, hi, xtol=1e-12, rtol=1e-12)


def _sigmas(deltas):
    return [calibrate_epsilon(1.0, d, steps_per_epoch=100, epochs=5).noise_multiplier
            for d in deltas]


def _check_smooth(deltas, sigmas):
    for i in range(len(deltas) - 1):
        (d0, s0), (d1, s1) = (deltas[i], sigmas[i]), (deltas[i + 1], sigmas[i + 1])
        assert s0 <= s1 * (1 + 1e-9), (d0, d1, s0, s1)  # smaller δ, never less noise
        decades = math.log10(d0 / d1)
        assert s1 <= s0 * 2.0 ** max(1.0, decades / 10.0), (d0, d1, s0, s1)


def test_sigma_for_a_target_epsilon_has_no_jump_across_decades():
    deltas = [1e-16, 1e-20, 1e-24, 1e-25, 1e-26, 1e-30]
    sigmas = _sigmas(deltas)
    _check_smooth(deltas, sigmas)
    assert sigmas[deltas.index(1e-25)] < 4.0  # was 22.42 (Gaussian dominance)


@pytest.mark.slow
def test_sigma_stays_amplified_down_to_1e_300():
    deltas = [1e-50, 1e-100, 1e-300]  # (each σ at δ <= 1e-200 takes 15-20 s)
    sigmas = _sigmas(deltas)
    _check_smooth(deltas, sigmas)
    assert sigmas[-1] < 20.0  # was 82.44 (Gaussian dominance)


@pytest.mark.parametrize("delta", [1e-12, 1e-25, 1e-50, 1e-100, 1e-300])
@pytest.mark.parametrize(("sigma", "epochs"), [(1.0, 1), (3.0, 5), (10.0, 2)])
def test_chernoff_bounds_are_sound_against_the_exact_gaussian_at_one_step(delta, sigma, epochs):
    """At M = 1 the mechanism is the Gaussian of μ = √E/σ, whose ε is exact (log space)."""
    exact = _gaussian_epsilon(math.sqrt(epochs) / sigma, delta)
    for eps in (chernoff.membership_epsilon(sigma, 1, epochs, delta),
                chernoff.removal_epsilon(sigma, 1, epochs, delta),
                epsilon_bound(sigma, steps_per_epoch=1, epochs=epochs, delta=delta).epsilon):
        # (the closed form equals the exact ε at M = 1: equal up to this root's 1e-12)
        assert exact * (1 - 1e-10) <= eps <= 1.5 * exact + 0.05, (exact, eps)


def test_epsilon_at_a_fixed_sigma_is_monotone_across_the_order_steps():
    """The order count steps with δ; where the cap would bind it grows, so ε(δ) never dips."""
    for sigma, steps in ((2.0, 100), (5.0, 100), (1.0, 10)):
        deltas = [10.0**-k for k in range(20, 60, 3)]
        eps = [chernoff.membership_epsilon(sigma, steps, 5, d) for d in deltas]
        assert all(a <= b for a, b in itertools.pairwise(eps)), (sigma, eps)


def test_the_adding_bound_uses_more_orders_at_smaller_delta():
    assert chernoff._orders(1e-5) == chernoff._MAX_ORDER
    assert chernoff._orders(1e-25) > chernoff._MAX_ORDER
    assert chernoff._orders(1e-300) == chernoff._TOP_ORDER >= 1000  # ln(1/δ)/λ ≤ 0.7
    # ε at a fixed σ grows with ln(1/δ) without a floor at ln(1/δ)/48
    eps = [chernoff.membership_epsilon(5.0, 100, 5, d) for d in (1e-20, 1e-25, 1e-30)]
    assert eps[0] < eps[1] < eps[2] < 0.6  # order 48 gave 0.93, 1.17, 1.42


def test_cli_sigma_names_the_bound_it_was_calibrated_against(capsys):
    argv = ["dpsgd", "sigma", "--steps-per-epoch", "100", "--epochs", "5",
            "--target-epsilon", "1", "--delta", "1e-25"]
    assert main([*argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["epsilon_source"].startswith("Chernoff bound")
    assert d["bound_kind"] == "closed-form" and "Chernoff" in d["bound"]
    assert d["noise_multiplier"] < 4.0 and d["epsilon"] <= 1.0
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Chernoff bound" in out and "certified, PLD" not in out
