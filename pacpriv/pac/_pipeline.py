"""The measurement step, written once: simulate → output spectrum → noise plan.

Used by :func:`pacpriv.pac.job.run_pac` and :meth:`pacpriv.pac.wrapper.PacPrivateFunction.calibrate`
(Xiao & Devadas, CRYPTO 2023, Algorithm 1: Monte-Carlo estimate of the output covariance, then
the Gaussian noise of Thm 3 for the MI budget).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pacpriv._random import RNGLike
from pacpriv._stats import clipping_problem
from pacpriv.exceptions import CalibrationError, ClippingWarning, warn_user
from pacpriv.pac._sampling import grid_overhead
from pacpriv.pac.engine._limit import after_trials_within
from pacpriv.pac.engine._options import ExecutionOptions
from pacpriv.pac.engine._simulate import SimulationResult, simulate
from pacpriv.pac.engine._stall import StallNotice
from pacpriv.pac.noise._certificate import RelativeOutputs
from pacpriv.pac.noise._plan import NoisePlan
from pacpriv.pac.noise._rescale import plan_rescaled
from pacpriv.pac.noise._rule import NoiseRule
from pacpriv.pac.samplers import as_sampler
from pacpriv.pac.spectrum._covariance import OutputSpectrum, estimate_output_spectrum
from pacpriv.pac.spectrum._gram import centred_gram

__all__ = ["measure"]


def _as_slice(rows: np.ndarray) -> slice | np.ndarray:
    """Evenly spaced rows as a slice (a view, not a copy, of on-disk outputs)."""
    rows = np.asarray(rows, dtype=np.intp)
    if rows.size == 0:
        return rows
    step = int(rows[1] - rows[0]) if rows.size > 1 else 1
    if step > 0 and np.array_equal(rows, np.arange(rows[0], rows[0] + step * rows.size, step)):
        return slice(int(rows[0]), int(rows[0]) + step * rows.size, step)
    return rows


def _warn_clipping(mechanism: Callable[..., Any], pool: Any) -> None:
    """:class:`ClippingWarning` when a mechanism's public clipping ranges (its
    ``clip_ranges(p)``: a clipped mean's bounds, a histogram's outer edges) move most of the
    pool; mechanisms without them, or pools that are not a numeric matrix, pass silently."""
    ranges = getattr(mechanism, "clip_ranges", None)
    X = pool[0] if isinstance(pool, tuple) and pool else pool
    if not callable(ranges) or getattr(X, "ndim", 0) != 2:
        return
    try:
        low, high = ranges(X.shape[1])
        problem = clipping_problem(X, low, high, what="the mechanism's clipping range(s)")
    except (TypeError, ValueError):  # the simulation reports a mismatched pool its own way
        return
    if problem is not None:
        warn_user(problem, ClippingWarning)


def measure(
    mechanism: Callable[..., Any],
    pool: Any,
    *,
    mi_budget: float,
    rule: NoiseRule,
    n_trials: int,
    sampler: Any = None,
    rng: RNGLike = None,
    execution: ExecutionOptions | None = None,
    grid_reserve: bool = False,
) -> tuple[SimulationResult, OutputSpectrum, NoisePlan]:
    """Simulate ``mechanism`` on ``pool``, estimate the spectrum and calibrate the noise.

    ``grid_reserve``: calibrate to ``mi_budget − grid_overhead(2d)``, so that a hardened
    release of the plan (its MI bound is the plan's plus ``grid_overhead(k)``, ``k <= 2d``:
    :func:`pacpriv.pac.release.grid_coordinates`) stays within ``mi_budget``.

    ``rule`` is a rule object (:mod:`pacpriv.pac.noise`); a rule whose :attr:`source` is the
    outputs (``Certified``) gets them instead of the spectrum. ``n_trials``, ``sampler``,
    ``rng`` and ``execution`` go to :func:`pacpriv.pac.engine.simulate`. Returns
    ``(simulation, spectrum, plan)``.
    """
    sampler = as_sampler(sampler)
    _warn_clipping(mechanism, pool)
    started = time.monotonic()  # `time_limit` covers the analysis too
    sim = simulate(mechanism, pool, n_trials=n_trials, sampler=sampler, rng=rng,
                   execution=execution)
    _check_output_bound(sim.outputs, rule.output_bound_assumed, sim.reference)
    n, d = sim.outputs.shape
    with _AnalysisNote(n, d):  # a long analysis says so (seventh new-user pass, #585)
        # a rule that certifies from the outputs reads them once (d > n: the one n x n Gram
        # pass, shared by the spectrum and the certificate) and does not use the spectrum's
        # eigenvectors (kept lazy: no second pass to form them)
        from_outputs = rule.source == "outputs"
        shared = centred_gram(sim.outputs) if from_outputs and d > n else None
        spectrum = estimate_output_spectrum(
            sim.outputs, gram=shared,
            eigenvectors="lazy" if from_outputs or not rule.needs_eigenvectors else "auto")
        with np.errstate(over="ignore"):
            overflow = not np.isfinite(float(spectrum.total_variance) / (2.0 * mi_budget))
        if overflow:
            raise CalibrationError(
                f"the noise for mi_budget={mi_budget!r} nats overflows float64 (the output "
                "spread is too large for so small a budget): raise `mi_budget` or rescale the "
                "output.")
        mi_budget = _reserved(mi_budget, d) if grid_reserve else mi_budget
        try:
            with np.errstate(over="ignore"):  # an overflow is reported below, in one line
                if rule.source == "outputs":
                    # the certificate needs independent trials: the sampler says which they are
                    # (of complementary pairs, one member each, i.i.d. draws of its law)
                    rows = _as_slice(sampler.independent_rows(n))
                    gram = None if shared is None else shared.restrict(rows)
                    outputs = sim.outputs[rows] if gram is None else gram.outputs
                    # float32 storage: rows relative to trial 0, read as they are (no copy)
                    # (rescaled by an exact power of two: no overflow at 1e100, no floor at
                    # 1e-100)
                    plan = plan_rescaled(
                        rule, RelativeOutputs(outputs, sim.reference, gram=gram),
                        mi_budget=mi_budget)
                else:
                    plan = rule.plan(spectrum, mi_budget=mi_budget)
        except (ValueError, FloatingPointError, ZeroDivisionError):
            # the arguments were checked before the simulation: a failure here is numerical
            # (its message may hold values computed from the pool, such as a noise scale:
            # neither repeated nor chained)
            raise CalibrationError(
                f"the {rule.name} rule could not calibrate the noise in float64 for mi_budget="
                f"{mi_budget!r} nats: the output's coordinates span too many orders of "
                "magnitude (or its spread is too large for so small a budget). Rescale the "
                "coordinates to comparable scales, or raise `mi_budget`.") from None
        if not (np.all(np.isfinite(plan.noise_std)) and np.isfinite(plan.residual_std)):
            raise CalibrationError(
                f"the noise for mi_budget={mi_budget!r} nats overflows float64 (the output "
                "spread is too large for so small a budget): raise `mi_budget` or rescale the "
                "output.")
    after_trials_within(None if execution is None else execution.time_limit, started,
                        lambda: None, n_trials=sim.n_trials, checkpoint=sim.checkpoint,
                        what="after the trials (their reproducibility check and analysis)")
    return sim, spectrum, plan


def _reserved(mi_budget: float, d: int) -> float:
    """The budget left to the noise plan once the hardened release's grid overhead over at
    most ``2d`` coordinates is held back (about ``(2d)^{3/2} / 2^40`` nats)."""
    left = mi_budget - grid_overhead(2 * d)
    if not left > mi_budget / 2:
        raise CalibrationError(
            f"mi_budget={mi_budget!r} nats is too small for a hardened release of {d} output "
            f"coordinates: its grid adds up to {grid_overhead(2 * d):.3g} nats; raise "
            "`mi_budget` (above twice that) or reduce the output's dimension.")
    return left


#: Seconds the analysis after the trials runs before its "still calibrating" line (then at
#: each doubling).
ANALYSIS_NOTE_S = 30.0


class _AnalysisNote(StallNotice):
    """One line when the spectrum and noise calibration after the trials run long (a run of
    thousands of outputs of dimension thousands printed nothing for minutes, even with the
    progress bar: it covers the trials only)."""

    def __init__(self, n: int, d: int) -> None:
        super().__init__(ANALYSIS_NOTE_S, name="pacpriv-analysis-note")
        self.n, self.d = n, d

    def text(self, idle: float) -> str:
        return (f"the noise calibration after the trials has run {idle:.0f} s ({self.n} "
                f"outputs of dimension {self.d}: its time grows with both); it is working, "
                "not hung: press Ctrl-C to stop (nothing has been released or charged yet).")


def _check_output_bound(outputs: np.ndarray, bound: float | None,
                        reference: np.ndarray | None = None) -> None:
    """Refuse a declared ``output_bound`` that the simulated outputs contradict.

    The certificates that take ``output_bound`` (Algorithm 1's confidence, the certified
    rule's clip radius and minimum noise) assume ``||f(X)||₂ <= output_bound`` for every
    subset; one output above it shows the assumption false. The error gives counts only (no
    output value or norm: those are statistics of the pool). ``reference``: the rows are
    stored relative to it (float32 storage).
    """
    if bound is None:
        return
    r = float(bound)
    if not (np.isfinite(r) and r > 0):
        return  # the rule's own argument check reports it
    n_bad = 0
    for start in range(0, outputs.shape[0], 4096):  # bounded memory on a memmap
        block = np.asarray(outputs[start:start + 4096], dtype=np.float64)
        if reference is not None:
            block = block + reference
        n_bad += int(np.count_nonzero(np.linalg.norm(block, axis=1) > r * (1.0 + 1e-12)))
    if n_bad:
        raise CalibrationError(
            f"`output_bound`={r!r} is violated: {n_bad} of {outputs.shape[0]} simulated outputs "
            "have a larger Euclidean norm, so the certificate's assumption ||f(X)||₂ <= "
            "output_bound is false. Declare a public bound that holds for every subset (or "
            "clip the mechanism's output to it).")
