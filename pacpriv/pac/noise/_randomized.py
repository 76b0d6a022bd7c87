"""Noise for randomized mechanisms by the coupling bound of PAC-Private Algorithms [1]_.

A mechanism ``f(X, θ)`` with internal randomness ``θ`` (random initialisation, SGD order...)
released as ``Y = f(X, θ) + B`` with isotropic ``B ~ N(0, s² I)`` satisfies
(Xiao & Devadas, CRYPTO 2023, §5, randomized mechanisms)

    MI(X; Y) <= E_{X,X'}[ min_π (1/τ) Σ_j ||f(X, θ_j) − f(X', θ'_π(j))||² ] / (2 s²),

with ``X, X'`` independent draws of the sampler, ``θ_1..θ_τ`` and ``θ'_1..θ'_τ`` independent
seeds, and ``π`` a permutation (an optimal matching, found by
:func:`scipy.optimize.linear_sum_assignment`). Given ``v`` the noise is ``s² = E[...] / (2v)``.

:func:`coupling_noise` estimates the expectation with the PAC engine: ``2·n_pairs`` trials, each
running the mechanism ``τ`` times with seeds derived from the trial's seed (so results are
identical for any ``n_jobs``), paired as trial ``i`` with trial ``i + n_pairs``.
:func:`compare_randomized_noise` sets it beside "θ as part of the secret" (plain engine +
isotropic rule on the randomized outputs, ``s² = tr Σ / (2v)``).

Which needs less noise
----------------------
By Jensen, for any matching ``(1/τ) Σ_j ||a_j − b_π(j)||² >= ||ā − b̄||²`` (means over the τ
runs), so ``E[matched] >= 2·(B + W/τ)`` with ``B = tr Cov_X(E[f | X])`` (between-subset
variance) and ``W = E_X tr Cov_θ(f | X)`` (internal variance), while "θ as secret" uses
``B + W``. For a deterministic ``f`` the coupling bound is ``tr Σ / s²``, exactly twice the
Gaussian-channel bound behind the isotropic rule, because it compares two independent subsets
rather than one subset with the mean. The coupling therefore pays off only when the internal
randomness dominates (``W`` well above ``B``) *and* the runs of two subsets can be matched
closely. Measured on iris (``make_kmeans(n_clusters=3, randomized=True)``, v = 0.1, 30 pairs,
τ = 4, seed 0): with 10 restarts ``W ≈ 0.003 ≪ B ≈ 0.093`` and the coupling needs 1.95x the
noise variance of "θ as secret"; with ``n_init=1`` ``W ≈ 0.20 > B ≈ 0.08``, but bad local optima
of different subsets do not match well and the ratio is still 2.0x. A mechanism that is mostly
internal noise (a fair coin, tested) is where the coupling wins.

References
----------
.. [1] M. Sridhar, H. Xiao, S. Devadas. PAC-Private Algorithms. IEEE S&P 2025, IACR ePrint
   2024/718 (coupling bound for randomized mechanisms).
.. [2] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, Thm 3 (isotropic rule).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from pacpriv._json import field_values
from pacpriv._random import RNGLike, as_seed_sequence
from pacpriv._validation import check_int, check_real
from pacpriv.pac.engine._mechanism import accepts_rng, call_mechanism, check_output
from pacpriv.pac.engine._options import (
    ExecutionOptions,
    execution_hints,
    refuses_removed,
    resolve_execution,
)
from pacpriv.pac.engine._simulate import SimulationResult, simulate
from pacpriv.pac.noise._calibration import NoisePlan, calibrate_noise
from pacpriv.pac.spectrum._covariance import estimate_output_spectrum

__all__ = [
    "CouplingResult",
    "RandomizedComparison",
    "compare_randomized_noise",
    "coupling_noise",
    "matched_distance",
]


@dataclass(frozen=True)
class _RepeatedRuns:
    """Run ``mechanism`` τ times on one subset with seeds from the trial's rng; concatenate."""

    mechanism: Callable[..., Any]
    tau: int

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        seeds = as_seed_sequence(rng).spawn(self.tau)
        takes_rng = accepts_rng(self.mechanism)
        runs = [
            check_output(call_mechanism(self.mechanism, subset, rng=s, takes_rng=takes_rng), None)
            for s in seeds
        ]
        if len({r.shape for r in runs}) > 1:
            shapes = [r.shape for r in runs]
            raise ValueError(f"mechanism output shape changed between runs: {shapes}.")
        return np.concatenate(runs)


def matched_distance(runs_a, runs_b) -> float:
    """``min_π (1/τ) Σ_j ||a_j − b_π(j)||²`` for two ``(τ, d)`` arrays of runs.

    Solved exactly with :func:`scipy.optimize.linear_sum_assignment` on the squared Euclidean
    cost matrix.
    """
    a = np.atleast_2d(np.asarray(runs_a, dtype=np.float64))
    b = np.atleast_2d(np.asarray(runs_b, dtype=np.float64))
    if a.shape != b.shape:
        raise ValueError(
            f"`runs_a` and `runs_b` must have the same shape; got {a.shape} and {b.shape}."
        )
    cost = cdist(a, b, "sqeuclidean")
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean())


@dataclass(frozen=True)
class CouplingResult:
    """Isotropic noise for a randomized mechanism from the coupling bound ([1]_).

    Attributes
    ----------
    noise_std : float
        Isotropic noise standard deviation ``s`` (output units), every coordinate.
    expected_matched_sq_distance : float
        Estimate of ``E_{X,X'}[min_π (1/τ) Σ_j ||f(X,θ_j) − f(X',θ'_π(j))||²]`` (mean over
        pairs); the empirical matching over τ seeds leans high in expectation (averaging the
        empirical couplings gives a coupling of the true laws), i.e. towards more noise.
    standard_error : float
        Standard error of that mean over the ``n_pairs`` pairs.
    calibrated_distance : float
        Value used for the noise: the estimate, or its one-sided upper ``confidence`` limit
        (normal approximation) when ``confidence`` was given.
    confidence : float or None
        Level of the upper limit, if used.
    mi_budget : float
        Budget ``v`` in nats; ``noise_std² = calibrated_distance / (2v)``.
    n_pairs, tau, dim : int
        Pairs of independent subsets, seeds per subset, output dimension ``d``.
    plan : NoisePlan
        Isotropic plan (``rule="isotropic"``, ``details["bound"] == "coupling"``) usable with
        :func:`pacpriv.pac.release.privatize`.
    pair_costs : ndarray of shape (n_pairs,)
        Matched distance of each pair.
    simulation : SimulationResult
        Engine output; ``outputs.reshape(2 * n_pairs, tau, dim)`` are the runs.
    """

    noise_std: float
    expected_matched_sq_distance: float
    standard_error: float
    calibrated_distance: float
    confidence: float | None
    mi_budget: float
    n_pairs: int
    tau: int
    dim: int
    plan: NoisePlan = field(repr=False)
    pair_costs: np.ndarray = field(repr=False)
    simulation: SimulationResult = field(repr=False)

    @property
    def noise_variance(self) -> float:
        """``noise_std²``."""
        return self.noise_std**2

    @property
    def runs(self) -> np.ndarray:
        """Simulated runs, shape ``(2 * n_pairs, tau, dim)``."""
        return np.asarray(self.simulation.outputs).reshape(2 * self.n_pairs, self.tau, self.dim)

    def to_dict(self) -> dict:
        """JSON-serialisable summary (no arrays)."""
        return {
            "noise_std": self.noise_std,
            "noise_variance": self.noise_variance,
            **field_values(self, exclude=("noise_std", "plan", "pair_costs", "simulation")),
            "plan": self.plan.to_dict(),
            "simulation": self.simulation.to_dict(),
        }


#: The execution of this module's functions unless given (no progress bar).
_DEFAULT_EXECUTION = ExecutionOptions(progress=False)


@refuses_removed(execution_hints())
def coupling_noise(
    mechanism: Callable[..., Any],
    pool: Any,
    *,
    mi_budget: float,
    n_pairs: int,
    tau: int,
    sampler: Any = None,
    confidence: float | None = None,
    rng: RNGLike = None,
    execution: ExecutionOptions | None = None,
) -> CouplingResult:
    """Calibrate isotropic noise for a randomized mechanism with the coupling bound [1]_.

    Parameters
    ----------
    mechanism : callable
        ``f(subset, *, rng) -> (d,)``; its internal randomness must come from ``rng`` (a
        ``numpy.random.Generator``). A mechanism without ``rng`` is run τ times identically.
    pool : ndarray of shape (n_records, ...) or tuple of such arrays
        Data pool.
    mi_budget : float
        Budget ``v`` in nats, ``> 0``.
    n_pairs : int
        Pairs ``(X, X')`` of independent subsets, ``>= 2`` (``2·n_pairs`` engine trials).
    tau : int
        Seeds per subset, ``>= 1`` (``τ·2·n_pairs`` mechanism calls).
    sampler : Sampler, callable, str or None
        Distribution of the subsets (None: Poisson-½). Trials ``i`` and ``i + n_pairs`` are
        paired, which are independent draws for every built-in sampler (complementary pairs
        included, as ``n_pairs >= 2``).
    confidence : float or None
        If given, in (0, 1): calibrate on the one-sided upper limit
        ``mean + z_confidence · standard_error`` (safe side) instead of the mean.
    rng : None, int, SeedSequence or Generator
        Root seed (None: fresh OS entropy).
    execution : ExecutionOptions, optional
        How the engine's trials run (:class:`~pacpriv.pac.engine.ExecutionOptions`); never
        changes the result. Default: ``ExecutionOptions(progress=False)``. The 0.2 keywords
        ``n_jobs=``, ``progress=`` and ``options=``
        were removed in 0.4 (a ``TypeError`` naming the replacement).

    Returns
    -------
    CouplingResult

    Raises
    ------
    TypeError, ValueError
        Invalid arguments.
    pacpriv.exceptions.MechanismError
        If a trial fails (see :func:`pacpriv.pac.engine.simulate`).

    References
    ----------
    .. [1] Sridhar, Xiao & Devadas, PAC-Private Algorithms, IEEE S&P 2025 (coupling bound).
    """
    v = check_real(mi_budget, "mi_budget", low=0.0, low_inclusive=False, high=100.0)
    n_pairs = check_int(n_pairs, "n_pairs", low=2)
    tau = check_int(tau, "tau", low=1)
    z = 0.0
    if confidence is not None:
        confidence = check_real(
            confidence, "confidence", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
        )
        z = float(stats.norm.ppf(confidence))
    sim = simulate(
        _RepeatedRuns(mechanism, tau), pool, n_trials=2 * n_pairs, sampler=sampler, rng=rng,
        execution=resolve_execution(execution, _DEFAULT_EXECUTION),
    )
    d = sim.dim // tau
    runs = np.asarray(sim.outputs, dtype=np.float64).reshape(2 * n_pairs, tau, d)
    costs = np.array([matched_distance(runs[i], runs[i + n_pairs]) for i in range(n_pairs)])
    mean = float(np.mean(costs))
    se = float(np.std(costs, ddof=1) / np.sqrt(n_pairs))
    used = mean + z * se
    s = float(np.sqrt(used / (2.0 * v)))
    details = {
        "bound": "coupling", "source": "PAC-ALG (Sridhar, Xiao & Devadas, S&P 2025)",
        "tau": tau, "n_pairs": n_pairs, "expected_matched_sq_distance": mean,
        "standard_error": se, "confidence": confidence,
    }
    bound = used / (2.0 * s**2) if s > 0 else 0.0
    while bound > v:  # round the noise up (an ulp at a time), never the bound down
        s = math.nextafter(s, math.inf)
        bound = used / (2.0 * s**2)
    std = np.full(d, s)
    std.setflags(write=False)
    plan = NoisePlan(
        rule="isotropic", mi_budget=v, mi_bound=bound, linearised_mi_bound=bound, mi_claim=v,
        confidence=None, dim=d, basis=None, noise_std=std, residual_std=0.0, details=details,
    )
    return CouplingResult(
        noise_std=s, expected_matched_sq_distance=mean, standard_error=se,
        calibrated_distance=used, confidence=confidence, mi_budget=v, n_pairs=n_pairs, tau=tau,
        dim=d, plan=plan, pair_costs=costs, simulation=sim,
    )


@dataclass(frozen=True)
class RandomizedComparison:
    """Coupling bound vs "θ as part of the secret" (:func:`compare_randomized_noise`).

    Attributes
    ----------
    mechanism : dict or str
        The mechanism's ``to_dict()`` or its name.
    mi_budget : float
        Budget ``v`` in nats.
    n_pairs, tau, dim : int
        Subset pairs, runs per subset, output dimension.
    coupling, theta_as_secret : dict
        Noise std, variance and ``E||B||²`` of each method (JSON-serialisable).
    variance_ratio : float
        Coupling noise variance / θ-as-secret noise variance.
    smaller : {"coupling", "theta_as_secret"}
        Which method needs less noise.
    between_subset_variance, internal_variance : float
        ``B`` and ``W`` of the variance split.
    jensen_floor : float
        ``2(B + W/τ)``; the coupling estimate cannot be far below it.
    rows : tuple of dict
        A small table (method, noise std, ``E||B||²``).
    """

    mechanism: Any
    mi_budget: float
    n_pairs: int
    tau: int
    dim: int
    coupling: dict
    theta_as_secret: dict
    variance_ratio: float
    smaller: str
    between_subset_variance: float
    internal_variance: float
    jensen_floor: float
    rows: tuple[dict, ...]

    def to_dict(self) -> dict:
        """JSON-serialisable dict (the same keys as the attributes)."""
        return {**field_values(self), "rows": [dict(r) for r in self.rows]}


@refuses_removed(execution_hints())
def compare_randomized_noise(
    mechanism: Callable[..., Any],
    pool: Any,
    *,
    mi_budget: float = 0.1,
    n_pairs: int = 20,
    tau: int = 3,
    sampler: Any = None,
    rng: RNGLike = None,
    execution: ExecutionOptions | None = None,
) -> RandomizedComparison:
    """Coupling bound vs "θ as part of the secret" on the same simulated runs.

    Parameters
    ----------
    mechanism : callable
        Randomized mechanism ``f(subset, *, rng)``, e.g.
        ``pacpriv.mechanisms.make_kmeans(n_clusters=3, randomized=True)``.
    pool : array or tuple
        Data pool, e.g. the iris features ``pacpriv.datasets.load_dataset("iris").X``.
    mi_budget, n_pairs, tau, sampler, rng, execution :
        As :func:`coupling_noise`; ``tau >= 2`` here (to split the variance).

    Returns
    -------
    RandomizedComparison
        ``coupling`` and ``theta_as_secret`` (noise std, variance and ``E||B||²`` each),
        ``variance_ratio`` (coupling / θ-as-secret noise variance), ``smaller`` (which needs
        less noise), ``between_subset_variance`` ``B``, ``internal_variance`` ``W``,
        ``jensen_floor`` ``2(B + W/τ)`` (the coupling estimate cannot be far below it, see the
        module notes) and ``rows`` (a small table); ``to_dict()`` is JSON-serialisable.

    Notes
    -----
    "θ as secret" is the isotropic rule ``s² = tr Σ / (2v)`` of [2]_ with ``Σ`` estimated from all
    ``2·n_pairs·τ`` runs (each is a draw of ``f(X, θ)``); the coupling is :func:`coupling_noise`.
    """
    tau = check_int(tau, "tau", low=2)
    res = coupling_noise(
        mechanism, pool, mi_budget=mi_budget, n_pairs=n_pairs, tau=tau, sampler=sampler,
        rng=rng, execution=execution,
    )
    runs = res.runs
    spectrum = estimate_output_spectrum(runs.reshape(-1, res.dim))
    secret = calibrate_noise(spectrum, mi_budget=res.mi_budget, rule="isotropic")
    s_secret = float(secret.noise_std[0])
    internal = float(np.mean(np.sum(np.var(runs, axis=1, ddof=1), axis=1)))
    between = float(np.sum(np.var(runs.mean(axis=1), axis=0, ddof=1))) - internal / tau
    coupling = {
        "noise_std": res.noise_std, "noise_variance": res.noise_variance,
        "expected_noise_power": res.dim * res.noise_variance,
        "expected_matched_sq_distance": res.expected_matched_sq_distance,
        "standard_error": res.standard_error,
    }
    theta = {
        "noise_std": s_secret, "noise_variance": s_secret**2,
        "expected_noise_power": res.dim * s_secret**2, "total_variance": spectrum.total_variance,
    }
    ratio = res.noise_variance / s_secret**2 if s_secret > 0 else float("inf")
    name = getattr(mechanism, "to_dict", None)
    return RandomizedComparison(
        mechanism=name() if callable(name) else getattr(mechanism, "__name__", "mechanism"),
        mi_budget=res.mi_budget, n_pairs=res.n_pairs, tau=tau, dim=res.dim,
        coupling=coupling, theta_as_secret=theta, variance_ratio=ratio,
        smaller="theta_as_secret" if ratio > 1 else "coupling",
        between_subset_variance=between, internal_variance=internal,
        jensen_floor=2.0 * (between + internal / tau),
        rows=(
            {"method": "coupling [PAC-ALG]", "noise_std": res.noise_std,
             "expected_noise_power": coupling["expected_noise_power"]},
            {"method": "theta as secret (isotropic)", "noise_std": s_secret,
             "expected_noise_power": theta["expected_noise_power"]},
        ),
    )
