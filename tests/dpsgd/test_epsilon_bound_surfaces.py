"""Every surface that prints ε for random-allocation DP-SGD prints the same number.

Found by an independent review: at t = 1 the trade-off curve's ``get_epsilon`` gave the
discretised PLD's ε (4.377307 at σ = 1, δ = 1e-5) while ``epsilon_bound`` gave the exact
Gaussian one (4.377178); both were sound, but the docs promise one number.
"""

import pytest

from pacpriv.dpsgd import DPSGDSpec, epsilon_bound, tradeoff_curve

POINTS = [(1.0, 1, 1, 1), (0.7, 1, 3, 1), (1.0, 10, 2, 1), (2.0, 4, 2, 2)]


@pytest.mark.parametrize(("sigma", "t", "e", "k"), POINTS)
@pytest.mark.parametrize("delta", [1e-5, 1e-2])
def test_curve_spec_and_epsilon_bound_agree(sigma, t, e, k, delta):
    want = epsilon_bound(sigma, steps_per_epoch=t, epochs=e, delta=delta, k=k).epsilon
    curve = tradeoff_curve(noise_multiplier=sigma, steps_per_epoch=t, epochs=e, k=k)
    assert curve.get_epsilon(delta) == want
    assert DPSGDSpec(sigma, t, e, k=k).get_epsilon(delta) == want


def test_t1_is_the_exact_gaussian_epsilon():
    from scipy.optimize import brentq
    from scipy.stats import norm

    mu, delta = 1.0, 1e-5    # σ = 1, one step: Gaussian shift μ = 1/σ
    def gap(eps):
        return norm.cdf(-eps / mu + mu / 2) - (2.718281828459045 ** eps) * norm.cdf(
            -eps / mu - mu / 2) - delta
    exact = brentq(gap, 0.0, 20.0, xtol=1e-14)
    got = tradeoff_curve(noise_multiplier=1.0, steps_per_epoch=1, epochs=1).get_epsilon(delta)
    assert exact <= got <= exact * (1 + 1e-6)
