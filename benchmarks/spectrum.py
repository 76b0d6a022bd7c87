"""Benchmark: output spectrum of a huge float32 output matrix read from an np.memmap.

Issue 13 item 6: for ``d = 1e6`` and 1000 trials, :func:`pacpriv.pac.spectrum._covariance.
estimate_output_spectrum` must take at most 1.5x the bare BLAS Gram product of the same matrix,
measured in the same run, with peak memory about that of the output matrix or less.

Generates ``n_trials x d`` float32 outputs (rank-``r`` signal + isotropic noise + offset) into a
file in a temporary directory (written with ``tofile``, so generation leaves no mapped pages),
then runs each phase in a fresh subprocess, ``--repeat`` times interleaved (the minimum counts;
wall-clock and process CPU seconds are both shown: on a loaded machine the CPU time is the
steadier measure of the work, with ``--threads 1`` for a like-for-like count):

* ``gram32``    the baseline: the bare BLAS Gram product ``Σ_blocks B B^T`` of the same matrix,
  float32 column blocks of 16 MiB sliced from the memmap, ``B @ B.T`` (OpenBLAS ``ssyrk``),
  summed in float64;
* ``spectrum``  :func:`~pacpriv.pac.spectrum.estimate_output_spectrum` with its defaults (at
  this size: float32 Gram with float64 centring, means and variances, lazy eigenvector basis);
* ``release``   the spectrum, then ``calibrate_noise`` (square-root rule) and one ``privatize``
  draw through the lazy basis (the time reported is that of calibration + draw only);
* ``float64``   the spectrum with ``gram_dtype=float64`` (``dsyrk``; for reference);
* ``dense``     the spectrum with ``gram_dtype=float64, eigenvectors="dense"`` (the previous
  behaviour: float64 Gram plus the ``n·k·d`` back-projection of the eigenvectors).

Memory, as a ratio to the output matrix size: ``tracemalloc`` peak (numpy heap allocations)
and the growth of the subprocess's resident-set high-water mark (``VmHWM`` minus ``VmRSS`` at
the start of the phase; includes BLAS/LAPACK workspaces and memmap pages still mapped).

Usage::

    python benchmarks/spectrum.py            # quick: d = 1e5, n_trials = 1000 (< 1 min)
    python benchmarks/spectrum.py --full     # d = 1e6, n_trials = 1000 (4 GB file, minutes)
    python benchmarks/spectrum.py --phases gram32,spectrum,dense --repeat 3 --threads 1

``--threads N`` sets ``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS`` for every phase (on a shared,
loaded machine one thread per phase gives the steadiest ratio).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

PHASES = ("gram32", "spectrum", "release", "float64", "dense")
DEFAULT_PHASES = "gram32,spectrum,release"


def generate(path: Path, n: int, d: int, rank: int, seed: int = 0) -> None:
    """Write float32 rank-``rank`` signal + noise rows to ``path`` block by block."""
    rng = np.random.default_rng(seed)
    basis = rng.standard_normal((rank, d), dtype=np.float32)
    scales = np.geomspace(10.0, 1.0, rank).astype(np.float32)[:, None]
    basis *= scales
    rows = max(1, (64 << 20) // (4 * d))
    with open(path, "wb") as fh:
        for start in range(0, n, rows):
            m = min(rows, n - start)
            block = rng.standard_normal((m, rank), dtype=np.float32) @ basis
            block += 0.1 * rng.standard_normal((m, d), dtype=np.float32) + 1.0
            block.astype(np.float32).tofile(fh)


def _proc_status(key: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _rss_now() -> int:
    """Current resident set (Linux /proc), else the high-water mark from getrusage."""
    now = _proc_status("VmRSS")
    return now if now is not None else _maxrss_bytes()


def _maxrss_bytes() -> int:
    hwm = _proc_status("VmHWM")
    if hwm is not None:
        return hwm
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _bare_gram(outputs: np.ndarray, dtype) -> float:
    """``Σ_blocks B B^T`` over 16 MiB column blocks of ``dtype``; returns its trace."""
    from pacpriv.pac.spectrum._moments import release_mapped_pages

    n, d = outputs.shape
    step = max(1, (16 << 20) // (np.dtype(dtype).itemsize * n))
    gram = np.zeros((n, n))
    for start in range(0, d, step):
        block = np.array(outputs[:, start : start + step], dtype=dtype)
        release_mapped_pages(outputs)
        gram += block @ block.T
    return float(np.trace(gram))


def measure(phase: str, path: str, n: int, d: int) -> dict:
    """Run one phase in this process; return time and memory."""
    from pacpriv.pac.noise import calibrate_noise
    from pacpriv.pac.release import privatize
    from pacpriv.pac.spectrum import estimate_output_spectrum

    outputs = np.memmap(path, dtype=np.float32, mode="r", shape=(n, d))
    options = {"float64": {"gram_dtype": np.float64},
               "dense": {"gram_dtype": np.float64, "eigenvectors": "dense"}}.get(phase, {})
    rss0 = _rss_now()
    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    extra = {}
    if phase == "gram32":
        extra["trace"] = _bare_gram(outputs, np.float32)
    else:
        spec = estimate_output_spectrum(outputs, **options)
        extra.update(k=spec.n_components, top_eigenvalue=float(spec.eigenvalues[0]),
                     gram=spec.gram_dtype, lazy=type(spec.eigenvectors).__name__ != "ndarray")
        if phase == "release":
            t0, c0 = time.perf_counter(), time.process_time()
            plan = calibrate_noise(spec, mi_budget=0.5)
            privatize(np.asarray(spec.mean), plan, rng=0)
            extra["mi_bound"] = plan.mi_bound
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"phase": phase, "seconds": seconds, "cpu": cpu, "traced_peak": peak,
            "rss_growth": max(0, _maxrss_bytes() - rss0), **extra}


def main(argv=None) -> int:
    """Generate the data, run every phase in a subprocess and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="d = 1e6 (the issue's size)")
    ap.add_argument("--n-trials", type=int, default=1000)
    ap.add_argument("--dim", type=int, default=None, help="override d")
    ap.add_argument("--rank", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=1, help="interleaved runs per phase (min)")
    ap.add_argument("--phases", default=DEFAULT_PHASES, help=f"comma list of {PHASES}")
    ap.add_argument("--tmpdir", default=None, help="where the memmap file goes")
    ap.add_argument("--threads", type=int, default=None, help="BLAS threads per phase")
    ap.add_argument("--_measure", nargs=4, metavar=("PHASE", "PATH", "N", "D"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._measure:
        phase, path, n, d = args._measure
        print(json.dumps(measure(phase, path, int(n), int(d))))
        return 0
    phases = args.phases.split(",")
    unknown = sorted(set(phases) - set(PHASES))
    if unknown:
        ap.error(f"unknown phases {unknown}; choose from {PHASES}")
    n = args.n_trials
    d = args.dim or (1_000_000 if args.full else 100_000)
    env = dict(os.environ)
    if args.threads:
        for key in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[key] = str(args.threads)
    out_bytes = 4 * n * d
    runs: dict[str, list[dict]] = {p: [] for p in phases}
    with tempfile.TemporaryDirectory(dir=args.tmpdir) as tmp:
        path = Path(tmp) / "outputs.f32"
        t0 = time.perf_counter()
        generate(path, n, d, args.rank)
        print(f"generated {n} x {d} float32 outputs ({out_bytes / 2**30:.2f} GiB) in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        for _ in range(args.repeat):
            for phase in phases:
                proc = subprocess.run(
                    [sys.executable, __file__, "--_measure", phase, str(path), str(n), str(d)],
                    capture_output=True, text=True, check=True, env=env,
                )
                runs[phase].append(json.loads(proc.stdout.strip().splitlines()[-1]))
                print(f"  {phase}: {runs[phase][-1]['seconds']:.1f} s", flush=True)
    rows = [min(r, key=lambda x: x["seconds"]) for r in runs.values()]
    cpus = {p: min(x["cpu"] for x in r) for p, r in runs.items()}
    gram = next((r["seconds"] for r in rows if r["phase"] == "gram32"), None)
    print(f"\nn_trials = {n}, d = {d}, output matrix {out_bytes / 2**30:.3f} GiB float32; "
          f"min of {args.repeat} run(s) per phase; BLAS threads: {args.threads or 'default'}")
    print(f"{'phase':<10}{'seconds':>10}{'x gram32':>10}{'CPU s':>9}{'x gram32':>10}"
          f"{'traced peak':>13}{'/ output':>10}{'RSS growth':>12}{'/ output':>10}")
    for r in rows:
        vs_gram = f"{r['seconds'] / gram:.2f}" if gram else "-"
        cpu = cpus[r["phase"]]
        cpu_vs = f"{cpu / cpus['gram32']:.2f}" if "gram32" in cpus else "-"
        print(f"{r['phase']:<10}{r['seconds']:>10.2f}{vs_gram:>10}{cpu:>9.2f}{cpu_vs:>10}"
              f"{r['traced_peak'] / 2**30:>11.3f}Gi{r['traced_peak'] / out_bytes:>10.3f}"
              f"{r['rss_growth'] / 2**30:>10.3f}Gi{r['rss_growth'] / out_bytes:>10.3f}")
    print("targets (issue 13 item 6): spectrum <= 1.5 x gram32; peak <= ~1.02 x output "
          "(release: calibration + one draw, after the spectrum)")
    for r in rows:
        extras = {k: v for k, v in r.items()
                  if k not in ("phase", "seconds", "cpu", "traced_peak", "rss_growth")}
        if extras:
            print(f"  {r['phase']}: {extras}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
