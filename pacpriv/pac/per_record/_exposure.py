"""Per-record PAC membership privacy against an informed adversary (PAC Privacy, CRYPTO 2023, §2).

The whole-subset guarantee of PAC Privacy bounds every inference about the subset at once. This
module answers the per-record question: *can an adversary tell whether record i was used?*

Threat model and bound
----------------------
Memberships are independent, ``b_i ~ Bernoulli(q)`` (Poisson sampling); the release is
``Y = f(X) + B`` with ``B ~ N(0, Σ_B)``. The **informed adversary** knows the pool, ``f``,
``Σ_B``, the internal randomness ``θ`` of ``f`` and every membership bit except ``b_i``. Given
``X₋ᵢ`` and ``θ`` it faces ``N(f(X₋ᵢ ∪ {i}), Σ_B)`` (prior ``q``) against ``N(f(X₋ᵢ), Σ_B)``
(prior ``1 − q``); its best accuracy is the Bayes accuracy

    acc(d) = q Φ(d/2 + λ/d) + (1 − q) Φ(d/2 − λ/d),   λ = ln(q/(1 − q)),

at the Mahalanobis distance ``d = ‖Δᵢ‖_{Σ_B⁻¹}``, ``Δᵢ = f(X₋ᵢ ∪ {i}) − f(X₋ᵢ)`` (``Φ(d/2)`` at
``q = ½``, ``max(q, 1 − q)`` at ``d = 0``). Averaged over ``X₋ᵢ`` and ``θ``,
``Aᵢ = E[acc(dᵢ)]`` bounds the accuracy of every adversary that knows less. The per-record MI
is ``I(bᵢ; Y) <= I(bᵢ; Y | X₋ᵢ, θ) <= E[min(q(1 − q) dᵢ², H_b(q))]`` (convexity of KL in its
second argument, and the entropy of one bit).

Estimation and confidence
-------------------------
Trial ``t`` draws ``S_t`` and ``θ_t`` and evaluates ``f(S_t)`` plus, for each audited record, the
other member of the pair ``f(S_t ∪ {i})``, ``f(S_t ∖ {i})`` (``1 + k`` evaluations; see
:func:`simulate_differences`). ``S_t ∖ {i}`` has the law of ``X₋ᵢ`` because memberships are
independent. The values ``acc(d_{t,i})`` are i.i.d. over trials in ``[max(q, 1 − q), 1]``: the
plug-in mean is an **estimate**; the one-sided empirical-Bernstein bound of Maurer & Pontil
(2009, Thm 4) at level ``γ/k`` gives a **certified** upper bound per record, and the union bound
makes *all* ``k`` of them hold at once with probability ``>= 1 − γ`` over the simulation. The
MI bounds form a second family, certified the same way (each family ``1 − γ``; both ``1 − 2γ``).

Calibration
-----------
:func:`~pacpriv.pac.per_record.calibrate_per_record` finds the smallest scale ``s``
of ``Σ_B = s² Σ_shape`` whose maximum certified upper bound is ``<= target_accuracy`` by
bisection on the stored differences (no new evaluations of ``f``). Because ``s`` is chosen on
the same trials, the plan is certified with a bound that holds uniformly over every scale
``>= s`` (see :mod:`pacpriv.pac.per_record._calibration`).

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy: Automatic Privacy Measurement and Control of Data
   Processing. CRYPTO 2023, arXiv:2210.03458, §2 (individual privacy), Thm 1.
.. [2] A. Maurer, M. Pontil. Empirical Bernstein bounds and sample variance penalization.
   COLT 2009, Thm 4.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacpriv._random import RNGLike
from pacpriv._validation import check_int
from pacpriv.pac.bounds._posterior import posterior_success_rate
from pacpriv.pac.engine._limit import after_trials_within
from pacpriv.pac.engine._options import (
    ExecutionOptions,
    execution_hints,
    refuses_removed,
    resolve_execution,
)
from pacpriv.pac.engine._simulate import SimulationResult, _check_pool
from pacpriv.pac.noise._plan import NoisePlan
from pacpriv.pac.per_record._betting import betting_upper, predictable_bets
from pacpriv.pac.per_record._checks import (
    _check_confidence,
    check_records,
    check_sampler,
)
from pacpriv.pac.per_record._distances import declared_bounds
from pacpriv.pac.per_record._math import (
    NoiseGeometry,
    bayes_accuracy,
    bernstein_upper,
    binary_entropy,
    record_mi_term,
)
from pacpriv.pac.per_record._report import per_record_section
from pacpriv.pac.per_record._sim import PairSpec
from pacpriv.pac.per_record._units import run_pairs
from pacpriv.pac.samplers import (
    PoissonSampler,
    Sampler,
    display_name,
)

__all__ = [
    "RecordDifferences",
    "RecordExposure",
    "exposure_from_differences",
    "record_exposure",
    "simulate_differences",
]

#: Default number of records :meth:`RecordExposure.most_exposed` returns (by index: private).
TOP_RECORDS = 10
_HIST_BINS = 20


# ----------------------------------------------------------------------------- simulation
@dataclass(frozen=True, eq=False)
class RecordDifferences:
    """Stored per-record differences of a simulation (:func:`simulate_differences`).

    Attributes
    ----------
    differences : ndarray of shape (n_trials, n_audited, d), float64
        ``Δ_{t,i} = f(S_t ∪ {i}) − f(S_t ∖ {i})`` (a view of ``simulation.outputs``). Never the
        records themselves.
    outputs : ndarray of shape (n_trials, d)
        ``f(S_t)``, the whole-subset outputs (used for the whole-subset guarantee).
    records : ndarray of int, shape (n_audited,)
        Audited record indices, in the order of ``differences``' second axis.
    sampling_rate : float
        Membership prior ``q`` of the Poisson sampler.
    simulation : SimulationResult
        The engine's result (seeds, masks, timing, backend); ``outputs`` holds the flattened
        ``[f(S_t), Δ_1, …, Δ_k]`` rows.
    difference_bound : ndarray of shape (n_audited,) or None
        The mechanism's declared bound on ``‖Δᵢ‖₂`` over all subsets (None: a black box);
        see :mod:`pacpriv.pac.per_record._distances`.
    difference_error : float
        The mechanism's declared bound on ``‖Δ_simulated − Δ_release‖₂`` (0 by default).
    """

    differences: np.ndarray = field(repr=False)
    outputs: np.ndarray = field(repr=False)
    records: np.ndarray = field(repr=False)
    sampling_rate: float
    simulation: SimulationResult = field(repr=False)
    difference_bound: np.ndarray | None = field(default=None, repr=False)
    difference_error: float = 0.0

    @property
    def n_trials(self) -> int:
        """Number of trials."""
        return int(self.differences.shape[0])

    @property
    def n_audited(self) -> int:
        """Number of audited records ``k``."""
        return int(self.differences.shape[1])

    @property
    def dim(self) -> int:
        """Output dimension ``d``."""
        return int(self.differences.shape[2])

    @property
    def n_evaluations(self) -> int:
        """Mechanism evaluations spent: ``n_trials · (1 + k)``."""
        return self.n_trials * (1 + self.n_audited)

    @property
    def baseline(self) -> float:
        """Blind-guess accuracy ``max(q, 1 − q)``."""
        return max(self.sampling_rate, 1.0 - self.sampling_rate)


@refuses_removed(execution_hints())
def simulate_differences(
    mechanism,
    pool,
    *,
    n_trials: int,
    sampler: Sampler | str | None = None,
    records: Any = None,
    rng: RNGLike = None,
    execution: ExecutionOptions | None = None,
) -> RecordDifferences:
    """Simulate the per-record differences ``Δ`` with the PAC engine.

    Trial ``t`` draws ``S_t`` from the sampler (same seed contract as
    :func:`~pacpriv.pac.engine.simulate`: trial ``t``'s subset and generator depend only on the
    root seed and ``t``) and evaluates ``f(S_t)`` and, for every audited record ``i``,
    ``f(S_t ∪ {i})`` if ``i ∉ S_t`` else ``f(S_t ∖ {i})``, all with the same generator copy
    (``θ_t`` known to the adversary). Cost: ``n_trials · (1 + k)`` evaluations. Checkpointing,
    retries, timeouts (per trial, i.e. per ``1 + k`` evaluations) and parallel backends are the
    engine's.

    Parameters
    ----------
    mechanism : callable
        ``f(subset) -> (d,)``; an ``rng`` parameter receives the trial's generator.
    pool : ndarray of shape (n_records, ...) or tuple of such arrays
    n_trials : int
        Number of trials, ``>= 2``.
    sampler : PoissonSampler, "poisson" or None, default None (Poisson-½)
        Must draw independent memberships; see :func:`check_sampler`.
    records : sequence of int or None, default None
        Audited record indices (None = every record).
    rng : None, int, SeedSequence or Generator
        Root seed, as in :func:`~pacpriv.pac.engine.simulate`.
    execution : ExecutionOptions, optional
        How the trials run (:class:`~pacpriv.pac.engine.ExecutionOptions`: workers, backend,
        progress bar, checkpoint, retries, timeout, batch size); never changes the results.
        The 0.2 loose keywords (``n_jobs=``, ``progress=``, ...) and ``options=`` were
        removed in 0.4 (a ``TypeError`` naming the replacement).

    Returns
    -------
    RecordDifferences

    Raises
    ------
    TypeError, ValueError
        For invalid arguments, including a sampler without independent memberships.
    MechanismError, CheckpointError
        As in :func:`~pacpriv.pac.engine.simulate`.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, §2 and Alg. 1.
    """
    smp = check_sampler(sampler)
    checked_pool, n_records = _check_pool(pool)
    recs = check_records(records, n_records)
    n_trials = check_int(n_trials, "n_trials", low=2)
    if not callable(mechanism):
        raise TypeError(
            f"`mechanism` must be callable f(subset) -> (d,); got {type(mechanism).__name__}."
        )
    run = resolve_execution(execution)
    spec = PairSpec.build(mechanism, checked_pool, recs, n_records, ensemble=run.ensemble)
    sim = run_pairs(spec, sampler=smp, n_trials=n_trials, rng=rng, execution=run,
                    mechanism_name=display_name(mechanism))
    k = recs.shape[0]
    d = sim.dim // (1 + k)
    rows = sim.outputs.reshape(sim.n_trials, 1 + k, d)
    bound, err = declared_bounds(mechanism, checked_pool, recs)
    return RecordDifferences(
        differences=rows[:, 1:, :], outputs=rows[:, 0, :], records=recs,
        sampling_rate=smp.sampling_rate, simulation=sim, difference_bound=bound,
        difference_error=err,
    )



def _reproducible(differences: RecordDifferences) -> bool:
    """Whether the simulation behind ``differences`` re-ran bit for bit from its seeds: False
    only when a re-run differed; a check that did not run (None: nothing re-run, or cut by the
    time limit, which then stops the run: :func:`after_trials_within`) is no such evidence."""
    return getattr(differences.simulation, "reproducible", True) is not False

# ----------------------------------------------------------------------------- exposure
def _whole_subset_mi(outputs: np.ndarray, geom: NoiseGeometry) -> tuple[float, float]:
    """Plug-in ``½ ln det(I + Σ̂ Σ_B⁻¹)`` and ``½ tr(Σ_B⁻¹ Σ̂)`` of the sampled outputs (nats).

    A direction in which the outputs never vary reveals nothing whatever its noise (0 nats,
    even with no noise: ``0 · ∞ = 0`` here); one that varies with no noise gives ``inf``.
    """
    y = np.asarray(outputs, dtype=np.float64)
    yc = (y - y.mean(axis=0)) / math.sqrt(max(y.shape[0] - 1, 1))
    if geom.basis is None:
        gram = _weighted_gram(yc, geom.variances)
    else:
        proj = yc @ geom.basis
        gram = _weighted_gram(proj, geom.variances)
        if geom.basis.shape[1] < geom.dim:
            rest = yc - proj @ geom.basis.T
            if geom.residual_variance > 0:
                gram = gram + (rest @ rest.T) / geom.residual_variance
            elif np.any(rest != 0):
                return float("inf"), float("inf")
    if not np.all(np.isfinite(gram)):
        return float("inf"), float("inf")
    ev = np.clip(np.linalg.eigvalsh((gram + gram.T) / 2.0), 0.0, None)
    return float(0.5 * np.sum(np.log1p(ev))), float(0.5 * np.sum(ev))


def _weighted_gram(a: np.ndarray, variances: np.ndarray) -> np.ndarray:
    """``a diag(1/v) aᵀ`` where a column with ``v = 0`` counts 0 if it is all zero (it never
    varies), else makes every entry ``inf`` (a varying output with no noise)."""
    pos = variances > 0
    if np.any(a[:, ~pos] != 0):
        return np.full((a.shape[0], a.shape[0]), np.inf)
    return (a[:, pos] / variances[pos]) @ a[:, pos].T


#: Quantiles of the per-record upper bounds in reports (each an order statistic at or above
#: the quantile: never below it).
QUANTILES = (0.5, 0.9, 0.99)
#: Accuracy thresholds whose counts of records above them reports give (those above the
#: blind-guess baseline).
THRESHOLDS = (0.55, 0.6, 0.75, 0.9)


def _quantiles(values: np.ndarray) -> dict:
    out = {f"p{round(100 * q):g}": float(np.quantile(values, q, method="higher"))
           for q in QUANTILES}
    out["max"] = float(np.max(values))
    return out


def n_above(values: np.ndarray, baseline: float, thresholds=THRESHOLDS) -> list[dict]:
    """How many of ``values`` exceed each threshold above ``baseline``: ``[{"accuracy",
    "count"}]`` (counts only, no index)."""
    return [{"accuracy": float(t), "count": int(np.count_nonzero(values > t))}
            for t in thresholds if t > baseline]


def _histogram(values: np.ndarray, baseline: float) -> dict:
    counts, edges = np.histogram(values, bins=_HIST_BINS, range=(baseline, 1.0))
    return {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts]}


@dataclass(frozen=True, eq=False)
class RecordExposure:
    """Per-record membership exposure to an informed adversary (:func:`record_exposure`).

    Attributes
    ----------
    records : ndarray of int, shape (k,)
        Audited record indices.
    accuracy : ndarray of float, shape (k,)
        Plug-in **estimate** of ``Aᵢ = E[acc(dᵢ)]``, in ``[max(q, 1 − q), 1]``.
    accuracy_upper : ndarray of float, shape (k,)
        **Certified** upper bounds: all ``k`` hold at once with probability ``>= confidence``
        over the simulation (empirical Bernstein at ``(1 − confidence)/k``, union bound).
    mi : ndarray of float, shape (k,)
        Plug-in estimate of the per-record MI bound ``E[min(q(1−q)dᵢ², H_b(q))]`` (nats).
    mi_upper : ndarray of float, shape (k,)
        Certified upper bounds of ``I(bᵢ; Y)`` (nats), a second family at the same confidence.
    confidence : float
        ``1 − γ``.
    sampling_rate : float
        Membership prior ``q``.
    baseline : float
        Blind-guess accuracy ``max(q, 1 − q)``.
    n_trials : int
        Trials behind the bounds.
    noise : dict
        Summary of ``Σ_B``: ``noise_std_max``, ``noise_std_min``, ``expected_noise_power``.
    whole_subset_mi : float
        **Estimated** (plug-in covariance of ``f(S_t)``) ``½ ln det(I + Σ̂ Σ_B⁻¹)`` of the same
        noise: the whole-subset guarantee, nats.
    whole_subset_accuracy_bound : float
        ``posterior_success_rate(whole_subset_mi, prior=baseline)`` ([1] Thm 1), estimated.
    """

    records: np.ndarray = field(repr=False)
    accuracy: np.ndarray = field(repr=False)
    accuracy_upper: np.ndarray = field(repr=False)
    mi: np.ndarray = field(repr=False)
    mi_upper: np.ndarray = field(repr=False)
    confidence: float
    sampling_rate: float
    baseline: float
    n_trials: int
    noise: dict
    whole_subset_mi: float
    whole_subset_accuracy_bound: float
    reproducible: bool = True
    bound: str = "bernstein"

    @property
    def max_accuracy_upper(self) -> float:
        """Largest certified upper bound over the audited records."""
        return float(np.max(self.accuracy_upper))

    @property
    def median_accuracy_upper(self) -> float:
        """Median certified upper bound over the audited records."""
        return float(np.median(self.accuracy_upper))

    @property
    def max_accuracy(self) -> float:
        """Largest plug-in estimate."""
        return float(np.max(self.accuracy))

    @property
    def max_mi_upper(self) -> float:
        """Largest certified per-record MI bound (nats)."""
        return float(np.max(self.mi_upper))

    def most_exposed(self, n: int = TOP_RECORDS) -> np.ndarray:
        """Indices of the ``n`` records with the largest upper bounds (ties: lower index)."""
        n = check_int(n, "n", low=1)
        order = np.lexsort((self.records, -self.accuracy_upper))
        return self.records[order[:n]]

    def report_section(self, *, target_accuracy: float | None = None,
                       n_pool_records: int | None = None) -> dict:
        """Report section (:func:`pacpriv.pac.per_record._report.per_record_section`);
        ``n_pool_records`` (the pool's size) adds a coverage note when not every record was
        audited."""
        return per_record_section(self, target_accuracy=target_accuracy,
                                  n_pool_records=n_pool_records)

    def ranked(self) -> list[dict]:
        """Every audited record, most exposed first: ``{"record", "accuracy_upper"}``.

        **Private output**: record indices with per-record bounds (they tell which records
        are outliers). Reports never hold it (:meth:`to_dict` keeps aggregates only); the CLI
        writes it only on request (``pacpriv pac records --private-index-list FILE``, an
        owner-only file outside the report)."""
        pos = {int(r): j for j, r in enumerate(self.records)}
        return [{"record": int(r), "accuracy_upper": float(self.accuracy_upper[pos[int(r)]])}
                for r in self.most_exposed(len(self.records))]

    def to_dict(self) -> dict:
        """Public summary: aggregates over the audited records only (maxima, medians,
        quantiles, counts above thresholds, a histogram); no record index or per-record value
        (:meth:`ranked` is the private list)."""
        return {
            "threat_model": "informed adversary (knows the pool, f, the noise, f's internal "
                            "randomness and every membership bit except the target's)",
            "confidence": self.confidence,
            "sampling_rate": self.sampling_rate,
            "baseline_accuracy": self.baseline,
            "n_trials": self.n_trials,
            "n_audited": int(self.records.shape[0]),
            "max_accuracy_upper": self.max_accuracy_upper,
            "median_accuracy_upper": self.median_accuracy_upper,
            "max_accuracy_estimate": self.max_accuracy,
            "median_accuracy_estimate": float(np.median(self.accuracy)),
            "max_mi_upper": self.max_mi_upper,
            "accuracy_upper_kind": f"certified (1-gamma = {self.confidence})",
            "bound": self.bound,
            "accuracy_kind": "estimated",
            "reproducible": self.reproducible,
            "accuracy_upper_quantiles": _quantiles(self.accuracy_upper),
            "n_above": n_above(self.accuracy_upper, self.baseline),
            "histogram_accuracy_upper": _histogram(self.accuracy_upper, self.baseline),
            "noise": dict(self.noise),
            "whole_subset_mi": self.whole_subset_mi,
            "whole_subset_accuracy_bound": self.whole_subset_accuracy_bound,
            "whole_subset_kind": "estimated (plug-in output covariance)",
        }


def _noise_summary(geom: NoiseGeometry) -> dict:
    std = np.sqrt(geom.variances)
    n_comp = 0 if geom.basis is None else geom.dim - geom.basis.shape[1]
    power = float(np.sum(geom.variances)) + n_comp * geom.residual_variance
    return {
        "noise_std_max": float(std.max()), "noise_std_min": float(std.min()),
        "expected_noise_power": power,
    }


def _upper(values: np.ndarray, low: float, high: float, delta: float, bound: str) -> np.ndarray:
    """Per-column upper bounds of the mean at a noise fixed in advance: betting (WSR 2024,
    predictable plug-in bets from the same values) or Maurer–Pontil."""
    if bound == "bernstein":
        return bernstein_upper(values, low=low, high=high, delta=delta)
    x = np.clip((values - low) / (high - low), 0.0, 1.0)
    bets = predictable_bets(x, delta=delta, horizon=x.shape[0], prior_mean=0.5,
                            prior_variance=0.25)
    return np.minimum(low + (high - low) * betting_upper(x, bets, delta), high)


def _exposure(diffs: np.ndarray, outputs: np.ndarray, records: np.ndarray, q: float,
              geom: NoiseGeometry, confidence: float, reproducible: bool = True,
              bound: str = "bernstein") -> RecordExposure:
    sq = geom.sq_norm(diffs)
    acc = bayes_accuracy(np.sqrt(sq), q)
    base = max(q, 1.0 - q)
    delta = (1.0 - confidence) / records.shape[0]
    mi_vals = record_mi_term(sq, q)
    whole, _ = _whole_subset_mi(outputs, geom)
    return RecordExposure(
        records=records, accuracy=acc.mean(axis=0),
        accuracy_upper=_upper(acc, base, 1.0, delta, bound),
        mi=mi_vals.mean(axis=0),
        mi_upper=_upper(mi_vals, 0.0, binary_entropy(q), delta, bound),
        confidence=confidence, sampling_rate=q, baseline=base, n_trials=int(diffs.shape[0]),
        noise=_noise_summary(geom), whole_subset_mi=whole,
        whole_subset_accuracy_bound=float(posterior_success_rate(whole, prior=base)),
        reproducible=reproducible, bound=bound,
    )


def exposure_from_differences(
    differences: RecordDifferences, *, noise_cov, confidence: float = 0.95,
    bound: str = "betting",
) -> RecordExposure:
    """Per-record exposure of stored differences under Gaussian noise ``noise_cov``.

    Parameters
    ----------
    differences : RecordDifferences
        From :func:`simulate_differences`.
    noise_cov : float, array_like of shape (d,) or (d, d), or NoisePlan
        ``Σ_B``: a scalar variance (``s²I``), a vector of coordinate variances, a positive
        definite covariance, or a noise plan.
    confidence : float, default 0.95
        ``1 − γ`` in ``(0, 1)``.
    bound : {"betting", "bernstein"}, default "betting"
        Per-record upper bounds at level ``γ/k``: betting (Waudby-Smith & Ramdas 2024,
        predictable plug-in bets) or empirical Bernstein (Maurer & Pontil 2009, Thm 4).

    Returns
    -------
    RecordExposure

    Raises
    ------
    TypeError, ValueError
        For invalid arguments (the message names the argument).
    """
    if not isinstance(differences, RecordDifferences):
        raise TypeError(
            f"`differences` must be a RecordDifferences; got {type(differences).__name__}."
        )
    conf = _check_confidence(confidence)
    geom = NoiseGeometry.from_spec(noise_cov, differences.dim)
    if bound not in ("betting", "bernstein"):
        raise ValueError(f"`bound` must be 'betting' or 'bernstein'; got {bound!r}.")
    return _exposure(differences.differences, differences.outputs, differences.records,
                     differences.sampling_rate, geom, conf,
                     reproducible=_reproducible(differences), bound=bound)


def _precheck_noise(noise_cov) -> None:
    """Validate ``noise_cov`` as far as possible before any mechanism evaluation."""
    if isinstance(noise_cov, NoisePlan):
        return
    if np.ndim(noise_cov) == 0:
        NoiseGeometry.from_spec(noise_cov, 1)
        return
    shape = np.shape(noise_cov)
    NoiseGeometry.from_spec(noise_cov, shape[0])


@refuses_removed(execution_hints())
def record_exposure(
    f,
    pool,
    *,
    noise_cov,
    n_trials: int,
    sampler: Sampler | str | None = PoissonSampler(0.5),  # noqa: B008 (frozen, immutable)
    records: Any = None,
    confidence: float = 0.95,
    rng: RNGLike = None,
    execution: ExecutionOptions | None = None,
    bound: str = "betting",
) -> RecordExposure:
    """Each audited record's membership exposure to an informed adversary under noise ``Σ_B``.

    Parameters
    ----------
    f : callable
        Mechanism ``f(subset) -> (d,)``.
    pool : ndarray of shape (n_records, ...) or tuple of such arrays
    noise_cov : float, array_like of shape (d,) or (d, d), or NoisePlan
        Noise covariance ``Σ_B`` (variances, not standard deviations), positive definite.
    n_trials : int
        Number of simulated trials, ``>= 2``; cost ``n_trials · (1 + k)`` evaluations.
    sampler : PoissonSampler, default PoissonSampler(0.5)
        Independent memberships with prior ``q = sampling_rate`` in ``(0, 1)``.
    records : sequence of int or None, default None
        Audited record indices (None = all).
    confidence : float, default 0.95
        ``1 − γ``: all per-record upper bounds hold at once with this probability.
    bound : {"betting", "bernstein"}, default "betting"
        As in :func:`exposure_from_differences`.
    rng : None, int, SeedSequence or Generator
        Root seed of the simulation.
    execution : ExecutionOptions, optional
        How the trials run (:class:`~pacpriv.pac.engine.ExecutionOptions`: workers, backend,
        progress bar, checkpoint, retries, timeout, batch size); never changes the results.
        The 0.2 loose keywords (``n_jobs=``, ``progress=``, ...) and ``options=`` were
        removed in 0.4 (a ``TypeError`` naming the replacement).

    Returns
    -------
    RecordExposure
        ``.accuracy`` (estimated), ``.accuracy_upper`` (certified), ``.records``,
        ``.mi_upper``, ``.max_accuracy_upper``.

    Raises
    ------
    TypeError, ValueError
        For invalid arguments, before any evaluation of ``f`` (except a ``noise_cov`` whose
        dimension disagrees with ``f``'s outputs, detected after the simulation).
    MechanismError
        If an evaluation fails (engine failure policy).

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, §2.
    .. [2] Maurer & Pontil, COLT 2009, Thm 4.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1.0], [2.0], [0.5]])
    >>> from pacpriv.pac.engine import ExecutionOptions
    >>> res = record_exposure(lambda s: s.sum(axis=0), x, noise_cov=4.0, n_trials=8, rng=0,
    ...                       execution=ExecutionOptions(progress=False))
    >>> np.round(res.accuracy, 6)  # Phi(|x_i| / (2 s)) exactly for a sum
    array([0.598706, 0.691462, 0.549738])
    """
    check_sampler(sampler)
    conf = _check_confidence(confidence)
    _precheck_noise(noise_cov)
    if bound not in ("betting", "bernstein"):
        raise ValueError(f"`bound` must be 'betting' or 'bernstein'; got {bound!r}.")
    started = time.monotonic()  # `time_limit` covers the analysis too (not only the trials)
    diffs = simulate_differences(f, pool, n_trials=n_trials, sampler=sampler, records=records,
                                 rng=rng, execution=execution)
    out = exposure_from_differences(diffs, noise_cov=noise_cov, confidence=conf, bound=bound)
    after_trials_within(getattr(execution, "time_limit", None), started, lambda: None,
                        n_trials=n_trials, checkpoint=getattr(execution, "checkpoint", None),
                        what="after the trials (their reproducibility check and analysis)")
    return out
