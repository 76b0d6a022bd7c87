"""Keep a user's mechanism from breaking pacpriv itself: its output, its exits, its workers.

Three guards, used wherever pacpriv runs user code (:func:`pacpriv.pac.engine._mechanism.
call_mechanism` and the engine's workers):

* :func:`output_to_stderr` -- while a mechanism runs, what it prints goes to standard error, so
  pacpriv's own standard output (``--json``, a table) stays intact. Python's ``sys.stdout`` is
  swapped for ``sys.stderr`` and, where the process has a real file descriptor 1, that
  descriptor is pointed at descriptor 2 as well, so a C extension's ``printf`` or a child
  process is redirected too. The swap is reference-counted under a lock: threads of one process
  (the threading backend) share one swap, undone when the last of them leaves.
* :func:`interrupt_marker` / :func:`interrupted_since` -- tell a ``KeyboardInterrupt`` that comes
  from a real ``SIGINT`` (the user pressed Ctrl-C: the run must stop) from one that the
  mechanism raised itself (a bug in the mechanism: a :class:`~pacpriv.exceptions.MechanismError`
  naming the trial). While a mechanism runs in the main thread under Python's default SIGINT
  handler, a handler that counts signals and then raises ``KeyboardInterrupt`` exactly as the
  default does is installed; a ``KeyboardInterrupt`` with no signal counted during the call is
  the mechanism's own. Outside the main thread no signal can raise one, so it is always the
  mechanism's.
* :func:`guard_parent` -- a process worker (loky, multiprocessing) exits when the process that
  started it dies, even while a trial is running: loky's workers only notice a dead parent when
  they next read their task queue, so a long trial would otherwise keep running, orphaned,
  holding its memory. On Linux the kernel delivers ``SIGKILL`` to the worker when its parent
  dies (``prctl(PR_SET_PDEATHSIG)``); everywhere, a daemon thread polls ``os.getppid()``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Iterator

__all__ = ["guard_parent", "interrupt_marker", "interrupted_since", "output_to_stderr"]

_lock = threading.RLock()
_depth = 0
_saved_stdout = None
_saved_fd: int | None = None


def _stdout_fd() -> int | None:
    """1 when ``sys.__stdout__`` and ``sys.__stderr__`` are the process's descriptors 1 and 2."""
    try:
        if sys.__stdout__ is None or sys.__stderr__ is None:
            return None
        if sys.__stdout__.fileno() != 1 or sys.__stderr__.fileno() != 2:
            return None
        os.fstat(1), os.fstat(2)
    except (AttributeError, OSError, ValueError):
        return None
    return 1


def _flush(stream) -> None:
    with contextlib.suppress(Exception):
        stream.flush()


@contextlib.contextmanager
def output_to_stderr() -> Iterator[None]:
    """Send standard output to standard error while the block runs (see the module docstring).

    Re-entrant and thread-safe (a counter under a lock: nested blocks and concurrent threads
    share one redirection); the original ``sys.stdout`` and descriptor 1 come back when the last
    block ends, whatever it raised.
    """
    global _depth, _saved_stdout, _saved_fd
    with _lock:
        if _depth == 0:
            _saved_stdout = sys.stdout
            _flush(sys.stdout)
            fd = _stdout_fd()
            if fd is not None:
                with contextlib.suppress(OSError):
                    _flush(sys.__stdout__)
                    _saved_fd = os.dup(fd)
                    os.dup2(2, fd)
            sys.stdout = sys.stderr
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _flush(sys.stdout)
                if _saved_fd is not None:
                    with contextlib.suppress(OSError):
                        _flush(sys.__stdout__)
                        os.dup2(_saved_fd, 1)
                        os.close(_saved_fd)
                    _saved_fd = None
                sys.stdout = _saved_stdout
                _saved_stdout = None


# -- interrupts ---------------------------------------------------------------------------

_sigints = 0


def _counting_handler(signum, frame):
    """Count the signal, then do what Python's default SIGINT handler does."""
    global _sigints
    _sigints += 1
    raise KeyboardInterrupt


@contextlib.contextmanager
def interrupt_marker() -> Iterator[int | None]:
    """While the block runs, count SIGINTs; yields the count at entry, or None where no
    signal can raise ``KeyboardInterrupt`` in this thread (then any is the code's own).

    Installed only in the main thread over Python's default handler (a custom handler, an
    ignored or default-action SIGINT is left alone), and restored after the block.
    """
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    try:
        current = signal.getsignal(signal.SIGINT)
    except (ValueError, OSError):  # pragma: no cover - no signals on this platform
        yield None
        return
    if current is _counting_handler:  # nested: the outer block restores
        yield _sigints
        return
    if current is not signal.default_int_handler:
        # SIG_IGN / SIG_DFL: no KeyboardInterrupt from a signal; a custom handler: it may raise
        # one, so count it as the user's (never turn a real interrupt into a mechanism error)
        yield None if current in (signal.SIG_IGN, signal.SIG_DFL, None) else -1
        return
    signal.signal(signal.SIGINT, _counting_handler)
    try:
        yield _sigints
    finally:
        signal.signal(signal.SIGINT, current)


def swallowed_since(marker: int | None) -> bool:
    """Whether a SIGINT counted since ``marker`` arrived while code ran that then returned
    normally: the code caught the ``KeyboardInterrupt`` itself (scikit-learn's MLP does, and
    finishes with a model cut short), so the Ctrl-C would be lost."""
    return marker is not None and marker >= 0 and _sigints != marker


def interrupted_since(marker: int | None) -> bool:
    """Whether a SIGINT arrived since :func:`interrupt_marker` yielded ``marker``."""
    if marker is None:
        return False
    return marker < 0 or _sigints != marker


# -- process workers ----------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_POLL_S = 0.25
_guarded_parent: int | None = None


def _set_pdeathsig() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no prctl: the watchdog remains
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def _watch(parent_pid: int) -> None:
    import time

    while True:
        time.sleep(_POLL_S)
        if os.getppid() != parent_pid:
            os._exit(70)  # EX_SOFTWARE: the parent is gone, nobody will read our results


def guard_parent(parent_pid: int | None, *, kernel_signal: bool) -> None:
    """In a process worker of ``parent_pid``: exit as soon as that process dies (idempotent).

    Does nothing in the parent itself, in a process that is not a direct child of a live
    ``parent_pid`` (a nested pool) or when ``parent_pid`` is None; exits at once when
    ``parent_pid`` is already dead (the worker was orphaned while it started up).
    ``kernel_signal`` also asks the Linux kernel for ``SIGKILL`` at the parent's death
    (``PR_SET_PDEATHSIG``); the parent passes it only when it dispatches from its main thread,
    because the kernel sends it when the *thread* that started the worker ends.
    """
    global _guarded_parent
    if parent_pid is None or os.getpid() == parent_pid or _guarded_parent == parent_pid:
        return
    if os.getppid() != parent_pid:
        if not _alive(parent_pid):  # orphaned before the first task: nobody wants its result
            os._exit(70)
        return  # not a direct child (a nested pool): its own parent watches it
    _guarded_parent = parent_pid
    if kernel_signal:
        _set_pdeathsig()
        if os.getppid() != parent_pid:  # died between the checks: the signal will not come
            os._exit(70)
    threading.Thread(target=_watch, args=(parent_pid,), name="pacpriv-parent-watch",
                     daemon=True).start()


# -- Ctrl-C reaches the parent only ---------------------------------------------------------

_spawns_patched = False


def _without_sigint(spawn):
    """``spawn`` called with SIGINT blocked in the calling thread: the child inherits the
    blocked signal across ``fork``/``exec``, so a Ctrl-C (sent by the terminal to the whole
    process group) never interrupts a worker, not even while its interpreter starts (where
    no handler of ours could run: "Fatal Python error: init_import_site" and a traceback)."""
    @functools.wraps(spawn)
    def spawn_without_sigint(*args, **kwargs):
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            return spawn(*args, **kwargs)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return spawn_without_sigint


def keep_ctrl_c_in_the_parent() -> None:
    """Start loky's workers and resource tracker with SIGINT blocked (idempotent).

    The parent alone handles a Ctrl-C: it stops the run and shuts its workers down
    (``pacpriv.cli`` prints one line and exits 130); workers are tied to its life
    (:func:`guard_parent`). A blocked SIGINT in the parent's spawning thread is delivered to
    another thread, or when the spawn returns: none is lost. POSIX only (elsewhere a no-op).
    """
    global _spawns_patched
    if _spawns_patched or not hasattr(signal, "pthread_sigmask"):
        return
    try:
        from joblib.externals.loky.backend import fork_exec, resource_tracker
    except ImportError:  # pragma: no cover - joblib without loky
        return
    fork_exec.fork_exec = _without_sigint(fork_exec.fork_exec)
    if hasattr(resource_tracker, "spawnv_passfds"):
        resource_tracker.spawnv_passfds = _without_sigint(resource_tracker.spawnv_passfds)
    _spawns_patched = True
