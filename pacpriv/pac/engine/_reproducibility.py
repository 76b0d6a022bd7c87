"""The reproducibility check after the trials: chosen trials re-run from their seeds.

A mechanism that draws randomness outside its ``rng`` argument (the global ``numpy.random`` or
``random`` state, an unseeded library, the clock) or depends on changing external state does
not rerun from the root seed; re-running the first trial run here (and, when cheap, a middle
and the last one) and comparing outputs and masks bit for bit catches it. A re-run that
exceeds the per-trial ``timeout`` (where the first run did not) checks nothing: the result is
"not checked", never "not reproducible" (fifteenth new-user pass).
"""

from __future__ import annotations

import warnings

import numpy as np

from pacpriv.exceptions import MechanismError, NotReproducibleWarning
from pacpriv.pac.engine._parallel import THREAD_WORKERS, _failure_error
from pacpriv.pac.engine._storage import OutputStore
from pacpriv.pac.engine._trial import DeadlineReached, TrialTask, TrialTimeoutError, run_batch

__all__ = ["check_reproducible", "reproducibility", "rerun", "warn_uninterruptible"]

_RERUN_BUDGET_S = 5.0  #: seconds of extra re-runs the reproducibility check may spend


def reproducibility(task: TrialTask, store: OutputStore, pending: list, verified: list, *,
                     run_s: float, n_workers: int, left_s: float) -> tuple[bool | None, str]:
    """``(reproducible, note)``: trials run here re-run from their seeds, or the verified
    trials of a resumed checkpoint, or nothing to check."""
    if pending:
        # the first trial run here, and (when cheap: within _RERUN_BUDGET_S, and under a time
        # limit leaving time for the first and a release) a middle and the last one: randomness
        # drawn outside `rng` in only some trials is then caught far more often than from one
        first, last = pending[0][0], pending[-1][1] - 1
        n_run = sum(b - a for a, b in pending)
        per_trial = run_s * max(n_workers, 1) / max(n_run, 1)
        picks = [first]
        if per_trial * 2 <= min(_RERUN_BUDGET_S, left_s - 2 * per_trial):
            picks += sorted({(first + last) // 2, last} - {first})
        return check_reproducible(task, store, picks)
    if verified:
        return True, f"recorded trials {verified} re-run from their seeds: bit-identical"
    return None, ""


def rerun(task: TrialTask, store: OutputStore, index: int) -> tuple[np.ndarray, np.ndarray]:
    """Trial ``index`` run again here: ``(output in the storage dtype, mask)``; its failure as
    a :class:`MechanismError` (the trial's exception chained), the run's limit as
    :class:`DeadlineReached`."""
    res = run_batch(task, index, index + 1, store.dim)  # (output in storage dtype, mask), here
    if res.failure is not None or res.stopped:  # stopped at time_limit: _limit reports it
        raise (DeadlineReached("stopped at the run's time limit") if res.failure is None
               else _failure_error(res.failure)) from getattr(res.failure, "cause", None)
    return res.outputs[0], res.masks[0]


def check_reproducible(task: TrialTask, store: OutputStore,
                       indices: list[int]) -> tuple[bool | None, str]:
    """Re-run trials ``indices`` from their seeds; warn if an output or mask differs. A re-run
    past the per-trial ``timeout`` checks nothing: ``(None, note)``, no warning."""
    problem, culprit = None, "mechanism"
    for index in indices:
        try:
            output, mask = rerun(task, store, index)
        except MechanismError as err:
            if isinstance(err.__cause__, TrialTimeoutError):  # slow, not shown to differ
                return None, (f"not checked: re-running trial {index} from its seed exceeded "
                              f"the per-trial timeout ({task.timeout:g} s; its first run did "
                              "not)")
            problem = f"re-running trial {index} from its seed failed ({err})"
            break
        stored_output, stored_mask = store.row(index)
        if not np.array_equal(mask, stored_mask):  # the sampler's, not the mechanism's fault
            problem = f"re-drawing trial {index}'s subset from its seed gave a different subset"
            culprit = "sampler"
            break
        if output.tobytes() != np.asarray(stored_output).tobytes():
            problem = f"re-running trial {index} from its seed gave a different output"
            break
    if problem is None:
        if len(indices) == 1:
            return True, f"trial {indices[0]} re-run from its seed: bit-identical"
        listed = ", ".join(map(str, indices))
        return True, f"trials {listed} re-run from their seeds: bit-identical"
    note = (
        f"not reproducible: {problem}. The {culprit} draws randomness outside its `rng` "
        "argument (global numpy.random or random state, an unseeded library, the clock) or "
        "depends on changing external state; the root seed does not rerun this simulation."
    )
    # a sampler's fault is not blamed on a deterministic mechanism (seventh new-user pass,
    # #452)
    func = getattr(task.sampler, "func", None)  # a callable sampler: the user's function
    sampler = getattr(func, "__qualname__", None) or type(task.sampler).__name__
    who = (f"Mechanism {task.mechanism_name}" if culprit == "mechanism"
           else f"The sampler {sampler}")
    warnings.warn(
        f"{who} is {note} Take all randomness from the `rng` argument.",
        NotReproducibleWarning,
        stacklevel=3,
    )
    return False, note



def warn_uninterruptible(timeout: float | None, backend: str, n_workers: int) -> None:
    """Say, before the trials, that a per-trial ``timeout`` cannot interrupt a trial on
    thread-based workers (threading, Dask): a trial that hangs there runs until it returns,
    and only then fails (fifteenth new-user pass: `--timeout 3` on the threading backend ran
    100 s without a word). The run's stall warnings still name a trial that has not finished."""
    if timeout is None or backend not in THREAD_WORKERS or n_workers <= 1:
        return
    from pacpriv.exceptions import UninterruptibleWarning

    warnings.warn(f"`timeout`={timeout:g} s cannot interrupt a trial on {backend} workers (a "
                  "thread cannot be stopped): a trial that hangs runs until it returns, then "
                  "fails. To bound every trial, use the loky or multiprocessing backend (or "
                  "one job).", UninterruptibleWarning, stacklevel=4)
