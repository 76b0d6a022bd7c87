"""Fail-closed noise (issue 35, F10): a noise scale of 0, NaN or inf for any reason other than
exactly equal outputs refuses the release and charges nothing."""

import dataclasses

import numpy as np
import pytest

from pacpriv.exceptions import CalibrationError
from pacpriv.pac import pac_private, privatize, run_pac
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.noise import RULES
from pacpriv.pac.noise._calibration import calibrate_variance_only

QUIET = ExecutionOptions(progress=False)

pytestmark = [pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning"),
              pytest.mark.filterwarnings("ignore::pacpriv.exceptions.DegenerateOutputWarning")]


def _broken(plan, value):
    return dataclasses.replace(plan, noise_std=np.full_like(plan.noise_std, value))


@pytest.mark.parametrize("value", [0.0, np.nan, np.inf, -1.0])
def test_privatize_refuses_a_broken_noise_scale(value):
    plan = calibrate_variance_only([1.0, 4.0], mi_budget=0.5)
    with pytest.raises(CalibrationError, match="refusing to release"):
        privatize([0.0, 0.0], _broken(plan, value), rng=0)
    resid = dataclasses.replace(plan, residual_std=float("nan"))
    with pytest.raises(CalibrationError, match="NaN"):
        privatize([0.0, 0.0], resid, rng=0)


@pytest.mark.parametrize("rule", [r for r in RULES if r != "algorithm1"])
def test_equal_outputs_release_exactly_with_every_rule(rule):
    """Zero MI is the one case where no noise is right: every rule releases f(X) exactly."""
    pool = np.random.default_rng(0).random((40, 2))
    res = run_pac(lambda x: np.array([1.0, 2.0]), pool, mi_budget=0.1, n_trials=200, rng=0,
                  rule=rule, execution=QUIET)
    assert np.array_equal(res.release, [1.0, 2.0])


def test_certified_zero_noise_with_varying_outputs_is_refused():
    pool = np.random.default_rng(0).random((40, 2))
    res = run_pac(lambda x: np.asarray(x).mean(axis=0), pool, mi_budget=0.1, n_trials=200,
                  rng=0, execution=QUIET)
    with pytest.raises(CalibrationError, match="not all equal"):
        privatize([0.5, 0.5], _broken(res.plan, 0.0), rng=0)


def test_wrapper_charges_nothing_when_the_scale_is_broken():
    pool = np.random.default_rng(0).random((40, 2))
    f = pac_private(lambda x: np.asarray(x).mean(axis=0), mi_budget=0.05)
    f.calibrate(pool, n_trials=200, rng=0, execution=QUIET)
    f.plan = _broken(f.plan, np.nan)
    with pytest.raises(CalibrationError):
        f(pool[:20])
    assert f.ledger.spent == 0.0
