"""Workers are bounded in the Python API and never outlive the run (issue 25, item 1).

``run_pac(..., n_jobs=1000)`` on a 2-CPU machine used to start about 940 worker processes and
be killed for memory; after the kill the workers stayed alive. Here: the engine caps the
workers of every local backend at the usable CPUs and at what memory allows, with a warning
naming the cap (counted: no more worker processes than the cap exist); cluster backends are
not capped; a worker exits when its parent is killed (SIGKILL), interrupted (SIGINT) or stops
on an exception, even in the middle of a long trial.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

import pacpriv
from pacpriv.exceptions import MechanismError, WorkerCapWarning
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine import _resources as resources
from pacpriv.pac.engine._simulate import simulate

ROOT = Path(__file__).resolve().parents[3]
POOL = np.arange(24.0).reshape(12, 2)
FAR_ABOVE = 40  # far above the CPU count of a test machine, small enough to survive a bug


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not reaped by a container's init, does not)."""
    stat = Path(f"/proc/{pid}/stat")
    if stat.parent.parent.is_dir() and Path("/proc/self").exists():
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except (FileNotFoundError, ProcessLookupError):
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _children_running(name: str) -> list[int]:
    """Live child processes of this process whose command line contains ``name``."""
    me, out = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int(entry.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = entry.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == me and name in cmd and _alive(int(entry.name)):
            out.append(int(entry.name))
    return out


def _pid_mech(subset, *, rng, out_dir: str):
    Path(out_dir, f"{os.getpid()}.pid").touch()
    return np.asarray(subset).mean(axis=0) + rng.normal(size=2)


def _pids(out_dir: Path) -> set[int]:
    return {int(p.stem) for p in out_dir.glob("*.pid")}


# ------------------------------------------------------------------------------ the cap


@pytest.mark.parametrize("backend", ["loky", "threading"])
def test_n_jobs_far_above_the_cpus_is_capped_with_a_warning(tmp_path, backend):
    from functools import partial

    cap = resources.usable_cpus()
    mech = partial(_pid_mech, out_dir=str(tmp_path))
    with pytest.warns(WorkerCapWarning, match=rf"n_jobs={FAR_ABOVE} .* capped at {cap}: "
                      r"this process may use \d+ CPU"):
        res = simulate(mech, POOL, n_trials=24, rng=0,
                       execution=ExecutionOptions(n_jobs=FAR_ABOVE, backend=backend,
                                                  progress=False))
    assert res.n_jobs == cap
    ref = simulate(mech, POOL, n_trials=24, rng=0, execution=ExecutionOptions(progress=False))
    assert np.array_equal(res.outputs, ref.outputs)  # the cap never changes a result
    ran = _pids(tmp_path) - {os.getpid()}
    if backend == "loky":  # counted: no more worker processes than the cap were started
        assert 1 <= len(ran) <= cap
        assert len(_children_running("loky")) <= cap + 1  # + loky's resource tracker


def test_a_parallel_config_asking_for_too_many_workers_is_capped():
    from joblib import parallel_config

    cap = resources.usable_cpus()
    with parallel_config(backend="threading", n_jobs=FAR_ABOVE), \
            pytest.warns(WorkerCapWarning, match=rf"parallel_config asks for {FAR_ABOVE} "
                         rf"threading workers; capped at {cap}"):
        res = simulate(lambda s: s.sum(axis=0), POOL, n_trials=8, rng=0,
                       execution=ExecutionOptions(progress=False))
    assert res.n_jobs == cap


def test_run_pac_is_capped_like_simulate():
    cap = resources.usable_cpus()
    with pytest.warns(WorkerCapWarning, match=rf"capped at {cap}"):
        res = pacpriv.run_pac(lambda s: s.mean(axis=0) if len(s) else np.zeros(2), POOL,
                              mi_budget=0.5, n_trials=30, rng=0, rule="anisotropic",
                              release=False,
                              execution=ExecutionOptions(n_jobs=FAR_ABOVE, backend="threading",
                                                         progress=False))
    assert res.simulation.n_jobs == cap


def test_worker_processes_are_capped_by_memory():
    """A per-worker budget larger than the memory: one worker (sequential), and the warning
    names the memory, not the CPUs."""
    huge = 2**60
    with pytest.warns(WorkerCapWarning, match=r"capped at 1: about 1 worker process.* of .* "
                      r"GiB each \(worker_memory\) fit in 80% of the .* GiB of memory"):
        res = simulate(lambda s: s.sum(axis=0), POOL, n_trials=6, rng=0,
                       execution=ExecutionOptions(n_jobs=2, backend="loky", progress=False,
                                                  worker_memory=huge))
    assert (res.backend, res.n_jobs) == ("sequential", 1)


def test_worker_cap_arithmetic(monkeypatch):
    gib = 2**30
    monkeypatch.setattr(resources, "available_memory", lambda: 10 * gib)
    monkeypatch.setattr(resources, "process_rss", lambda: 3 * gib)
    # processes: floor(0.8 * 10 / 3) = 2 by memory, under 64 CPUs
    cap, why = resources.worker_cap("loky", cpus=64)
    assert cap == 2 and "3 GiB each (this process's resident memory" in why
    assert resources.worker_cap("multiprocessing", cpus=64, worker_memory=gib)[0] == 8
    assert resources.worker_cap(None, cpus=1)[0] == 1  # joblib's default is loky
    # threads share the memory: CPUs only
    assert resources.worker_cap("threading", cpus=64)[0] == 64
    # clusters are not ours to cap
    assert resources.worker_cap("dask", cpus=1) == (None, "")
    assert resources.worker_cap("ray", cpus=1) == (None, "")


def test_worker_memory_is_validated():
    with pytest.raises(ValueError, match=r"`worker_memory` must be an integer in \[1, inf\)"):
        ExecutionOptions(worker_memory=0)
    with pytest.raises(TypeError, match="`worker_memory` must be an integer"):
        ExecutionOptions(worker_memory=1.5)


def test_the_cli_cap_is_the_librarys(monkeypatch):
    from pacpriv.cli import _resources as cli_resources

    monkeypatch.setattr(resources, "available_memory", lambda: 10 * 2**30)
    monkeypatch.setattr(resources, "process_rss", lambda: 4 * 2**30)
    monkeypatch.setattr(cli_resources, "available_cpus", lambda: 16)
    n, note = cli_resources.effective_n_jobs(16, "loky")
    assert n == 2 and "--n-jobs 16 capped at 2: about 2 worker process(es)" in note
    assert cli_resources.effective_n_jobs(16, "threading") == (16, "")


# ------------------------------------------------------------------ workers die with the run

_PARENT = """
import os, pathlib, sys, time
import numpy as np
from pacpriv.pac.engine import ExecutionOptions, simulate

OUT = pathlib.Path(sys.argv[1])

def slow(subset):
    (OUT / f"{os.getpid()}.pid").touch()
    end = time.time() + 120
    while time.time() < end:  # busy in Python: a trial that never reads the task queue
        sum(range(1000))
    return subset.mean(axis=0)

if __name__ == "__main__":
    simulate(slow, np.ones((10, 2)), n_trials=8, rng=0,
             execution=ExecutionOptions(n_jobs=2, backend=sys.argv[2], progress=False))
"""


def _start_parent(tmp_path: Path, backend: str) -> tuple[subprocess.Popen, set[int]]:
    script = tmp_path / "parent.py"
    script.write_text(_PARENT)
    out = tmp_path / "pids"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(script), str(out), backend], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while len(_pids(out)) < 2:  # both workers are inside a trial
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the parent did not start two trials: {proc.stderr.read()[-2000:]!r}")
        time.sleep(0.1)
    return proc, _pids(out)


def _wait_dead(pids: set[int], seconds: float) -> set[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = {p for p in pids if _alive(p)}
        if not left:
            return left
        time.sleep(0.1)
    return {p for p in pids if _alive(p)}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["loky", "multiprocessing"])
def test_kill_9_of_the_parent_leaves_no_worker_alive(tmp_path, backend):
    proc, workers = _start_parent(tmp_path, backend)
    assert proc.pid not in workers
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    left = _wait_dead(workers, 5.0)
    for pid in left:  # never leave them behind, even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert not left, f"workers {sorted(left)} outlived their SIGKILLed parent"


@pytest.mark.slow
def test_sigint_to_the_parent_stops_it_and_its_workers(tmp_path):
    proc, workers = _start_parent(tmp_path, "loky")
    os.kill(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode != 0 and b"KeyboardInterrupt" in proc.stderr.read()
    left = _wait_dead(workers, 5.0)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"workers {sorted(left)} outlived their interrupted parent"


def _first_fails(subset, *, out_dir: str):
    """The first trial waits for a second one to start, then raises; the others run long."""
    d = Path(out_dir)
    (d / f"{os.getpid()}.pid").touch()
    try:
        os.close(os.open(d / "first", os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        (d / f"{os.getpid()}.long").touch()
        end = time.time() + 120
        while time.time() < end:
            sum(range(1000))
        return np.asarray(subset).mean(axis=0)
    deadline = time.time() + 60
    while not list(d.glob("*.long")) and time.time() < deadline:
        time.sleep(0.05)
    raise ValueError("first trial fails")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["loky", "multiprocessing"])
def test_an_exception_stops_the_other_workers(tmp_path, backend):
    """The run fails at once (not after the long trials) and the worker running a long trial
    is stopped, on a streaming backend (loky) and a list backend (multiprocessing)."""
    from functools import partial

    tic = time.monotonic()
    with pytest.raises(MechanismError, match=r"raised ValueError in trial"):
        simulate(partial(_first_fails, out_dir=str(tmp_path)), np.ones((10, 2)), n_trials=6,
                 rng=0, execution=ExecutionOptions(n_jobs=2, backend=backend, progress=False,
                                                   batch_size=1))
    assert time.monotonic() - tic < 90  # a long trial takes 120 s
    long_running = {int(p.stem) for p in tmp_path.glob("*.long")}
    assert long_running and os.getpid() not in long_running
    left = _wait_dead(long_running, 10.0)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"workers {sorted(left)} kept running after the run failed"


# worker processes cannot import this test module (pytest's importlib mode): ship it by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])
