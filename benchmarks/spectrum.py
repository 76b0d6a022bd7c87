"""Benchmark: output spectrum of a huge output matrix read from an np.memmap.

Generates ``n_trials x d`` float32 outputs (rank-``r`` signal + isotropic noise + offset) into
a file in a temporary directory (written with ``tofile``, so generation leaves no mapped
pages), then measures, each phase in a fresh subprocess:

* ``read``      one pass over the memmap by row blocks (the baseline: time to read the data);
* ``gram32``    the bare BLAS Gram product ``Σ_blocks B B^T`` of the same matrix: float32 column
  blocks sliced from the memmap, ``B @ B.T`` (OpenBLAS ``ssyrk``), summed in float64 (the
  baseline of issue 13 item 6);
* ``gram64``    the same with the blocks converted to float64 (``dsyrk``): the float64 floor of
  the spectrum's first pass;
* ``moments``   :func:`pacpriv.pac.moments.streaming_moments` (O(d) memory);
* ``spectrum``  :func:`pacpriv.pac.covariance.estimate_output_spectrum` (Gram path, float32
  eigenvectors because the outputs are float32);
* ``plan``      spectrum + ``calibrate_noise`` (square-root rule) + one ``privatize`` draw.

The spectrum needs two float64 passes: the Gram (``dsyrk``, ``n²d/2`` multiply-adds) and the
eigenvector back-projection ``V = Xc^T U Λ^(-1/2)`` (``dgemm``, ``n·k·d``; ``k`` held
eigenpairs, up to ``n - 1``). Its floor is therefore about ``(1 + 2k/n)`` times ``gram64``,
i.e. about ``2 (1 + 2k/n)`` times ``gram32`` (float32 BLAS runs about twice as fast).

Memory is reported two ways, as a ratio to the output matrix size: ``tracemalloc`` peak
(numpy heap allocations) and the growth of the subprocess's resident-set high-water mark
(``VmHWM`` minus ``VmRSS`` at the start of the phase; includes BLAS/LAPACK workspaces and
any memmap pages still mapped). The spectrum's own result (float32 ``(d, k)`` eigenvectors)
is about the size of the float32 output matrix when ``k ≈ n``.

Usage::

    python benchmarks/spectrum.py            # d = 1e6, n_trials = 1000 (4 GB file, minutes)
    python benchmarks/spectrum.py --quick    # d = 1e5
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

PHASES = ("read", "gram32", "gram64", "moments", "spectrum", "plan")


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
    from pacpriv.pac.moments import release_mapped_pages

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
    from pacpriv.pac.calibration import calibrate_noise
    from pacpriv.pac.covariance import estimate_output_spectrum
    from pacpriv.pac.moments import iter_row_blocks, streaming_moments
    from pacpriv.pac.release import privatize

    outputs = np.memmap(path, dtype=np.float32, mode="r", shape=(n, d))
    rss0 = _rss_now()
    tracemalloc.start()
    t0 = time.perf_counter()
    extra = {}
    if phase == "read":
        total = 0.0
        for block in iter_row_blocks(outputs):
            total += float(block.sum())
    elif phase in ("gram32", "gram64"):
        extra["trace"] = _bare_gram(outputs, np.float32 if phase == "gram32" else np.float64)
    elif phase == "moments":
        extra["total_variance"] = streaming_moments(outputs).total_variance
    else:
        spec = estimate_output_spectrum(outputs)
        extra.update(n_components=spec.n_components, top_eigenvalue=float(spec.eigenvalues[0]))
        if phase == "plan":
            plan = calibrate_noise(spec, mi_budget=0.5)
            privatize(np.asarray(spec.mean), plan, rng=0)
            extra["mi_bound"] = plan.mi_bound
    seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"phase": phase, "seconds": seconds, "traced_peak": peak,
            "rss_growth": max(0, _maxrss_bytes() - rss0), **extra}


def main(argv=None) -> int:
    """Generate the data, run every phase in a subprocess and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="d = 1e5 instead of 1e6")
    ap.add_argument("--n-trials", type=int, default=1000)
    ap.add_argument("--dim", type=int, default=None)
    ap.add_argument("--rank", type=int, default=20)
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--_measure", nargs=4, metavar=("PHASE", "PATH", "N", "D"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._measure:
        phase, path, n, d = args._measure
        print(json.dumps(measure(phase, path, int(n), int(d))))
        return 0
    n = args.n_trials
    d = args.dim or (100_000 if args.quick else 1_000_000)
    out_bytes = 4 * n * d
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "outputs.f32"
        t0 = time.perf_counter()
        generate(path, n, d, args.rank)
        print(f"generated {n} x {d} float32 outputs ({out_bytes / 2**30:.2f} GiB) in "
              f"{time.perf_counter() - t0:.1f} s")
        rows = []
        for phase in args.phases.split(","):
            proc = subprocess.run(
                [sys.executable, __file__, "--_measure", phase, str(path), str(n), str(d)],
                capture_output=True, text=True, check=True,
            )
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    base = next((r["seconds"] for r in rows if r["phase"] == "read"), None)
    gram = next((r["seconds"] for r in rows if r["phase"] == "gram32"), None)
    print(f"\n{'phase':<10}{'seconds':>10}{'x read':>9}{'x gram32':>10}{'traced peak':>13}"
          f"{'/ output':>10}{'RSS growth':>12}{'/ output':>10}")
    for r in rows:
        ratio = f"{r['seconds'] / base:.2f}" if base else "-"
        vs_gram = f"{r['seconds'] / gram:.2f}" if gram else "-"
        print(f"{r['phase']:<10}{r['seconds']:>10.1f}{ratio:>9}{vs_gram:>10}"
              f"{r['traced_peak'] / 2**30:>11.3f}Gi{r['traced_peak'] / out_bytes:>10.3f}"
              f"{r['rss_growth'] / 2**30:>10.3f}Gi{r['rss_growth'] / out_bytes:>10.3f}")
    print(f"\noutput matrix: {out_bytes / 2**30:.3f} GiB; targets (issue 13 item 6): spectrum "
          "<= 1.5 x gram32, peak ~1.02 x output")
    for r in rows:
        extras = {k: v for k, v in r.items()
                  if k not in ("phase", "seconds", "traced_peak", "rss_growth")}
        if extras:
            print(f"  {r['phase']}: {extras}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
