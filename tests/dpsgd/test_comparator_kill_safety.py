"""A comparator row killed at its time limit never leaves the parent waiting (issue 35).

``dpsgd compare --comparator-timeout 0.001`` hung after the first row, intermittently: the
exact row's child took tqdm's write lock (a multiprocessing lock shared with the forked
parent) for its own bar, was killed while holding it, and the parent's bar then waited for
it forever. Each scenario runs in a fresh interpreter under an outer timeout, so a hang
fails the test instead of the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [os.getcwd(), *filter(None, [os.environ.get("PYTHONPATH")])])}


def _run(script: str, timeout: float = 90.0) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=_ENV,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:  # the hang this file guards against
        pytest.fail(f"hung (killed after {timeout:g} s); stderr: {exc.stderr!r}")


def test_a_child_killed_holding_the_bar_lock_does_not_block_the_parent():
    """Deterministic form of the race: the child holds tqdm's lock when it is killed."""
    done = _run("""
        import time
        from tqdm.auto import tqdm
        from pacpriv.dpsgd.comparators import _run_limited

        def hold_the_bar_lock():
            tqdm.get_lock().acquire()  # what a child's own bar does while it draws
            time.sleep(60)

        with tqdm(total=2, desc="parent") as bar:
            status, note, wall = _run_limited(hold_the_bar_lock, (), 0.5)
            bar.update(1)
            bar.write(f"row: {status}")
            status, value, _ = _run_limited(abs, (-3,), 30.0)
            bar.update(1)
            bar.write(f"row: {status} {value}")
        print("finished")
    """)  # bar.write goes to stdout
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["row: timed out", "row: ok 3", "finished"]


def test_tiny_timeouts_always_finish_with_timed_out_rows():
    """Rows × tiny timeout, repeated, in three interpreters at once: every run finishes and
    every limited row says "timed out" (or answered), none is left running."""
    script = """
        import multiprocessing
        from pacpriv.dpsgd.comparators import compare_accountants

        for timeout in [1e-3, 1e-9, 0.01, 1e-3, 0.05, 1e-3]:
            t = compare_accountants(steps_per_epoch=100, epochs=10, noise_multiplier=1.0,
                                    methods=("chi-square", "exact", "poisson-pld", "ckp"),
                                    timeout=timeout, progress=True)
            status = {r.method.split()[0]: r.status for r in t.rows}
            assert status["chi-square"] == status["CKP"] == "ok", status
            assert status["exact,"] in ("timed out", "ok"), status
            assert status["Poisson"] in ("timed out", "ok", "missing"), status
        assert multiprocessing.active_children() == []
        print("finished")
    """
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], env=_ENV,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    except subprocess.TimeoutExpired:
        pytest.fail("a compare run with tiny timeouts hung (outer limit 120 s)")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
        assert out.strip() == "finished"
        assert "timed out" in err
