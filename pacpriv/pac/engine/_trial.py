"""Worker side of the engine: run a contiguous batch of trials and check every output.

A worker receives a :class:`TrialTask` (mechanism, pool, sampler, root seed...) and a
range ``[start, stop)`` of trial indices. It recomputes each trial's mask and generator
from the root seed (nothing per-trial is shipped), runs the mechanism, and checks the
output like user input. It never raises for a mechanism failure: it returns the trials
finished so far plus a :class:`TrialFailure`, and the parent raises
:class:`~pacpriv.exceptions.MechanismError` chained ``from`` the original exception. This
keeps the cause, the trial index and the seed intact across process boundaries (loky,
Dask) and lets the parent checkpoint the finished part of the batch first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import pickle
import random
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cloudpickle
import numpy as np

from pacpriv._random import GLOBAL_STREAM, MECHANISM_STREAM, seed_to_dict, stream_seed, trial_seed
from pacpriv.exceptions import WITHHELD_NOTE
from pacpriv.pac.engine._isolation import guard_parent, output_to_stderr
from pacpriv.pac.engine._mechanism import (
    InvalidOutput,
    MechanismExit,
    as_float64,
    call_mechanism,
    check_output,
    subset_pool,
)
from pacpriv.pac.samplers import Sampler

__all__ = ["BatchResult", "TrialFailure", "TrialTask", "TrialTimeoutError", "run_batch",
           "run_batch_into"]


class TrialTimeoutError(TimeoutError):
    """A trial ran longer than the engine's per-trial ``timeout``."""


@dataclass(frozen=True)
class TrialTask:
    """Everything a worker needs, identical for every batch of one simulation."""

    mechanism: Callable
    mechanism_name: str
    pool: Any  # ndarray or tuple of ndarrays sharing the first axis
    n_records: int
    sampler: Sampler
    root: np.random.SeedSequence
    pass_rng: bool
    retries: int
    timeout: float | None
    output_dtype: np.dtype
    #: float64 output of trial 0; outputs are stored as ``output - reference`` (below float64).
    reference: np.ndarray | None = None
    #: Seed the global ``numpy.random`` and ``random`` states from the trial seed (fork backend).
    reseed_global: bool = False
    #: pid of the process that dispatches the trials, for process backends: its workers exit
    #: when it dies (:func:`pacpriv.pac.engine._isolation.guard_parent`); None otherwise.
    parent_pid: int | None = None
    #: Whether the parent dispatches from its main thread (then the kernel's parent-death
    #: signal is safe to ask for).
    kernel_signal: bool = False
    #: Trials per canonical block of an ensemble mechanism (``run_block``); 0: one call per
    #: trial (:mod:`pacpriv.pac.engine._blocks`).
    block_size: int = 0
    #: Trials of the simulation (the last canonical block ends there).
    n_trials: int = 0
    #: Wall-clock end (``time.time()`` seconds) of the run's ``time_limit``, or None: a batch
    #: starts no trial past it, a trial running at it is interrupted there where a trial can be
    #: (:class:`_Alarm`), and the batch returns its finished trials (``BatchResult.stopped``).
    deadline: float | None = None

    @functools.cached_property
    def _payload(self) -> bytes:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        del fields["pool"]
        return cloudpickle.dumps(fields)

    def __reduce__(self):
        # Everything but the pool goes through cloudpickle on every backend, so a mechanism
        # that loky can ship (by value, e.g. defined in __main__ or registered with
        # cloudpickle.register_pickle_by_value) ships to Dask too. The pool stays outside,
        # for joblib's automatic memmapping of large arrays.
        return (_rebuild_task, (self._payload, self.pool))


#: Said of a failed trial whose subset was empty (the engine's own masks).
EMPTY_SUBSET_NOTE = " on an empty subset (the sampler included no record in this trial)"


def _rebuild_task(payload: bytes, pool: Any) -> TrialTask:
    return TrialTask(pool=pool, **pickle.loads(payload))


@dataclass(frozen=True)
class TrialFailure:
    """A trial that failed ``retries + 1`` times; ``cause`` is the last exception."""

    trial_index: int
    seed: dict
    message: str
    cause: BaseException | None
    remote_traceback: str


@dataclass(frozen=True)
class BatchResult:
    """Outputs of trials ``start .. start + len(outputs) - 1`` of the batch ``[start, stop)``.

    Fewer than ``stop - start`` rows means trial ``start + len(outputs)`` failed (``failure``).
    """

    start: int
    stop: int
    outputs: np.ndarray  # (k, d) output_dtype
    masks: np.ndarray  # (k, n_records) bool
    failure: TrialFailure | None
    elapsed_s: float
    #: Whether ``outputs`` and ``masks`` are the store's own rows, written in place
    #: (:func:`run_batch_into`): the parent then only marks them done.
    in_place: bool = False
    #: Whether the batch stopped at ``TrialTask.deadline`` (``time_limit``) before its last
    #: trial: the rows are its finished trials, and no trial failed.
    stopped: bool = False


def _stored(arr: np.ndarray, task: TrialTask) -> np.ndarray:
    """A checked float64 output in the storage form: ``output - reference``, cast, finite.

    ``task.reference`` (float64, set below float64 storage) is subtracted in float64 before
    the cast, so the rounding error is relative to the spread across trials, not to the offset
    the output sits on.
    """
    if task.output_dtype == np.float64:
        return arr
    if task.reference is not None:
        if task.reference.shape != arr.shape:
            raise InvalidOutput(
                f"output has shape {arr.shape} but trial 0 returned {task.reference.shape}"
            )
        arr = arr - task.reference
    return check_output(arr, None, task.output_dtype)


#: Longest timer armed for a trial (seconds, about 31 years): a longer timeout is no limit.
_MAX_TIMER_S = 1e9


class _Alarm:
    """Interrupt a trial after ``timeout`` seconds with SIGALRM where that is possible.

    Possible in the main thread of a POSIX process (n_jobs=1, loky and multiprocessing
    workers). Elsewhere (threading backend, Dask worker threads) a trial cannot be
    interrupted; the caller checks its duration after it returns. A previously armed timer
    (e.g. pytest-timeout) is restored with its remaining time.
    """

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.fired = False
        self.active = (
            timeout is not None
            and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
        )

    def __enter__(self) -> _Alarm:
        if self.active and self.timeout is not None:
            # the timer takes (0, ~1e9 s]: 0 would disarm it, beyond it a timeval overflows
            # (an OverflowError blamed on the mechanism at --timeout 1e300 in 0.3)
            delay = min(max(float(self.timeout), 1e-6), _MAX_TIMER_S)
            # read before arming: at a tiny timeout the interrupt can arrive inside
            # ``__enter__`` (no ``__exit__`` follows), so it disarms and restores itself
            self._old_timer = signal.getitimer(signal.ITIMER_REAL)
            self._old_handler = signal.signal(signal.SIGALRM, self._fire)
            self._start = time.monotonic()
            try:
                signal.setitimer(signal.ITIMER_REAL, delay)
            except BaseException:
                self.__exit__()
                raise
        return self

    def _fire(self, signum, frame):
        self.fired = True
        raise TrialTimeoutError(f"trial exceeded timeout={self.timeout} s (interrupted)")

    def __exit__(self, *exc) -> None:
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            old = self._old_handler  # None if it was installed outside Python
            signal.signal(signal.SIGALRM, signal.SIG_DFL if old is None else old)
            delay, interval = self._old_timer
            if delay > 0:
                left = delay - (time.monotonic() - self._start)
                signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), interval)


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a RuntimeError carrying its repr."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__qualname__}: {exc} (original exception not picklable)")
    return exc




@contextlib.contextmanager
def _global_state_from(seed: np.random.SeedSequence | None):
    """Seed ``numpy.random``'s and ``random``'s global states from ``seed``; restore after.

    Used under the fork-based backend, where every worker inherits the parent's global state
    and a mechanism drawing from it would repeat the same draws in every worker.
    """
    if seed is None:
        yield
        return
    np_state, py_state = np.random.get_state(), random.getstate()  # noqa: NPY002
    words = seed.generate_state(4)
    np.random.seed(words)  # noqa: NPY002
    random.seed(int.from_bytes(words.tobytes(), "little"))
    try:
        yield
    finally:
        np.random.set_state(np_state)  # noqa: NPY002
        random.setstate(py_state)


class DeadlineReached(TrialTimeoutError):
    """A trial was interrupted at the run's ``time_limit`` (``TrialTask.deadline``), not at its
    own ``timeout``: the batch stops there and returns its finished trials."""


def _past(task: TrialTask) -> bool:
    """Whether the run's deadline (``time_limit``) has passed."""
    return task.deadline is not None and time.time() >= task.deadline


def _alarm_s(task: TrialTask, seconds: float | None) -> tuple[float | None, bool]:
    """``(seconds until the interrupt, whether it is the deadline's)`` for a call that may run
    ``seconds`` (its ``timeout``; None: no limit): the run's deadline comes first when sooner."""
    if task.deadline is None:
        return seconds, False
    left = max(task.deadline - time.time(), 1e-3)
    return (left, True) if seconds is None or left < seconds else (seconds, False)


@contextlib.contextmanager
def _interrupted(task: TrialTask, seconds: float | None):
    """Run the body under :class:`_Alarm` at its ``timeout`` ``seconds`` or the run's deadline,
    whichever comes first; interrupted at the deadline, whatever the mechanism made of the
    interrupt (caught, wrapped), it raises :class:`DeadlineReached`."""
    delay, by_deadline = _alarm_s(task, seconds)
    alarm = _Alarm(delay)
    try:
        with alarm:
            yield
    except Exception as err:
        if by_deadline and (alarm.fired or isinstance(err, TrialTimeoutError)) and _past(task):
            raise DeadlineReached("stopped at the run's time limit") from err
        raise


def _run_trial(task: TrialTask, index: int, mask: np.ndarray, dim: int | None) -> np.ndarray:
    subset = subset_pool(task.pool, mask)

    def call():
        seed = stream_seed(task.root, index, MECHANISM_STREAM) if task.pass_rng else None
        reseed = stream_seed(task.root, index, GLOBAL_STREAM) if task.reseed_global else None
        with _global_state_from(reseed):
            return call_mechanism(task.mechanism, subset, rng=seed, takes_rng=task.pass_rng)

    if task.timeout is None and task.deadline is None:
        return _stored(check_output(call(), dim), task)
    tic = time.monotonic()
    with _interrupted(task, task.timeout):
        value = call()
    # a trial that finished is kept, even past the deadline (where it could not be interrupted)
    if task.timeout is not None and time.monotonic() - tic > task.timeout:
        raise TrialTimeoutError(
            f"trial took {time.monotonic() - tic:.3g} s > timeout={task.timeout} s"
        )
    return _stored(check_output(value, dim), task)


def run_batch(task: TrialTask, start: int, stop: int, dim: int | None) -> BatchResult:
    """Run trials ``start .. stop-1``; stop at the first trial that fails all its attempts.

    In a process worker this first ties the worker's life to the parent's
    (:func:`~pacpriv.pac.engine._isolation.guard_parent`); what the batch prints (the sampler
    and the mechanism are user code) goes to standard error.
    """
    guard_parent(task.parent_pid, kernel_signal=task.kernel_signal)
    with output_to_stderr():
        return _run_batch(task, start, stop, dim)


def _run_batch(task: TrialTask, start: int, stop: int, dim: int | None) -> BatchResult:
    tic = time.perf_counter()
    if task.block_size:
        block_rows, kept, fail = _run_blocks(task, start, stop, dim)
        done = len(block_rows)
        outputs = np.asarray(block_rows, dtype=task.output_dtype).reshape(done,
                                                                          -1 if done else 0)
        block_masks = (np.asarray(kept, dtype=bool) if kept
                       else np.empty((0, task.n_records), dtype=bool))
        return BatchResult(start, stop, outputs, block_masks, fail, time.perf_counter() - tic,
                           stopped=fail is None and done < stop - start)
    n = stop - start
    masks = np.empty((n, task.n_records), dtype=bool)
    rows: np.ndarray | None = None  # (n, d), made by the first finished trial
    done = 0
    failure = None
    for k, index in enumerate(range(start, stop)):
        # the trial runs on the drawn mask itself, kept alive until the next draw (not on its
        # copy in the batch array): freeing it before the call let glibc trim the heap under
        # the mechanism's temporaries, which were then faulted in again every trial (measured:
        # 0.9 s of system time per 128 trials of a count sketch over 10⁶ records)
        mask = task.sampler.trial_mask(task.n_records, root=task.root, index=index)
        masks[k] = mask
        if not (isinstance(mask, np.ndarray) and mask.dtype == bool and mask.ndim == 1):
            mask = masks[k]  # what the trial runs on is always the stored boolean mask
        out, failure = _attempts(task, index, mask, dim)
        if out is None:  # failed after its last attempt
            break
        if rows is None:
            rows = np.empty((n, out.shape[0]), dtype=task.output_dtype)
        rows[done] = out  # a copy: a mechanism may return a buffer it reuses
        done += 1
        dim = out.shape[0]
    if rows is None:
        rows = np.empty((0, 0), dtype=task.output_dtype)
    return BatchResult(start, stop, rows[:done], masks[:done], failure,
                       time.perf_counter() - tic, stopped=failure is None and done < n)


def run_batch_into(task: TrialTask, start: int, stop: int, store) -> BatchResult:
    """:func:`run_batch` in this process, writing each trial's mask and output straight into
    the rows of ``store`` (an :class:`~pacpriv.pac.engine._storage.OutputStore`): the
    sequential path. No batch arrays and no copies of them: each mask is drawn into its stored
    row (:meth:`~pacpriv.pac.samplers.Sampler.trial_mask_into`) and the trial runs on that row;
    each checked output is written once into the preallocated ``(n_trials, d)`` outputs. The
    rows are those :func:`run_batch` returns, bit for bit (the mask, the seeds and the checks
    are the same); the result's arrays are views of the store (``in_place``).
    """
    if task.block_size:  # the block contract draws a block's masks together
        return run_batch(task, start, stop, store.dim)
    with output_to_stderr():
        return _run_batch_into(task, start, stop, store)


def _run_batch_into(task: TrialTask, start: int, stop: int, store) -> BatchResult:
    tic = time.perf_counter()
    dim = store.dim
    failure = None
    done = 0
    for index in range(start, stop):
        # before the first stored trial the store has no rows yet: that one mask gets its own
        mask = (np.empty(task.n_records, dtype=bool) if store.masks is None
                else store.masks[index])
        task.sampler.trial_mask_into(mask, root=task.root, index=index)
        out, failure = _attempts(task, index, mask, dim)
        if out is None:  # failed after its last attempt
            break
        if store.outputs is None:  # the first trial sizes (and allocates) the store
            store.put(index, out[None, :], mask[None, :])
        else:
            store.outputs[index] = out
        dim = out.shape[0]
        done += 1
    if done:
        outputs, masks = store.outputs[start:start + done], store.masks[start:start + done]
    else:
        outputs = np.empty((0, 0), dtype=task.output_dtype)
        masks = np.empty((0, task.n_records), dtype=bool)
    return BatchResult(start, stop, outputs, masks, failure, time.perf_counter() - tic,
                       in_place=True, stopped=failure is None and done < stop - start)


def _attempts(task: TrialTask, index: int, mask: np.ndarray,
              dim: int | None) -> tuple[np.ndarray | None, TrialFailure | None]:
    """Trial ``index`` on ``mask``, retried up to ``task.retries`` times with the same seed:
    ``(output, None)``, ``(None, failure)`` after the last attempt, or ``(None, None)`` when
    the run's deadline (``time_limit``) stopped it."""
    for attempt in range(task.retries + 1):
        if _past(task):  # the run's time limit: no trial (or retry) starts past it
            return None, None
        try:
            return _run_trial(task, index, mask, dim), None
        except DeadlineReached:
            return None, None
        except Exception as err:
            if attempt == task.retries:
                # (a mechanism whose subsets are its own, e.g. a per-record unit over a
                # stand-in pool, marks itself: the engine's mask says nothing about them)
                empty = not (np.any(mask) or getattr(task.mechanism, "stand_in_pool", False))
                return None, _failure(task, index, attempt + 1, err, empty=empty)
    raise AssertionError("unreachable: the last attempt returns")


def _failure(task: TrialTask, index: int, attempts: int, err: Exception, *,
             empty: bool = False) -> TrialFailure:
    seed = seed_to_dict(trial_seed(task.root, index))
    tried = f" after {attempts} attempts with the same seed" if attempts > 1 else ""
    if empty:  # the sampler's doing, likely (a mean of nothing is NaN): say so, publicly
        tried += EMPTY_SUBSET_NOTE
    if isinstance(err, InvalidOutput):
        what = f"returned an invalid output: {err}"
        cause = err.__cause__
    elif isinstance(err, MechanismExit):
        what = err.what  # pacpriv's own words (the exit code, not a message)
        cause = err.__cause__
    elif isinstance(err, TrialTimeoutError):
        what = str(err)
        cause = err
    else:
        what = f"raised {type(err).__qualname__}"
        cause = err
    message = (
        f"Mechanism {task.mechanism_name} {what} in trial {index}{tried} "
        f"(trial seed {seed}; replay with numpy.random.SeedSequence(**seed))."
    )
    if not isinstance(err, (InvalidOutput, TrialTimeoutError, MechanismExit)) and str(err):
        message += f" {WITHHELD_NOTE}"
    return TrialFailure(
        trial_index=index,
        seed=seed,
        message=message,
        cause=None if cause is None else _portable(cause),
        remote_traceback="".join(traceback.format_exception(err)),
    )


def _run_blocks(task, start: int, stop: int, dim: int | None):
    """Trials ``start .. stop-1`` of ``task`` by canonical blocks (the block contract of
    :mod:`pacpriv.pac.engine._blocks`): ``(rows, masks, failure)``.

    Stops at the first block that fails all its attempts; ``failure`` then names its first
    trial in ``[start, stop)``.
    """
    size = task.block_size
    rows: list[np.ndarray] = []
    kept: list[np.ndarray] = []
    a = (start // size) * size
    while a < stop:
        if _past(task):  # the run's time limit: no block starts past it
            return rows, kept, None
        b = min(a + size, task.n_trials)
        index = range(a, b)
        masks = np.stack([task.sampler.trial_mask(task.n_records, root=task.root, index=i)
                          for i in index])
        seeds = [stream_seed(task.root, i, MECHANISM_STREAM) for i in index]
        failure = None
        for attempt in range(task.retries + 1):
            try:
                timeout = None if task.timeout is None else task.timeout * len(index)
                with _interrupted(task, timeout):
                    block = call_mechanism(
                        lambda pool, m=masks, s=seeds: task.mechanism.run_block(pool, m, seeds=s),
                        task.pool, rng=None, takes_rng=False)
                block = as_float64(block)  # pacpriv's cast: "not castable", not "raised"
                if block.ndim != 2 or block.shape[0] != len(index):
                    raise InvalidOutput(f"run_block returned an array of shape {block.shape} "
                                        f"for {len(index)} subsets; expected ({len(index)}, d)")
                outs = [_stored(check_output(row, dim), task) for row in block]
            except DeadlineReached:
                return rows, kept, None
            except Exception as err:
                if attempt < task.retries:
                    if _past(task):  # no retry starts past the time limit
                        return rows, kept, None
                    continue
                failure = _failure(task, max(a, start), attempt + 1, err)
            break
        if failure is not None:
            return rows, kept, failure
        for k, i in enumerate(index):
            if start <= i < stop:
                rows.append(outs[k])
                kept.append(masks[k])
        dim = outs[0].shape[0]
        a = b
    return rows, kept, None
