"""The whole-run time limit (``ExecutionOptions.time_limit``): an estimate before, a stop during.

Before any trial (and before a checkpoint or an output file is created), :func:`start_limit`
times one trial on a subset drawn with a public seed (its output is discarded; nothing is
stored or released) and scales it to the trials still to run over the workers; when that
cold trial says the run would not fit, a warm trial (for an ensemble mechanism, a block of a
few trials too) refines the estimate, and a run still estimated over the limit is refused
with a one-line
:class:`~pacpriv.exceptions.TimeLimitError` that gives the estimate. The probe itself is
bounded by the limit (:func:`~pacpriv.pac.engine._probe.bounded_probe`).

While the run goes on, every batch of trials carries the deadline as wall-clock time
(:meth:`Deadline.wall_end`): it starts no trial past it, interrupts a trial running at it where a
trial can be interrupted (SIGALRM: this process, loky and multiprocessing workers), and returns
its finished trials. The parent stores them (and checkpoints them) and stops with a
``TimeLimitError`` saying how many trials finished and how to resume from the checkpoint; the
batches in flight are cancelled. So the stop comes within one trial's interruption after the
limit, or, where a trial cannot be interrupted (threading and Dask workers), once the trials in
flight finish: at most their per-trial timeout, which is at most ``time_limit``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from pacpriv.exceptions import PROBE_TIME_ADVICE, TimeLimitError
from pacpriv.pac.engine._checkpoint import _MANIFEST
from pacpriv.pac.engine._probe import ProbeTimeoutError, bounded_probe, duration_text
from pacpriv.pac.engine._trial import (
    TrialFailure,
    TrialTask,
    TrialTimeoutError,
    _Alarm,
    run_batch,
)

__all__ = ["Deadline", "after_trials_within", "carry_over", "checked_within", "rerun_within",
           "stage_within", "start_limit", "whole_run_words"]

#: Public root seed of the probe's trial (its output is discarded).
PROBE_SEED = 0

_T = TypeVar("_T")


def checked_within(deadline: Deadline | None, task: TrialTask, work: Callable[[TrialTask], _T],
                   *, n_done: Callable[[], int], n_trials: int, what: str) -> _T:
    """``work(task)`` (re-runs of recorded trials: a checkpoint's verification) inside the
    run's time limit: each re-run's per-trial timeout is capped at the time left, and a limit
    reached before or during it is a :class:`TimeLimitError` naming ``what`` (the trials stay
    in the checkpoint), never the mechanism's failure or a "delete the checkpoint" advice
    (tenth new-user pass)."""
    if deadline is None:
        return work(task)
    if not deadline.passed():
        try:
            return work(deadline.bound(task))
        except Exception:
            if time.monotonic() < deadline.end - 0.05:  # the work's own failure
                raise
    err = deadline.error(n_done(), n_trials)
    raise TimeLimitError(f"{err} (It was reached while {what}.)", n_done=err.n_done) from None


def rerun_within(deadline: Deadline | None, task: TrialTask,
                 check: Callable[[TrialTask], tuple[bool | None, str]], *,
                 n_trials: int) -> tuple[bool | None, str]:
    """The reproducibility check after the trials (``check(task) -> (reproducible, note)``)
    inside the run's time limit: each re-run starts only before the deadline and is
    interrupted at it.

    Raises
    ------
    TimeLimitError
        The limit passed before or during the check (the ``n_trials`` trials are kept in the
        checkpoint, if any): a re-run cut by the limit is never reported as "not reproducible",
        nor is a run that could not check its trials returned as finished (twelfth new-user
        pass, R5).
    """
    if deadline is None:
        return check(task)

    def stop() -> TimeLimitError:
        err = deadline.error(n_trials, n_trials)
        return TimeLimitError(f"{err} (It was reached during the reproducibility check, which "
                              "re-runs trials from their seeds.)", n_done=n_trials)

    if deadline.passed():
        raise stop()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = check(deadline.bound(task))
        except Exception:
            if time.monotonic() < deadline.end - 0.05:  # the check's own failure
                raise
            raise stop() from None
    if out[0] is False and time.monotonic() >= deadline.end - 0.05:
        raise stop()  # a re-run cut by the limit, not a different output
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return out


@dataclass(frozen=True)
class Deadline:
    """The end of a run's ``time_limit`` (``time.monotonic()`` seconds) and where its trials
    are kept."""

    limit_s: float
    end: float
    checkpoint: str | None

    def passed(self) -> bool:
        return time.monotonic() > self.end

    def bound(self, task: TrialTask) -> TrialTask:
        """``task`` for calls made outside a batch of trials (a checkpoint's verification, the
        reproducibility check): each call starts only before the deadline and is interrupted
        at it (``TrialTask.deadline``), its own ``timeout`` capped at the time left."""
        left = max(self.end - time.monotonic(), 1e-3)
        return dataclasses.replace(
            task, deadline=self.wall_end(),
            timeout=left if task.timeout is None else min(task.timeout, left))

    def wall_end(self) -> float:
        """The end as wall-clock time (``time.time()`` seconds), which worker processes and
        machines share: each batch of trials carries it (``TrialTask.deadline``)."""
        return time.time() + (self.end - time.monotonic())

    def stops(self, failure: TrialFailure | None) -> bool:
        """Whether the run stops here: the limit has passed, and the batch finished or its
        trial was cut by the per-trial timeout (which the limit caps)."""
        return self.passed() and (failure is None or isinstance(failure.cause, TimeoutError))

    def error(self, n_done: int, n_trials: int) -> TimeLimitError:
        kept = (f"they are kept in the checkpoint {self.checkpoint!r}: run again with the same "
                "arguments (and a larger `time_limit`, or none) to resume" if self.checkpoint
                else "they were not kept (no `checkpoint`): pass one to resume a stopped run")
        return TimeLimitError(
            f"the run reached its time limit (`time_limit` {self.limit_s:g} s) and stopped "
            f"with {n_done} of {n_trials} trials finished; {kept}. Nothing was released or "
            "charged.", n_done=n_done)


def kept_trials(checkpoint, n_trials: int) -> int:
    """Trials ``< n_trials`` an existing checkpoint lists (read-only; 0 when there is none or
    its manifest cannot be read: opening it later reports that)."""
    if checkpoint is None:
        return 0
    try:
        chunks = json.loads((Path(os.fspath(checkpoint)) / _MANIFEST).read_text())["chunks"]
        return sum(max(0, min(int(stop), n_trials) - int(start)) for start, stop, *_ in chunks)
    except (OSError, ValueError, TypeError, KeyError):
        return 0


def start_limit(task: TrialTask, *, time_limit: float | None, checkpoint, n_trials: int,
                n_workers: int) -> tuple[TrialTask, Deadline | None]:
    """Before any trial: ``(task with its per-trial timeout capped at the limit, deadline)``,
    or ``(task, None)`` without a limit.

    Raises
    ------
    TimeLimitError
        The probe's estimate of the trials still to run exceeds ``time_limit``, or the probe
        itself did not finish within it (nothing was run, stored or charged).
    """
    if time_limit is None:
        return task, None
    start = time.monotonic()
    pending = n_trials - kept_trials(checkpoint, n_trials)
    if pending > 0:
        _refuse_over(task, time_limit, pending, max(1, int(n_workers)), start)
    timeout = time_limit if task.timeout is None else min(task.timeout, time_limit)
    deadline = Deadline(time_limit, start + time_limit,
                        None if checkpoint is None else os.fspath(checkpoint))
    return dataclasses.replace(task, timeout=timeout), deadline


#: Calls after the trials that a run's estimate counts: a reproducibility re-run of a trial
#: and the release's one call (``run_pac``).
AFTER_TRIALS_CALLS = 2


def _refuse_over(task: TrialTask, limit: float, pending: int, n_workers: int,
                 start: float) -> None:
    """Time trials on a public seed until the estimate is within the limit, or refuse.

    The first trial (cold: imports, caches, compilation) bounds a trial's cost from above, so
    a run it fits in starts at once. Otherwise a second, warm trial gives the estimate (an
    ensemble mechanism: then a block of a few trials too, for a block's fixed cost and its
    cost per trial at the run's block size); over the limit, the run is refused.
    """
    probe = dataclasses.replace(
        task, root=np.random.SeedSequence(PROBE_SEED), timeout=None, retries=0, reference=None,
        output_dtype=np.dtype(np.float64), reseed_global=False, parent_pid=None,
        kernel_signal=False)
    sizes = (1, 1) if task.block_size <= 1 else (1, 1, min(_BLOCK_PROBE, task.block_size))
    times: list[float] = []
    try:
        with bounded_probe((limit, "`time_limit`"),
                           what="the timed probe (before the run)", hint=PROBE_TIME_ADVICE):
            for i, m in enumerate(sizes):  # trials i .. i + m - 1 (a block of m, if blocks)
                one = dataclasses.replace(probe, n_trials=i + m,
                                          block_size=m if task.block_size else 0)
                tic = time.perf_counter()
                result = run_batch(one, i, i + m, None)
                times.append(time.perf_counter() - tic)
                if result.failure is not None:
                    return  # the run reports the failing trial with its own index and seed
                per_trial = _per_trial(times, sizes[:i + 1], task.block_size)
                seconds = (time.monotonic() - start  # the probe so far is part of the run
                           + (math.ceil(pending / n_workers) + AFTER_TRIALS_CALLS) * per_trial)
                if seconds <= limit:
                    return
    except ProbeTimeoutError as err:
        raise TimeLimitError(str(err)) from None
    raise TimeLimitError(
        f"the run would take about {duration_text(seconds)} ({pending} trials at "
        f"{per_trial:.3g} s each on {n_workers} worker(s), {AFTER_TRIALS_CALLS} calls after "
        "them (a reproducibility re-run; a release, if the run makes one) and the probe "
        "itself, from a timed "
        f"probe of {sum(sizes)} trial(s)), over `time_limit` {limit:g} s: use fewer trials, more "
        "workers (`n_jobs`) or a larger `time_limit` (nothing was run or charged)",
        estimate_s=seconds)


#: Trials of the last block probe of an ensemble mechanism.
_BLOCK_PROBE = 4


def _per_trial(times: list[float], sizes: tuple[int, ...], block: int) -> float:
    """Seconds a trial costs from the probes so far: the last one-trial probe (the first is
    cold: an upper bound), or for blocks the line through the warm probe and the block of a
    few trials (fixed cost + cost per trial) at the run's block size, per trial."""
    if len(sizes) < 3:
        return times[-1] / sizes[-1]
    slope = max(0.0, (times[2] - times[1]) / (sizes[2] - sizes[1]))
    fixed = max(0.0, times[1] - slope * sizes[1])
    return (fixed + slope * block) / block


def carry_over(execution: Any, started: float, limit_s: float | None, *, before: str) -> Any:
    """``execution`` whose ``time_limit`` is what is left of a whole run's ``limit_s`` seconds
    since ``started`` (a ``time.monotonic()`` reading): a limit covers every simulation of a
    run (e.g. the shape and the certification trials), not each one.

    Raises
    ------
    TimeLimitError
        Nothing is left before ``before`` (e.g. ``"the certification trials"``) runs.
    """
    if limit_s is None:
        return execution
    left = limit_s - (time.monotonic() - started)
    if left <= 0:
        raise TimeLimitError(
            f"the run reached its time limit (`time_limit` {limit_s:g} s, the whole run) "
            f"before {before}; run again with a larger `time_limit` (or none), fewer trials "
            "or more workers. Nothing was released or charged.", n_done=0)
    return execution.replace(time_limit=left)


@contextlib.contextmanager
def whole_run_words(limit_s: float | None):
    """A ``TimeLimitError`` of a simulation run under :func:`carry_over` names the whole run's
    ``limit_s`` (not the part of it that was left to that simulation), once however deeply
    parts nest, in its two forms ("`time_limit` X s", a probe's "within X s (time_limit)"),
    and never says "nothing was run" of a part that may follow others (twelfth new-user pass,
    Q9, AI1)."""
    try:
        yield
    except TimeLimitError as err:
        if limit_s is not None:
            err.args = (_whole_run_text(str(err), limit_s), *err.args[1:])
        raise


_PART = r"(?: for the whole run \(([0-9.e+-]+) s were left for this part\))?"


def _whole_run_text(text: str, limit_s: float) -> str:
    whole_s, later = f"{limit_s:g}", False

    def named(m: re.Match) -> str:
        nonlocal later
        left = m.group(2) or m.group(1)  # an inner run's words: what it was left
        if left == whole_s:
            return f"`time_limit` {whole_s} s"
        later = True
        return f"`time_limit` {whole_s} s for the whole run ({left} s were left for this part)"

    def probe(m: re.Match) -> str:
        nonlocal later
        if m.group(1) == whole_s and m.group(2) is None:
            return m.group(0)
        later = True
        return (f"within {m.group(1)} s (what was left of `time_limit` {whole_s} s for the "
                "whole run)")

    # a probe's words first (an inner part's rewrite of them included), then the limit's
    text = re.sub(r"within ([0-9.e+-]+) s \((?:what was left of )?`?time_limit`?"
                  r"(?: ([0-9.e+-]+) s for the whole run)?\)", probe, text, count=1)
    text = re.sub(r"`time_limit` ([0-9.e+-]+) s" + _PART, named, text, count=1)
    if later:  # an earlier part of the run may have run trials (kept in its checkpoint)
        text = text.replace("nothing was run or charged",
                            "this part was not started; nothing was released or charged")
    return text


def after_trials_within(limit_s: float | None, started: float, call: Callable[[], _T], *,
                        n_trials: int, checkpoint: Any, what: str,
                        timeout: float | None = None) -> _T:
    """``call()`` after a run's trials (e.g. the release's one call of the mechanism on the
    secret subset) inside the run's ``time_limit`` of ``limit_s`` seconds since ``started``
    (a ``time.monotonic()`` reading; None: no limit).

    The analysis before it counts too: nothing is left, and ``call`` does not start. The call
    is interrupted at the limit where it can be (SIGALRM, in the main thread of a POSIX
    process), and a call that returns past it (where it could not be) is discarded: a run
    never finishes past its limit (eleventh new-user pass, #4, #540).

    ``timeout`` (seconds; None: none) bounds ``call`` itself as the engine's per-trial
    ``timeout`` bounds a trial (fourteenth new-user pass: a release call that hung was
    bounded by neither).

    Raises
    ------
    TimeLimitError
        The limit was reached before or during ``what``; the ``n_trials`` finished trials are
        kept in ``checkpoint`` (if any); nothing was released or charged.
    TrialTimeoutError
        ``call`` ran past ``timeout`` (interrupted where it can be; discarded where it could
        not be) before the run's limit.
    """
    if limit_s is None and timeout is None:
        return call()
    end = math.inf if limit_s is None else started + limit_s
    deadline = None if limit_s is None else Deadline(
        limit_s, end, None if checkpoint is None else os.fspath(checkpoint))

    def stop() -> TimeLimitError:
        assert deadline is not None  # (only raised past a finite end)
        err = deadline.error(n_trials, n_trials)
        return TimeLimitError(f"{err} (It was reached {what}.)", n_done=n_trials)

    return _interrupted_at(end, call, stop, timeout=timeout)


def stage_within(limit_s: float | None, started: float, call: Callable[[], _T], *, what: str,
                 checkpoint: Any = None, timeout: float | None = None) -> _T:
    """``call()``, a stage of a run that is not a simulation (e.g. a comparison's model
    training, before or between its simulations), inside the run's ``time_limit`` of
    ``limit_s`` seconds since ``started`` (a ``time.monotonic()`` reading; None: no limit).

    Nothing left: ``call`` does not start. It is interrupted at the limit where it can be
    (SIGALRM, in the main thread of a POSIX process), and a call that returns past it is
    discarded: a run never finishes past its limit (twelfth new-user pass, R8, R9).

    ``timeout`` (seconds; None: none) also bounds ``call`` by itself, as a trial's
    ``timeout`` bounds a trial (a :class:`~pacpriv.pac.engine._trial.TrialTimeoutError`).

    Raises
    ------
    TimeLimitError
        The limit was reached before or during ``what`` (e.g. ``"training the DP-SGD rows"``);
        trials finished before it are kept in ``checkpoint`` (if any); nothing was released
        or charged.
    TrialTimeoutError
        ``call`` ran past ``timeout`` before the run's limit.
    """
    if limit_s is None and timeout is None:
        return call()
    kept = (f"trials finished before it are kept in the checkpoint {os.fspath(checkpoint)!r}: "
            "run again with the same arguments (and a larger `time_limit`, or none) to resume"
            if checkpoint is not None else "run again with a larger `time_limit` (or none)")

    def stop() -> TimeLimitError:
        return TimeLimitError(
            f"the run reached its time limit (`time_limit` {limit_s:g} s) while {what}, and "
            f"stopped; {kept}. Nothing was released or charged.", n_done=0)

    end = math.inf if limit_s is None else started + limit_s
    return _interrupted_at(end, call, stop, timeout=timeout)


def _interrupted_at(end: float, call: Callable[[], _T],
                    stop: Callable[[], TimeLimitError], *, timeout: float | None = None) -> _T:
    """``call()`` started only before ``end`` (``time.monotonic()`` seconds), interrupted at
    it where it can be, and discarded when it returns past it (``stop()`` is raised); with a
    ``timeout``, also interrupted (discarded) after that many seconds of its own
    (:class:`~pacpriv.pac.engine._trial.TrialTimeoutError`)."""
    tic = time.monotonic()
    left = end - tic
    if left <= 0:
        raise stop()
    own = math.inf if timeout is None else float(timeout)
    alarm = _Alarm(min(left, own))

    def past() -> BaseException | None:  # the run's limit first, then the call's own
        now = time.monotonic()
        if now > end or (alarm.fired and left <= own):
            return stop()
        if alarm.fired or now - tic > own:
            return TrialTimeoutError(f"the call exceeded timeout={timeout} s")
        return None

    try:
        with alarm:
            out = call()
    except Exception:
        late = past()  # whatever the call made of the interrupt
        if late is not None:
            raise late from None
        raise
    late = past()
    if late is not None:
        raise late
    return out
