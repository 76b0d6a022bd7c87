"""The measurement step, written once: simulate → output spectrum → noise plan.

Used by :func:`pacpriv.pac.job.run_pac` and :meth:`pacpriv.wrapper.PacPrivateFunction.calibrate`
(Xiao & Devadas, CRYPTO 2023, Algorithm 1: Monte-Carlo estimate of the output covariance, then
the Gaussian noise of Thm 3 for the MI budget).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pacpriv.pac.calibration import NoisePlan, calibrate_noise
from pacpriv.pac.covariance import OutputSpectrum, estimate_output_spectrum
from pacpriv.pac.engine import SimulationResult, simulate

__all__ = ["measure"]


def measure(
    mechanism: Callable[..., Any],
    pool: Any,
    *,
    mi_budget: float,
    rule: str = "anisotropic",
    calibration: dict | None = None,
    **simulation: Any,
) -> tuple[SimulationResult, OutputSpectrum, NoisePlan]:
    """Simulate ``mechanism`` on ``pool``, estimate the spectrum and calibrate the noise.

    ``simulation`` holds the keyword arguments of :func:`pacpriv.pac.engine.simulate`
    (``n_trials``, ``sampler``, ``n_jobs``, ``rng``, ...); ``calibration`` the extra keyword
    arguments of :func:`pacpriv.pac.calibration.calibrate_noise` (``confidence``, ``c``,
    ``beta``, ``output_bound``). Returns ``(simulation, spectrum, plan)``.
    """
    sim = simulate(mechanism, pool, **simulation)
    spectrum = estimate_output_spectrum(sim.outputs)
    plan = calibrate_noise(spectrum, mi_budget=mi_budget, rule=rule, **(calibration or {}))
    return sim, spectrum, plan
