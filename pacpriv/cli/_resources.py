"""What the machine can run, and checks of output paths (CLI helpers).

The caps themselves live in the library (:mod:`pacpriv.pac.engine._resources`, which the engine
applies to every run); here they become the CLI's one-line notes.
"""

from __future__ import annotations

from pathlib import Path

from pacpriv import _files
from pacpriv.pac.engine._resources import LOCAL_BACKENDS, usable_cpus, worker_cap

__all__ = ["available_cpus", "check_output_dir", "effective_n_jobs", "shutdown_workers"]


def available_cpus() -> int:
    """CPUs this process may run on (affinity mask, cgroup quota): the library's count."""
    return usable_cpus()


def effective_n_jobs(n_jobs: int | None, backend: str | None) -> tuple[int | None, str]:
    """``(n_jobs to use, note)``: ``None`` (sequential) stays ``1``; ``-1`` means all
    available CPUs and ``-k`` all but ``k − 1``; more workers than a local backend can run
    (CPUs, and memory for worker processes) are capped, with a note naming the cap. Remote
    backends (dask, ray) are passed through."""
    if n_jobs is None:
        return 1, ""
    if backend not in LOCAL_BACKENDS:
        return n_jobs, ""
    cpus = available_cpus()
    wanted = n_jobs if n_jobs > 0 else max(1, cpus + 1 + n_jobs)
    cap, reason = worker_cap(backend, cpus=cpus)
    if cap is not None and wanted > cap:
        return cap, f"--n-jobs {n_jobs} capped at {cap}: {reason}"
    return wanted, ""


def check_output_dir(text: str, flag: str) -> Path:
    """Check that ``text`` is, or can be created as, a writable directory (the library's
    :func:`pacpriv._files.check_output_dir`, naming ``flag``). Creates nothing (the report
    writer does), so a run refused later leaves no empty folder; runs before any work."""
    return _files.check_output_dir(text, flag)


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
