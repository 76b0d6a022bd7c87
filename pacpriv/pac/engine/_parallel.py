"""Parent side of the engine: dispatch batches of trials through joblib and collect them.

One joblib task is one contiguous batch of trials (:func:`pacpriv.pac.engine._trial.run_batch`).
Batch sizes never change results (trial ``i`` depends only on the root seed and ``i``), so
``batch_size="auto"`` adapts them freely: the first batches hold one trial, later ones
aim at ~0.2 s of work each, capped so every worker gets at least four batches.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import pickle
import re
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

from pacpriv._optional import import_optional
from pacpriv._random import seed_to_dict, trial_seed
from pacpriv.exceptions import TIMEOUT_ADVICE, MechanismError, WorkerCapWarning
from pacpriv.pac.engine._heap import raise_heap_thresholds
from pacpriv.pac.engine._isolation import keep_ctrl_c_in_the_parent
from pacpriv.pac.engine._limit import Deadline
from pacpriv.pac.engine._resources import worker_cap
from pacpriv.pac.engine._stall import StallNotice
from pacpriv.pac.engine._trial import (
    BatchResult,
    TrialFailure,
    TrialTask,
    run_batch,
    run_batch_into,
)

__all__ = ["BACKEND_NAMES", "plan_workers", "resolve_backend", "run_pending"]

_TARGET_BATCH_S = 0.2

#: joblib backend class -> short name reported in results.
BACKEND_NAMES = {
    "SequentialBackend": "sequential",
    "LokyBackend": "loky",
    "ThreadingBackend": "threading",
    "MultiprocessingBackend": "multiprocessing",
    "DaskDistributedBackend": "dask",
    "RayBackend": "ray",
}


class BatchFailed(Exception):
    """A batch stopped at a failing trial, raised (instead of returned) where joblib cannot
    stream results (the multiprocessing backend): joblib then stops the other tasks at once
    rather than running the whole round. Carries the batch's :class:`BatchResult`."""

    def __init__(self, result: BatchResult) -> None:
        super().__init__(f"trials {result.start}..{result.stop - 1}: a trial failed")
        self.result = result

    def __reduce__(self):
        return (BatchFailed, (self.result,))


def run_batch_or_raise(task, start, stop, dim) -> BatchResult:
    """:func:`run_batch`, raising :class:`BatchFailed` for a batch with a failed trial."""
    result = run_batch(task, start, stop, dim)
    if result.failure is not None:
        raise BatchFailed(result)
    return result


class _Batches:
    """Thread-safe iterator of ``delayed(run_batch)`` calls over the pending ranges
    (``(function, args, kwargs)``, joblib's form of a call); ``in_process``: calls of
    :func:`run_batch_into`, which write into ``store`` itself (the sequential path)."""

    def __init__(self, task, store, ranges, n_workers, batch_size, *, streamed=True,
                 in_process=False) -> None:
        self._func = (run_batch_into if in_process
                      else run_batch if streamed else run_batch_or_raise)
        self.in_process = in_process
        self.task, self.store = task, store
        self.fixed = None if batch_size == "auto" else int(batch_size)
        n_pending = sum(b - a for a, b in ranges)
        self.cap = max(1, math.ceil(n_pending / (4 * n_workers))) if n_workers > 1 else n_pending
        self.trial_s: float | None = None
        self.in_flight: set[tuple[int, int]] = set()
        self._lock = threading.Lock()
        self._ranges = iter(ranges)
        self._current: tuple[int, int] | None = None

    def _size(self) -> int:
        if self.fixed is not None:
            return self.fixed
        if self.trial_s is None:
            return 1
        return max(1, min(self.cap, int(_TARGET_BATCH_S / max(self.trial_s, 1e-7))))

    def observe(self, result: BatchResult) -> None:
        with self._lock:
            self.in_flight.discard((result.start, result.stop))
            n = max(len(result.outputs), 1)
            per_trial = result.elapsed_s / n
            self.trial_s = per_trial if self.trial_s is None else 0.5 * (self.trial_s + per_trial)

    def __iter__(self) -> Iterator:
        return self

    def __next__(self):
        with self._lock:
            if self._current is None or self._current[0] >= self._current[1]:
                self._current = next(self._ranges)  # StopIteration ends the run
            a, b = self._current
            stop = min(b, a + self._size())
            block = self.task.block_size
            if block and stop < b:  # end batches on canonical block boundaries
                stop = min(b, -(-stop // block) * block)
            self._current = (stop, b)
            self.in_flight.add((a, stop))
        last = self.store if self.in_process else self.store.dim
        return self._func, (self.task, a, stop, last), {}


def _resolve_backend(backend):
    if backend == "ray":
        import_optional("ray.util.joblib", "backend='ray'", extra="ray",
                        hint="pip install 'pacpriv[ray]' (and ray.init()).").register_ray()
    return backend


def _make_parallel(n_jobs, backend):
    """``Parallel`` for ``backend`` (a name goes through ``parallel_config``, which also
    registers external backends such as "dask"); None keeps the active configuration."""
    from joblib import Parallel, parallel_config

    keep_ctrl_c_in_the_parent()  # loky's workers start with SIGINT blocked
    if backend == "ray" and n_jobs is None:
        n_jobs = -1  # a cluster backend: None means every CPU the Ray runtime offers
    kwargs = {"n_jobs": n_jobs, "prefer": "processes", "batch_size": 1}
    if isinstance(backend, str):
        context = parallel_config(backend=_resolve_backend(backend))
    else:
        context = contextlib.nullcontext()
        if backend is not None:
            kwargs["backend"] = backend
    with context:
        try:
            return Parallel(return_as="generator_unordered", **kwargs)
        except ValueError as err:  # e.g. the multiprocessing backend cannot stream results
            if "return_as" not in str(err):
                raise
            return Parallel(return_as="list", **kwargs)


def _in_this_process(batches):
    """Run ``batches``' calls one after the other in this process, as joblib does for one
    worker (without importing it): a generator of their results."""
    for func, args, kwargs in batches:
        yield func(*args, **kwargs)


def _plainly_sequential(n_jobs, backend) -> bool:
    """Whether the trials run in this process without asking joblib: one job and no backend
    named, and joblib not imported, so no ``joblib.parallel_config`` can be active (joblib's
    answer would be the sequential backend; its import costs about 0.07 s)."""
    return backend is None and n_jobs in (None, 1) and "joblib" not in sys.modules


def _crash_types() -> tuple[type[BaseException], ...]:
    from concurrent.futures.process import BrokenProcessPool

    from joblib.externals.loky.process_executor import TerminatedWorkerError

    types: list[type[BaseException]] = [TerminatedWorkerError, BrokenProcessPool]
    # a Dask crash needs Dask running, which has imported its scheduler: never import
    # `distributed` (0.2 s, and dask) for a run that does not use it
    scheduler = sys.modules.get("distributed.scheduler")
    if scheduler is not None and hasattr(scheduler, "KilledWorker"):
        types.append(scheduler.KilledWorker)
    return tuple(types)


def _ranges_text(ranges: list[tuple[int, int]], limit: int = 6) -> str:
    parts = [f"{a}" if b - a == 1 else f"{a}-{b - 1}" for a, b in sorted(ranges)[:limit]]
    return ", ".join(parts) + (", ..." if len(ranges) > limit else "")


def _failure_error(failure: TrialFailure) -> MechanismError:
    err = MechanismError(failure.message, trial_index=failure.trial_index, seed=failure.seed)
    if failure.cause is not None and hasattr(failure.cause, "add_note"):
        failure.cause.add_note(f"Traceback in the worker:\n{failure.remote_traceback}")
    return err


def _crash_error(task: TrialTask, err: BaseException, suspects, store) -> MechanismError:
    suspects = sorted(suspects) or store.missing_ranges()
    first = suspects[0][0]
    seed = seed_to_dict(trial_seed(task.root, first))
    return MechanismError(
        f"A worker died ({type(err).__name__}: {err}) while running trials "
        f"{_ranges_text(suspects)} of mechanism {task.mechanism_name}; the mechanism may "
        f"have crashed the process (os._exit, segfault, out of memory) in one of them. First "
        f"suspect: trial {first} (trial seed {seed}). {store.n_done} finished trials are "
        "kept (in the checkpoint, if any): rerun with the same arguments to resume.",
        trial_index=first,
        seed=seed,
    )


#: Seconds without a finished trial before the first "no trial finished" line (then doubling).
STALL_WARN_S = 60.0
#: Backends whose trials run in threads of a process: a signal cannot interrupt them.
THREAD_WORKERS = ("threading", "dask")


class _Watchdog(StallNotice):
    """One line (a :class:`~pacpriv.exceptions.StallWarning`) when no trial has finished for
    :data:`STALL_WARN_S` seconds (then after twice as long, and so on): a hanging mechanism
    without ``timeout`` otherwise leaves the bar at 0 without a word (issue 35, item 5)."""

    def __init__(self, store, timeout: float | None, *, threads: bool = False) -> None:
        super().__init__(STALL_WARN_S, name="pacpriv-watchdog", poll_s=1.0)
        self.store, self.timeout, self.threads = store, timeout, threads
        self.last = time.monotonic()
        self.done = 0

    def tick(self, k: int) -> None:
        self.last = time.monotonic()
        self.done += k

    def idle(self) -> float:
        return time.monotonic() - self.last

    def text(self, idle: float) -> str:
        # a warning, so that the CLI lists it with the others; printed at once by the CLI
        # and by Python's default warning display
        hint = (TIMEOUT_ADVICE if not self.timeout else
                f"timeout={self.timeout:g} s cannot interrupt a trial on thread workers"
                if self.threads else f"each trial is bounded by timeout={self.timeout:g} s")
        return (f"no trial has finished for {idle:.0f} s ({self.done} finished in this round "
                f"so far); a trial may hang: {hint}, or press Ctrl-C to stop.")


#: Seconds of a run with its bar hidden (``progress=False``) before the first "N of M trials"
#: line (then at each doubling): --no-progress hides bars, not how long a run takes.
QUIET_NOTE_S = 5.0


class _QuietProgress(StallNotice):
    """With the bar hidden: one line after :data:`QUIET_NOTE_S` s, then at each doubling,
    with the trials done and about how long is left (twelfth new-user pass, AC3)."""

    def __init__(self, store) -> None:
        super().__init__(QUIET_NOTE_S, name="pacpriv-quiet-progress")
        self.store, self.before = store, store.n_done

    def text(self, idle: float) -> str:
        done, total = self.store.n_done, len(self.store.done)
        rate = (done - self.before) / idle if idle > 0 else 0.0
        left = (f"about {(total - done) / rate / 60.0:.2g} min left" if rate > 0
                else "none finished yet")
        return (f"{done} of {total} trials finished after {idle:.0f} s ({left}; no progress "
                "bar was asked for), or press Ctrl-C to stop.")


def _quiet_progress(bar, store):
    """:class:`_QuietProgress` when ``bar`` shows nothing (not a tqdm bar, or a disabled
    one), else nothing."""
    shown = hasattr(bar, "total") and not getattr(bar, "disable", False)
    return contextlib.nullcontext() if shown else _QuietProgress(store)


#: Seconds past ``time_limit`` the parent waits for the workers' batches (which stop at the
#: limit themselves) before it stops waiting: workers still starting, or a trial that cannot
#: be interrupted.
DEADLINE_GRACE_S = 0.5


class _StopWaiting(Exception):
    """The parent's wait for batches reached the time limit plus :data:`DEADLINE_GRACE_S`."""


class _ParentDeadline:
    """Stop the parent's wait for worker batches at ``deadline`` + :data:`DEADLINE_GRACE_S`
    (SIGALRM, in a POSIX main thread; elsewhere the batches' own stop is all). The interrupt
    is raised only while the parent waits (:meth:`waiting`), never while it stores a batch, so
    the checkpoint and the count of finished trials agree. A timer armed before (e.g.
    pytest-timeout) is restored with its time left."""

    def __init__(self, deadline: Deadline | None) -> None:
        self.deadline, self.due, self._waiting = deadline, False, False
        self.active = (deadline is not None and hasattr(signal, "setitimer")
                       and threading.current_thread() is threading.main_thread())

    def __enter__(self) -> _ParentDeadline:
        if self.active and self.deadline is not None:
            delay = max(self.deadline.end + DEADLINE_GRACE_S - time.monotonic(), 1e-3)
            self._old_timer = signal.getitimer(signal.ITIMER_REAL)
            self._old_handler = signal.signal(signal.SIGALRM, self._fire)
            self._start = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, delay)
        return self

    def _fire(self, signum, frame) -> None:
        self.due = True
        if self._waiting:
            raise _StopWaiting

    @contextlib.contextmanager
    def waiting(self):
        """The parent waits for the next batch here: the deadline may interrupt it."""
        if self.due:
            raise _StopWaiting
        self._waiting = True
        try:
            yield
        finally:
            self._waiting = False

    def __exit__(self, *exc) -> None:
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            old = self._old_handler
            signal.signal(signal.SIGALRM, signal.SIG_DFL if old is None else old)
            delay, interval = self._old_timer
            if delay > 0:
                left = delay - (time.monotonic() - self._start)
                signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), interval)


def _one_round(parallel, batches: _Batches, store, checkpoint, bar, deadline=None) -> None:
    # in this process the trials stop at the deadline themselves (_trial._interrupted)
    stop = _ParentDeadline(None if batches.in_process else deadline)
    threads = not batches.in_process and _describe(parallel)[0] in THREAD_WORKERS
    with _Watchdog(store, batches.task.timeout, threads=threads) as watchdog, stop, \
            _quiet_progress(bar, store):
        gen: Any = None
        try:
            try:
                with stop.waiting():  # list mode runs every batch in parallel()
                    gen = parallel(batches)
            except BatchFailed as failed:  # list mode: joblib has stopped the other tasks
                gen = iter([failed.result])
            _collect(gen, batches, store, checkpoint, bar, watchdog, deadline, stop)
        except _StopWaiting:
            assert deadline is not None
            raise deadline.error(store.n_done, store.n_trials) from None
        finally:
            if hasattr(gen, "close"):
                with warnings.catch_warnings():  # joblib warns about cancelled tasks on close
                    warnings.simplefilter("ignore")
                    gen.close()


def _collect(gen, batches: _Batches, store, checkpoint, bar, watchdog: _Watchdog,
             deadline: Deadline | None = None, stop: _ParentDeadline | None = None) -> None:
    """Store each finished batch (checkpointed, counted on the bar); raise at a failure, or
    past the ``deadline`` of ``time_limit`` while trials remain (:mod:`._limit`)."""
    results = iter(gen)
    while True:
        with stop.waiting() if stop is not None else contextlib.nullcontext():
            result = next(results, None)
        if result is None:
            break
        watchdog.tick(len(result.outputs))
        k = len(result.outputs)
        if k:
            if store.dim is not None and result.outputs.shape[1] != store.dim:
                index = result.start
                raise MechanismError(
                    f"Mechanism {batches.task.mechanism_name} returned shape "
                    f"({result.outputs.shape[1]},) in trial {index}, but earlier trials "
                    f"returned ({store.dim},); outputs must have the same length d in "
                    f"every trial.",
                    trial_index=index,
                    seed=seed_to_dict(trial_seed(batches.task.root, index)),
                )
            if result.in_place:  # the trials wrote their own rows
                store.mark_done(result.start, k)
            else:
                store.put(result.start, result.outputs, result.masks)
            if checkpoint is not None:
                checkpoint.save(result.start, result.outputs, result.masks)
            bar.update(k)
        batches.observe(result)
        if (deadline is not None and store.n_done < store.n_trials
                and (result.stopped or deadline.stops(result.failure))):
            _keep_finished(results, batches, store, checkpoint, bar)
            raise deadline.error(store.n_done, store.n_trials)
        if result.failure is not None:
            error = _failure_error(result.failure)
            raise error from result.failure.cause


def _keep_finished(gen, batches: _Batches, store, checkpoint, bar) -> None:
    """At the time limit: store the batches that have already returned (a list: joblib's
    multiprocessing backend returns every batch at once); a stream's batches in flight are
    cancelled instead (they stop at the deadline themselves)."""
    if hasattr(gen, "close"):
        return
    for result in gen:
        k = len(result.outputs)
        if k and not result.in_place and (store.dim is None
                                          or result.outputs.shape[1] == store.dim):
            store.put(result.start, result.outputs, result.masks)
            if checkpoint is not None:
                checkpoint.save(result.start, result.outputs, result.masks)
            bar.update(k)


def _describe(parallel) -> tuple[str, int]:
    n_workers = max(1, int(parallel._backend.effective_n_jobs(parallel.n_jobs)))
    cls_name = type(parallel._backend).__name__
    name = "sequential" if n_workers == 1 else BACKEND_NAMES.get(cls_name, cls_name)
    return name, n_workers


def resolve_backend(n_jobs, backend) -> tuple[str, int]:
    """``(backend name, n_workers)`` that :func:`run_pending` will use (starts no worker)."""
    return _describe(_make_parallel(n_jobs, backend))


def plan_workers(n_jobs, backend, *, worker_memory: int | None = None,
                 stacklevel: int = 2) -> tuple[int | None, str, int]:
    """``(n_jobs to pass, backend name, n_workers)``, capped for this machine (starts nothing).

    ``n_jobs`` and ``backend`` are resolved as :func:`run_pending` resolves them (an enclosing
    ``joblib.parallel_config`` included); on a local backend, more workers than
    :func:`~pacpriv.pac.engine._resources.worker_cap` allows are cut to the cap with a
    :class:`~pacpriv.exceptions.WorkerCapWarning` that names it and why.
    """
    if _plainly_sequential(n_jobs, backend):
        return n_jobs, "sequential", 1
    parallel = _make_parallel(n_jobs, backend)
    name, n_workers = _describe(parallel)
    full = BACKEND_NAMES.get(type(parallel._backend).__name__)
    if n_workers > 1 and full is not None:
        cap, reason = worker_cap(full, worker_memory=worker_memory)
        if cap is not None and n_workers > cap:
            asked = "n_jobs=None under joblib.parallel_config" if n_jobs is None else \
                f"n_jobs={n_jobs!r}"
            warnings.warn(f"{asked} asks for {n_workers} {full} workers; capped at {cap}: "
                          f"{reason}.", WorkerCapWarning, stacklevel=stacklevel + 1)
            n_jobs = cap
            name, n_workers = _describe(_make_parallel(n_jobs, backend))
    return n_jobs, name, n_workers


def run_pending(task, store, checkpoint, *, n_jobs, backend, batch_size, bar, retries,
                deadline: Deadline | None = None):
    """Run every unfinished trial of ``store``; return ``(backend_name, n_workers)``.

    Past ``deadline`` (``time_limit``) the run stops with a
    :class:`~pacpriv.exceptions.TimeLimitError`; finished trials stay in ``checkpoint``. Each
    batch carries the deadline (``TrialTask.deadline``) and returns its finished trials when it
    passes, however many trials it holds.

    A worker crash (loky ``TerminatedWorkerError``, Dask ``KilledWorker``) reruns the
    unfinished trials up to ``retries`` more times, then raises ``MechanismError`` naming
    the batches that were running.
    """
    name, n_workers = "sequential", 1
    ranges = store.missing_ranges()
    if not ranges:
        return name, n_workers
    if deadline is not None:  # every batch stops at the limit itself (_trial._past)
        task = dataclasses.replace(task, deadline=deadline.wall_end())
    parallel = None if _plainly_sequential(n_jobs, backend) else _make_parallel(n_jobs, backend)
    if parallel is None or _describe(parallel)[1] == 1:
        # one worker: joblib would run the batches here one after the other; they run here,
        # writing masks and outputs straight into the store (no worker to crash)
        batches = _Batches(task, store, ranges, 1, batch_size, in_process=True)
        # glibc: the mechanism's freed temporaries stay on the heap for the next trial,
        # instead of being given back and faulted in again (pac/engine/_heap.py)
        raise_heap_thresholds()
        _one_round(_in_this_process, batches, store, checkpoint, bar, deadline)
        return name, n_workers
    crash_types = _crash_types()
    for attempt in range(retries + 1):
        ranges = store.missing_ranges()
        if not ranges:
            break
        parallel = _make_parallel(n_jobs, backend)
        name, n_workers = _describe(parallel)
        batches = _Batches(task, store, ranges, n_workers, batch_size,
                           streamed=parallel.return_generator)
        try:
            _one_round(parallel, batches, store, checkpoint, bar, deadline)
        except crash_types as err:
            if attempt == retries:
                raise _crash_error(task, err, batches.in_flight, store) from err
        except pickle.PicklingError as err:  # the task cannot reach a worker process
            why = re.search(r"cannot pickle '[\w.]+' object", f"{err} {err.__cause__}")
            raise TypeError(
                "the mechanism (with its sampler and what its closure holds) cannot be sent to "
                f"worker processes ({why.group(0) if why else 'not picklable'}): run in this "
                "process with n_jobs=1, or keep locks, open files and connections out of it"
            ) from err
    return name, n_workers
