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

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacpriv._display import Displayable, Summary, shown
from pacpriv._numbers import format_bound
from pacpriv._random import RNGLike, as_generator, as_seed_sequence, seed_to_dict
from pacpriv._validation import check_int
from pacpriv.exceptions import (
    WITHHELD_NOTE,
    MechanismError,
    PacprivWarning,
    UndersampledWarning,
    VacuousBoundWarning,
    warn_user,
)
from pacpriv.pac._pipeline import measure
from pacpriv.pac._sampling import grid_overhead
from pacpriv.pac.bounds._posterior import individual_mi_bound, pinsker_bound, posterior_success_rate
from pacpriv.pac.bounds._prior import resolve_membership_prior
from pacpriv.pac.engine._limit import after_trials_within
from pacpriv.pac.engine._mechanism import (
    InvalidOutput,
    MechanismExit,
    call_mechanism,
    check_output,
    subset_pool,
)
from pacpriv.pac.engine._options import (
    ExecutionOptions,
    execution_hints,
    refuses_removed,
)
from pacpriv.pac.engine._simulate import SimulationResult
from pacpriv.pac.engine._trial import TrialTimeoutError
from pacpriv.pac.noise._calibration import NoisePlan, _check_budget
from pacpriv.pac.noise._concentration import constant_output_bound
from pacpriv.pac.noise._registry import (
    DEFAULT_RULE,
    RULE_CLASSES,
    as_rule,
    rule_hints,
)
from pacpriv.pac.noise._rule import NoiseRule
from pacpriv.pac.release import privatize
from pacpriv.pac.samplers import as_sampler
from pacpriv.pac.spectrum._covariance import OutputSpectrum
from pacpriv.pac.spectrum._gram import rows_all_equal

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
        The noisy output ``f(X) + B`` on the secret subset ``X`` (None if ``release=False``);
        its error bar, the noise std of each coordinate, is :attr:`noise_std_per_coordinate`.
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
    prior_confidence: float | None = None
    #: Nats the hardened release's grid may add to the plan's bound
    #: (:func:`pacpriv.pac._sampling.grid_overhead`); the plan was calibrated with it held back
    grid_overhead: float = 0.0

    @property
    def certified(self) -> bool:
        """Whether the plan's MI claim is certified for the true covariance (``confidence``)."""
        return self.plan.certified

    @property
    def confidence(self) -> float | None:
        """``1 − γ`` of a certified (or asymptotic) plan; None for a plug-in estimate."""
        return None if self.plan.confidence is None else float(self.plan.confidence)

    @property
    def label(self) -> str:
        """``"certified (1−γ = …)"`` or ``"estimated (plug-in)"``: printed beside every bound
        (the rule object decides, :meth:`pacpriv.pac.noise.NoiseRule.label`)."""
        return self.plan.label

    @property
    def posterior_label(self) -> str:
        """The label of the posterior success bound: :attr:`label`, except that a certified
        bound resting on an **estimated** membership prior (a sampler that declares no
        inclusion probability) holds with the joint confidence ``1 − γ − γ_prior`` (union bound
        over the MI certificate and the prior's Clopper–Pearson bound), which it states."""
        if (self.prior_source != "estimated" or self.prior_confidence is None
                or self.confidence is None or not self.certified):
            return self.label
        joint = self.confidence + self.prior_confidence - 1.0
        return (f"certified (1−γ = {format_bound(joint, side='down')}: "
                f"{format_bound(self.confidence, side='down')} for the MI certificate and "
                f"{format_bound(self.prior_confidence, side='down')} for the estimated "
                "membership prior, union bound)")

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
    def noise_std_per_coordinate(self) -> np.ndarray:
        """The release's error bar: noise std of each output coordinate, ``sqrt(diag(Σ_B))``,
        shape ``(d,)``, float64, in the output's units (:attr:`NoisePlan.noise_std_per_coordinate
        <pacpriv.pac.noise.NoisePlan.noise_std_per_coordinate>`).

        A statistic of the pool (Σ_B is calibrated from the spread of f over random subsets of
        it), not of the secret subset: the PAC adversary knows it. Reports show it for every
        pool unless withheld (``pool_statistics=False``).
        """
        return self.plan.noise_std_per_coordinate

    @property
    def mi_claim(self) -> float:
        """MI (nats) claimed for the true covariance: the plan's (``v``, or ``v + β`` for Alg.
        1) plus :attr:`grid_overhead`."""
        return float(self.plan.mi_claim) + self.grid_overhead

    def with_sections(self, *sections: dict) -> PacResult:
        """A copy with extra report sections appended."""
        from dataclasses import replace

        return replace(self, sections=(*self.sections, *sections))

    def summary(self) -> Summary:
        """Rows shown by ``str(result)`` and in Jupyter: the report's headline facts."""
        prior = self.blind_guess_prior if self.blind_guess_prior is not None else None
        return Summary(f"PAC result: {self.mechanism}", [
            ("posterior success bound", self.posterior_success_bound, "percent-risk"),
            ("bound is", self.posterior_label, "plain"),
            ("prior (best blind guess)", prior, "plain"),
            ("MI budget v (nats)", self.mi_budget, "risk"),
            ("MI bound (nats)", self.plan.mi_bound, "risk"),
            ("noise rule", self.plan.rule, "plain"),
            ("E||B||^2", self.plan.expected_noise_power, "plain"),
            ("noise std per coordinate (error bar)",
             shown(self.noise_std_per_coordinate, up=True), "plain"),
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
            "posterior_success_bound_label": self.posterior_label,
            "pinsker_success_bound": self.pinsker_success_bound,
            "average_per_record_mi_nats": self.individual_mi_bound,
            "release": None if self.release is None else [float(v) for v in self.release],
            "noise_std_per_coordinate": [float(v) for v in self.noise_std_per_coordinate],
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


def _certain_membership(secret_mask, n_records: int) -> str | None:
    """The note for a given ``secret_mask`` that makes every membership certain (the whole
    pool or none of it): the posterior bound does not apply to such a release, as the wrapper
    says (seventh new-user pass, #599: run_pac said nothing)."""
    if secret_mask is None:
        return None
    mask = np.asarray(secret_mask)
    if mask.dtype != bool or mask.shape != (n_records,) or (mask.any() and not mask.all()):
        return None  # a bad mask is refused by _secret_output
    which = "the whole pool" if mask.all() else "an empty subset"
    return (f"this release is on {which} (`secret_mask`): every record's membership is "
            "certain, so the posterior-success bound does not apply to it. Release on a secret "
            "subset drawn like the simulation's sampler.")


def _secret_output(mechanism, pool, sampler, n_records, secret_mask, gen,
                   name: str = "", dim: int | None = None) -> np.ndarray:
    """Run ``mechanism`` once on the secret subset (drawn from the sampler unless given).

    An exception of the mechanism (``SystemExit`` and its own ``KeyboardInterrupt`` too)
    becomes :class:`MechanismError` (``trial_index=-1``, no seed: the release's randomness is
    secret) whose message withholds the original one; what it prints goes to standard error.
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
    except MechanismExit as err:  # sys.exit / its own KeyboardInterrupt: pacpriv's words
        raise MechanismError(
            f"Mechanism {name or 'f'} {err.what} on the release's secret subset (after every "
            "trial had passed); nothing was released.", trial_index=-1, seed={},
        ) from err.__cause__
    except Exception as err:
        raise MechanismError(
            f"Mechanism {name or 'f'} raised {type(err).__qualname__} on the release's secret "
            f"subset (after every trial had passed). {WITHHELD_NOTE}",
            trial_index=-1, seed={},
        ) from err
    try:
        return check_output(value, dim)  # the trials' length too
    except InvalidOutput as err:  # a MechanismError, like a trial's (thirteenth new-user pass)
        raise MechanismError(
            f"Mechanism {name or 'f'} returned an invalid output on the release's secret "
            f"subset (after every trial had passed): {err}. Nothing was released.",
            trial_index=-1, seed={}) from err.__cause__


def _constant_note(sim: SimulationResult, plan: NoisePlan, rule: NoiseRule) -> str:
    """What identical outputs in every trial support (never "reveals nothing")."""
    conf = plan.confidence if plan.confidence is not None and plan.confidence < 1 else 0.95
    p_diff = constant_output_bound(sim.n_trials, confidence=conf)
    head = (
        f"the output was identical in all {sim.n_trials} trials. This does not show that the "
        f"output is independent of the subset: with confidence {format_bound(conf, side='down')}"
        f", the probability that its output differs from the seen value is at most "
        f"{format_bound(p_diff, 4)} (<= ln(1/γ)/m = "
        f"{format_bound(math.log(1.0 / (1.0 - conf)) / sim.n_trials, 4)}); a rarer change was "
        "not tested. "
    )
    return head + rule.constant_note(plan)


def _caveats(sim: SimulationResult, plan: NoisePlan, rule: NoiseRule,
             prior: float, claim: float) -> list[tuple[str, type | None]]:
    """Caveats that must reach the report (as notes) and, with a category, the user (warnings)."""
    notes: list[tuple[str, type | None]] = []
    if not rule.safe_when_undersampled and sim.n_trials - 1 < sim.dim:
        notes.append((
            f"only {sim.n_trials} trials for a {sim.dim}-dimensional output: at most "
            f"{sim.n_trials - 1} directions were explored. The others are charged the whole "
            "trace when the sample filled every explorable direction (costly), else only the "
            "numerical resolution, and then the MI bound holds only if the output does not "
            "vary outside the simulated span. Use more trials than output dimensions, or "
            "rule='certified' (or a rule that is safe when undersampled: "
            f"{', '.join(n for n, c in RULE_CLASSES.items() if c.safe_when_undersampled)}).",
            UndersampledWarning,
        ))
    notes.extend(rule.notes(plan, n_trials=sim.n_trials, dim=sim.dim))
    if sim.n_trials >= 1 and rows_all_equal(sim.outputs):
        notes.append((_constant_note(sim, plan, rule), None))
    vacuous = _vacuous_note(claim, prior)
    if vacuous:
        notes.append((vacuous, VacuousBoundWarning))
    return notes


def _vacuous_note(mi: float, prior: float) -> str:
    """The vacuous-bound caveat, in words that match the numbers ("" when the bound says
    something): "at least ln(1/prior)" only when the budget is (the float comparison of Thm 1's
    root), else "just below ln(1/prior), within round-off of it" with the bound itself.
    """
    log_inv = -math.log(prior)
    bound = float(posterior_success_rate(mi, prior=prior))
    if bound < 1.0 and mi < log_inv * (1 - 1e-12):
        return ""
    if mi >= log_inv:
        return (f"the MI budget {format_bound(mi)} nats is at least ln(1/prior) = "
                f"{format_bound(log_inv, side='down')}: the posterior success bound is 1 "
                "(vacuous).")
    # (printed in full: six digits rounded up would read as ln(1/prior) itself)
    return (f"the MI budget {mi!r} nats is just below ln(1/prior) = {log_inv!r}, within "
            f"round-off of it: the posterior success bound is {format_bound(bound, 17)}, "
            "vacuous in effect.")


@refuses_removed({**execution_hints(), **rule_hints()})
def run_pac(
    mechanism: Callable[..., Any],
    pool: Any,
    *,
    mi_budget: float,
    n_trials: int = 1000,
    sampler: Any = None,
    rule: str | NoiseRule = DEFAULT_RULE,
    rng: RNGLike = None,
    release: bool = True,
    release_rng: RNGLike = None,
    secret_mask: np.ndarray | None = None,
    execution: ExecutionOptions | None = None,
    mechanism_name: str | None = None,
    dataset: dict | None = None,
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
    rule : NoiseRule or str, default "certified"
        What to certify: a rule object of :mod:`pacpriv.pac.noise` (``Certified(confidence=0.99,
        output_bound=...)``, ``Algorithm1(c=..., beta=..., output_bound=...)``,
        ``Anisotropic()``, ``Isotropic()``, ``VarianceOnly()``, ``ExactMI()``,
        ``AsymptoticT()``) or the name of one with its default parameters. ``Certified``
        (:func:`pacpriv.pac.noise.certify_noise`) meets the budget for the true covariance of
        the released (clipped) mechanism with probability ``confidence`` and warns
        (``UndersampledWarning``) when ``n_trials`` is below its planning model's count; the
        plug-in rules (:func:`pacpriv.pac.noise.calibrate_noise`) meet it for the estimated
        covariance only and their headline is worded "estimated". The rule is validated
        before any trial; a public ``output_bound`` it carries is checked against every
        simulated output (:class:`~pacpriv.exceptions.CalibrationError` if one breaks it). The
        0.2 keywords ``confidence``, ``c``, ``beta``, ``output_bound`` and
        ``target_inflation`` beside a rule name
        were removed in 0.4 (a ``TypeError`` naming the replacement).
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
    execution : ExecutionOptions, optional
        How the trials run (:class:`~pacpriv.pac.engine.ExecutionOptions`: workers, backend,
        progress bar, checkpoint, retries, timeout); never changes the results. A checkpoint
        holds the un-noised trial outputs and subset masks (mode 0700, files 0600): treat it
        like the raw data; delete it after the run. The 0.2 keywords (``n_jobs=``,
        ``backend=``, ``progress=``, ``checkpoint=``, ``retries=``, ``timeout=``,
        ``options=``)
        were removed in 0.4 (a ``TypeError`` naming the replacement).
    mechanism_name : str, optional
        Name shown in the report (default: the engine's qualified name).
    dataset : dict, optional
        Public description of the pool for the report (never the records).
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
    spec = as_rule(rule)
    spec.validate(n_trials=n_trials)  # the rule's own requirements, before any trial
    sampler_obj = as_sampler(sampler)

    started = time.monotonic()  # `time_limit` covers the whole run: trials, analysis, release
    limit = None if execution is None else execution.time_limit
    hardened = release and release_rng is None  # this release is the grid's
    sim, spectrum, plan = measure(
        mechanism, pool, mi_budget=mi_budget, rule=spec, n_trials=n_trials,
        sampler=sampler_obj, rng=rng, execution=execution, grid_reserve=hardened,
    )
    # what was held back: the hardened release's grid adds grid_overhead(k) <= this (k <= 2d)
    overhead = grid_overhead(2 * plan.dim) if hardened else 0.0
    within = functools.partial(after_trials_within, limit, started, n_trials=sim.n_trials,
                               checkpoint=sim.checkpoint)
    # Thm 1 bounds an adversary relative to *its own* blind-guess rate, which lies between
    # min(q, 1-q) and max(q, 1-q); the bound over all adversaries uses the best blind guess
    # (declared by the sampler, or an upper confidence bound from the masks: never a silent ½).
    prior_info = resolve_membership_prior(sampler_obj, sim.masks, n_records=sim.n_records)
    prior, baseline = prior_info.inclusion_probability, prior_info.blind_guess
    claim = float(plan.mi_claim) + overhead  # the grid's overhead: still <= mi_budget

    notes = _caveats(sim, plan, spec, baseline, claim)
    for note, category in notes:
        if category is not None:
            warn_user(note, category)
    if prior_info.source == "estimated":
        notes.append((f"membership prior: {prior_info.explanation}.", UserWarning))

    noisy = None
    if release:
        certain = _certain_membership(secret_mask, sim.n_records)
        if certain is not None:
            warn_user(certain, PacprivWarning)
            notes.append((certain, PacprivWarning))
        gen = as_generator(release_rng, name="release_rng")
        timeout = None if execution is None else execution.timeout  # as each trial's
        try:
            value = within(lambda: _secret_output(
                mechanism, pool, sampler_obj, sim.n_records, secret_mask, gen,
                mechanism_name or sim.mechanism, plan.dim),
                what="during the release's call of the mechanism", timeout=timeout)
        except TrialTimeoutError:
            raise MechanismError(
                f"Mechanism {mechanism_name or sim.mechanism} exceeded timeout={timeout} s on "
                "the release's secret subset (after every trial had passed; interrupted); "
                "nothing was released or charged.", trial_index=-1, seed={}) from None
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
        prior_confidence=prior_info.confidence,
        grid_overhead=overhead,
    )
