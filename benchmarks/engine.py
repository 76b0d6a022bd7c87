"""Benchmark of the PAC Monte-Carlo engine against baselines measured in the same run.

Prints one table:

1. engine overhead vs a bare Python loop (same mask draws and subsetting) for a 1 ms
   mechanism, n_jobs=1, progress bar on (target: <= 5 %);
2. speed-up of n_jobs=2 (loky) over n_jobs=1 for a 100 ms mechanism (target: >= 1.8x);
3. Dask LocalCluster (2 worker processes x 1 thread) vs loky (n_jobs=2), 10 ms mechanism.

The mechanisms spin (busy-wait) for a fixed wall-clock time: CPU-bound like real work, but
their duration does not depend on how busy the machine is, so the ratios measure the
engine, not the neighbours. Each timing is the best of ``--repeat`` runs; process pools
are warmed up first (worker start-up is reported separately).

Run: ``python benchmarks/engine.py`` (about 1 minute) or ``--quick`` (about 15 s).

``--sizes`` prints instead ``run_pac`` (sequential, certified rule, release included) against
the bare trials loop (the same mechanism calls on the same masks in a plain numpy loop) for a
count sketch (each record hashed into one of ``d`` buckets) at ``d = 10² … 10⁶`` and 128
trials, over pools of 10⁴ and 10⁶ records (``--records``; users have 10⁴–10⁶): wall time, peak
resident memory (``ru_maxrss`` of a fresh process per cell) and their ratios, and the
processes' CPU time (``time.process_time``: on a shared machine preemption inflates wall time,
not CPU time; BLAS runs on one thread, so on a quiet machine the two agree) (target: time
ratio <= 1.3 at ``d >= 10⁴``, and at most 0.1 s over the bare loop at ``d = 10²``), plus the
time of each phase (simulate; the Gram pass shared by the spectrum and the certificate; the
spectrum's eigen-decomposition; the certificate; the release) and of ``import pacpriv``. The
load average is printed before and after. ``--sizes --max-d 100000`` stops earlier (10⁶ needs
about 3 GiB and one to two minutes per pool). Each cell also gives the minor page faults and
the system CPU time of the timed region (``getrusage``), and ``--before DIR`` times ``run_pac``
of another source tree (e.g. ``git worktree add /tmp/main main``) in the same run, alternating
cell by cell, and flags a cell whose noise power differs between the two.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

from pacpriv.pac.engine import ExecutionOptions, simulate


def spin(seconds: float) -> None:
    """Busy-wait for ``seconds`` of wall-clock time."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def mech_nop(subset):
    return np.array([subset.sum(), len(subset)])


def mech_1ms(subset):
    spin(0.001)
    return np.array([subset.sum(), len(subset)])


def mech_10ms(subset):
    spin(0.010)
    return np.array([subset.sum(), len(subset)])


def mech_100ms(subset):
    spin(0.100)
    return np.array([subset.sum(), len(subset)])


def bare_loop(mechanism, pool, n_trials, seed):
    """The baseline: the same useful work (mask draw, subset, call) in a plain loop."""
    rng = np.random.default_rng(seed)
    out = np.empty((n_trials, 2))
    for i in range(n_trials):
        mask = rng.random(len(pool)) < 0.5
        out[i] = mechanism(pool[mask])
    return out


def best_of(repeat, func):
    times = []
    for _ in range(repeat):
        tic = time.perf_counter()
        func()
        times.append(time.perf_counter() - tic)
    return min(times)


def best_of_pairs(repeat, baseline, candidate):
    """Best times of ``baseline`` and ``candidate`` run alternately (shared noise)."""
    tb, tc = [], []
    for _ in range(repeat):
        for func, times in ((baseline, tb), (candidate, tc)):
            tic = time.perf_counter()
            func()
            times.append(time.perf_counter() - tic)
    return min(tb), min(tc)


class CountSketch:
    """Each record (an integer id) hashed into one of ``d`` buckets; the bucket counts.

    Its own memory is one ``d``-vector; its time O(subset + d).
    """

    def __init__(self, d: int) -> None:
        self.d = d

    def __call__(self, subset):
        h = (subset.astype(np.uint64) * np.uint64(11400714819323198485)) >> np.uint64(20)
        return np.bincount((h % np.uint64(self.d)).astype(np.intp),
                           minlength=self.d).astype(np.float64)


SIZES_RECORDS = (10_000, 1_000_000)
SIZES_TRIALS = 128


def _bare_sketch(mech, pool, n_trials):
    """The bare loop of the sizes table: the engine's masks (same sampler and seeds), the
    mechanism, a preallocated float64 output array."""
    from pacpriv._random import as_seed_sequence
    from pacpriv.pac.samplers import PoissonSampler

    root = as_seed_sequence(0)
    sampler = PoissonSampler()
    out = np.empty((n_trials, mech.d))
    for i in range(n_trials):
        mask = sampler.trial_mask(len(pool), root=root, index=i)
        out[i] = mech(pool[mask])
    return out


def _phases(mech, pool, ex) -> dict:
    """The time of each phase of ``run_pac``, run one after the other as the pipeline runs them
    (on a tree without the shared Gram pass: the spectrum and the certificate each make their
    own, and the 'gram' column is empty)."""
    from pacpriv.pac.noise import certify_noise
    from pacpriv.pac.release import privatize
    from pacpriv.pac.spectrum import estimate_output_spectrum

    try:
        from pacpriv.pac.spectrum._gram import centred_gram
    except ImportError:  # the tree before the shared pass
        centred_gram = None
    out: dict = {}
    tic = time.perf_counter()
    sim = simulate(mech, pool, n_trials=SIZES_TRIALS, rng=0, execution=ex)
    out["simulate_s"] = time.perf_counter() - tic
    x = sim.outputs
    tic = time.perf_counter()
    gram = centred_gram(x) if centred_gram is not None and x.shape[1] > x.shape[0] else None
    out["gram_s"] = time.perf_counter() - tic if gram is not None else float("nan")
    tic = time.perf_counter()
    if centred_gram is None:
        estimate_output_spectrum(x)
    else:
        estimate_output_spectrum(x, gram=gram, eigenvectors="lazy")
    out["spectrum_s"] = time.perf_counter() - tic
    tic = time.perf_counter()
    if gram is None:
        plan = certify_noise(x, mi_budget=1.0)
    else:
        from pacpriv.pac.noise._certificate import RelativeOutputs

        plan = certify_noise(RelativeOutputs(x, None, gram), mi_budget=1.0)
    out["certificate_s"] = time.perf_counter() - tic
    tic = time.perf_counter()
    privatize(mech(pool[: len(pool) // 2]), plan, rng=1)
    out["release_s"] = time.perf_counter() - tic
    return out


def _usage() -> tuple[int, float]:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_minflt, use.ru_stime


def _usage_since(start: tuple[int, float]) -> dict:
    """Minor page faults and system CPU seconds since ``start`` (:func:`_usage`)."""
    faults, sys_s = _usage()
    return {"faults": faults - start[0], "sys_s": sys_s - start[1]}


def sizes_child(mode: str, d: int, n_records: int) -> dict:
    """One cell of the sizes table, in a fresh process (its peak RSS is the cell's)."""
    import warnings

    warnings.simplefilter("ignore")
    from pacpriv.pac import run_pac
    mech, pool = CountSketch(d), np.arange(n_records)
    ex = ExecutionOptions(progress=False)
    out: dict = {}
    if mode == "bare":
        _bare_sketch(CountSketch(min(d, 100)), pool, 4)  # warm the code paths, not the memory
        tic, cpu, usage = time.perf_counter(), time.process_time(), _usage()
        _bare_sketch(mech, pool, SIZES_TRIALS)
        out["time_s"] = time.perf_counter() - tic
        out["cpu_s"] = time.process_time() - cpu
        out.update(_usage_since(usage))
    elif mode == "run_pac":
        tic, cpu, usage = time.perf_counter(), time.process_time(), _usage()
        res = run_pac(mech, pool, mi_budget=1.0, n_trials=SIZES_TRIALS, rng=0, execution=ex)
        out["time_s"] = time.perf_counter() - tic
        out["cpu_s"] = time.process_time() - cpu
        out.update(_usage_since(usage))
        cert = res.plan.certificate
        out["certified"] = bool(cert is not None and cert.certified)
        out["noise_power"] = float(res.plan.expected_noise_power)  # unchanged across trees?
    elif mode == "import":  # `import pacpriv` in a process that has imported numpy only
        code = ("import time; import numpy; t = time.perf_counter(); import pacpriv, "
                "pacpriv.pac; print(time.perf_counter() - t)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True)
        out["import_s"] = float(done.stdout.strip())
    else:
        out.update(_phases(mech, pool, ex))
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _cell(mode: str, d: int, n_records: int, tree: str | None = None) -> dict:
    """One cell in a fresh process; ``tree``: a source tree whose ``pacpriv`` it imports
    (``--before``), else this one's."""
    cmd = [sys.executable, __file__, "--sizes-child", mode, str(d), str(n_records)]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if tree is not None:
        env["PYTHONPATH"] = tree
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=True,
                          env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _best(cells: list[dict]) -> dict:
    """The cell of least CPU time (its faults and system time with it)."""
    return min(cells, key=lambda r: r["cpu_s"])


def sizes_table(max_d: int, repeat: int, records: tuple[int, ...],
                before: str | None = None, min_d: int = 100) -> None:
    """Print run_pac vs the bare loop at d = 10^2 ... max_d (see the module docstring);
    ``before``: a source tree whose run_pac is timed beside this one's, cell by cell."""
    print(f"load average {os.getloadavg()}; {SIZES_TRIALS} trials, count sketch; best of",
          repeat, "fresh processes per cell (bare, before and run_pac alternate); CPU seconds")
    header = ["records", "d", "bare cpu"]
    if before:
        header += ["before cpu", "ratio"]
    header += ["run_pac cpu", "ratio", "over s", "bare flt", "run_pac flt", "sys s",
               "wall ratio", "bare MiB", "run_pac MiB", "simulate", "gram", "spectrum",
               "certificate", "release", "import s"]
    print("  ".join(f"{h:>11}" for h in header))
    for n_records in records:
        d = min_d
        while d <= max_d:
            bare, old, full = [], [], []
            for _ in range(repeat):  # alternate, so that all see the same load
                bare.append(_cell("bare", d, n_records))
                if before:
                    old.append(_cell("run_pac", d, n_records, tree=before))
                full.append(_cell("run_pac", d, n_records))
            b, f = _best(bare), _best(full)
            ph = _cell("phases", d, n_records)
            imp = min(_cell("import", d, n_records)["import_s"] for _ in range(repeat))
            cells: list = [n_records, d, b["cpu_s"]]
            if before:
                o = _best(old)
                cells += [o["cpu_s"], o["cpu_s"] / b["cpu_s"]]
            cells += [f["cpu_s"], f["cpu_s"] / b["cpu_s"], f["cpu_s"] - b["cpu_s"],
                      b["faults"], f["faults"], f["sys_s"],
                      min(r["time_s"] for r in full) / min(r["time_s"] for r in bare),
                      b["peak_rss_mib"], f["peak_rss_mib"], ph["simulate_s"], ph["gram_s"],
                      ph["spectrum_s"], ph["certificate_s"], ph["release_s"], imp]
            same = "" if not before or o.get("noise_power") == f.get("noise_power") else \
                " (noise power differs from before!)"
            print("  ".join(f"{c:>11.3f}" if isinstance(c, float) else f"{c:>11}"
                            for c in cells), "" if f.get("certified") else " (not certified!)",
                  same, flush=True)
            d *= 10
    print(f"load average {os.getloadavg()} (after)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", action="store_true",
                        help="run_pac vs the bare loop at d = 1e2 ... 1e6 (time, peak memory)")
    parser.add_argument("--max-d", type=int, default=10**6, help="largest d of --sizes")
    parser.add_argument("--min-d", type=int, default=100,
                        help="smallest d of --sizes (then 10x, 100x, ... up to --max-d)")
    parser.add_argument("--records", default=",".join(str(r) for r in SIZES_RECORDS),
                        help="pool sizes of --sizes, comma-separated (default 10000,1000000)")
    parser.add_argument("--before", default=None, metavar="DIR",
                        help="--sizes: also time run_pac from the source tree DIR (e.g. a git "
                             "worktree of main), alternating with this one")
    parser.add_argument("--sizes-child", nargs=3, metavar=("MODE", "D", "RECORDS"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="fewer trials (about 15 s)")
    parser.add_argument("--repeat", type=int, default=None, help="best of this many runs")
    parser.add_argument("--no-dask", action="store_true", help="skip the Dask comparison")
    args = parser.parse_args(argv)
    if args.sizes_child:
        mode, d, n_records = args.sizes_child
        print(json.dumps(sizes_child(mode, int(d), int(n_records))))
        return
    if args.sizes:
        records = tuple(int(r) for r in args.records.split(","))
        if not records or min(records) < 2 or not 1 <= args.min_d <= args.max_d:
            parser.error(f"--records must be integers >= 2 and 1 <= --min-d <= --max-d; got "
                         f"--records {args.records} --min-d {args.min_d} --max-d {args.max_d}")
        sizes_table(args.max_d, args.repeat or (1 if args.quick else 2), records,
                    before=args.before, min_d=args.min_d)
        return
    repeat = args.repeat or (2 if args.quick else 3)
    n_fast, n_slow, n_mid = (300, 10, 100) if args.quick else (1000, 20, 200)
    pool = np.random.default_rng(0).normal(size=1000)
    rows = []

    # 1. overhead vs a bare loop, 1 ms mechanism, n_jobs=1, progress on (interleaved runs)
    t_bare, t_eng = best_of_pairs(
        repeat + 2,
        lambda: bare_loop(mech_1ms, pool, n_fast, 0),
        lambda: simulate(mech_1ms, pool, n_trials=n_fast, rng=0,
                         execution=ExecutionOptions(n_jobs=1)),
    )
    rows.append((f"1 ms mechanism, {n_fast} trials", "bare loop", t_bare, "engine n_jobs=1 +tqdm",
                 t_eng, f"overhead {100 * (t_eng / t_bare - 1):+.1f} % (target <= 5 %)"))
    # the same with a no-op mechanism: the engine's own cost per trial, insensitive to noise
    n_nop = 10 * n_fast
    t_bare0, t_eng0 = best_of_pairs(
        repeat + 2,
        lambda: bare_loop(mech_nop, pool, n_nop, 0),
        lambda: simulate(mech_nop, pool, n_trials=n_nop, rng=0,
                         execution=ExecutionOptions(n_jobs=1)),
    )
    per_trial = (t_eng0 - t_bare0) / n_nop
    rows.append((f"no-op mechanism, {n_nop} trials", "bare loop", t_bare0,
                 "engine n_jobs=1 +tqdm", t_eng0,
                 f"{1e6 * per_trial:.0f} us/trial = {per_trial / 1e-3:.1%} of 1 ms"))

    # 2. speed-up at n_jobs=2 for a 100 ms mechanism (loky, pool warmed up)
    tic = time.perf_counter()
    simulate(mech_1ms, pool, n_trials=4, rng=0,
             execution=ExecutionOptions(n_jobs=2, progress=False))
    t_start_loky = time.perf_counter() - tic
    kwargs = {"n_trials": n_slow, "rng": 0}
    t_1 = best_of(repeat, lambda: simulate(
        mech_100ms, pool, execution=ExecutionOptions(n_jobs=1, progress=False), **kwargs))
    t_2 = best_of(repeat, lambda: simulate(
        mech_100ms, pool, execution=ExecutionOptions(n_jobs=2, progress=False), **kwargs))
    rows.append((f"100 ms mechanism, {n_slow} trials", "n_jobs=1", t_1, "n_jobs=2 (loky)", t_2,
                 f"speed-up {t_1 / t_2:.2f}x (target >= 1.8x)"))

    # 3. Dask LocalCluster vs loky, 10 ms mechanism, 2 workers each
    if not args.no_dask:
        from dask.distributed import Client, LocalCluster

        tic = time.perf_counter()
        with LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                          dashboard_address=None) as cluster, Client(cluster):
            t_start_dask = time.perf_counter() - tic
            kwargs = {"n_trials": n_mid, "rng": 0}
            simulate(mech_1ms, pool, n_trials=4, rng=0,
                     execution=ExecutionOptions(backend="dask", progress=False))
            loky = ExecutionOptions(n_jobs=2, backend="loky", progress=False)
            dask = ExecutionOptions(backend="dask", progress=False)
            t_loky = best_of(repeat, lambda: simulate(mech_10ms, pool, execution=loky, **kwargs))
            t_dask = best_of(repeat, lambda: simulate(mech_10ms, pool, execution=dask, **kwargs))
        rows.append((f"10 ms mechanism, {n_mid} trials", "loky n_jobs=2", t_loky,
                     "dask 2 workers", t_dask, f"dask/loky {t_dask / t_loky:.2f}x"))
        rows.append(("worker start-up", "loky pool", t_start_loky, "dask LocalCluster",
                     t_start_dask, "one-off, excluded above"))

    header = ("case", "baseline", "s", "engine", "s", "ratio")
    widths = (32, 14, 7, 22, 7, 34)
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for case, base, tb, eng, te, ratio in rows:
        cells = (case, base, f"{tb:.3f}", eng, f"{te:.3f}", ratio)
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))


if __name__ == "__main__":
    main()
