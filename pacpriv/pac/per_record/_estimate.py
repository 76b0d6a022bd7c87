"""Time estimate of a per-record simulation from a short timed probe (before any trial runs).

A per-record trial costs ``1 + k`` mechanism evaluations for ``k`` audited records (one call
when the mechanism has ``per_record_differences``; ``k + ⌈k/B⌉`` for a black box run in record
blocks of ``B``, :mod:`pacpriv.pac.per_record._units`, whose blocks divide among the workers).
:func:`estimate_per_record_time` times ``f(S)`` and a few flipped subsets (or one fast-path
call) on one Poisson subset drawn with a public seed, and scales the time per evaluation to
the whole run. The probe's outputs are discarded (nothing of it is stored or released). The
estimate is a plain extrapolation: a mechanism whose cost depends strongly on the subset, a
loaded machine or worker start-up can make the run slower or faster; it is printed as "about".
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from pacpriv._validation import check_real
from pacpriv.exceptions import PROBE_TIME_ADVICE, TimeLimitError
from pacpriv.pac.engine._probe import ProbeTimeoutError, bounded_probe, duration_text
from pacpriv.pac.per_record._sim import PairSpec, _differences
from pacpriv.pac.per_record._units import DEFAULT_RECORD_BLOCK

__all__ = ["RunEstimate", "check_whole_run_time", "estimate_per_record_time"]

#: Public seed of the probe's subset.
PROBE_SEED = 0
#: Flipped subsets timed by the probe of the generic path (at most).
PROBE_FLIPS = 3


@dataclass(frozen=True)
class RunEstimate:
    """A run's predicted wall time.

    Attributes
    ----------
    seconds : float
        Predicted wall time of the simulation, seconds.
    per_trial_s : float
        Predicted seconds of one trial (one worker).
    evaluations_per_trial : int
        Mechanism calls per trial (``1 + k``, or 1 on the fast path).
    probe_evaluations : int
        Calls timed by the probe.
    workers : int
    n_trials : int
    """

    seconds: float
    per_trial_s: float
    evaluations_per_trial: int
    probe_evaluations: int
    workers: int
    n_trials: int

    def text(self) -> str:
        """One line for the user, e.g. ``about 3.2 min (200 trials × 570 evaluations ...)``."""
        return (f"about {duration_text(self.seconds)} ({self.n_trials} trials × "
                f"{self.evaluations_per_trial} evaluation(s) at {self.per_trial_s:.3g} s a "
                f"trial, {self.workers} worker(s); from a timed probe of "
                f"{self.probe_evaluations} evaluation(s))")


def estimate_per_record_time(mechanism: Any, pool: Any, records: np.ndarray, *, n_records: int,
                             n_trials: int, sampling_rate: float = 0.5,
                             workers: int = 1, record_block: int | None = None,
                             time_limit: float | None = None) -> RunEstimate:
    """Estimate the wall time of a per-record simulation by timing a short probe.

    Parameters
    ----------
    mechanism : callable
        The black box (``f(subset[, rng]) -> (d,)``), optionally with ``per_record_differences``.
    pool : array or tuple of arrays
        The pool (``n_records`` rows).
    records : ndarray of int, shape (k,)
        Audited records (validated).
    n_records : int
    n_trials : int
        Trials of the run (>= 1).
    sampling_rate : float, default 0.5
        Poisson rate of the probe's subset, in (0, 1).
    workers : int, default 1
        Parallel workers of the run (the trials, or a black box's record blocks, divide among
        them).
    record_block : int or None, default None
        Records per block of a black box's trial (``ExecutionOptions.record_block``; None: the
        default): each of the ``⌈k/B⌉`` blocks also evaluates ``f(S)``.
    time_limit : float or None, default None
        Seconds the probe may take (> 0): it is interrupted there (SIGALRM, in the main
        thread of a POSIX process; elsewhere checked when it returns). None: no limit; a
        probe still running after a few seconds then says so in a
        :class:`~pacpriv.exceptions.StallWarning` (again at each doubling of the wait).

    Returns
    -------
    RunEstimate

    Raises
    ------
    Exception
        Whatever the mechanism raises on the probe (the run would fail the same way).
    pacpriv.exceptions.TimeLimitError
        A ``TimeoutError``: the probe did not finish within ``time_limit`` (nothing was run).
    ValueError
        If ``time_limit`` is not a number > 0 (before the mechanism is called).
    """
    limit = None
    if time_limit is not None:
        limit = (check_real(time_limit, "time_limit", low=0, low_inclusive=False),
                 "time_limit")
    try:
        with bounded_probe(limit, what="the timed probe of the mechanism (before the run)",
                           hint=PROBE_TIME_ADVICE):
            return timed_probe(mechanism, pool, records, n_records=n_records,
                               n_trials=n_trials, sampling_rate=sampling_rate, workers=workers,
                               record_block=record_block)
    except ProbeTimeoutError as err:  # the same error as run_pac's (eleventh new-user pass)
        raise TimeLimitError(str(err)) from None


def timed_probe(mechanism: Any, pool: Any, records: np.ndarray, *, n_records: int,
                n_trials: int,
                sampling_rate: float, workers: int, record_block: int | None) -> RunEstimate:
    """:func:`estimate_per_record_time` without its guards (the caller bounds it, e.g. the
    command line with its own flags' names)."""
    spec = PairSpec.build(mechanism, pool, np.asarray(records, np.int64), n_records)
    mask = np.random.default_rng(PROBE_SEED).random(n_records) < sampling_rate
    subset = np.flatnonzero(mask)
    gen = np.random.default_rng(PROBE_SEED) if spec.pass_rng else None
    k = int(spec.records.shape[0])
    if spec.fast:
        tic = time.perf_counter()
        _differences(spec, subset, gen)
        per_trial, probe, evals = time.perf_counter() - tic, 1, 1
    else:
        few = dataclasses.replace(spec, records=spec.records[:PROBE_FLIPS])
        tic = time.perf_counter()
        _differences(few, subset, gen)
        probe = 1 + int(few.records.shape[0])
        per_eval = (time.perf_counter() - tic) / probe
        block = max(1, min(int(record_block or DEFAULT_RECORD_BLOCK), k))
        parts = math.ceil(k / block)
        evals = k + parts
        per_trial = per_eval * evals
        w = max(1, int(workers))
        # the blocks of all trials divide among the workers; no less than one block's time
        seconds = max(math.ceil(n_trials * parts / w) * per_eval * (1 + block),
                      per_eval * (1 + block))
        return RunEstimate(seconds=seconds, per_trial_s=per_trial, evaluations_per_trial=evals,
                           probe_evaluations=probe, workers=w, n_trials=int(n_trials))
    w = max(1, int(workers))
    return RunEstimate(seconds=math.ceil(n_trials / w) * per_trial, per_trial_s=per_trial,
                       evaluations_per_trial=evals, probe_evaluations=probe, workers=w,
                       n_trials=int(n_trials))


def check_whole_run_time(mechanism: Any, pool: Any, records: np.ndarray, *, n_records: int,
                         n_trials: int, sampling_rate: float, execution: Any) -> None:
    """Refuse, before any trial, a per-record run whose ``n_trials`` trials (every simulation
    of it: shape and certification) are estimated over ``execution.time_limit`` (the whole
    run's). Nothing is done without a limit.

    Raises
    ------
    TimeLimitError
        With the estimate (nothing was run, stored or charged); or the probe itself did not
        finish within the limit.
    """
    limit = getattr(execution, "time_limit", None)
    if limit is None:
        return
    from pacpriv.pac.engine._parallel import resolve_backend

    _, workers = resolve_backend(execution.n_jobs, execution.backend)
    try:
        est = estimate_per_record_time(mechanism, pool, records, n_records=n_records,
                                       n_trials=n_trials, sampling_rate=sampling_rate,
                                       workers=workers, record_block=execution.record_block,
                                       time_limit=limit)
    except TimeoutError:
        raise
    except Exception:  # a failing mechanism: the run reports it with its trial and seed
        return
    if est.seconds > limit:
        raise TimeLimitError(
            f"the run would take {est.text()}, over `time_limit` {limit:g} s (the whole run: "
            "every simulation of it): use fewer trials or records, more workers (`n_jobs`) "
            "or a larger `time_limit` (nothing was run or charged)", estimate_s=est.seconds)
