"""``lower_noise_multiplier`` is a σ certified to fail the target, or ``None`` ("unknown"),
never a 0.0 that means "unknown" (issue 35, fix9a item 4: k of t returned 0.0, documented as
unknown, and a search without a certified-failing σ returned a σ that had merely not
certified, or 0.0)."""

from __future__ import annotations

import json

import pytest

from pacpriv.cli.main import main
from pacpriv.dpsgd import calibrate_noise_multiplier
from pacpriv.dpsgd.exact import exact_membership_inference_accuracy


@pytest.fixture(scope="module")
def k_of_t():
    return calibrate_noise_multiplier(0.6, steps_per_epoch=10, epochs=2, k=2)


def test_k_of_t_lower_sigma_is_none_not_zero(k_of_t):
    assert k_of_t.lower_noise_multiplier is None
    assert k_of_t.to_dict()["lower_noise_multiplier"] is None


def test_k_of_t_summary_says_unknown(k_of_t):
    rows = dict(k_of_t.summary().text_rows())
    assert rows["largest σ known to fail the target"] == "unknown"
    assert "unknown" in str(k_of_t)


@pytest.mark.parametrize("target,steps,epochs", [(0.6, 10, 2), (0.7, 10, 5), (0.9, 5, 1)])
def test_a_given_lower_sigma_is_certified_to_fail(target, steps, epochs):
    r = calibrate_noise_multiplier(target, steps_per_epoch=steps, epochs=epochs)
    lo = r.lower_noise_multiplier
    assert lo is None or (0.0 < lo < r.noise_multiplier and exact_membership_inference_accuracy(
        lo, steps_per_epoch=steps, epochs=epochs).lower > target)
    shown = dict(r.summary().text_rows())["largest σ known to fail the target"]
    assert shown == "unknown" if lo is None else float(shown) <= lo  # rounded down


def test_cli_json_gives_null(capsys):
    code = main(["dpsgd", "sigma", "--steps-per-epoch", "10", "--epochs", "2", "--k", "2",
                 "--target-accuracy", "0.6", "--method", "exact", "--json"])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out)["lower_noise_multiplier"] is None
    assert '"lower_noise_multiplier": null' in out


def test_epsilon_calibration_without_a_failing_sigma_gives_none(monkeypatch):
    """Every σ searched reaches the target: no failing σ is known (was 0.0)."""
    from pacpriv.dpsgd import epsilon_calibration as mod

    monkeypatch.setattr(mod, "_poisson_epsilon", lambda *a: 0.0)
    r = mod.calibrate_epsilon(1.0, 1e-5, steps_per_epoch=10, epochs=1, sampling="poisson")
    assert r.lower_noise_multiplier is None and r.to_dict()["lower_noise_multiplier"] is None
    monkeypatch.undo()  # the real PLD: a failing σ is found below the returned one
    real = mod.calibrate_epsilon(1.0, 1e-5, steps_per_epoch=10, epochs=1, sampling="poisson")
    assert 0 < real.lower_noise_multiplier < real.noise_multiplier
