"""Outputs of any magnitude: a sound plan at the right scale, or one clear line before work.

0.4 refused outputs of magnitude 1e80–1e120 under the certified and asymptotic-t rules with a
misleading "span too many orders of magnitude" error (the certificate squared whitened
distances into overflow), and gave a different noise ratio below 1e-75 (absolute floors; the
asymptotic-t rule *less* noise). The rules that read the outputs now plan on outputs rescaled by
an exact power of two (``pacpriv.pac.noise._rescale``), so a plan scales exactly with its
outputs.
"""

import math

import numpy as np
import pytest

from pacpriv.exceptions import CalibrationError, MechanismError
from pacpriv.pac import ExecutionOptions, run_pac
from pacpriv.pac.noise._certificate import RelativeOutputs
from pacpriv.pac.noise._registry import rule_with
from pacpriv.pac.noise._rescale import output_exponent, plan_rescaled

QUIET = ExecutionOptions(n_jobs=1, progress=False)
POOL = np.random.default_rng(0).normal(size=(40, 2))
OUTPUTS = np.random.default_rng(1).normal(size=(64, 3))
pytestmark = pytest.mark.filterwarnings(
    "ignore::pacpriv.exceptions.UndersampledWarning", "ignore::pacpriv.exceptions.PacprivWarning")


class _Scaled:
    def __init__(self, scale):
        self.scale = scale

    def __call__(self, x):
        return np.asarray(x, dtype=float).mean(axis=0) * self.scale


def _same_plan_scaled(plan, base, j):
    assert np.array_equal(plan.noise_std, np.ldexp(base.noise_std, j))
    assert plan.residual_std == math.ldexp(base.residual_std, j)
    assert np.array_equal(plan.clip_center, np.ldexp(base.clip_center, j))
    assert plan.clip_radius == base.clip_radius and plan.mi_bound == base.mi_bound
    assert plan.certificate.kappa == math.ldexp(base.certificate.kappa, 2 * j)


@pytest.mark.parametrize("rule", ["certified", "asymptotic-t"])
@pytest.mark.parametrize("j", [-390, -300, -250, -200, -70, 0, 70, 200, 265, 300, 380])
def test_plan_scales_exactly_with_a_power_of_two(rule, j):
    """Bit for bit: outputs x 2^j give the noise x 2^j (0.4: overflow above ~2^265, other
    ratios below ~2^-250)."""
    r = rule_with(rule)
    base = plan_rescaled(r, OUTPUTS * 2.0**-3, mi_budget=0.5)
    plan = plan_rescaled(r, np.ldexp(OUTPUTS * 2.0**-3, j), mi_budget=0.5)
    if rule == "certified":
        _same_plan_scaled(plan, base, j)
    else:
        assert np.array_equal(plan.noise_std, np.ldexp(base.noise_std, j))
    assert plan.rule_spec is r and plan.label == base.label


def test_relative_outputs_and_output_bound_rescale_with_the_outputs():
    """float32 storage (rows relative to a reference) and a public output_bound."""
    j = 330
    rows = (OUTPUTS - OUTPUTS[0]).astype(np.float32)
    ref = OUTPUTS[0] + 5.0
    bound = float(np.max(np.linalg.norm(OUTPUTS + 5.0, axis=1))) * 1.5
    r = rule_with("certified", output_bound=bound)
    big = rule_with("certified", output_bound=math.ldexp(bound, j))
    base = plan_rescaled(r, RelativeOutputs(rows, ref), mi_budget=0.3)
    plan = plan_rescaled(big, RelativeOutputs(np.ldexp(rows.astype(np.float64), j),
                                              np.ldexp(ref, j)), mi_budget=0.3)
    _same_plan_scaled(plan, base, j)
    assert plan.certificate.output_bound == math.ldexp(bound, j)
    assert plan.rule_spec is big


def test_comfortable_outputs_are_planned_as_they_are():
    unit = OUTPUTS / np.max(np.abs(OUTPUTS))  # largest magnitude exactly 1
    assert output_exponent(unit) == 0 and output_exponent(unit * 2.0**64) == 0
    assert output_exponent(unit * 2.0**-64) == 0 and output_exponent(unit * 2.0**65) == 66
    assert output_exponent(OUTPUTS * 1e100) > 300 and output_exponent(OUTPUTS * 1e-100) < -300
    assert output_exponent(np.zeros((8, 2))) == 0


def test_mixed_scales_get_at_least_each_coordinates_spread_or_one_clear_error():
    """Coordinates 230 orders apart: the certified rule answers (the small coordinate's
    squares underflow after rescaling; the shape floor gives it far more noise than its
    spread); the exact-mi rule (log space) answers too."""
    def mixed(s):
        s = np.asarray(s)
        return np.array([s[:, 0].mean() * 1e-115, s[:, 1].mean() * 1e115])

    with np.errstate(all="ignore"):
        res = run_pac(mixed, POOL, mi_budget=0.02, n_trials=40, rng=1, execution=QUIET)
        spread = np.asarray(res.simulation.outputs).std(axis=0)
        assert res.certified and np.all(res.noise_std_per_coordinate > spread)
        # exact-mi works in log space: it answers too, never below either spread
        res = run_pac(mixed, POOL, mi_budget=0.02, n_trials=40, rng=1, execution=QUIET,
                      rule="exact-mi")
        spread = np.asarray(res.simulation.outputs).std(axis=0)
        assert res.plan.mi_bound <= 0.02 and np.all(res.noise_std_per_coordinate > spread)


@pytest.mark.parametrize("rule", ["certified", "asymptotic-t", "exact-mi"])
def test_magnitude_sweep_releases_at_the_right_scale_or_fails_in_one_line(rule):
    """1e-300 ... 1e300: a release whose noise is the unit-scale noise times the scale, or a
    one-line pacpriv error before any release (never a traceback, never another scale)."""
    unit = run_pac(_Scaled(1.0), POOL, mi_budget=0.5, n_trials=48, rule=rule, rng=1,
                   execution=QUIET, release_rng=2)
    ratio = np.asarray(unit.plan.noise_std)
    released = set()
    for e in range(-300, 301, 20):
        s = 10.0**e
        try:
            res = run_pac(_Scaled(s), POOL, mi_budget=0.5, n_trials=48, rule=rule, rng=1,
                          execution=QUIET, release_rng=2)
        except (MechanismError, CalibrationError) as err:
            assert "\n" not in str(err) and "orders of magnitude" not in str(err)
            assert abs(e) >= 120  # only at the engine's documented output range [2^-400, 2^400]
            continue
        released.add(e)
        np.testing.assert_allclose(np.asarray(res.plan.noise_std) / s, ratio, rtol=1e-9)
        assert np.all(np.isfinite(res.release))
        assert np.all(np.abs(res.release) < 1e3 * s)
    assert released >= set(range(-100, 101, 20))  # 0.4: refused from 1e80 up
