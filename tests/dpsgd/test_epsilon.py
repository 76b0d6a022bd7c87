"""ε at δ (issue 35, items 1, 2 and F6): sound, monotone, finite where the true value is."""

import json
import math

import numpy as np
import pytest
from scipy import special
from scipy.stats import norm

from pacpriv.cli.main import main
from pacpriv.dpsgd import DPSGDSpec
from pacpriv.dpsgd.epsilon import epsilon_bound, gaussian_epsilon

SIGMAS = np.geomspace(0.01, 1e9, 19)
DELTAS = (1e-20, 1e-10, 1e-5, 0.5)


def _table(steps, epochs):
    return np.array([[DPSGDSpec(float(s), steps, epochs).get_epsilon(d) for d in DELTAS]
                     for s in SIGMAS])


def test_epsilon_sweep_is_finite_nonnegative_and_monotone():
    """F6: σ ∈ [0.01, 1e9], δ ∈ [1e-20, 0.5]: no NaN, no inf, ε ≥ 0, non-increasing in σ and
    δ (main printed 0.00046 at σ = 1e3, 0.0717 at 1e5 and inf at 1e9)."""
    tab = _table(100, 10)
    assert np.all(np.isfinite(tab)) and np.all(tab >= 0.0)
    assert np.all(np.diff(tab, axis=0) <= 0.0), "ε must not grow with σ"
    assert np.all(np.diff(tab, axis=1) <= 0.0), "ε must not grow with δ"
    # the true ε is 0 once TV ≤ δ: at σ = 1e9 TV ≈ 1.3e-10 (δ = 1e-5 and 0.5)
    assert tab[-1, 2] == tab[-1, 3] == 0.0
    assert 0.0 < tab[-1, 0] < 1e-6  # δ = 1e-20: tiny but positive


def test_epsilon_monotone_in_steps_and_epochs():
    for sigma in (0.7, 3e3, 1e6):
        by_m = [DPSGDSpec(sigma, m, 5).get_epsilon(1e-6) for m in (1, 3, 30, 300)]
        by_e = [DPSGDSpec(sigma, 20, e).get_epsilon(1e-6) for e in (1, 3, 30, 300)]
        assert np.all(np.diff(by_m) <= 0.0) and np.all(np.diff(by_e) >= 0.0), sigma
        assert all(math.isfinite(x) for x in by_m + by_e)


def test_gaussian_epsilon_matches_the_analytic_gaussian_mechanism():
    """Balle & Wang 2018, Thm. 8: δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) at the returned ε."""
    for mu, delta in ((1.0, 1e-5), (0.1, 1e-3), (5.0, 1e-10)):
        eps = gaussian_epsilon(mu, delta)
        d = special.ndtr(mu / 2 - eps / mu) - math.exp(eps) * special.ndtr(-mu / 2 - eps / mu)
        assert d == pytest.approx(delta, rel=1e-6) and d <= delta * (1 + 1e-9)
    assert gaussian_epsilon(1e-9, 1e-5) == 0.0  # δ(0) = 2Φ(μ/2) − 1 ≈ 4e-10 ≤ δ


def test_closed_forms_never_below_the_certified_pld():
    """Every fallback is an upper bound: where the PLD is accurate, closed forms are ≥ it."""
    for sigma in (0.8, 2.0, 20.0, 300.0):
        full = epsilon_bound(sigma, steps_per_epoch=50, epochs=4, delta=1e-6)
        closed = epsilon_bound(sigma, steps_per_epoch=50, epochs=4, delta=1e-6, pld=False)
        assert full.source == "certified PLD" and closed.epsilon >= full.epsilon > 0.0


@pytest.mark.parametrize("command", [
    ["bound", "--noise-multiplier", "0.3"],
    ["sigma", "--target-accuracy", "0.6"],
])
def test_steps_above_the_pld_cap_still_answer(command, capsys):
    """Item 2: M > 1e8 gives the chi-square answer; ε from a labelled closed form, the PLD
    marked unavailable (main exited 2)."""
    argv = ["dpsgd", *command, "--steps-per-epoch", "1000000000", "--epochs", "10"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["epsilon"]["note"].startswith("PLD unavailable")
    assert "closed form" in out["epsilon"]["source"] and out["epsilon"]["epsilon"] >= 0.0
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "PLD unavailable" in text and "closed-form upper bound" in text


def test_epsilon_bound_validates_before_work():
    for kw, name in (({"delta": 0.0}, "delta"), ({"delta": 1.0}, "delta"),
                     ({"delta": float("nan")}, "delta"), ({"k": 0}, "k")):
        args = {"steps_per_epoch": 10, "epochs": 1, "delta": 1e-5, **kw}
        with pytest.raises(ValueError, match=name):
            epsilon_bound(1.0, **args)
    with pytest.raises(ValueError, match="noise_multiplier"):
        epsilon_bound(float("inf"), steps_per_epoch=10, epochs=1, delta=1e-5)


def test_huge_epochs_stay_in_bounded_memory():
    """E = 1e9: the exact method refuses before allocating (the window would need ~6e8 lattice
    points), and ε falls back to a labelled closed form that says why (review finding)."""
    from pacpriv.dpsgd import exact_membership_inference_accuracy
    from pacpriv.dpsgd._exact.composition import MAX_WINDOW_POINTS

    with pytest.raises(ValueError, match="lattice points"):
        exact_membership_inference_accuracy(1e4, steps_per_epoch=10, epochs=10**9)
    b = epsilon_bound(1e4, steps_per_epoch=10, epochs=10**9, delta=1e-5)
    assert math.isfinite(b.epsilon) and "memory cap" in b.pld_note
    # Gaussian dominance with mu = sqrt(E)/sigma = sqrt(10): an independent value
    mu = math.sqrt(10**9) / 1e4
    delta_at = norm.cdf(-b.epsilon / mu + mu / 2) - math.exp(b.epsilon) * norm.cdf(
        -b.epsilon / mu - mu / 2)
    assert delta_at <= 1e-5 * (1 + 1e-6)
    assert MAX_WINDOW_POINTS == 2**25
