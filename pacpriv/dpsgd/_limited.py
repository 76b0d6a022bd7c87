"""Run one function in a fresh process under a time limit (the comparator rows).

A third-party accountant stuck in C or numpy code cannot be interrupted inside the process; a
separate process can always be killed. Every wait here is bounded: the limit counts the
process's start, the child is killed at the limit, and its answer is read only once it is
gone. A child killed at its limit holds no lock its parent waits on: it takes tqdm locks of its
own (issue 35: ``dpsgd compare --comparator-timeout 0.001`` hung after the first row when a
killed child held tqdm's multiprocessing write lock).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import cloudpickle

__all__ = ["MISSING", "run_limited"]

#: Note of a row whose optional package is missing.
MISSING = "not installed (pip install pacpriv[compare])"

# fork is cheap (no re-import) and needs no ``if __name__ == "__main__"`` guard in scripts;
# spawn elsewhere (fork is unsafe on macOS and absent on Windows).
_START_METHOD = "fork" if sys.platform.startswith("linux") else "spawn"


#: memory a comparator row may add (fraction of physical memory): a time limit alone let
#: dp-accounting's PLD grow by ~0.35 GB/s, to 10 GB in 30 s at M = 1e6, E = 1e4
_MEMORY_FRACTION = 0.25


def _cap_memory(fraction: float | None = None) -> None:
    """Limit this process's data segment (heap and private mappings, ``RLIMIT_DATA``) to its
    current size plus ``fraction`` of physical memory; beyond it allocations fail
    (``MemoryError``: the row says so) instead of exhausting the machine."""
    try:
        import resource

        pages, page = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        with open("/proc/self/status", encoding="ascii") as fh:
            data_kb = next(int(line.split()[1]) for line in fh if line.startswith("VmData:"))
    except (ImportError, OSError, ValueError, StopIteration, AttributeError):
        return  # not Linux: no cap (the time limit still applies)
    share = _MEMORY_FRACTION if fraction is None else fraction
    cap = data_kb * 1024 + int(share * pages * page)
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft == resource.RLIM_INFINITY or cap < soft:
        resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))


def _own_tqdm_locks() -> None:
    """Give this (forked) process tqdm write locks of its own.

    tqdm's default write lock holds a ``multiprocessing.RLock`` shared with every forked
    child, and a thread lock copied in whatever state the parent's threads left it. A child
    killed at its time limit while it holds the shared lock (its own bar, e.g. the exact
    row's, takes it) never releases it, and the parent's bar then waits forever (issue 35:
    ``dpsgd compare --comparator-timeout 0.001`` stuck after the first row).
    """
    import threading

    try:
        from tqdm import std
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return
    std.TqdmDefaultWriteLock.mp_lock = None  # type: ignore[attr-defined]
    std.TqdmDefaultWriteLock.th_lock = threading.RLock()  # type: ignore[assignment]
    classes = [std.tqdm]
    while classes:
        cls = classes.pop()
        if cls is std.tqdm or "_lock" in vars(cls):
            cls.set_lock(std.TqdmDefaultWriteLock())
        classes.extend(cls.__subclasses__())


def _child(conn, payload: bytes) -> None:  # runs in the comparator's own process
    try:
        _own_tqdm_locks()
        _cap_memory()
        fn, args = cloudpickle.loads(payload)
        value = fn(*args)
    except ImportError as exc:
        conn.send(("missing", f"{MISSING}: {exc}"))
    except MemoryError:
        conn.send(("failed", "failed here: stopped at its memory limit (a quarter of this "
                             "machine's memory)"))
    except BaseException as exc:  # reported as the row's note
        msg = " ".join(str(exc).split())[:160]
        conn.send(("failed", f"failed here: {type(exc).__name__}: {msg}"))
    else:
        conn.send(("ok", value))
    finally:
        conn.close()


def run_limited(fn: Callable, args: tuple, timeout: float | None) -> tuple[str, Any, float]:
    """Run ``fn(*args)`` in a fresh process, killed after ``timeout`` s.

    Returns ``(status, value or note, wall seconds)`` with status ``"ok"``, ``"timed out"``,
    ``"failed"`` or ``"missing"``. A third-party accountant stuck in C or numpy code cannot
    be interrupted inside the process; a separate process can always be killed.
    ``timeout=None`` runs in this process without a limit.
    """
    start = time.perf_counter()
    if timeout is None or multiprocessing.current_process().daemon:
        # (a daemonic process, e.g. a joblib worker, cannot start a child: no limit there)
        try:
            return "ok", fn(*args), time.perf_counter() - start
        except ImportError as exc:
            return "missing", f"{MISSING}: {exc}", time.perf_counter() - start
        except Exception as exc:  # a third-party accountant failed: keep the other rows
            msg = " ".join(str(exc).split())[:160]
            note = f"failed here: {type(exc).__name__}: {msg}"
            return "failed", note, time.perf_counter() - start
    deadline = start + timeout  # start-up counts against the limit
    ctx = multiprocessing.get_context(_START_METHOD)
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(  # type: ignore[attr-defined]
        target=_child, args=(sender, cloudpickle.dumps((fn, args))), daemon=True)
    ready = False
    try:
        try:
            with _ctrl_c_after_the_fork():
                proc.start()
        finally:
            sender.close()
        ready = receiver.poll(max(0.0, deadline - time.perf_counter()))
    finally:  # also on Ctrl-C: the child never outlives this call by more than the grace
        _stop(proc, _GRACE_S if ready else 0.0)
    status, value = _answer(receiver, proc, ready, timeout)
    return status, value, time.perf_counter() - start


@contextlib.contextmanager
def _ctrl_c_after_the_fork() -> Iterator[None]:
    """Hold a Ctrl-C (SIGINT) that lands while the child is forked, and deliver it after.

    CPython runs the fork's ``os.register_at_fork`` handlers (``logging``'s lock release,
    among others) as callbacks whose exceptions it prints as "Exception ignored in ..." and
    drops: a ``KeyboardInterrupt`` raised there was lost, so the run went on to its end and
    printed a traceback. Here SIGINT only records itself during the fork; the handler in
    force before is then called as if the signal came now. Only the main thread can set a
    handler: elsewhere nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        if callable(previous):
            previous(signal.SIGINT, None)
        elif previous == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)


#: seconds a child that has answered gets to exit by itself, then after a kill to be reaped
_GRACE_S = 1.0


def _stop(proc, grace: float) -> None:
    """End ``proc`` in bounded time: ``grace`` s to exit, then SIGKILL and a bounded join."""
    if grace > 0:
        proc.join(grace)
    if proc.is_alive():
        proc.kill()
        proc.join(_GRACE_S)


def _answer(receiver, proc, ready: bool, timeout: float) -> tuple[str, Any]:
    """The child's ``(status, value)`` from the pipe, read only once the child is gone.

    The answer is a few hundred bytes, well under the pipe's buffer, so the child's send
    never waits for this read; with the only writer gone, ``recv`` returns the whole message
    or raises ``EOFError`` at once: it cannot block on a message the child never finished.
    """
    try:
        if ready and not proc.is_alive():
            return receiver.recv()
        if ready:  # pragma: no cover - a child that survived SIGKILL (uninterruptible I/O)
            return "failed", "failed here: the process could not be stopped"
        return "timed out", (
            f"timed out after {timeout:g} s and was stopped (raise the limit with "
            "timeout= / --comparator-timeout)"
        )
    except (EOFError, OSError):  # the process died without answering (segfault, memory)
        return "failed", f"failed here: the process died (exit code {proc.exitcode})"
    finally:
        receiver.close()
