"""Benchmark of the per-record simulation (``simulate_differences``) against a bare loop.

Prints one table of mechanism evaluations per second (each trial costs ``1 + k`` evaluations
for ``k`` audited records):

1. a 2 ms busy-wait mechanism: bare Python loop (same masks, the same pairs) vs the engine at
   n_jobs=1 and n_jobs=2 (loky, pool warmed up), and at n_jobs=2 in record blocks of 16 (a
   trial's evaluations split across the workers; each block also evaluates f(S)); ratios
   against the bare loop of the same run;
2. ``--logistic``: the bundled ``logistic`` mechanism on ``breast_cancer``, every record
   audited (569), ``--trials`` trials (default 50): wall time and evaluations per second at
   ``--jobs`` (default 2), plus the calibration time on the stored differences.

3. ``--fast-path``: the stabilised logistic regression
   (:class:`pacpriv.mechanisms.stable_logistic.StableLogistic`) on ``breast_cancer``, every
   record: its ``per_record_differences`` (one call per trial) against the generic path
   (``1 + n`` exact fits per trial), same trials; the ratio is the speed-up.
4. ``--certificate``: trials each every-record certificate needs. For the stabilised black box
   on ``breast_cancer`` (n = 569), ``wine`` (178) and, with ``--digits``, ``digits`` (1797),
   ``--max-trials`` trials of distances are simulated once; for T in a grid, the first T/4
   are shape trials and the rest certify. Printed: the certified noise power over the
   *oracle* power (the plug-in scale on all trials, an estimate of the exact threshold) per
   route: betting on the accuracies with a black-box range, betting with the mechanism's
   declared sensitivity range, Jensen (a betting bound on ``E‖Δ‖²`` with the declared range,
   then ``Φ(sqrt(E d²)/2)``), and the Maurer–Pontil bound on all T trials.

5. ``--n-sweep``: per-record cost against the pool size ``n`` (``--sizes``, default 2k, 5k,
   20k, 100k) for a closed-form mechanism (the clipped mean, 5 features, every record
   audited): the per-record simulation of ``calibrate_per_record`` (shape + certification
   trials, ``--trials`` default 20) against a bare numpy loop of the same closed form on the
   same masks (the baseline, same run), CPU and wall seconds per trial, and the fitted
   log-log slope of the cost in ``n`` (all sizes, and from 5k on). ``--stable`` adds the
   stabilised logistic regression on a generated two-class pool (its certified O(n) path),
   ``--newton`` the logistic regression and the linear SVM with ``solver="newton"``.
6. ``--compare``: wall and CPU seconds of ``compare_table`` per bundled dataset
   (``breast_cancer``, ``digits``, ``wine``, every record certified) with its phases (PAC
   simulation, per-record simulation); ``--csv20k`` adds a generated 20,000 x 20 two-class CSV
   (5 informative, 15 noise columns; written under ``--workdir``).

Load: every table prints ``os.getloadavg()`` before and after; on a shared machine the CPU
seconds (``time.process_time``, this process and its threads) are the load-independent
measure, the wall seconds are what the user waits.

The busy-wait mechanism's duration does not depend on how loaded the machine is, so the
ratios measure the engine. Run: ``python benchmarks/per_record.py`` (about 30 s),
``python benchmarks/per_record.py --logistic`` (minutes: 50 x 570 logistic fits),
``--skip-throughput --fast-path`` (a minute) or ``--skip-throughput --certificate`` (about
two minutes; ``--digits`` adds about ten).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.per_record import calibrate_from_differences, simulate_differences
from pacpriv.pac.samplers import PoissonSampler


def spin(seconds: float) -> None:
    """Busy-wait for ``seconds`` of wall-clock time."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def mech_2ms(subset):
    spin(0.002)
    return np.array([subset.sum(), len(subset)], dtype=float)


def bare_loop(mechanism, pool, n_trials, seed):
    """Baseline: the same evaluations (f(S_t) and one flipped subset per record) in a loop."""
    rng = np.random.default_rng(seed)
    n = len(pool)
    out = np.empty((n_trials, n, 2))
    for t in range(n_trials):
        mask = PoissonSampler(0.5).draw(n, rng)
        base = mechanism(pool[mask])
        for i in range(n):
            flipped = mask.copy()
            flipped[i] = not mask[i]
            other = mechanism(pool[flipped])
            out[t, i] = base - other if mask[i] else other - base
    return out


def timed(func):
    tic = time.perf_counter()
    result = func()
    return time.perf_counter() - tic, result


def throughput_rows(n_records: int, n_trials: int, repeat: int) -> list[tuple]:
    pool = np.random.default_rng(0).normal(size=n_records)
    evals = n_trials * (1 + n_records)
    kw = {"n_trials": n_trials, "rng": 0}
    simulate_differences(mech_2ms, pool[:4], n_trials=2, rng=0,
                         execution=ExecutionOptions(progress=False, n_jobs=2))
    runs = {
        "bare": lambda: bare_loop(mech_2ms, pool, n_trials, 0),
        "1": lambda: simulate_differences(
            mech_2ms, pool, execution=ExecutionOptions(n_jobs=1, progress=False), **kw),
        "2": lambda: simulate_differences(
            mech_2ms, pool, execution=ExecutionOptions(n_jobs=2, progress=False), **kw),
        "2b": lambda: simulate_differences(
            mech_2ms, pool, execution=ExecutionOptions(n_jobs=2, progress=False,
                                                       record_block=16), **kw),
    }
    best = dict.fromkeys(runs, np.inf)
    for _ in range(repeat):  # interleaved, best of `repeat`: the machine's load is shared
        for key, func in runs.items():
            best[key] = min(best[key], timed(func)[0])
    t_bare, t_1, t_2 = best["bare"], best["1"], best["2"]
    case = f"2 ms mech, {n_records} rec x {n_trials} trials"
    return [
        (case, "bare loop", t_bare, evals / t_bare, "1.00x"),
        (case, "engine n_jobs=1", t_1, evals / t_1, f"{t_bare / t_1:.2f}x"),
        (case, "engine n_jobs=2 (loky)", t_2, evals / t_2, f"{t_bare / t_2:.2f}x"),
        (case, "n_jobs=2, record_block=16", best["2b"], evals / best["2b"],
         f"{t_bare / best['2b']:.2f}x"),
    ]


def logistic_rows(n_trials: int, n_jobs: int) -> list[tuple]:
    from pacpriv import load_dataset
    from pacpriv.registry import resolve_mechanism

    ds = load_dataset("breast_cancer")
    mech, _ = resolve_mechanism("logistic", dataset_info=ds.info())
    evals = n_trials * (1 + ds.n_records)
    t_sim, diffs = timed(lambda: simulate_differences(
        mech, ds.pool, n_trials=n_trials, rng=0,
            execution=ExecutionOptions(n_jobs=n_jobs, progress=True)))
    rows = [(f"breast_cancer logistic, {ds.n_records} rec x {n_trials} trials",
             f"engine n_jobs={n_jobs}", t_sim, evals / t_sim, "-")]
    target = 0.9
    t_cal, plan = timed(lambda: calibrate_from_differences(diffs, target_accuracy=target))
    rows.append((f"calibration to {target} (stored diffs)", "no evaluations", t_cal, 0.0,
                 f"scale {plan.scale:.4g}"))
    return rows


def _stable(name: str):
    from pacpriv.compare.models import scale_features
    from pacpriv.datasets import load_dataset
    from pacpriv.mechanisms.stable_logistic import StableLogistic

    ds = load_dataset(name)
    X = scale_features(ds.X, ds.feature_low, ds.feature_high)
    y = np.searchsorted(np.asarray(ds.classes), np.asarray(ds.y))
    mech = StableLogistic.for_pool(X, classes=tuple(range(len(ds.classes))),
                                   sampling_rate=0.5)
    return mech, (X, y)


def fast_path_rows(n_trials: int) -> list[tuple]:
    """The fast per-record path against 1 + n exact fits per trial (same trials)."""
    mech, pool = _stable("breast_cancer")
    n = pool[0].shape[0]

    class Generic:  # the same black box without its fast path
        def __call__(self, subset):
            return mech(subset)

    quiet = ExecutionOptions(progress=False, n_jobs=1)
    t_fast, fast = timed(lambda: simulate_differences(mech, pool, n_trials=n_trials, rng=0,
                                                      execution=quiet))
    t_slow, slow = timed(lambda: simulate_differences(Generic(), pool, n_trials=n_trials,
                                                      rng=0, execution=quiet))
    err = float(np.max(np.abs(fast.differences - slow.differences)))
    evals = n_trials * (1 + n)
    case = f"stable logistic, breast_cancer {n} rec x {n_trials} trials"
    return [(case, "generic (1 + n fits/trial)", t_slow, evals / t_slow, "1.00x"),
            (case, f"fast path (max diff {err:.1e})", t_fast, evals / t_fast,
             f"{t_slow / t_fast:.1f}x")]


def _distances(name: str, n_trials: int):
    mech, pool = _stable(name)
    n = pool[0].shape[0]
    rng = np.random.default_rng(2024)
    d = np.empty((n_trials, n))
    for t in range(n_trials):
        mask = rng.random(n) < 0.5
        d[t] = np.linalg.norm(mech.per_record_differences(pool, mask)[1], axis=1)
    err = mech.difference_error
    return d + err, mech.difference_bound(pool) + err


def _jensen_scale(d, T0, bound, a, gamma):
    """Jensen route: betting bound on E[d²] (range bound²), then Φ(sqrt(U)/(2s)) <= a."""
    from scipy.stats import norm

    from pacpriv.pac.per_record._betting import betting_upper, predictable_bets

    y = (d / bound) ** 2
    sh, ce = y[:T0], y[T0:]
    delta = np.full(d.shape[1], gamma / d.shape[1])
    bets = predictable_bets(ce, delta=delta, horizon=ce.shape[0], prior_mean=sh.mean(0),
                            prior_variance=sh.var(0, ddof=1) + 1e-12)
    upper = betting_upper(ce, bets, delta) * bound**2
    return float(np.sqrt(upper.max()) / (2 * norm.ppf(a)))


def certificate_rows(names, max_trials: int, targets=(0.55, 0.6)) -> list[tuple]:
    """Certified / oracle noise power per route and trial count (module notes)."""
    from pacpriv.pac.per_record._bernstein import bernstein_scale
    from pacpriv.pac.per_record._certificate import certify_scale, plug_in_scale

    rows = []
    for name in names:
        tic = time.perf_counter()
        d, bound = _distances(name, max_trials)
        sim_s = time.perf_counter() - tic
        n = d.shape[1]
        for a in targets:
            s_or = plug_in_scale(d, a, 0.5)
            for T in (64, 100, 150, 200, 300, 400):
                if T > max_trials:
                    continue
                T0 = T // 4
                ratios = []
                for rng_bound in (None, bound):
                    try:
                        c = certify_scale(d[:T0], d[T0:T], target_accuracy=a, prior=0.5,
                                          confidence=0.95, distance_bound=rng_bound)
                        ratios.append(f"{(c.scale / s_or) ** 2:.2f}")
                    except ValueError:
                        ratios.append("infeasible")
                ratios.append(f"{(_jensen_scale(d[:T], T0, bound, a, 0.05) / s_or) ** 2:.2f}")
                try:
                    from pacpriv.pac.per_record._math import bernstein_floor

                    if bernstein_floor(T, low=0.5, high=1.0, delta=0.05 / n) >= a:
                        raise ValueError
                    s_mp = bernstein_scale(d[:T], 0.5, 0.05 / n, a)
                    ratios.append(f"{(s_mp / s_or) ** 2:.2f}")
                except ValueError:
                    ratios.append("infeasible")
                rows.append((f"{name} n={n} a={a}", T, *ratios, f"{sim_s:.0f}"))
    return rows


def _load() -> str:
    return "load " + " ".join(f"{v:.1f}" for v in os.getloadavg())


def _slope(ns, costs) -> float:
    """Least-squares slope of log(cost) on log(n)."""
    return float(np.polyfit(np.log(np.asarray(ns, float)), np.log(np.asarray(costs, float)), 1)[0])


def _bare_mean_loop(X, masks, lo, hi) -> None:
    """Baseline: the clipped mean's closed-form differences of every record, per mask (the
    same work as one call of ``per_record_differences`` a trial, without the engine)."""
    for mask in masks:
        C = np.clip(X, lo, hi)
        total, count = C[mask].sum(axis=0), int(mask.sum())
        rest = np.where(mask[:, None], total - C, total)
        m = (count - mask.astype(np.int64))[:, None].astype(float)
        _ = (rest + C) / (m + 1.0) - rest / np.maximum(m, 1.0)


def _per_record_sim(mech, pool, n_trials):
    """CPU and wall seconds of the per-record simulation (shape + certify), every record."""
    from pacpriv.pac.per_record._calibration import simulate_calibration_trials

    n = pool[0].shape[0] if isinstance(pool, tuple) else pool.shape[0]
    c0, t0 = time.process_time(), time.perf_counter()
    simulate_calibration_trials(mech, pool, n_trials=n_trials, sampler=PoissonSampler(0.5),
                                records=np.arange(n), rng=0,
                                execution=ExecutionOptions(progress=False))
    return time.process_time() - c0, time.perf_counter() - t0


def two_class_pool(n: int, informative: int = 5, noise: int = 15, seed: int = 0):
    """``n`` records, ``informative + noise`` features, two classes (labels 0/1)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n)
    X = rng.normal(size=(n, informative + noise))
    X[:, :informative] += (2 * y[:, None] - 1) * rng.uniform(0.3, 1.0, size=informative)
    return X, y


def n_sweep(sizes, n_trials: int, stable: bool, newton: bool = False) -> None:
    """Per-record cost per trial against n, with the fitted log-log slope."""
    from pacpriv.mechanisms import make_clipped_mean, make_linear_svm, make_logistic

    print(f"per-record cost vs n ({n_trials} trials, every record; {_load()})")
    print(f"{'mechanism':<34}{'n':>8}{'cpu s/trial':>13}{'wall s/trial':>14}"
          f"{'bare cpu s/trial':>18}{'vs bare':>9}")
    mean = make_clipped_mean(low=-3.0, high=3.0)
    cases = [("clipped mean (closed form)", lambda X: mean, False)]
    if stable:
        from pacpriv.mechanisms.stable_logistic import StableLogistic
        cases.append(("stable logistic (certified O(n))", lambda X: StableLogistic.for_pool(
            X, classes=(0, 1), sampling_rate=0.5), True))
    if newton:
        cases.append(("logistic newton (certified O(n))",
                      lambda X: make_logistic(classes=(0, 1), solver="newton"), True))
        cases.append(("linear_svm newton (certified O(n))",
                      lambda X: make_linear_svm(classes=(0, 1), solver="newton"), True))
    for name, build, supervised in cases:
        ns, cpus = [], []
        for n in [500, *sizes]:  # the first (500) warms up imports and caches; not printed
            X, y = two_class_pool(n, 2, 3)
            m, pool = build(X), ((X, y) if supervised else X)
            cpu, wall = _per_record_sim(m, pool, n_trials)
            masks = np.random.default_rng(1).random((n_trials, n)) < 0.5
            c0 = time.process_time()
            _bare_mean_loop(X, masks, -3.0, 3.0)
            bare = (time.process_time() - c0) / n_trials
            if n == 500:
                continue
            ns.append(n)
            cpus.append(cpu / n_trials)
            ratio = f"{cpu / n_trials / bare:>9.1f}" if not supervised else f"{'-':>9}"
            print(f"{name:<34}{n:>8}{cpu / n_trials:>13.4f}{wall / n_trials:>14.4f}"
                  f"{bare:>18.4f}{ratio}", flush=True)
        tail = [i for i, n in enumerate(ns) if n >= 5000]
        msg = f"  log-log slope of cpu/trial in n: {_slope(ns, cpus):.2f} (all sizes)"
        if len(tail) >= 2:
            msg += f", {_slope([ns[i] for i in tail], [cpus[i] for i in tail]):.2f} (n >= 5k)"
        print(msg)
    print(f"({_load()})")


def compare_timings(csv20k: bool, workdir: str) -> None:
    """Wall and CPU seconds of compare_table per dataset, with its phases."""
    from pacpriv.compare import ComparisonSettings, compare_table

    names: list = ["breast_cancer", "digits", "wine"]
    if csv20k:
        X, y = two_class_pool(20000)
        path = os.path.join(workdir, "two_class_20000x20.csv")
        os.makedirs(workdir, exist_ok=True)
        header = ",".join([f"x{j}" for j in range(X.shape[1])] + ["label"])
        np.savetxt(path, np.column_stack([X, y]), delimiter=",", header=header, comments="",
                   fmt=["%.6g"] * X.shape[1] + ["%d"])
        from pacpriv.datasets import load_dataset
        names.append(load_dataset(path, label_column="label"))
    print(f"compare wall time per dataset (defaults: 500 PAC trials, 400 per-record trials, "
          f"every record; {_load()})")
    print(f"{'dataset':<26}{'n':>7}{'wall s':>9}{'cpu s':>9}{'PAC sim s':>11}"
          f"{'per-record s':>14}")
    tw = tc = 0.0
    for ds in names:
        c0, t0 = time.process_time(), time.perf_counter()
        table = compare_table([ds], target_accuracies=0.6, settings=ComparisonSettings(),
                              rng=0, execution=ExecutionOptions(progress=False))
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        st = table.results[0].to_dict()["settings"]
        tw, tc = tw + wall, tc + cpu
        print(f"{st['dataset'][:25]:<26}{st['n_records']:>7}{wall:>9.1f}{cpu:>9.1f}"
              f"{st['pac_simulation_s']:>11.1f}{st['per_record_simulation_s']:>14.1f}",
              flush=True)
    print(f"{'total':<33}{tw:>9.1f}{tc:>9.1f}   ({_load()})")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=30, help="records of the 2 ms case")
    parser.add_argument("--trials", type=int, default=None, help="trials (default 8 / 50)")
    parser.add_argument("--logistic", action="store_true", help="breast_cancer logistic case")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--jobs", type=int, default=2, help="n_jobs of the logistic case")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    parser.add_argument("--fast-path", action="store_true", help="stable logistic fast path")
    parser.add_argument("--certificate", action="store_true", help="trials per certificate")
    parser.add_argument("--digits", action="store_true", help="add digits to --certificate")
    parser.add_argument("--max-trials", type=int, default=400, help="--certificate trials")
    parser.add_argument("--n-sweep", action="store_true", help="per-record cost vs n")
    parser.add_argument("--sizes", default="2000,5000,20000,100000", help="--n-sweep sizes")
    parser.add_argument("--stable", action="store_true", help="add stable logistic to the sweep")
    parser.add_argument("--newton", action="store_true",
                        help="add logistic and linear_svm with solver='newton' to the sweep")
    parser.add_argument("--compare", action="store_true", help="compare wall time per dataset")
    parser.add_argument("--csv20k", action="store_true", help="add a 20,000 x 20 CSV")
    parser.add_argument("--workdir", default="/tmp/pacpriv-bench", help="where --csv20k writes")
    args = parser.parse_args(argv)
    if args.n_sweep or args.compare:
        if args.n_sweep:
            n_sweep([int(v) for v in args.sizes.split(",")], args.trials or 20, args.stable,
                    args.newton)
        if args.compare:
            compare_timings(args.csv20k, args.workdir)
        return
    if args.certificate:
        names = ["breast_cancer", "wine"] + (["digits"] if args.digits else [])
        head = ("dataset, bound", "T", "betting", "betting+range", "Jensen+range",
                "Maurer-Pontil", "sim s")
        print("certified noise power / oracle power (every record, 1-gamma = 0.95; T/4 "
              "shape trials)")
        print("  ".join(f"{h:>14}" if i else f"{h:<30}" for i, h in enumerate(head)))
        for row in certificate_rows(names, args.max_trials):
            print("  ".join(f"{c!s:>14}" if i else f"{c:<30}" for i, c in enumerate(row)))
        if args.skip_throughput and not (args.logistic or args.fast_path):
            return
    rows = []
    if not args.skip_throughput:
        rows += throughput_rows(args.records, args.trials or 8, args.repeat)
    if args.logistic:
        rows += logistic_rows(args.trials or 50, args.jobs)
    if args.fast_path:
        rows += fast_path_rows(args.trials or 4)
    header = ("case", "run", "s", "evals/s", "vs bare loop")
    widths = (48, 24, 9, 10, 14)
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for case, run, secs, rate, ratio in rows:
        cells = (case, run, f"{secs:.2f}", f"{rate:.0f}", ratio)
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))


if __name__ == "__main__":
    main()
