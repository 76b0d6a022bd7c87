"""What the machine can run, and checks of output paths (CLI helpers, no pacpriv import)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["available_cpus", "check_output_dir", "effective_n_jobs", "shutdown_workers"]

#: Backends whose workers live on this machine (``--n-jobs`` is capped at its CPUs).
LOCAL_BACKENDS = (None, "loky", "threading", "multiprocessing", "sequential")


def available_cpus() -> int:
    """CPUs this process may run on: its affinity mask when the OS has one, else
    ``joblib.cpu_count()`` (which also honours cgroup quotas)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = 0
    try:
        from joblib import cpu_count

        quota = int(cpu_count())
    except Exception:  # pragma: no cover - joblib is a dependency
        quota = os.cpu_count() or 1
    return max(1, min(n, quota) if n else quota)


def effective_n_jobs(n_jobs: int | None, backend: str | None) -> tuple[int | None, str]:
    """``(n_jobs to use, note)``: ``None`` (sequential) stays ``1``; ``-1`` means all
    available CPUs and ``-k`` all but ``k − 1``; more workers than CPUs on a local backend
    are capped (with a note). Remote backends (dask, ray) are passed through."""
    if n_jobs is None:
        return 1, ""
    if backend not in LOCAL_BACKENDS:
        return n_jobs, ""
    cpus = available_cpus()
    wanted = n_jobs if n_jobs > 0 else max(1, cpus + 1 + n_jobs)
    if wanted > cpus:
        return cpus, (f"--n-jobs {n_jobs} capped at {cpus}: this process may use {cpus} "
                      "CPU(s); more workers would only add memory and contention")
    return wanted, ""


def check_output_dir(text: str, flag: str) -> Path:
    """Check that ``text`` is, or can be created as, a writable directory; ``ValueError``
    naming the flag and the reason otherwise. Creates nothing (the report writer does), so a
    run refused later leaves no empty folder; runs before any work starts."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{flag} {text!r} is an existing file; give a directory path")
    probe = path
    while not probe.exists():  # the nearest existing ancestor must take the new folder
        probe = probe.parent
    try:
        if not probe.is_dir():
            raise NotADirectoryError(20, f"{str(probe)!r} is a file")
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as err:
        raise ValueError(f"{flag} {text!r} is not a writable directory "
                         f"({err.strerror or err})") from None
    return path


def shutdown_workers() -> None:
    """Stop joblib's reusable loky workers now (after Ctrl-C), so no worker or semaphore is
    left behind for the resource tracker to complain about."""
    try:
        from joblib.externals.loky import reusable_executor

        executor = reusable_executor._executor  # None when no worker was ever started
        if executor is not None:
            executor.shutdown(wait=True, kill_workers=True)
    except Exception:  # best effort on the way out
        pass
