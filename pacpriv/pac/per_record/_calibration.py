"""Noise for a per-record membership-inference target (PAC Privacy, CRYPTO 2023, §2).

:func:`calibrate_per_record` finds the smallest scale ``s`` of ``Σ_B = s² Σ_shape`` whose
maximum certified per-record upper bound (informed adversary, :mod:`pacpriv.pac.per_record`) is
``<= target_accuracy``, by bisection on stored differences (no new evaluations of ``f``).

Soundness of a scale chosen on the same trials
----------------------------------------------
For a *fixed* noise the Maurer–Pontil bounds hold with probability ``>= 1 − γ``. The calibrated
scale depends on the trials, so the plan is certified by :func:`uniform_max_upper`, a bound that
holds for **every** scale ``>= s`` at once: the accuracies ``acc(d_{t,i}/s')`` are non-increasing
in ``s'``, so on a box of scales ``[e_j, e_{j+1}]`` every sample lies between its values at the
two ends and :func:`~pacpriv.pac.per_record._math.box_bernstein_upper` dominates the bound of
each sample in the box; boxes cover ``[s, ∞)``. If the true maximum ``Aᵢ(s)`` exceeded the
target, the certified ``Aᵢ <= bound`` would fail at a fixed scale just below the true threshold,
an event of probability ``<= γ`` (union bound over records). The square-root-rule shape is
fitted on the first ``shape_fraction`` of the trials and certified on the rest.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, §2.
.. [2] A. Maurer, M. Pontil. Empirical Bernstein bounds and sample variance penalization.
   COLT 2009, Thm 4.
.. [3] M. Sridhar, H. Xiao, S. Devadas. PAC-Private Algorithms. IEEE S&P 2025, Thm 1
   (square-root rule).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacpriv._random import RNGLike
from pacpriv._validation import check_int, check_real
from pacpriv.exceptions import CalibrationError
from pacpriv.pac.engine._options import ExecutionOptions, accepts_legacy_execution
from pacpriv.pac.engine._simulate import _check_pool
from pacpriv.pac.noise._plan import NoisePlan
from pacpriv.pac.per_record._exposure import (
    RecordDifferences,
    RecordExposure,
    _check_confidence,
    _check_target,
    _exposure,
    _reproducible,
    _whole_subset_mi,
    check_certifiable,
    check_records,
    check_sampler,
    simulate_differences,
)
from pacpriv.pac.per_record._math import (
    NoiseGeometry,
    bayes_accuracy,
    bernstein_upper,
    box_bernstein_upper,
)
from pacpriv.pac.per_record._report import per_record_section
from pacpriv.pac.samplers import PoissonSampler, Sampler

__all__ = ["SHAPES", "PerRecordPlan", "calibrate_from_differences", "calibrate_per_record",
           "uniform_max_upper"]

#: Noise shapes accepted by :func:`calibrate_per_record`.
SHAPES = ("isotropic", "sqrt")


@dataclass(frozen=True, eq=False, kw_only=True)
class PerRecordPlan(NoisePlan):
    """A :class:`NoisePlan` calibrated to a per-record membership-inference target.

    ``privatize`` accepts it. ``Σ_B = scale² · Σ_shape``. The inherited MI fields describe the
    whole-subset guarantee of the same noise, **estimated** on the plug-in covariance of
    ``f(S_t)`` (``mi_budget = mi_bound = mi_claim``; ``confidence = None``).

    Attributes
    ----------
    target_accuracy : float
        Requested per-record accuracy ``a*``.
    max_accuracy_upper : float
        **Certified** bound, ``<= target_accuracy``: with probability ``>= accuracy_confidence``
        every audited record's informed-adversary accuracy is at most this, for this noise and
        any larger scale (uniform empirical-Bernstein bound; see the module notes).
    accuracy_upper : ndarray of shape (k,)
        Per-record empirical-Bernstein bounds at this noise (each ``<= max_accuracy_upper``).
        The scale was chosen on the same trials, so the certified statement is
        ``max_accuracy_upper``; these values rank the records.
    accuracy : ndarray of shape (k,)
        Per-record plug-in estimates at this noise.
    records : ndarray of int, shape (k,)
    accuracy_confidence : float
        ``1 − γ`` of the per-record statement.
    scale : float
        ``s``.
    shape : str
        ``"isotropic"`` or ``"sqrt"``.
    sampling_rate : float
    n_trials_certify, n_trials_shape : int
        Trials used to certify the bound and (``"sqrt"`` only) to fit the shape.
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

    def report_section(self, *, n_pool_records: int | None = None) -> dict:
        """Report section of the plan's exposure, with the target and the certified bound;
        ``n_pool_records`` (the pool's size) adds a coverage note when not every record was
        audited (the plan bounds the audited records only)."""
        if self.exposure is None:
            raise ValueError("this plan carries no exposure to report.")
        return per_record_section(self.exposure, target_accuracy=self.target_accuracy,
                                  plan_bound=self.max_accuracy_upper,
                                  n_pool_records=n_pool_records)

    def to_dict(self) -> dict:
        """JSON-serialisable summary (no per-record arrays)."""
        out = super().to_dict()
        out.update(
            target_accuracy=self.target_accuracy,
            max_accuracy_upper=self.max_accuracy_upper,
            max_accuracy_upper_kind=f"certified (1-gamma = {self.accuracy_confidence})",
            median_accuracy_upper=float(np.median(self.accuracy_upper)),
            accuracy_confidence=self.accuracy_confidence, scale=self.scale, shape=self.shape,
            sampling_rate=self.sampling_rate, n_trials_certify=self.n_trials_certify,
            n_trials_shape=self.n_trials_shape, n_audited=int(self.records.shape[0]),
            whole_subset_kind="estimated (plug-in output covariance)",
        )
        return out


# noise-scale boxes for the uniform bound: fine near s, coarser further out, then [edge, ∞)
_BOX_RATIOS = np.concatenate([np.full(50, 1.002), np.full(50, 1.02), np.full(60, 1.2)])


def uniform_max_upper(distance: np.ndarray, scale: float, q: float, delta: float) -> float:
    """Max over records of an empirical-Bernstein bound valid for **every** scale ``>= scale``.

    ``distance`` (n, k) are Mahalanobis norms under ``Σ_shape``; the accuracy at scale ``s`` is
    ``acc(distance / s)``, non-increasing in ``s``. The scales ``[scale, ∞)`` are covered by
    boxes ``[e_j, e_{j+1}]`` and a last box ``[e_last, ∞)`` (accuracies in
    ``[baseline, acc(e_last)]``); :func:`box_bernstein_upper` bounds every sample in each box.
    """
    base = max(q, 1.0 - q)
    if scale <= 0:
        return 1.0 if np.any(distance > 0) else float(
            np.max(bernstein_upper(np.full(distance.shape, base), low=base, high=1.0,
                                   delta=delta)))
    edges = scale * np.concatenate([[1.0], np.cumprod(_BOX_RATIOS)])
    best = -np.inf
    hi = bayes_accuracy(distance / edges[0], q)
    for e in edges[1:]:
        lo = bayes_accuracy(distance / e, q)
        best = max(best, float(np.max(box_bernstein_upper(hi, lo, low=base, high=1.0,
                                                          delta=delta))))
        hi = lo
    tail = box_bernstein_upper(hi, np.full_like(hi, base), low=base, high=1.0, delta=delta)
    return max(best, float(np.max(tail)))


def _plain_max_upper(distance: np.ndarray, scale: float, q: float, delta: float) -> float:
    base = max(q, 1.0 - q)
    with np.errstate(divide="ignore"):
        acc = bayes_accuracy(distance / scale, q) if scale > 0 else bayes_accuracy(
            np.where(distance > 0, np.inf, 0.0), q)
    return float(np.max(bernstein_upper(acc, low=base, high=1.0, delta=delta)))


def _smallest_passing(crit, start: float, target: float, rtol: float = 1e-10) -> float:
    """Smallest ``s`` (to relative ``rtol``) with ``crit(s) <= target``, non-increasing ``crit``."""
    hi = start
    for _ in range(2200):
        if crit(hi) <= target:
            break
        hi *= 2.0
    else:  # pragma: no cover - the feasibility check rules this out
        raise CalibrationError("no noise scale reaches the target; this is a bug.")
    lo = hi / 2.0
    for _ in range(2200):
        if crit(lo) > target:
            break
        hi, lo = lo, lo / 2.0
        if lo < np.finfo(np.float64).tiny:
            return 0.0 if crit(0.0) <= target else hi
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        if crit(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def _sqrt_shape(diffs: np.ndarray) -> NoiseGeometry:
    """Square-root-rule shape ``U diag(sqrt λ) Uᵀ`` of the second moment ``E[ΔΔᵀ]`` (trace d).

    Minimises the noise power ``tr Σ_B`` at a fixed linearised exposure ``E[ΔᵀΣ_B⁻¹Δ]``
    (Sridhar, Xiao & Devadas 2025, Thm 1). Directions with ``sqrt λ`` below ``1e-6`` of the
    largest keep that floor, so ``Σ_shape`` stays positive definite.
    """
    flat = diffs.reshape(-1, diffs.shape[-1])
    second = flat.T @ flat / flat.shape[0]
    lam, vecs = np.linalg.eigh((second + second.T) / 2.0)
    root = np.sqrt(np.clip(lam, 0.0, None))
    top = float(root.max())
    if top == 0.0:
        return NoiseGeometry(diffs.shape[-1], np.ones(diffs.shape[-1]))
    root = np.maximum(root, 1e-6 * top)
    root *= root.size / root.sum()
    return NoiseGeometry(diffs.shape[-1], root, vecs, 0.0)


def _n_shape_trials(n_trials: int, shape: str, shape_fraction: float) -> int:
    if shape == "isotropic":
        return 0
    return max(2, round(n_trials * shape_fraction))


def _check_shape(shape, shape_fraction) -> tuple[str, float]:
    if not isinstance(shape, str) or shape not in SHAPES:
        raise ValueError(f"`shape` must be one of {SHAPES}; got {shape!r}.")
    frac = check_real(shape_fraction, "shape_fraction", low=0.0, high=1.0,
                      low_inclusive=False, high_inclusive=False)
    return shape, frac


def calibrate_from_differences(
    differences: RecordDifferences,
    *,
    target_accuracy: float,
    confidence: float = 0.95,
    shape: str = "isotropic",
    shape_fraction: float = 0.25,
) -> PerRecordPlan:
    """Smallest noise ``Σ_B = s² Σ_shape`` whose certified per-record bound meets the target.

    Parameters
    ----------
    differences : RecordDifferences
        From :func:`simulate_differences` (not re-run).
    target_accuracy : float
        ``a*`` in ``(max(q, 1 − q), 1)``.
    confidence : float, default 0.95
        ``1 − γ``.
    shape : {"isotropic", "sqrt"}, default "isotropic"
        ``Σ_shape = I``, or the square-root rule on ``E[ΔΔᵀ]`` fitted on the first
        ``shape_fraction`` of the trials (the rest certify).
    shape_fraction : float, default 0.25
        ``"sqrt"`` only: fraction of trials (at least 2) used to fit the shape.

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

    Notes
    -----
    Bisection on ``s`` of the maximum plain bound, then the uniform bound (valid for every
    scale ``>= s``) is checked at the candidate and ``s`` is raised until it passes. The plan is
    verified afterwards: its uniform bound and every per-record bound are ``<= a*``;
    ``details["smaller_scale_fails"]`` records whether ``0.99 s`` fails the plain bound.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, §2; Maurer & Pontil, COLT 2009, Thm 4;
       Sridhar, Xiao & Devadas, IEEE S&P 2025, Thm 1.
    """
    if not isinstance(differences, RecordDifferences):
        raise TypeError(
            f"`differences` must be a RecordDifferences; got {type(differences).__name__}."
        )
    conf = _check_confidence(confidence)
    shape, frac = _check_shape(shape, shape_fraction)
    q, base, k = differences.sampling_rate, differences.baseline, differences.n_audited
    target = _check_target(target_accuracy, base)
    n_shape = _n_shape_trials(differences.n_trials, shape, frac)
    n_cert = differences.n_trials - n_shape
    if n_cert < 2:
        raise ValueError(
            f"`n_trials` = {differences.n_trials} leaves {n_cert} certification trials after "
            f"{n_shape} shape trials; at least 2 are needed."
        )
    check_certifiable(target, n_cert, k, base, conf)
    delta = (1.0 - conf) / k
    all_diffs = differences.differences
    if shape == "isotropic":
        geom_shape = NoiseGeometry(differences.dim, np.ones(differences.dim))
    else:
        geom_shape = _sqrt_shape(np.asarray(all_diffs[:n_shape]))
    cert = np.asarray(all_diffs[n_shape:])
    distance = np.sqrt(geom_shape.sq_norm(cert))
    top = float(distance.max())
    if top == 0.0:
        scale = 0.0
    else:
        scale = _smallest_passing(lambda s: _plain_max_upper(distance, s, q, delta), top, target)
        if uniform_max_upper(distance, scale, q, delta) > target:
            start = scale
            scale = _smallest_passing(
                lambda s: uniform_max_upper(distance, max(s, start), q, delta), start, target,
                rtol=1e-4)
            scale = max(scale, start)
    certified = uniform_max_upper(distance, scale, q, delta)
    geom = geom_shape.scaled(scale)
    exposure = _exposure(cert, differences.outputs, differences.records, q, geom, conf,
                         reproducible=_reproducible(differences))
    if not (certified <= target and exposure.max_accuracy_upper <= target):
        raise CalibrationError(
            f"per-record plan failed verification (uniform bound {certified!r}, plain bound "
            f"{exposure.max_accuracy_upper!r} > target {target!r}); this is a bug."
        )
    smaller_fails = scale == 0.0 or _plain_max_upper(distance, 0.99 * scale, q, delta) > target
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
        sampling_rate=q, n_trials_certify=n_cert, n_trials_shape=n_shape, exposure=exposure,
    )


@accepts_legacy_execution()
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
) -> PerRecordPlan:
    """Simulate and calibrate noise for a per-record membership-inference target.

    Parameters
    ----------
    f, pool, n_trials, sampler, records, confidence, rng, execution
        As in :func:`~pacpriv.pac.per_record.record_exposure` (``execution``: an
        :class:`~pacpriv.pac.engine.ExecutionOptions`).
    target_accuracy : float
        Per-record informed-adversary accuracy ``a*`` in ``(max(q, 1 − q), 1)``.
    shape, shape_fraction
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
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, §2.
    """
    smp = check_sampler(sampler)
    conf = _check_confidence(confidence)
    shape, frac = _check_shape(shape, shape_fraction)
    base = max(smp.sampling_rate, 1.0 - smp.sampling_rate)
    target = _check_target(target_accuracy, base)
    n_trials = check_int(n_trials, "n_trials", low=2)
    _, n_records = _check_pool(pool)
    k = check_records(records, n_records).shape[0]
    n_cert = n_trials - _n_shape_trials(n_trials, shape, frac)
    if n_cert < 2:
        raise ValueError(f"`n_trials` = {n_trials} is too small for shape {shape!r}.")
    check_certifiable(target, n_cert, k, base, conf)
    tic = time.perf_counter()
    diffs = simulate_differences(f, pool, n_trials=n_trials, sampler=smp, records=records,
                                 rng=rng, execution=execution)
    plan = calibrate_from_differences(diffs, target_accuracy=target, confidence=conf,
                                      shape=shape, shape_fraction=frac)
    plan.details["elapsed_s"] = time.perf_counter() - tic
    plan.details["n_evaluations"] = diffs.n_evaluations
    return plan
