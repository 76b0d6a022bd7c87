"""Per-record distances under a fixed noise shape, simulated with bounded memory (private).

The certificate of :mod:`pacpriv.pac.per_record._certificate` needs, per trial and record, only
the Mahalanobis norm ``d_{t,i} = ‖Δ_{t,i}‖_{Σ_shape⁻¹}`` of the difference under a shape fixed
*before* the certification trials. :func:`simulate_distances` runs the engine with
:func:`~pacpriv.pac.per_record._sim.distance_trial`, so each trial stores ``d + k`` numbers (the
whole-subset output ``f(S_t)`` and ``k`` distances) instead of ``(1 + k) d``.

Declared properties of a mechanism
----------------------------------
A mechanism may declare, as attributes (read by :func:`declared_bounds`):

* ``difference_bound(pool) -> (n,)``: a *proven* bound on ``‖f(S ∪ {i}) − f(S ∖ {i})‖₂`` for
  every subset ``S`` (used as the range of the certificate, and checked on every simulated
  difference);
* ``difference_error`` (float): a bound on the distance between a simulated difference and the
  difference of two releases (e.g. solver tolerance); added to every distance.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, §2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacpriv._random import RNGLike
from pacpriv.pac.engine._options import ExecutionOptions
from pacpriv.pac.engine._simulate import SimulationResult
from pacpriv.pac.per_record._math import NoiseGeometry
from pacpriv.pac.per_record._sim import PairSpec
from pacpriv.pac.per_record._units import run_pairs
from pacpriv.pac.samplers import PoissonSampler, display_name

__all__ = ["RecordDistances", "declared_bounds", "simulate_distances"]


def declared_bounds(mechanism: Any, pool: Any, records: np.ndarray
                    ) -> tuple[np.ndarray | None, float]:
    """The mechanism's declared ``(difference_bound[records], difference_error)`` (module notes).

    ``(None, 0.0)`` for a black box that declares nothing.

    Raises
    ------
    ValueError
        If a declared value is not finite and non-negative, or of the wrong shape.
    """
    err = float(getattr(mechanism, "difference_error", 0.0) or 0.0)
    if not (np.isfinite(err) and err >= 0):
        raise ValueError(f"the mechanism's `difference_error` must be finite and >= 0; got {err}.")
    fn = getattr(mechanism, "difference_bound", None)
    if not callable(fn):
        return None, err
    bound = np.asarray(fn(pool), dtype=np.float64).reshape(-1)
    if bound.shape[0] <= int(np.max(records, initial=-1)) or not np.all(np.isfinite(bound)) \
            or np.any(bound < 0):
        raise ValueError("the mechanism's `difference_bound(pool)` must return one finite "
                         "non-negative bound per record of the pool.")
    return bound[records], err


@dataclass(frozen=True, eq=False)
class RecordDistances:
    """Distances of a simulation under a fixed shape (:func:`simulate_distances`).

    Attributes
    ----------
    distances : ndarray of shape (n_trials, k)
        ``‖Δ_{t,i}‖_{Σ_shape⁻¹} + difference_error/sqrt(λ_min(Σ_shape))`` (an upper bound of the
        distance of two releases).
    outputs : ndarray of shape (n_trials, d)
        ``f(S_t)``.
    records : ndarray of int, shape (k,)
    sampling_rate : float
    geometry : NoiseGeometry
        ``Σ_shape``.
    distance_bound : ndarray of shape (k,) or None
        Declared range of the distances (``difference_bound/sqrt(λ_min) + error``), or None.
    simulation : SimulationResult
    """

    distances: np.ndarray = field(repr=False)
    outputs: np.ndarray = field(repr=False)
    records: np.ndarray = field(repr=False)
    sampling_rate: float
    geometry: NoiseGeometry = field(repr=False)
    distance_bound: np.ndarray | None = field(repr=False)
    simulation: SimulationResult = field(repr=False)

    @property
    def n_trials(self) -> int:
        """Number of trials."""
        return int(self.distances.shape[0])


def min_std(geometry: NoiseGeometry) -> float:
    """``sqrt(λ_min(Σ))`` of a geometry (its residual variance counts when it has one)."""
    var = np.asarray(geometry.variances, dtype=np.float64)
    lo = float(var.min()) if var.size else np.inf
    if geometry.basis is not None and geometry.basis.shape[1] < geometry.dim:
        lo = min(lo, float(geometry.residual_variance))
    return float(np.sqrt(lo))


def simulate_distances(mechanism: Any, pool: Any, geometry: NoiseGeometry, *, n_trials: int,
                       sampler: PoissonSampler, records: np.ndarray, n_records: int,
                       rng: RNGLike, execution: ExecutionOptions) -> RecordDistances:
    """Simulate ``n_trials`` trials and keep the distances under ``geometry`` (validated inputs).

    Raises
    ------
    MechanismError
        As :func:`~pacpriv.pac.engine.simulate`.
    ValueError
        If the mechanism's declared bounds are malformed.
    """
    bound, err = declared_bounds(mechanism, pool, records)
    floor = min_std(geometry)
    pad = 0.0 if err == 0.0 else err / floor
    spec = PairSpec.build(mechanism, pool, records, n_records, ensemble=execution.ensemble)
    sim = run_pairs(spec, sampler=sampler, n_trials=n_trials, rng=rng, execution=execution,
                    mechanism_name=display_name(mechanism), geometry=geometry)
    k = records.shape[0]
    d = sim.dim - k
    return RecordDistances(
        distances=np.asarray(sim.outputs[:, d:], dtype=np.float64) + pad,
        outputs=sim.outputs[:, :d], records=records, sampling_rate=sampler.sampling_rate,
        geometry=geometry,
        distance_bound=None if bound is None else bound / floor + pad,
        simulation=sim,
    )
