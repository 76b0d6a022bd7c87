"""Noise for a per-record membership-inference target, certified for every record at once.

:func:`calibrate_per_record` simulates the per-record differences of a mechanism and returns
the smallest noise ``Σ_B = s² Σ_shape`` such that, with probability ``>= 1 − γ`` over the
simulation, **every audited record** (by default every record of the pool) has
informed-adversary accuracy ``<= target_accuracy`` (PAC Privacy [1]_ §2).

Protocol (``bound="betting"``, the default)
-------------------------------------------
1. *Shape trials* (the first ``shape_fraction`` of the trials, at least 2): their differences
   fix the noise shape (:mod:`pacpriv.pac.per_record._shapes`), a reference scale, the split
   of ``γ`` over records and the priors of the bets.
2. *Certification trials* (the rest, an independent seed): only the distances
   ``‖Δ_{t,i}‖_{Σ_shape⁻¹}`` are kept (:mod:`pacpriv.pac.per_record._distances`); the betting
   certificate (:mod:`pacpriv.pac.per_record._certificate`, which holds the proof) picks the
   scale. A mechanism that *declares* a sensitivity bound (``difference_bound``) gets a tighter
   range; the bound is checked on every simulated difference and the plan says it was used.
   ``bound="bernstein"`` keeps the earlier Maurer–Pontil calibration on all trials
   (:mod:`pacpriv.pac.per_record._bernstein`), which needs far more trials.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, §2.
.. [2] I. Waudby-Smith, A. Ramdas. Estimating means of bounded random variables by betting.
   J. R. Stat. Soc. B 86(1), 2024, Thm 3.
.. [3] A. Maurer, M. Pontil. Empirical Bernstein bounds and sample variance penalization.
   COLT 2009, Thm 4.
.. [4] M. Sridhar, H. Xiao, S. Devadas. PAC-Private Algorithms. IEEE S&P 2025, Thm 1.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pacpriv._random import RNGLike, as_seed_sequence, trial_seed
from pacpriv._validation import check_int, check_real
from pacpriv.exceptions import CalibrationError
from pacpriv.pac.bounds._posterior import posterior_success_rate
from pacpriv.pac.engine._checkpoint import run_fingerprint
from pacpriv.pac.engine._checkpoint_words import records_text
from pacpriv.pac.engine._limit import after_trials_within, carry_over, whole_run_words
from pacpriv.pac.engine._options import (
    ExecutionOptions,
    execution_hints,
    refuses_removed,
    resolve_execution,
)
from pacpriv.pac.engine._simulate import _check_pool
from pacpriv.pac.noise._plan import NoisePlan
from pacpriv.pac.per_record._bernstein import bernstein_scale, plain_max_upper, uniform_max_upper
from pacpriv.pac.per_record._betting import betting_upper, predictable_bets
from pacpriv.pac.per_record._certificate import (
    BETTING_METHOD,
    ScaleCertificate,
    certify_scale,
    check_betting_feasible,
    check_scale_feasible,
)
from pacpriv.pac.per_record._checks import (
    _check_confidence,
    _check_target,
    check_certifiable,
    check_records,
    check_sampler,
)
from pacpriv.pac.per_record._distances import (
    RecordDistances,
    declared_bounds,
    min_std,
    simulate_distances,
)
from pacpriv.pac.per_record._estimate import check_whole_run_time
from pacpriv.pac.per_record._exposure import (
    RecordDifferences,
    RecordExposure,
    _exposure,
    _noise_summary,
    _reproducible,
    _whole_subset_mi,
    simulate_differences,
)
from pacpriv.pac.per_record._math import NoiseGeometry, bayes_accuracy, binary_entropy
from pacpriv.pac.per_record._report import per_record_section
from pacpriv.pac.per_record._shapes import SHAPES, fit_shape
from pacpriv.pac.samplers import PoissonSampler, Sampler

__all__ = ["BOUNDS", "SHAPES", "CalibrationTrials", "PerRecordPlan",
           "calibrate_from_differences", "calibrate_per_record", "plan_from_trials",
           "simulate_calibration_trials", "uniform_max_upper"]

#: Per-record certificates: betting (default) or the earlier Maurer–Pontil bound.
BOUNDS = ("betting", "bernstein")


@dataclass(frozen=True, eq=False, kw_only=True)
class PerRecordPlan(NoisePlan):
    """A :class:`NoisePlan` calibrated to a per-record membership-inference target.

    ``privatize`` accepts it. ``Σ_B = scale² · Σ_shape``. The inherited MI fields describe the
    whole-subset guarantee of the same noise, **estimated** on the plug-in covariance of
    ``f(S_t)`` (``mi_budget = mi_bound = mi_claim``; ``confidence = None``; ``certified``
    False); the certified per-record statement's label is :attr:`bound_label`.

    Attributes
    ----------
    target_accuracy : float
        Requested per-record accuracy ``a*``.
    max_accuracy_upper : float
        **Certified** bound, ``<= target_accuracy``: with probability ``>= accuracy_confidence``
        every audited record's informed-adversary accuracy is at most this, for this noise and
        any larger scale. (Betting: exactly the target, the level the proof is about.)
    accuracy_upper : ndarray of shape (k,)
        Per-record bounds at the calibrated scale (each ``<= max_accuracy_upper``); the scale
        was chosen on these trials, so these rank the records; the certified statement is
        ``max_accuracy_upper``.
    accuracy : ndarray of shape (k,)
        Per-record plug-in estimates at this noise.
    records : ndarray of int, shape (k,)
    accuracy_confidence : float
        ``1 − γ`` of the per-record statement.
    scale : float
    shape : str
        One of :data:`SHAPES`.
    sampling_rate : float
    n_trials_certify, n_trials_shape : int
    bound : str
        ``"betting"`` or ``"bernstein"``.
    n_pool_records : int or None
        Size of the pool (None: unknown); ``records`` covers it all when equal.
    range_source : str
        What bounded the certificate's range (a declared sensitivity, or none: black box).
    record_certificate : ScaleCertificate or None
        The betting certificate.
    """

    target_accuracy: float
    max_accuracy_upper: float
    accuracy_upper: np.ndarray = field(repr=False)
    accuracy: np.ndarray = field(repr=False)
    records: np.ndarray = field(repr=False)
    accuracy_confidence: float
    scale: float
    shape: str
    sampling_rate: float
    n_trials_certify: int
    n_trials_shape: int = 0
    exposure: RecordExposure | None = field(default=None, repr=False)
    bound: str = "betting"
    n_pool_records: int | None = None
    range_source: str = "none (black box): accuracy range [max(q, 1-q), 1]"
    record_certificate: ScaleCertificate | None = field(default=None, repr=False)

    @property
    def covers_every_record(self) -> bool:
        """Whether the audited records are the whole pool."""
        return self.n_pool_records is not None and self.records.size >= self.n_pool_records

    @property
    def coverage(self) -> str:
        """``"every record (n)"`` or ``"SAMPLE of k of n records"`` (or of an unknown pool)."""
        k = int(self.records.size)
        if self.covers_every_record:
            return f"every record ({k})"
        of = "?" if self.n_pool_records is None else str(self.n_pool_records)
        return f"SAMPLE of {k} of {of} records"

    @property
    def bound_label(self) -> str:
        """E.g. ``"certified (1−γ = 0.95), every record (569)"``."""
        return f"certified (1−γ = {self.accuracy_confidence:g}), {self.coverage}"

    def report_section(self, *, n_pool_records: int | None = None) -> dict:
        """Report section of the plan's exposure, with the target and the certified bound;
        ``n_pool_records`` (the pool's size; default the plan's) adds a coverage note when not
        every record was audited (the plan bounds the audited records only)."""
        if self.exposure is None:
            raise ValueError("this plan carries no exposure to report.")
        n = self.n_pool_records if n_pool_records is None else n_pool_records
        return per_record_section(self.exposure, target_accuracy=self.target_accuracy,
                                  plan_bound=self.max_accuracy_upper, n_pool_records=n,
                                  method=self.method)

    @property
    def method(self) -> str:
        """The certificate in words."""
        if self.bound == "betting":
            return f"{BETTING_METHOD}; range: {self.range_source}"
        return ("empirical Bernstein (Maurer & Pontil 2009), union bound over the audited "
                "records, uniform over noise scales >= the chosen one")

    def to_dict(self) -> dict:
        """JSON-serialisable summary (no per-record arrays)."""
        out = super().to_dict()
        out.update(
            target_accuracy=self.target_accuracy,
            max_accuracy_upper=self.max_accuracy_upper,
            max_accuracy_upper_kind=self.bound_label,
            median_accuracy_upper=float(np.median(self.accuracy_upper)),
            accuracy_confidence=self.accuracy_confidence, scale=self.scale, shape=self.shape,
            sampling_rate=self.sampling_rate, n_trials_certify=self.n_trials_certify,
            n_trials_shape=self.n_trials_shape, n_audited=int(self.records.shape[0]),
            n_pool_records=self.n_pool_records, coverage=self.coverage, bound=self.bound,
            method=self.method, whole_subset_kind="estimated (plug-in output covariance)",
        )
        return out


def _check_shape(shape, shape_fraction) -> tuple[str, float]:
    SHAPES.get(shape)  # ValueError naming `shape` and the registered shapes
    frac = check_real(shape_fraction, "shape_fraction", low=0.0, high=1.0,
                      low_inclusive=False, high_inclusive=False)
    return shape, frac


def _check_bound(bound) -> str:
    if not isinstance(bound, str) or bound not in BOUNDS:
        raise ValueError(f"`bound` must be one of {BOUNDS}; got {bound!r}.")
    return bound


def _split(n_trials: int, shape: str, frac: float, bound: str) -> tuple[int, int]:
    """``(n_shape, n_certify)``; the betting certificate always spends shape trials."""
    if bound == "bernstein" and shape == "isotropic":
        return 0, n_trials
    n_shape = max(2, round(n_trials * frac))
    return n_shape, n_trials - n_shape


def _min_trials(shape: str, frac: float, bound: str) -> int:
    """The fewest trials whose split (:func:`_split`) leaves 2 certification trials, found
    without a cap (a capped search named a count that leaves fewer): the certification count
    ``n − max(2, round(n·frac))`` grows by 0 or 1 per trial and is ``<= n(1 − frac) + ½``, so
    the search starts at ``1.5/(1 − frac)`` and ends within a few steps."""
    n = max(2, math.floor(1.5 / (1.0 - frac)) if bound != "bernstein" or shape != "isotropic"
            else 2)
    for _ in range(10_000):
        if _split(n, shape, frac, bound)[1] >= 2:
            return n
        n += 1
    raise ValueError(f"`shape_fraction` = {frac!r} leaves no certification trials at any "
                     "count float64 represents; use a smaller shape_fraction.")


def _feasible(target, n_cert, k, base, conf, bound, declares_range: bool,
              trials: tuple[int, str, float]) -> None:
    """``trials``: ``(n_trials, shape, shape_fraction)``, for the one wording of a trials
    range (as the noise rules' and the CLI's) when too few trials are left to certify."""
    if n_cert < 2:
        low = _min_trials(trials[1], trials[2], bound)
        raise ValueError(f"`n_trials` must be an integer in [{low}, {2**63 - 1}] with "
                         f"shape={trials[1]!r} and shape_fraction={trials[2]:g}, which need "
                         f"at least {low} trials (2 of them certify); got {trials[0]}.")
    if bound == "bernstein":
        check_certifiable(target, n_cert, k, base, conf)
    else:  # a declared range lowers the floor: its data-free part here, the rest after the
        # shape trials (check_scale_feasible)
        check_betting_feasible(target, n_cert, k, base, conf, declared_range=declares_range)


# ----------------------------------------------------------------------------- betting path
@dataclass(frozen=True, eq=False)
class CalibrationTrials:
    """Simulated trials of a per-record calibration, reusable for several targets.

    Attributes
    ----------
    shape_trials : RecordDifferences
        The shape trials (differences kept; also used by the informed attack).
    certify : RecordDistances
        The certification trials (distances under ``geometry`` only).
    shape : str
    geometry : NoiseGeometry
        ``Σ_shape``, fitted on ``shape_trials``.
    shape_distance : ndarray of shape (n_shape, k)
        The shape trials' distances under ``geometry`` (padded like ``certify``'s).
    n_pool_records : int
    elapsed_s : float
    """

    shape_trials: RecordDifferences
    certify: RecordDistances
    shape: str
    geometry: NoiseGeometry = field(repr=False)
    shape_distance: np.ndarray = field(repr=False)
    n_pool_records: int
    elapsed_s: float = 0.0

    @property
    def n_evaluations(self) -> int:
        """Trials run, each ``1 + k`` evaluations (or one fast call)."""
        k = int(self.certify.records.size)
        return (self.shape_trials.n_trials + self.certify.n_trials) * (1 + k)


def _phase(opts: ExecutionOptions, name: str) -> ExecutionOptions:
    """A checkpoint folder holds one subfolder per simulation (shape, certify)."""
    return opts if opts.checkpoint is None else replace(
        opts, checkpoint=os.path.join(os.fspath(opts.checkpoint), name))


def calibration_fingerprint(f, pool, records: np.ndarray, sampler: Sampler, *,
                            shape: str, shape_fraction: float) -> dict:
    """The fingerprint of a calibration's checkpoint folder (its subfolders hold the
    simulations): the kind of run, the audited records, the shape and its share of trials,
    the mechanism, the pool and the sampler: a resume with any of them changed is refused in
    words before any probe or trial (new-user passes 9, #64, and 14)."""
    return {"run": "pacpriv.per_record", "records": records_text(records), "shape": shape,
            "shape_fraction": float(shape_fraction),
            **run_fingerprint(f, pool, sampler, np.float64)}


def simulate_calibration_trials(
    f, pool, *, n_trials: int, sampler: PoissonSampler, records: np.ndarray,
    shape: str = "isotropic", shape_fraction: float = 0.25, rng: RNGLike = None,
    execution: ExecutionOptions | None = None, targets: tuple = (), confidence: float = 0.95,
) -> CalibrationTrials:
    """Run the shape trials, fit the shape, run the certification trials (validated inputs).

    A ``checkpoint`` of ``execution`` keeps each simulation in a subfolder (``shape``,
    ``certify``), so an interrupted run resumes where it stopped. Its ``time_limit`` covers
    both simulations: the certification trials get what the shape trials left (their own
    probe refuses them when that is too little). Each of ``targets`` (at
    ``confidence``) is checked between the two (:func:`check_scale_feasible`: the floor of a
    declared range depends on the shape trials), so an uncertifiable one is refused before
    the certification trials run."""
    tic = time.perf_counter()
    root = as_seed_sequence(rng)
    _, n_records = _check_pool(pool)
    n_shape, n_cert = _split(n_trials, shape, shape_fraction, "betting")
    opts = execution if execution is not None else ExecutionOptions(progress=False)
    started = time.monotonic()
    check_whole_run_time(f, pool, records, n_records=n_records, n_trials=n_trials,
                         sampling_rate=sampler.sampling_rate, execution=opts)
    shape_trials = simulate_differences(f, pool, n_trials=n_shape, sampler=sampler,
                                        records=records, rng=trial_seed(root, 0),
                                        execution=_phase(opts, "shape"))
    geom = fit_shape(shape, shape_trials.differences, shape_trials.dim)
    bound, err = declared_bounds(f, pool, records)
    pad = 0.0 if err == 0.0 else err / min_std(geom)
    shape_d = np.sqrt(geom.sq_norm(shape_trials.differences)) + pad
    for target in targets:
        check_scale_feasible(shape_d, None if bound is None else bound / min_std(geom) + pad,
                             target_accuracy=target, prior=sampler.sampling_rate,
                             confidence=confidence, n_certify=n_cert)
    limit = opts.time_limit  # the whole run's: the certification trials get what is left
    left = carry_over(opts, started, limit, before="the certification trials")
    with whole_run_words(limit):
        cert = simulate_distances(f, pool, geom, n_trials=n_cert, sampler=sampler,
                                  records=records, n_records=n_records, rng=trial_seed(root, 1),
                                  execution=_phase(left, "certify"))
    return CalibrationTrials(shape_trials, cert, shape, geom, shape_d, n_records,
                             time.perf_counter() - tic)


def _mi_upper(dist: np.ndarray, scale: float, q: float, delta: np.ndarray) -> tuple:
    """Plug-in and betting bounds of the per-record MI term at a scale (fixed-scale bets)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        sq = (dist / scale) ** 2 if scale > 0 else np.where(dist > 0, np.inf, 0.0)
    hb = binary_entropy(q)
    vals = np.minimum(q * (1.0 - q) * sq, hb) / hb
    bets = predictable_bets(vals, delta=delta, horizon=vals.shape[0], prior_mean=0.5,
                            prior_variance=0.25)
    return vals.mean(axis=0) * hb, betting_upper(vals, bets, delta) * hb


def plan_from_trials(trials: CalibrationTrials, *, target_accuracy: float,
                     confidence: float = 0.95) -> PerRecordPlan:
    """The betting plan for one target from simulated trials (validated ``trials``).

    Raises
    ------
    ValueError
        If the target cannot be certified with these trials, or a declared sensitivity bound
        is violated by a simulated difference.
    CalibrationError
        If the plan fails its final verification (a bug).
    """
    cert_d = trials.certify
    q = cert_d.sampling_rate
    base = max(q, 1.0 - q)
    target = _check_target(target_accuracy, base)
    conf = _check_confidence(confidence)
    sc = certify_scale(trials.shape_distance, cert_d.distances, target_accuracy=target,
                       prior=q, confidence=conf, distance_bound=cert_d.distance_bound)
    scale = sc.scale
    geom = trials.geometry.scaled(scale)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = cert_d.distances / scale if scale > 0 else np.where(cert_d.distances > 0,
                                                                 np.inf, 0.0)
    acc = bayes_accuracy(rel, q).mean(axis=0)
    mi, mi_up = _mi_upper(cert_d.distances, scale, q, sc.delta)
    whole, lin = _whole_subset_mi(cert_d.outputs, geom)
    exposure = RecordExposure(
        records=cert_d.records, accuracy=acc, accuracy_upper=sc.accuracy_upper, mi=mi,
        mi_upper=mi_up, confidence=conf, sampling_rate=q, baseline=base,
        n_trials=cert_d.n_trials, noise=_noise_summary(geom), whole_subset_mi=whole,
        whole_subset_accuracy_bound=float(posterior_success_rate(whole, prior=base)),
        reproducible=bool(getattr(cert_d.simulation, "reproducible", True)), bound="betting",
    )
    if not np.all(sc.accuracy_upper <= target):
        raise CalibrationError("per-record plan failed verification; this is a bug.")
    range_source = ("none (black box): accuracy range [max(q, 1-q), 1]"
                    if cert_d.distance_bound is None else
                    "the mechanism's declared sensitivity bound (checked on every simulated "
                    "difference)")
    std = np.sqrt(geom.variances)
    std.setflags(write=False)
    details = {
        "target_accuracy": target, "max_accuracy_upper": target, "scale": scale,
        "shape": trials.shape, "bet_cap": sc.cap,
        "smaller_scale_fails": sc.smaller_scale_fails,
        "whole_subset": "estimated (plug-in output covariance)",
        "elapsed_s": trials.elapsed_s, "n_evaluations": trials.n_evaluations,
    }
    return PerRecordPlan(
        rule=f"per-record-{trials.shape}", mi_budget=whole, mi_bound=whole,
        linearised_mi_bound=lin, mi_claim=whole, confidence=None, dim=geom.dim,
        basis=geom.basis, noise_std=std, residual_std=0.0, details=details,
        target_accuracy=target, max_accuracy_upper=target, accuracy_upper=sc.accuracy_upper,
        accuracy=acc, records=cert_d.records, accuracy_confidence=conf, scale=scale,
        shape=trials.shape, sampling_rate=q, n_trials_certify=cert_d.n_trials,
        n_trials_shape=trials.shape_trials.n_trials, exposure=exposure, bound="betting",
        n_pool_records=trials.n_pool_records, range_source=range_source,
        record_certificate=sc,
    )


# ----------------------------------------------------------------------------- public API
def calibrate_from_differences(
    differences: RecordDifferences,
    *,
    target_accuracy: float,
    confidence: float = 0.95,
    shape: str = "isotropic",
    shape_fraction: float = 0.25,
    bound: str = "betting",
    n_pool_records: int | None = None,
) -> PerRecordPlan:
    """Smallest noise ``Σ_B = s² Σ_shape`` whose certified per-record bound meets the target.

    Parameters
    ----------
    differences : RecordDifferences
        From :func:`~pacpriv.pac.per_record.simulate_differences` (not re-run). Its first
        trials are the shape trials, the rest certify.
    target_accuracy : float
        ``a*`` in ``(max(q, 1 − q), 1)``.
    confidence : float, default 0.95
        ``1 − γ``.
    shape : {"isotropic", "sqrt", "second_moment"}, default "isotropic"
        :mod:`pacpriv.pac.per_record._shapes`, fitted on the shape trials.
    shape_fraction : float, default 0.25
        Fraction of trials (at least 2) used as shape trials.
    bound : {"betting", "bernstein"}, default "betting"
        The certificate (module notes).
    n_pool_records : int, optional
        Size of the pool, so the plan can say whether it covers every record.

    Returns
    -------
    PerRecordPlan
        With ``max_accuracy_upper <= target_accuracy``.

    Raises
    ------
    TypeError, ValueError
        For invalid arguments, or a target below the smallest certifiable bound.
    CalibrationError
        If the final plan fails its verification (a bug).

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, §2; Waudby-Smith & Ramdas, JRSS-B 2024;
       Maurer & Pontil, COLT 2009, Thm 4; Sridhar, Xiao & Devadas, IEEE S&P 2025, Thm 1.
    """
    if not isinstance(differences, RecordDifferences):
        raise TypeError(
            f"`differences` must be a RecordDifferences; got {type(differences).__name__}."
        )
    conf = _check_confidence(confidence)
    shape, frac = _check_shape(shape, shape_fraction)
    bound = _check_bound(bound)
    q, base, k = differences.sampling_rate, differences.baseline, differences.n_audited
    target = _check_target(target_accuracy, base)
    n_shape, n_cert = _split(differences.n_trials, shape, frac, bound)
    has_range = differences.difference_bound is not None
    _feasible(target, n_cert, k, base, conf, bound, has_range,
              (differences.n_trials, shape, frac))
    diffs = np.asarray(differences.differences)
    geom = fit_shape(shape, diffs[:n_shape] if n_shape else None, differences.dim)
    pad = (0.0 if differences.difference_error == 0.0
           else differences.difference_error / min_std(geom))
    distance = np.sqrt(geom.sq_norm(diffs)) + pad
    if bound == "bernstein":
        return _bernstein_plan(differences, distance[n_shape:], geom, target, conf, shape,
                               n_shape, n_pool_records)
    first = replace(differences, differences=differences.differences[:n_shape],
                    outputs=differences.outputs[:n_shape])
    rest = RecordDistances(
        distances=distance[n_shape:], outputs=differences.outputs[n_shape:],
        records=differences.records, sampling_rate=q, geometry=geom,
        distance_bound=(None if differences.difference_bound is None
                        else differences.difference_bound / min_std(geom) + pad),
        simulation=differences.simulation,
    )
    trials = CalibrationTrials(first, rest, shape, geom, distance[:n_shape],
                               n_pool_records if n_pool_records is not None else -1)
    plan = plan_from_trials(trials, target_accuracy=target, confidence=conf)
    return replace(plan, n_pool_records=n_pool_records)


def _bernstein_plan(differences, distance, geom_shape, target, conf, shape, n_shape,
                    n_pool) -> PerRecordPlan:
    q, k = differences.sampling_rate, differences.n_audited
    delta = (1.0 - conf) / k
    scale = bernstein_scale(distance, q, delta, target)
    certified = uniform_max_upper(distance, scale, q, delta)
    geom = geom_shape.scaled(scale)
    cert = np.asarray(differences.differences[n_shape:])
    exposure = _exposure(cert, differences.outputs, differences.records, q, geom, conf,
                         reproducible=_reproducible(differences))
    if not (certified <= target and exposure.max_accuracy_upper <= target):
        raise CalibrationError(
            f"per-record plan failed verification (uniform bound {certified!r}, plain bound "
            f"{exposure.max_accuracy_upper!r} > target {target!r}); this is a bug."
        )
    smaller_fails = scale == 0.0 or plain_max_upper(distance, 0.99 * scale, q, delta) > target
    whole, lin = _whole_subset_mi(differences.outputs, geom)
    std = np.sqrt(geom.variances)
    std.setflags(write=False)
    details = {
        "target_accuracy": target, "max_accuracy_upper": certified, "scale": scale,
        "shape": shape, "smaller_scale_fails": bool(smaller_fails),
        "whole_subset": "estimated (plug-in output covariance)",
    }
    return PerRecordPlan(
        rule=f"per-record-{shape}", mi_budget=whole, mi_bound=whole, linearised_mi_bound=lin,
        mi_claim=whole, confidence=None, dim=differences.dim, basis=geom.basis,
        noise_std=std, residual_std=0.0, details=details,
        target_accuracy=target, max_accuracy_upper=certified,
        accuracy_upper=exposure.accuracy_upper, accuracy=exposure.accuracy,
        records=differences.records, accuracy_confidence=conf, scale=scale, shape=shape,
        sampling_rate=q, n_trials_certify=distance.shape[0], n_trials_shape=n_shape,
        exposure=exposure, bound="bernstein", n_pool_records=n_pool,
    )


@refuses_removed(execution_hints())
def calibrate_per_record(
    f,
    pool,
    *,
    target_accuracy: float,
    n_trials: int,
    sampler: Sampler | str | None = PoissonSampler(0.5),  # noqa: B008 (frozen, immutable)
    records: Any = None,
    confidence: float = 0.95,
    shape: str = "isotropic",
    shape_fraction: float = 0.25,
    rng: RNGLike = None,
    execution: ExecutionOptions | None = None,
    bound: str = "betting",
) -> PerRecordPlan:
    """Simulate and calibrate noise so that every record meets a per-record target.

    Parameters
    ----------
    f, pool, n_trials, sampler, confidence, rng, execution
        As in :func:`~pacpriv.pac.per_record.record_exposure` (``execution``: an
        :class:`~pacpriv.pac.engine.ExecutionOptions`). A ``checkpoint`` folder records the
        root seed (``rng=None`` resumes an interrupted run) and, for ``bound="betting"``, holds
        the shape and certification simulations in subfolders; ``output_path`` applies to
        ``bound="bernstein"`` only (one simulation).
    target_accuracy : float
        Per-record informed-adversary accuracy ``a*`` in ``(max(q, 1 − q), 1)``.
    records : sequence of int or None, default None
        Audited records. None: **every record of the pool** (the plan then bounds them all at
        once); a subset is labelled as a sample (``plan.coverage``).
    shape, shape_fraction, bound
        As in :func:`calibrate_from_differences`.

    Returns
    -------
    PerRecordPlan
        A noise plan for :func:`~pacpriv.pac.release.privatize` with
        ``max_accuracy_upper <= target_accuracy`` (certified at ``confidence``).

    Raises
    ------
    TypeError, ValueError
        For invalid arguments or an uncertifiable target, before any evaluation of ``f``.
    MechanismError
        If an evaluation fails.
    CalibrationError
        If the plan fails its final verification (a bug).

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, §2; Waudby-Smith & Ramdas, JRSS-B 2024.
    """
    smp = check_sampler(sampler)
    conf = _check_confidence(confidence)
    shape, frac = _check_shape(shape, shape_fraction)
    bound = _check_bound(bound)
    base = max(smp.sampling_rate, 1.0 - smp.sampling_rate)
    target = _check_target(target_accuracy, base)
    n_trials = check_int(n_trials, "n_trials", low=2)
    checked_pool, n_records = _check_pool(pool)
    recs = check_records(records, n_records)
    _, n_cert = _split(n_trials, shape, frac, bound)
    has_range = callable(getattr(f, "difference_bound", None))
    _feasible(target, n_cert, recs.shape[0], base, conf, bound, has_range,
              (n_trials, shape, frac))
    run = resolve_execution(execution)
    tic, started = time.perf_counter(), time.monotonic()  # `time_limit`: the analysis too
    if bound == "bernstein":
        diffs = simulate_differences(f, pool, n_trials=n_trials, sampler=smp, records=records,
                                     rng=rng, execution=run)
        plan = calibrate_from_differences(diffs, target_accuracy=target, confidence=conf,
                                          shape=shape, shape_fraction=frac, bound=bound,
                                          n_pool_records=n_records)
        plan.details["n_evaluations"] = diffs.n_evaluations
    else:
        if run.output_path is not None:
            raise ValueError(f"`output_path` must be None for the betting calibration (it "
                             f"runs two simulations); got {run.output_path!r}.")
        if run.checkpoint is not None:  # the folder records the root seed (rng=None resumes)
            from pacpriv.pac.engine._checkpoint import Checkpoint

            print_ = calibration_fingerprint(f, checked_pool, recs, smp, shape=shape,
                                             shape_fraction=frac)
            rng = Checkpoint.open(run.checkpoint, fingerprint=print_, n_records=0,
                                  root=None if rng is None else as_seed_sequence(rng)).root
        trials = simulate_calibration_trials(f, checked_pool, n_trials=n_trials, sampler=smp,
                                             records=recs, shape=shape, shape_fraction=frac,
                                             rng=rng, execution=run, targets=(target,),
                                             confidence=conf)
        plan = plan_from_trials(trials, target_accuracy=target, confidence=conf)
    after_trials_within(run.time_limit, started, lambda: None, n_trials=n_trials,
                        checkpoint=run.checkpoint,
                        what="after the trials (their reproducibility check and analysis)")
    plan.details["elapsed_s"] = time.perf_counter() - tic
    return plan

