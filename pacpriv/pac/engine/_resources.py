"""How many workers this machine can run: usable CPUs and available memory.

The engine never starts more local workers than :func:`worker_cap` allows, whatever ``n_jobs``
(or an enclosing ``joblib.parallel_config``) asks for, and warns with the cap and its reason
(:class:`~pacpriv.exceptions.WorkerCapWarning`); the CLI prints the same cap as a note.

* CPUs: the process's affinity mask (``os.sched_getaffinity``) and the cgroup CPU quota
  (``joblib.cpu_count``, which reads it), whichever is smaller. More workers than CPUs only add
  memory and contention.
* Memory (process backends only: threads share one address space): each worker process is
  estimated at ``worker_memory`` bytes, by default the parent's resident set size (a worker
  imports the same libraries and receives the same pool and mechanism); at most
  ``0.8 * available // worker_memory`` workers start, where ``available`` is the kernel's
  ``MemAvailable`` or the cgroup's free memory (``memory.max - memory.current``), whichever is
  smaller.

Cluster backends (Dask, Ray) run their workers elsewhere: they are not capped here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["LOCAL_BACKENDS", "available_memory", "process_rss", "usable_cpus", "worker_cap"]

#: Backends whose workers are processes on this machine (memory and CPUs bound them).
PROCESS_BACKENDS = ("loky", "multiprocessing")
#: Backends whose workers are threads of this process (CPUs bound them).
THREAD_BACKENDS = ("threading",)
#: Backends whose workers live on this machine; None is joblib's default (loky).
LOCAL_BACKENDS = (None, "sequential", *PROCESS_BACKENDS, *THREAD_BACKENDS)

#: Share of the available memory that worker processes may take together.
MEMORY_SHARE = 0.8


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask and the cgroup CPU quota (>= 1)."""
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


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_available() -> int | None:
    for limit_path, usage_path in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
         "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            limit = Path(limit_path).read_text().strip()
            usage = Path(usage_path).read_text().strip()
        except OSError:
            continue
        if limit.isdigit() and usage.isdigit() and 0 < int(limit) < 2**62:
            return max(0, int(limit) - int(usage))
    return None


def available_memory() -> int | None:
    """Bytes that new processes may still take: ``MemAvailable`` and the cgroup's free
    memory, whichever is smaller; None where neither is known."""
    known = [v for v in (_meminfo_available(), _cgroup_available()) if v is not None]
    return min(known) if known else None


def process_rss() -> int | None:
    """Resident set size of this process in bytes (None where unknown)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak) * (1 if sys.platform == "darwin" else 1024)  # macOS: bytes; else KiB
    except (ImportError, OSError, ValueError):  # pragma: no cover
        return None


def _gib(n: float) -> str:
    return f"{n / 2**30:.2g} GiB"


def worker_cap(backend: str | None, *, worker_memory: int | None = None,
               cpus: int | None = None) -> tuple[int | None, str]:
    """``(most workers, reason)`` for ``backend`` on this machine; ``(None, "")`` for a cluster
    backend (not capped here).

    Parameters
    ----------
    backend : str or None
        Short backend name ("loky", "multiprocessing", "threading", "sequential", "dask", ...);
        None is joblib's default, loky.
    worker_memory : int or None
        Bytes one worker process needs (None: this process's resident set size).
    cpus : int or None
        Usable CPUs (None: :func:`usable_cpus`).

    Returns
    -------
    cap : int or None
        At least 1.
    reason : str
        Why the cap is what it is (names the CPUs or the memory), for a warning or a note.
    """
    name = "loky" if backend is None else backend
    if name not in LOCAL_BACKENDS:
        return None, ""
    cpus = usable_cpus() if cpus is None else int(cpus)
    cap = max(1, cpus)
    reason = (f"this process may use {cpus} CPU(s) (affinity mask and cgroup quota); more "
              "workers would only add memory and contention")
    if name in PROCESS_BACKENDS:
        per_worker = worker_memory if worker_memory is not None else process_rss()
        free = available_memory()
        if per_worker and free is not None:
            by_memory = max(1, int(MEMORY_SHARE * free // per_worker))
            if by_memory < cap:
                source = ("worker_memory" if worker_memory is not None
                          else "this process's resident memory; set "
                          "ExecutionOptions(worker_memory=...) if a worker needs less")
                cap = by_memory
                reason = (f"about {by_memory} worker process(es) of {_gib(per_worker)} each "
                          f"({source}) fit in {int(MEMORY_SHARE * 100)}% of the "
                          f"{_gib(free)} of memory available")
    return cap, reason
