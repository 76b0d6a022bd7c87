"""The PAC main job, end to end: simulate → spectrum → calibrate → release → bounds.

:func:`run_pac` chains the engine (:func:`pacpriv.pac.engine.simulate`), the spectrum
(:func:`pacpriv.pac.covariance.estimate_output_spectrum`), the noise calibration
(:func:`pacpriv.pac.calibration.calibrate_noise`), the release
(:func:`pacpriv.pac.release.privatize`) and the posterior bounds
(:mod:`pacpriv.pac.posterior`) into one call and returns a :class:`PacResult` that
:mod:`pacpriv.report` renders as the PAC membership-privacy report.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy: Automatic Privacy Measurement and Control of Data
   Processing. CRYPTO 2023, arXiv:2210.03458 (Thm 1, Thm 2, Thm 3, Algorithm 1).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacpriv._random import RNGLike, as_generator
from pacpriv._validation import check_int, check_real
from pacpriv.exceptions import UndersampledWarning, VacuousBoundWarning
from pacpriv.pac._mechanism import InvalidOutput, call_mechanism, check_output, subset_pool
from pacpriv.pac._pipeline import measure
from pacpriv.pac.calibration import RULES, NoisePlan
from pacpriv.pac.covariance import OutputSpectrum
from pacpriv.pac.engine import SimulationResult
from pacpriv.pac.options import ExecutionOptions
from pacpriv.pac.posterior import individual_mi_bound, pinsker_bound, posterior_success_rate
from pacpriv.pac.prior import resolve_membership_prior
from pacpriv.pac.release import privatize
from pacpriv.pac.samplers import as_sampler

__all__ = ["PacResult", "run_pac"]


@dataclass(frozen=True)
class PacResult:
    """Everything the PAC membership-privacy report says, as one frozen object.

    Attributes
    ----------
    mechanism : str
        Name of the black-box mechanism.
    dataset : dict
        Public description of the pool (name, source, ``n_records``, ``n_features``); never
        the records themselves.
    simulation : SimulationResult
        Engine output: the ``(n_trials, d)`` outputs, masks and seeds.
    spectrum : OutputSpectrum
        Estimated output covariance ``Σ`` (eigen-decomposition).
    plan : NoisePlan
        Calibrated Gaussian noise ``B ~ N(0, Σ_B)``.
    mi_budget : float
        Budget ``v`` in nats.
    membership_prior : float
        Probability ``q`` that one record is in the secret subset (½ for Poisson-½ sampling);
        declared by the sampler, or (``prior_source == "estimated"``) the simulated masks'
        overall inclusion rate.
    posterior_success_bound : float
        Largest posterior success rate of any membership adversary for the claimed MI
        (KL inversion of [1]_ Thm 1 at the best blind-guess rate ``max(q, 1 − q)``,
        ``q = membership_prior``); for prior ½ this is the membership-inference accuracy bound.
    pinsker_success_bound : float
        The looser Pinsker bound ``prior + sqrt(v/2)`` ([1]_ Cor. 1), for reference.
    individual_mi_bound : float
        Average per-record MI ``v / n_records`` (nats) ([1]_ Thm 2: i.i.d. records and a
        permutation-symmetric mechanism; independent membership bits otherwise).
    release : ndarray of shape (d,) or None
        The noisy output ``f(X) + B`` on the secret subset ``X`` (None if ``release=False``).
    release_seeded : bool
        Whether the caller seeded the release (otherwise fresh OS entropy was used).
    sections : tuple of dict
        Extra report sections (e.g. a DP-SGD comparison), each ``{"title", "markdown", ...}``.
    notes : tuple of str
        Caveats the report must show (too few trials for the output dimension, vacuous bound).
    blind_guess_prior : float or None
        The prior ``p0`` the posterior bounds use: the best blind guess ``max(q, 1 − q)``, or,
        when the sampler declares no inclusion probability, an upper confidence bound on it
        from the simulated masks (:func:`pacpriv.pac.prior.resolve_membership_prior`).
    prior_source : {"sampler", "estimated"} or None
        Where ``blind_guess_prior`` comes from.
    prior_explanation : str
        One line saying which prior was used and why (for the report).
    """

    mechanism: str
    dataset: dict
    simulation: SimulationResult = field(repr=False)
    spectrum: OutputSpectrum = field(repr=False)
    plan: NoisePlan = field(repr=False)
    mi_budget: float
    membership_prior: float
    posterior_success_bound: float
    pinsker_success_bound: float
    individual_mi_bound: float
    release: np.ndarray | None = field(repr=False, default=None)
    release_seeded: bool = False
    sections: tuple = ()
    notes: tuple = ()
    blind_guess_prior: float | None = None
    prior_source: str | None = None
    prior_explanation: str = ""

    @property
    def mi_claim(self) -> float:
        """MI (nats) the plan claims for the true covariance (``v``, or ``v + β`` for Alg. 1)."""
        return float(self.plan.mi_claim)

    def with_sections(self, *sections: dict) -> PacResult:
        """A copy with extra report sections appended."""
        from dataclasses import replace

        return replace(self, sections=(*self.sections, *sections))

    def to_dict(self) -> dict:
        """JSON-serialisable summary (no raw records, masks or outputs)."""
        return {
            "mechanism": self.mechanism,
            "dataset": dict(self.dataset),
            "simulation": self.simulation.to_dict(),
            "spectrum": self.spectrum.to_dict(),
            "noise_plan": self.plan.to_dict(),
            "mi_budget_nats": self.mi_budget,
            "mi_claim_nats": self.mi_claim,
            "membership_prior": self.membership_prior,
            "blind_guess_prior": self.blind_guess_prior,
            "prior_source": self.prior_source,
            "prior_explanation": self.prior_explanation,
            "posterior_success_bound": self.posterior_success_bound,
            "pinsker_success_bound": self.pinsker_success_bound,
            "individual_mi_bound_nats": self.individual_mi_bound,
            "release": None if self.release is None else [float(v) for v in self.release],
            "release_seeded": self.release_seeded,
            "notes": list(self.notes),
        }


def _secret_output(mechanism, pool, sampler, n_records, secret_mask, gen) -> np.ndarray:
    """Run ``mechanism`` once on the secret subset (drawn from the sampler unless given)."""
    if secret_mask is None:
        secret_mask = sampler.draw(n_records, gen)
    else:
        secret_mask = np.asarray(secret_mask)
        if secret_mask.shape != (n_records,) or secret_mask.dtype != bool:
            raise ValueError(
                f"`secret_mask` must be a boolean array of shape ({n_records},); "
                f"got dtype {secret_mask.dtype}, shape {secret_mask.shape}."
            )
    subset = subset_pool(pool, secret_mask)
    try:
        return check_output(call_mechanism(mechanism, subset, rng=gen), None)
    except InvalidOutput as err:
        raise InvalidOutput(f"the release: mechanism {err}") from err.__cause__


def _caveats(sim: SimulationResult, plan: NoisePlan, prior: float) -> list[tuple[str, type]]:
    """Caveats that must reach the user (as warnings) and the report (as notes)."""
    notes: list[tuple[str, type]] = []
    if plan.rule not in ("isotropic", "algorithm1", "variance-only") and sim.n_trials - 1 < sim.dim:
        notes.append((
            f"only {sim.n_trials} trials for a {sim.dim}-dimensional output: at most "
            f"{sim.n_trials - 1} directions were explored. The others are charged the whole "
            "trace when the sample filled every explorable direction (costly), else only the "
            "numerical resolution, and then the MI bound holds only if the output does not "
            "vary outside the simulated span. Use more trials than output dimensions, or "
            "rule='isotropic'/'algorithm1'.",
            UndersampledWarning,
        ))
    if plan.confidence is not None and plan.confidence < 1.0:
        notes.append((
            f"Algorithm 1 claims MI <= {plan.mi_claim:.6g} nats only with probability >= "
            f"{plan.confidence:.6g} over the simulation (conservative matrix-Bernstein count "
            f"for {sim.n_trials} trials); the posterior bound inherits that condition. Use "
            "pacpriv.pac.confidence.trials_for_confidence to choose n_trials.",
            UndersampledWarning,
        ))
    if plan.mi_claim >= math.log(1.0 / prior) * (1 - 1e-12):
        notes.append((
            f"the MI budget {plan.mi_claim:.6g} nats is at least ln(1/prior) = "
            f"{math.log(1.0 / prior):.6g}: the posterior success bound is 1 (vacuous).",
            VacuousBoundWarning,
        ))
    return notes


def run_pac(
    mechanism: Callable[..., Any],
    pool: Any,
    *,
    mi_budget: float,
    n_trials: int = 1000,
    sampler: Any = None,
    rule: str = "anisotropic",
    confidence: float | None = None,
    c: float | None = None,
    beta: float | None = None,
    output_bound: float | None = None,
    n_jobs: int | None = None,
    backend: str | None = None,
    rng: RNGLike = None,
    release: bool = True,
    release_rng: RNGLike = None,
    secret_mask: np.ndarray | None = None,
    progress: bool = True,
    checkpoint: str | os.PathLike | None = None,
    retries: int = 0,
    timeout: float | None = None,
    mechanism_name: str | None = None,
    dataset: dict | None = None,
    options: ExecutionOptions | None = None,
) -> PacResult:
    """Measure a black-box mechanism, calibrate PAC noise and release ``f(X) + B``.

    Parameters
    ----------
    mechanism : callable
        ``f(subset) -> array-like of shape (d,)``; gets the trial's ``numpy.random.Generator``
        as ``rng=`` if its signature has one. Must be picklable for process backends.
    pool : ndarray of shape (n_records, ...) or tuple of such arrays
        The data pool the adversary is assumed to know.
    mi_budget : float
        Mutual-information budget ``v`` in **nats**, ``> 0``.
    n_trials : int, default 1000
        Number of simulated subsets (``>= 2``).
    sampler : Sampler, callable, str or None
        Distribution of the secret subset (None: Poisson with ``sampling_rate=0.5``).
    rule : {"anisotropic", "isotropic", "variance-only", "exact-mi", "algorithm1"}
        Noise rule, see :func:`pacpriv.pac.calibration.calibrate_noise`.
    confidence, c, beta, output_bound : float, optional
        Algorithm 1 parameters (``rule="algorithm1"`` only).
    n_jobs, backend : optional
        joblib parallelism (``n_jobs=-1``: all cores).
    rng : None, int, SeedSequence or Generator
        Root seed of the simulation (None: fresh OS entropy, recorded in the report).
    release : bool, default True
        Whether to draw the secret subset, run ``f`` on it and add the noise.
    release_rng : None, int, SeedSequence or Generator
        Randomness of the secret subset and of the noise; None (default) = fresh OS entropy,
        which is what a real release must use. Seed it only for tests and demos.
    secret_mask : ndarray of bool, shape (n_records,), optional
        Use this subset as the secret instead of drawing it from the sampler.
    progress, checkpoint, retries, timeout :
        Passed to :func:`pacpriv.pac.engine.simulate`.
    mechanism_name : str, optional
        Name shown in the report (default: the engine's qualified name).
    dataset : dict, optional
        Public description of the pool for the report (never the records).
    options : ExecutionOptions, optional
        The execution arguments (``n_jobs``, ``backend``, ``progress``, ``checkpoint``,
        ``retries``, ``timeout``, ``batch_size``, ``output_path``) as one object, instead of
        the individual keywords (not both).

    Returns
    -------
    PacResult

    Raises
    ------
    ValueError, TypeError
        Invalid arguments (each message names the argument and its allowed range).
    pacpriv.exceptions.MechanismError
        The mechanism raised or returned a bad output in some trial (index and seed given).

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 1 (posterior bound), Thm 3 (Gaussian
       noise), Algorithm 1 (confidence).
    """
    mi_budget = check_real(mi_budget, "mi_budget", low=0, low_inclusive=False)
    n_trials = check_int(n_trials, "n_trials", low=2)
    if rule not in RULES:
        raise ValueError(f"`rule` must be one of {', '.join(RULES)}; got {rule!r}.")
    sampler_obj = as_sampler(sampler)

    sim, spectrum, plan = measure(
        mechanism,
        pool,
        mi_budget=mi_budget,
        rule=rule,
        calibration={"confidence": confidence, "c": c, "beta": beta, "output_bound": output_bound},
        n_trials=n_trials,
        sampler=sampler_obj,
        n_jobs=n_jobs,
        backend=backend,
        rng=rng,
        progress=progress,
        checkpoint=checkpoint,
        retries=retries,
        timeout=timeout,
        options=options,
    )
    # Thm 1 bounds an adversary relative to *its own* blind-guess rate, which lies between
    # min(q, 1-q) and max(q, 1-q); the bound over all adversaries uses the best blind guess
    # (declared by the sampler, or an upper confidence bound from the masks: never a silent ½).
    prior_info = resolve_membership_prior(sampler_obj, sim.masks, n_records=sim.n_records)
    prior, baseline = prior_info.inclusion_probability, prior_info.blind_guess
    claim = float(plan.mi_claim)

    notes = _caveats(sim, plan, baseline)
    for note, category in notes:
        warnings.warn(note, category, stacklevel=2)
    if prior_info.source == "estimated":
        notes.append((f"membership prior: {prior_info.explanation}.", UserWarning))

    noisy = None
    if release:
        gen = as_generator(release_rng, name="release_rng")
        value = _secret_output(mechanism, pool, sampler_obj, sim.n_records, secret_mask, gen)
        noisy = privatize(value, plan, rng=gen)

    return PacResult(
        mechanism=mechanism_name or sim.mechanism,
        dataset=dict(dataset or {"name": "user pool", "n_records": sim.n_records}),
        simulation=sim,
        spectrum=spectrum,
        plan=plan,
        mi_budget=mi_budget,
        membership_prior=float(prior),
        posterior_success_bound=float(posterior_success_rate(claim, prior=baseline)),
        pinsker_success_bound=float(pinsker_bound(claim, prior=baseline)),
        individual_mi_bound=float(individual_mi_bound(claim, n_records=max(sim.n_records, 1))),
        release=noisy,
        release_seeded=release_rng is not None,
        notes=tuple(note for note, _ in notes),
        blind_guess_prior=float(baseline),
        prior_source=prior_info.source,
        prior_explanation=prior_info.explanation,
    )
