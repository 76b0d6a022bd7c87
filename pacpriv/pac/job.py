"""The PAC main job, end to end: simulate → spectrum → calibrate → release → bounds.

:func:`run_pac` chains the engine (:func:`pacpriv.pac.engine.simulate`), the spectrum
(:func:`pacpriv.pac.spectrum.estimate_output_spectrum`), the noise calibration
(:func:`pacpriv.pac.noise.calibrate_noise`), the release
(:func:`pacpriv.pac.release.privatize`) and the posterior bounds
(:mod:`pacpriv.pac.bounds._posterior`) into one call and returns a :class:`PacResult` that
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

from pacpriv._display import Displayable, Summary
from pacpriv._numbers import format_bound
from pacpriv._random import RNGLike, as_generator, as_seed_sequence, seed_to_dict
from pacpriv._validation import check_int, check_real
from pacpriv.exceptions import (
    WITHHELD_NOTE,
    MechanismError,
    UndersampledWarning,
    VacuousBoundWarning,
)
from pacpriv.pac._pipeline import measure
from pacpriv.pac.bounds._posterior import individual_mi_bound, pinsker_bound, posterior_success_rate
from pacpriv.pac.bounds._prior import resolve_membership_prior
from pacpriv.pac.engine._mechanism import InvalidOutput, call_mechanism, check_output, subset_pool
from pacpriv.pac.engine._options import ExecutionOptions
from pacpriv.pac.engine._simulate import SimulationResult
from pacpriv.pac.noise import _rules
from pacpriv.pac.noise._calibration import DEFAULT_RULE, RULES, NoisePlan, _check_budget
from pacpriv.pac.noise._concentration import constant_output_bound
from pacpriv.pac.noise._planning import trials_for_inflation
from pacpriv.pac.release import privatize
from pacpriv.pac.samplers import as_sampler
from pacpriv.pac.spectrum._covariance import OutputSpectrum

__all__ = ["PacResult", "run_pac"]


@dataclass(frozen=True)
class PacResult(Displayable):
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
    evaluation : str
        Empty for a PAC job. Non-empty for an evaluation built on it (e.g.
        :func:`pacpriv.compare.compare_pac_dpsgd`), whose models derive from a recorded seed
        and so are not private releases: the report then shows this text instead of a release
        (``release`` must be None).
    sections : tuple of dict
        Extra report sections (e.g. a DP-SGD comparison), each ``{"title", "markdown", ...}``.
    notes : tuple of str
        Caveats the report must show (too few trials for the output dimension, vacuous bound).
    blind_guess_prior : float or None
        The prior ``p0`` the posterior bounds use: the best blind guess ``max(q, 1 − q)``, or,
        when the sampler declares no inclusion probability, an upper confidence bound on it
        from the simulated masks (:func:`pacpriv.pac.bounds.resolve_membership_prior`).
    prior_source : {"sampler", "estimated"} or None
        Where ``blind_guess_prior`` comes from.
    prior_explanation : str
        One line saying which prior was used and why (for the report).

    The properties :attr:`certified`, :attr:`confidence` and :attr:`label` say whether the
    headline holds for the true covariance with probability ``1 − γ`` over the simulation
    (``"certified (1−γ = 0.95)"``) or is a plug-in estimate (``"estimated (plug-in)"``).
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
    evaluation: str = ""
    sections: tuple = ()
    notes: tuple = ()
    blind_guess_prior: float | None = None
    prior_source: str | None = None
    prior_explanation: str = ""

    @property
    def certified(self) -> bool:
        """Whether the plan's MI claim is certified for the true covariance (``confidence``)."""
        if self.plan.rule == "algorithm1":  # matrix-Bernstein confidence, 0 when too few trials
            return bool(self.plan.confidence and self.plan.confidence > 0)
        return self.plan.certified

    @property
    def confidence(self) -> float | None:
        """``1 − γ`` of a certified (or asymptotic) plan; None for a plug-in estimate."""
        return None if self.plan.confidence is None else float(self.plan.confidence)

    @property
    def label(self) -> str:
        """``"certified (1−γ = …)"`` or ``"estimated (plug-in)"``: printed beside every bound."""
        if self.plan.rule == "algorithm1":
            if not self.certified:
                return "estimated (Algorithm 1 with too few trials: confidence not certified)"
            conf = format_bound(self.plan.confidence, 4, side="down")
            return f"certified (1−γ >= {conf}, MI <= v + β)"
        return self.plan.label

    def certification(self) -> dict:
        """Public facts of the certificate: γ, trial split, noise inflation, clipped trials."""
        cert = self.plan.certificate
        out = {"label": self.label, "certified": self.certified, "confidence": self.confidence,
               "gamma": None if self.confidence is None else 1.0 - self.confidence,
               "rule": self.plan.rule}
        if cert is not None:
            out.update(method=cert.method, n_shape_trials=cert.n_shape,
                       n_certificate_trials=cert.n_certificate, summands=cert.summands,
                       scaling=cert.scaling, randomized_threshold=cert.randomized,
                       noise_inflation_vs_plugin=cert.inflation,
                       n_clipped_simulated_outputs=cert.n_clipped,
                       clipped_release=self.plan.clip_radius is not None,
                       output_bound=cert.output_bound, constant_outputs=cert.constant)
        return out

    @property
    def mi_claim(self) -> float:
        """MI (nats) the plan claims for the true covariance (``v``, or ``v + β`` for Alg. 1)."""
        return float(self.plan.mi_claim)

    def with_sections(self, *sections: dict) -> PacResult:
        """A copy with extra report sections appended."""
        from dataclasses import replace

        return replace(self, sections=(*self.sections, *sections))

    def summary(self) -> Summary:
        """Rows shown by ``str(result)`` and in Jupyter: the report's headline facts."""
        prior = self.blind_guess_prior if self.blind_guess_prior is not None else None
        return Summary(f"PAC result: {self.mechanism}", [
            ("posterior success bound", self.posterior_success_bound, "percent-risk"),
            ("bound is", self.label, "plain"),
            ("prior (best blind guess)", prior, "plain"),
            ("MI budget v (nats)", self.mi_budget, "risk"),
            ("MI bound (nats)", self.plan.mi_bound, "risk"),
            ("noise rule", self.plan.rule, "plain"),
            ("E||B||^2", self.plan.expected_noise_power, "plain"),
            ("trials", self.simulation.n_trials, "plain"),
            ("output dimension d", self.plan.dim, "plain"),
            ("released", self.release is not None, "plain"),
        ])

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
            "certification": self.certification(),
            "posterior_success_bound": self.posterior_success_bound,
            "posterior_success_bound_label": self.label,
            "pinsker_success_bound": self.pinsker_success_bound,
            "individual_mi_bound_nats": self.individual_mi_bound,
            "release": None if self.release is None else [float(v) for v in self.release],
            "release_seeded": self.release_seeded,
            "notes": list(self.notes),
        }


def _check_release_seed(rng, release_rng, release) -> None:
    """Refuse a release seed equal to the simulation seed, which the report records."""
    seeds = (rng, release_rng)
    if not release or any(s is None or isinstance(s, np.random.Generator) for s in seeds):
        return
    seed = seed_to_dict(as_seed_sequence(rng))
    if seed == seed_to_dict(as_seed_sequence(release_rng, name="release_rng")):
        raise ValueError("`release_rng` must differ from `rng`: the simulation seed is "
                         "recorded in the result and the report, so a release drawn from it "
                         f"could be regenerated; got the same seed {seed} for both.")


def _secret_output(mechanism, pool, sampler, n_records, secret_mask, gen,
                   name: str = "") -> np.ndarray:
    """Run ``mechanism`` once on the secret subset (drawn from the sampler unless given).

    An exception of the mechanism becomes :class:`MechanismError` (``trial_index=-1``, no
    seed: the release's randomness is secret) whose message withholds the original one.
    """
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
        value = call_mechanism(mechanism, subset, rng=gen)
    except Exception as err:
        raise MechanismError(
            f"Mechanism {name or 'f'} raised {type(err).__qualname__} on the release's secret "
            f"subset (after every trial had passed). {WITHHELD_NOTE}",
            trial_index=-1, seed={},
        ) from err
    try:
        return check_output(value, None)
    except InvalidOutput as err:
        raise InvalidOutput(f"the release: mechanism {err}") from err.__cause__


def _constant_note(sim: SimulationResult, plan: NoisePlan) -> str:
    """What identical outputs in every trial support (never "reveals nothing")."""
    conf = plan.confidence if plan.confidence is not None else 0.95
    p_diff = constant_output_bound(sim.n_trials, confidence=conf)
    head = (
        f"the output was identical in all {sim.n_trials} trials. This does not show that the "
        f"output is independent of the subset: with confidence {conf:g}, the probability "
        f"that its output differs from the seen value is at most {p_diff:.4g} (<= ln(1/γ)/m = "
        f"{math.log(1.0 / (1.0 - conf)) / sim.n_trials:.4g}); a rarer change was not tested. "
    )
    if plan.certified and plan.clip_radius == 0.0:
        return head + ("The certified release is clipped to the seen value (a constant, so the "
                       "release carries no information); give output_bound for a noisy release "
                       "that keeps the mechanism's other outputs.")
    if plan.certified:
        return head + ("The certified rule adds the minimum noise that output_bound supports.")
    return head + ("This plug-in rule adds no noise (estimate); use rule='certified' with "
                   "output_bound for a certified minimum noise.")


def _caveats(sim: SimulationResult, plan: NoisePlan, prior: float,
             target_inflation: float | None = None) -> list[tuple[str, type | None]]:
    """Caveats that must reach the report (as notes) and, with a category, the user (warnings)."""
    notes: list[tuple[str, type | None]] = []
    info = _rules.rule_info(plan.rule)
    if not info.safe_when_undersampled and sim.n_trials - 1 < sim.dim:
        notes.append((
            f"only {sim.n_trials} trials for a {sim.dim}-dimensional output: at most "
            f"{sim.n_trials - 1} directions were explored. The others are charged the whole "
            "trace when the sample filled every explorable direction (costly), else only the "
            "numerical resolution, and then the MI bound holds only if the output does not "
            "vary outside the simulated span. Use more trials than output dimensions, or "
            "rule='certified' (or 'isotropic'/'algorithm1').",
            UndersampledWarning,
        ))
    if not info.certified:
        notes.append((
            f"estimated (plug-in): rule {plan.rule!r} meets the budget for the covariance "
            f"estimated from {sim.n_trials} trials, not for the true one. Spread in the "
            "estimated eigenvalues raises the true MI (measured: the plug-in square-root rule "
            "exceeded the budget in all 200 runs at d = 50 outputs with 100 to 500 trials; "
            "docs/guide/certification.md, benchmarks/coverage.py). "
            "rule='certified' holds with a stated confidence."
            if plan.certificate is None else
            f"estimated (asymptotic): rule {plan.rule!r} uses a Student-t bound without a "
            "bound on the outputs; it is not certified and may understate heavy tails.",
            None,
        ))
    cert = plan.certificate
    if cert is not None and cert.certified:
        gamma = 1.0 - cert.confidence
        notes.append((
            f"certified (1−γ = {cert.confidence:g}): with probability >= {cert.confidence:g} "
            f"over the simulation, MI <= {format_bound(plan.mi_claim)} nats for the released "
            "(clipped) "
            f"mechanism; {cert.n_shape} trials fixed the noise shape and the clip, the other "
            f"{cert.n_certificate} certified its scale ({cert.method} bound, γ = {gamma:g}); "
            f"the certificate cost {cert.inflation:.3g}x the plug-in noise power; "
            f"{cert.n_clipped} of the {cert.n_trials} simulated outputs it used were clipped.",
            None,
        ))
        if cert.n_clipped > 0.05 * cert.n_trials and not cert.constant:
            notes.append((
                f"{cert.n_clipped} of {cert.n_trials} simulated outputs fell outside the release "
                "clip (an ellipsoid fixed by the shape trials): a secret output outside it is "
                "released shrunk towards the centre. More trials reduce this.",
                None,
            ))
        if target_inflation is not None and not cert.constant:
            need = trials_for_inflation(sim.dim, target_inflation=target_inflation,
                                        confidence=cert.confidence)
            if cert.n_trials < need:
                notes.append((
                    f"n_trials = {cert.n_trials} is below the {need} trials that the planning "
                    f"model (trials_for_inflation) needs for a noise power within "
                    f"{target_inflation:g}x the oracle square-root rule at d = {sim.dim}; the "
                    "certificate holds, at the cost of more noise.",
                    UndersampledWarning,
                ))
    if sim.n_trials >= 1 and bool(np.all(sim.outputs == sim.outputs[0])):
        notes.append((_constant_note(sim, plan), None))
    if plan.rule == "algorithm1" and plan.confidence is not None and plan.confidence < 1.0:
        notes.append((
            f"Algorithm 1 claims MI <= {format_bound(plan.mi_claim)} nats only with probability >= "
            f"{format_bound(plan.confidence, side='down')} over the simulation (conservative "
            "matrix-Bernstein count "
            f"for {sim.n_trials} trials); the posterior bound inherits that condition. Use "
            "pacpriv.pac.noise.trials_for_confidence to choose n_trials.",
            UndersampledWarning,
        ))
    if plan.mi_claim >= math.log(1.0 / prior) * (1 - 1e-12):
        notes.append((
            f"the MI budget {format_bound(plan.mi_claim)} nats is at least ln(1/prior) = "
            f"{math.log(1.0 / prior):.6g}: the posterior success bound is 1 (vacuous).",
            VacuousBoundWarning,
        ))
    return notes


def _check_algorithm1(n_trials: int, *, c, beta, output_bound, confidence) -> None:
    """Algorithm 1's parameters, before any trial: present and positive, and a requested
    ``confidence`` reachable with ``n_trials`` at least for ``d = 1`` (the matrix-Bernstein
    confidence only falls as ``d`` grows)."""
    for name, val in (("c", c), ("beta", beta), ("output_bound", output_bound)):
        if val is None:
            raise ValueError(f"rule='algorithm1' needs `{name}`; got None.")
        check_real(val, name, low=0.0, low_inclusive=False)
    if confidence is not None:
        from pacpriv.pac.noise._confidence import confidence_for_trials

        best = confidence_for_trials(n_trials, c=float(c), output_bound=float(output_bound),
                                     dim=1)
        if best < float(confidence):
            raise ValueError(
                f"`n_trials`={n_trials} cannot certify confidence={confidence!r} for "
                f"rule='algorithm1' with c={c!r} and output_bound={output_bound!r} even for a "
                f"1-dimensional output (at most {best:.6g}): raise `n_trials` "
                "(pacpriv.pac.noise.trials_for_confidence) or lower `confidence`.")


def run_pac(
    mechanism: Callable[..., Any],
    pool: Any,
    *,
    mi_budget: float,
    n_trials: int = 1000,
    sampler: Any = None,
    rule: str = DEFAULT_RULE,
    confidence: float | None = None,
    c: float | None = None,
    beta: float | None = None,
    output_bound: float | None = None,
    target_inflation: float | None = 1.2,
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
        The data pool the adversary is assumed to know: at least 2 records; float arrays must
        be finite (checked before any trial, like ``n_jobs``: None or a nonzero integer).
    mi_budget : float
        Mutual-information budget ``v`` in **nats**, ``> 0``.
    n_trials : int, default 1000
        Number of simulated subsets (``>= 2``).
    sampler : Sampler, callable, str or None
        Distribution of the secret subset (None: Poisson with ``sampling_rate=0.5``).
    rule : {"certified", "anisotropic", "isotropic", "variance-only", "exact-mi", \
"algorithm1", "asymptotic-t"}, default "certified"
        Noise rule (:data:`pacpriv.pac.noise._rules.RULE_TABLE`), or an
        :class:`~pacpriv.pac.noise.Algorithm1` object carrying its parameters. ``"certified"``
        (:func:`pacpriv.pac.noise.certify_noise`) meets the budget for the true
        covariance of the released (clipped) mechanism with probability ``confidence``; the
        plug-in rules (:func:`pacpriv.pac.noise.calibrate_noise`) meet it for the
        estimated covariance only and their headline is worded "estimated".
    confidence : float, optional
        ``1 − γ`` in (0, 1): ``"certified"``/``"asymptotic-t"`` (default 0.95) and
        ``"algorithm1"`` (required minimum).
    output_bound : float, optional
        Public bound ``r >= ||f(X)||₂``: ``"certified"`` (clip radius; certified minimum noise
        for outputs that never varied) and ``"algorithm1"``. A simulated output with a larger
        norm raises :class:`~pacpriv.exceptions.CalibrationError` (the assumption is false).
    c, beta : float, optional
        Algorithm 1 parameters (``rule="algorithm1"`` only).
    target_inflation : float or None, default 1.2
        ``"certified"``: warn (``UndersampledWarning``) when ``n_trials`` is below
        :func:`pacpriv.pac.noise.trials_for_inflation` for this noise-power inflation
        over the oracle square-root rule (None: no check).
    n_jobs, backend : optional
        joblib parallelism (``n_jobs=-1``: all cores).
    rng : None, int, SeedSequence or Generator
        Root seed of the simulation (None: fresh OS entropy, recorded in the report).
    release : bool, default True
        Whether to draw the secret subset, run ``f`` on it and add the noise.
    release_rng : None, int, SeedSequence or Generator
        Randomness of the secret subset and of the noise; None (default) = fresh OS entropy,
        which is what a real release must use. Seed it only for tests and demos, and never
        with the seed given as ``rng`` (recorded in the report): that raises ValueError.
    secret_mask : ndarray of bool, shape (n_records,), optional
        Use this subset as the secret instead of drawing it from the sampler.
    progress, checkpoint, retries, timeout :
        Passed to :func:`pacpriv.pac.engine.simulate`. A checkpoint holds the un-noised trial
        outputs and subset masks (mode 0700, files 0600): treat a checkpoint like the raw
        data; delete it after the run.
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
    pacpriv.exceptions.CalibrationError
        The noise cannot be calibrated (float64 overflow, a numerical failure) or a simulated
        output breaks ``output_bound``.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 1 (posterior bound), Thm 3 (Gaussian
       noise), Algorithm 1 (confidence).
    """
    mi_budget = _check_budget(mi_budget)
    n_trials = check_int(n_trials, "n_trials", low=2)
    _check_release_seed(rng, release_rng, release)
    rule, unpacked = _rules.unpack_rule(rule, confidence=confidence, c=c, beta=beta,
                                        output_bound=output_bound)
    confidence, c, beta, output_bound = (unpacked.get(k) for k in
                                         ("confidence", "c", "beta", "output_bound"))
    if rule not in RULES:
        raise ValueError(f"`rule` must be one of {', '.join(RULES)}; got {rule!r}.")
    info = _rules.rule_info(rule)
    rule_params = {k: val for k, val in {"confidence": confidence, "c": c, "beta": beta,
                                         "output_bound": output_bound}.items()
                   if val is not None}
    refused = [k for k in rule_params if k not in info.parameters]
    if refused:
        raise ValueError(f"{refused} do not apply to rule={rule!r} (it takes "
                         f"{list(info.parameters)}).")
    if confidence is not None:
        check_real(confidence, "confidence", low=0.0, high=1.0, low_inclusive=False,
                   high_inclusive=False)
    if output_bound is not None:
        check_real(output_bound, "output_bound", low=0.0, low_inclusive=False)
    if rule == "algorithm1":
        _check_algorithm1(n_trials, c=c, beta=beta, output_bound=output_bound,
                          confidence=confidence)
    if info.source == "outputs" and n_trials < 6:
        raise ValueError(f"rule={rule!r} needs `n_trials` >= 6 (shape trials and pairs); "
                         f"got {n_trials}.")
    if target_inflation is not None:
        target_inflation = check_real(target_inflation, "target_inflation", low=1.0,
                                      low_inclusive=False)
    sampler_obj = as_sampler(sampler)

    sim, spectrum, plan = measure(
        mechanism,
        pool,
        mi_budget=mi_budget,
        rule=rule,
        calibration=rule_params,
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

    notes = _caveats(sim, plan, baseline, target_inflation if info.certified else None)
    for note, category in notes:
        if category is not None:
            warnings.warn(note, category, stacklevel=2)
    if prior_info.source == "estimated":
        notes.append((f"membership prior: {prior_info.explanation}.", UserWarning))

    noisy = None
    if release:
        gen = as_generator(release_rng, name="release_rng")
        value = _secret_output(mechanism, pool, sampler_obj, sim.n_records, secret_mask, gen,
                               mechanism_name or sim.mechanism)
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
