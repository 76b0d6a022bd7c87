"""Benchmark: closed form, certified exact interval and σ calibration for random allocation.

Prints, with baselines measured in the same run (timings are noisy on a shared machine):

(i)   closed-form σ: scalar call time (target ≤ 10 µs) and the vectorised call for 10⁶ targets
      as a ratio to the plain numpy expression of the same formula (target ≤ 1.5×);
(ii)  calibration to the exact accuracy, target 0.6, at (M=100, E=10) and (M=1000, E=100)
      (target ≤ 1 s each), with the number of exact evaluations and the saving vs the closed form;
(iii) the grid σ × M × E of the exact interval: time, peak memory (RSS growth, in a fresh
      subprocess per cell), interval width and warnings per cell. ``--quick`` runs a subset,
      ``--corners`` adds M ∈ {1e7, 1e8}, E ∈ {1e5, 1e6} at a few σ; ``--item2`` runs instead
      the E = 1000 and M = 1000 cells of the 10 s target (M ≤ 1e4, E ≤ 1e3), ``--band`` the
      σ 0.3–1.5 × M 1e6–1e8 × E 1e5–1e6 cells (the hybrid grids' hardest). Each cell also times a fixed
      reference workload (FFT convolutions of 2¹⁸ points) in the same process: ``ratio`` is the
      cell's time in units of it (robust to machine load). ``--json OUT`` saves the cells and
      ``--compare OLD.json`` prints, per cell, whether the new interval meets the old one and
      the largest |Δ| of the bounds.
(iv)  published accountants at the exact σ (``--accountants``; time-boxed, one evaluation).
(v)   ``--issue29``: the calibration grid of issue 29 (M ∈ {1e2, 1e3, 1e4}, E ∈ {1, 10, 1e2,
      1e3}, targets 0.51, 0.6, 0.75, 0.9; rtol 1e-3), one fresh process per cell: wall and
      CPU time, evaluations, peak RSS, "certified" (the returned σ's upper end ≤ target) and
      "within 0.1%" verified after the timing by an exact evaluation at σ/1.001 whose certified
      lower end exceeds the target (so the exact root lies above σ/1.001). Then, in the same
      run, pld-accounting's σ search (Feldman & Shenfeld 2026; Brent in ln σ to 1e-3, dominating
      PLD, ``--pld-discretization``) on ``--pld-cells`` cells: the ratio of its time to ours.
      ``--baseline REF`` (e.g. ``main``) also runs every cell, in the same run, with the
      package as it is at git ref REF (exported by ``git archive`` to a temporary folder) and
      prints the CPU-time ratio old/new per cell and in all (REF may also be a folder holding
      a ``pacpriv`` package).
(vi)  ``--k-of-t``: the exact k-of-t interval at the docs' example points (docs/guide/k_of_t.md):
      width and time (target: width ≤ 1e-3 in ≤ 10 s each).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from pacpriv.dpsgd import calibrate_noise_multiplier, closed_form_noise_multiplier

SIGMAS = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 4.0)
STEPS = (1, 2, 3, 10, 100, 10**4, 10**6)
EPOCHS = (1, 10, 100, 10**4)
QUICK = ((0.05, 0.3, 1.0), (1, 10, 100, 10**4), (1, 10, 100))
CORNER_SIGMAS = (0.05, 0.2, 0.5, 1.0, 4.0)
CORNER_CELLS = tuple(
    [(s, m, e) for s in CORNER_SIGMAS for m in (10**7, 10**8) for e in (1, 100, 10**4)]
    + [(s, m, e) for s in CORNER_SIGMAS for m in (10, 10**4, 10**6) for e in (10**5, 10**6)]
    + [(s, 10**8, 10**6) for s in CORNER_SIGMAS]
)
#: the band where the exact method works hardest (hybrid grids, large M·E, σ near 0.5)
BAND_CELLS = tuple(
    (s, m, e) for s in (0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 1.0, 1.5)
    for m in (10**6, 10**7, 10**8) for e in (10**5, 10**6)
)
#: Issue 13 item 2 (≤ 10 s for M ≤ 1e4, E ≤ 1e3): the E = 1000 and M = 1000 cells the grid lacks
ITEM2_CELLS = tuple(
    [(s, m, 1000) for s in SIGMAS for m in (2, 10, 100, 1000, 10**4)]
    + [(s, 1000, e) for s in SIGMAS for e in (1, 10, 100)]
)

_CELL = """
import json, resource, sys, time, warnings
from pacpriv.dpsgd import exact_membership_inference_accuracy as ex
s, m, e = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
import numpy as np
from scipy import signal
x = np.random.default_rng(0).random(2**18)
t = time.perf_counter()
for _ in range(5):
    signal.fftconvolve(x, x)
ref = (time.perf_counter() - t) / 5
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    r = ex(s, steps_per_epoch=m, epochs=e, progress=False)
dt = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"lower": r.lower, "upper": r.upper, "time": dt, "ref": ref, "rss_kb": peak,
                  "growth_kb": peak - base, "method": r.details.get("method"),
                  "warnings": [str(x.message)[:80] for x in w]}))
"""


def _closed_form() -> None:
    print("(i) closed-form sigma")
    n = 20000
    t = time.perf_counter()
    for _ in range(n):
        closed_form_noise_multiplier(0.6, steps_per_epoch=100, epochs=10)
    per = (time.perf_counter() - t) / n
    a = np.random.default_rng(0).uniform(0.51, 0.99, 10**6)

    def plain(x, m, e):
        return 1.0 / np.sqrt(np.log1p(m * np.expm1(np.log1p(16.0 * (x - 0.5) ** 2) / e)))

    reps = 7
    t_lib, t_plain = [], []
    for _ in range(reps):  # interleaved, best of reps
        t = time.perf_counter()
        closed_form_noise_multiplier(a, steps_per_epoch=100, epochs=10)
        t_lib.append(time.perf_counter() - t)
        t = time.perf_counter()
        plain(a, 100, 10)
        t_plain.append(time.perf_counter() - t)
    ratio = min(t_lib) / min(t_plain)
    print(f"  scalar call: {per * 1e6:.2f} us (target <= 10 us)")
    print(f"  vectorised 1e6 targets: {min(t_lib) * 1e3:.1f} ms vs plain numpy "
          f"{min(t_plain) * 1e3:.1f} ms -> ratio {ratio:.2f} (target <= 1.5)")


def _calibration() -> None:
    print("(ii) calibration to the exact accuracy, target 0.6 (certified upper end)")
    for m, e in [(100, 10), (1000, 100)]:
        t = time.perf_counter()
        cal = calibrate_noise_multiplier(0.6, steps_per_epoch=m, epochs=e)
        dt = time.perf_counter() - t
        print(f"  M={m:5d} E={e:4d}: sigma {cal.noise_multiplier:.5f} (closed form "
              f"{cal.closed_form_noise_multiplier:.5f}, saving {100 * cal.noise_saving:.1f}%), "
              f"{cal.n_evaluations} evals, {dt:.3f} s (target <= 1 s); upper "
              f"{cal.accuracy.upper:.6f} <= 0.6")


def _cells(quick: bool, corners: bool) -> list[tuple[float, int, int]]:
    sig, steps, epochs = QUICK if quick else (SIGMAS, STEPS, EPOCHS)
    cells = [(s, m, e) for s in sig for m in steps for e in epochs]
    return cells + list(CORNER_CELLS) if corners else cells


def _grid(cells, out_json: str | None, compare: str | None, timeout: float) -> None:
    print("(iii) exact interval grid (tolerance 1e-4; fresh process per cell; peak = max RSS, "
          "growth = RSS growth during the call; ratio = time / reference FFT workload)")
    old = {}
    if compare:
        with open(compare) as fh:
            old = {(c["sigma"], c["M"], c["E"]): c for c in json.load(fh)}
    print(f"  {'sigma':>5s} {'M':>9s} {'E':>7s} {'lower':>10s} {'upper':>10s} {'width':>8s} "
          f"{'time s':>7s} {'ratio':>6s} {'peak MB':>8s} {'growth MB':>9s} {'method':>10s} warn"
          + ("  overlap |d|max" if old else ""))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    done, max_d, n_warn, n_disjoint = [], 0.0, 0, 0
    for s, m, e in cells:
        try:
            out = subprocess.run([sys.executable, "-c", _CELL, str(s), str(m), str(e)],
                                 capture_output=True, text=True, env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            print(f"  {s:5g} {m:9d} {e:7d} TIMEOUT after {timeout:g} s", flush=True)
            done.append({"sigma": s, "M": m, "E": e, "timeout": timeout})
            continue
        if out.returncode:
            print(f"  {s:5g} {m:9d} {e:7d} FAILED: {out.stderr.strip()[-200:]}", flush=True)
            done.append({"sigma": s, "M": m, "E": e, "failed": out.stderr.strip()[-500:]})
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        r.update({"sigma": s, "M": m, "E": e})
        done.append(r)
        n_warn += bool(r["warnings"])
        line = (f"  {s:5g} {m:9d} {e:7d} {r['lower']:10.7f} {r['upper']:10.7f} "
                f"{r['upper'] - r['lower']:8.1e} {r['time']:7.2f} {r['time'] / r['ref']:6.0f} "
                f"{r['rss_kb'] / 1e3:8.0f} {r['growth_kb'] / 1e3:9.0f} {r['method']:>10s} "
                f"{len(r['warnings'])}")
        o = old.get((s, m, e))
        if o is not None and "lower" in o:
            ok = max(o["lower"], r["lower"]) <= min(o["upper"], r["upper"])
            d = max(abs(o["lower"] - r["lower"]), abs(o["upper"] - r["upper"]))
            max_d = max(max_d, d)
            n_disjoint += not ok
            line += f"  {'yes' if ok else 'NO':>7s} {d:8.1e}"
        print(line, flush=True)
    print(f"  cells {len(done)}, warned {n_warn}"
          + (f", disjoint from old {n_disjoint}, max |d| {max_d:.2e}" if old else ""))
    if out_json:
        with open(out_json, "w") as fh:
            json.dump(done, fh, indent=0)


def _accountants(sigma: float) -> None:
    from pacpriv.dpsgd import comparators as cmp

    print(f"(iv) published accountants at the exact sigma {sigma:.5f} (M=100, E=10)")
    for name, fn in [("fs-pld (pld-accounting)", cmp._fs_pld_accuracy),
                     ("random-allocation pkg", cmp._random_allocation_accuracy)]:
        try:
            t = time.perf_counter()
            acc = fn(sigma, 100, 10)
            print(f"  {name:28s} accuracy {acc:.6f} in {time.perf_counter() - t:.2f} s")
        except Exception as exc:
            print(f"  {name:28s} not available: {exc}")


ISSUE29_STEPS = (100, 1000, 10**4)
ISSUE29_EPOCHS = (1, 10, 100, 1000)
ISSUE29_TARGETS = (0.51, 0.6, 0.75, 0.9)

_CAL_CELL = """
import json, resource, sys, time, warnings
from pacpriv.dpsgd import calibrate_noise_multiplier as cal
from pacpriv.dpsgd import exact_membership_inference_accuracy as ex
a, m, e = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t, c = time.perf_counter(), time.process_time()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    r = cal(a, steps_per_epoch=m, epochs=e, rtol=1e-3)
dt, dc = time.perf_counter() - t, time.process_time() - c
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    v = ex(r.noise_multiplier / 1.001, steps_per_epoch=m, epochs=e,
           tolerance=max(1e-7, (a - 0.5) * 2e-4))
print(json.dumps({"sigma": r.noise_multiplier, "time": dt, "cpu": dc, "evals": r.n_evaluations,
                  "upper": r.accuracy.upper, "lower": r.accuracy.lower,
                  "method": r.accuracy.details.get("method"), "certified": r.accuracy.upper <= a,
                  "within": v.lower > a, "lower_at": v.lower, "rss_kb": peak,
                  "growth_kb": peak - base, "warnings": len(w)}))
"""


def _pld_search(target: float, m: int, e: int, disc: float, start: float) -> dict:
    """pld-accounting's σ search: Brent in ln σ on ½ + ½δ(0) − target (dominating PLD)."""
    import math

    from PLD_accounting import (
        AllocationSchemeConfig,
        BoundType,
        PrivacyParams,
        gaussian_allocation_pld,
    )
    from scipy import optimize

    n = [0]

    def acc(ls: float) -> float:
        n[0] += 1
        pld = gaussian_allocation_pld(
            params=PrivacyParams(sigma=math.exp(ls), num_steps=m, num_epochs=e),
            config=AllocationSchemeConfig(loss_discretization=disc),
            bound_type=BoundType.DOMINATES)
        return 0.5 + 0.5 * float(pld.get_delta_for_epsilon(0.0)) - target

    t = time.perf_counter()
    root = optimize.brentq(acc, math.log(start / 1.3), math.log(start * 1.3), xtol=1e-3)
    return {"sigma": math.exp(root), "time": time.perf_counter() - t, "evals": n[0]}


def _export(ref: str) -> str:
    """The package at git ref ``ref``, exported to a temporary folder (for the baseline); a
    folder that holds a ``pacpriv`` package is used as it is."""
    import tempfile

    if (Path(ref) / "pacpriv").is_dir():
        return str(Path(ref).resolve())

    root = Path(__file__).resolve().parents[1]
    dest = tempfile.mkdtemp(prefix="pacpriv-baseline-")
    arch = subprocess.run(["git", "-C", str(root), "archive", ref, "pacpriv"],
                          capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=arch, check=True)
    return dest


def _cal_cell(a: float, m: int, e: int, env: dict, timeout: float) -> dict | str:
    """One calibration cell in a fresh process: its JSON line, or why there is none."""
    try:
        # run in the package's folder: ``python -c`` puts the working directory first on
        # sys.path, ahead of PYTHONPATH
        out = subprocess.run([sys.executable, "-c", _CAL_CELL, str(a), str(m), str(e)],
                             capture_output=True, text=True, env=env, timeout=timeout,
                             cwd=env["PYTHONPATH"])
    except subprocess.TimeoutExpired:
        return f"TIMEOUT after {timeout:g} s"
    if out.returncode:
        return f"FAILED {out.stderr.strip()[-160:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def _issue29(cell_timeout: float, pld_cells: list, disc: float, pld_timeout: float,
             grid: list | None = None, baseline: str | None = None) -> None:
    print("(v) issue 29 calibration grid (rtol 1e-3; fresh process per cell; 'within 0.1%': "
          "certified lower end at sigma/1.001 above the target; load "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    print(f"  {'M':>6s} {'E':>5s} {'target':>6s} {'sigma':>10s} {'wall s':>7s} {'cpu s':>6s} "
          f"{'evals':>5s} {'width':>7s} {'method':>9s} {'peak MB':>7s} certified within-0.1%"
          + (f" {'old cpu s':>9s} {'old sigma':>10s} {'old/new':>7s}" if baseline else ""))
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    env_old = dict(os.environ, PYTHONPATH=_export(baseline)) if baseline else None
    ours: dict = {}
    worst, n_ok, tot_new, tot_old = 0.0, 0, 0.0, 0.0
    cells = grid if grid else [(m, e, a) for m in ISSUE29_STEPS for e in ISSUE29_EPOCHS
                               for a in ISSUE29_TARGETS]
    for m, e, a in cells:
        r = _cal_cell(a, m, e, env, cell_timeout)
        if isinstance(r, str):
            print(f"  {m:6d} {e:5d} {a:6g} {r}", flush=True)
            continue
        ours[(m, e, a)] = r
        worst = max(worst, r["cpu"])
        n_ok += r["cpu"] <= 1.0
        line = (f"  {m:6d} {e:5d} {a:6g} {r['sigma']:10.6f} {r['time']:7.2f} "
                f"{r['cpu']:6.2f} {r['evals']:5d} {r['upper'] - r['lower']:7.1e} "
                f"{r['method']!s:>9s} {r['rss_kb'] / 1e3:7.0f} "
                f"{r['certified']!s:>9s} {r['within']!s:>13s}")
        if env_old is not None:
            o = _cal_cell(a, m, e, env_old, cell_timeout)
            if isinstance(o, str):
                line += f" old: {o}"
            else:
                tot_new, tot_old = tot_new + r["cpu"], tot_old + o["cpu"]
                line += (f" {o['cpu']:9.2f} {o['sigma']:10.6f} "
                         f"{o['cpu'] / max(r['cpu'], 1e-9):7.1f}")
        print(line, flush=True)
    print(f"  cells with CPU time <= 1 s: {n_ok} of {len(ours)}; slowest {worst:.2f} s CPU; "
          f"load at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
          + (f"; total CPU old/new {tot_old:.1f}/{tot_new:.1f} s = "
             f"{tot_old / max(tot_new, 1e-9):.1f}x" if baseline else ""))
    for m, e, a in pld_cells:
        mine = ours.get((m, e, a))
        if mine is None:
            continue
        # load this file by path: benchmarks/ holds a coverage.py that must not shadow the
        # coverage package numba imports
        code = ("import importlib.util, json; spec = importlib.util.spec_from_file_location("
                f"'bench', {str(Path(__file__).resolve())!r}); mod = importlib.util."
                "module_from_spec(spec); spec.loader.exec_module(mod); print(json.dumps("
                f"mod._pld_search({a}, {m}, {e}, {disc}, {mine['sigma']})))")
        try:
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 env=env, timeout=pld_timeout)
        except subprocess.TimeoutExpired:
            print(f"  pld-accounting search M={m} E={e} target {a}: > {pld_timeout:g} s "
                  f"(ratio > {pld_timeout / mine['time']:.0f}x)")
            continue
        if out.returncode:
            print(f"  pld-accounting search M={m} E={e}: failed {out.stderr.strip()[-160:]}")
            continue
        p = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"  pld-accounting (loss_discretization={disc}) M={m} E={e} target {a}: sigma "
              f"{p['sigma']:.6f} ({100 * (p['sigma'] / mine['sigma'] - 1):+.2f}% vs ours), "
              f"{p['evals']} evals, {p['time']:.1f} s -> ratio {p['time'] / mine['time']:.0f}x "
              "our wall time")


#: the docs' k-of-t example points (σ, t, k, E), docs/guide/k_of_t.md §5
K_OF_T_POINTS = ((1.0, 10, 2, 1), (1.0, 10, 2, 3), (1.5, 12, 3, 2), (1.0, 10, 2, 4),
                 (0.7, 12, 3, 2), (2.0, 20, 4, 10), (2.0, 100, 4, 10))


def _k_of_t() -> None:
    import warnings

    from pacpriv.dpsgd import exact_membership_inference_accuracy as ex

    print("(vi) exact k-of-t interval at the docs' example points (default tolerance; "
          f"target width <= 1e-3 in <= 10 s; wall and CPU time of this process; load {os.getloadavg()[0]:.2f})")
    print(f"  {'sigma':>5s} {'t':>4s} {'k':>2s} {'E':>3s} {'lower':>9s} {'upper':>9s} "
          f"{'width':>8s} {'time s':>7s} {'cpu s':>7s}  upper end / lower end (confidence); stratified "
          "upper; split blocks [t_j, k_j] and its upper")
    for s, t, k, e in K_OF_T_POINTS:
        t0, c0 = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = ex(s, steps_per_epoch=t, epochs=e, k=k)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        d = r.details
        print(f"  {s:5g} {t:4d} {k:2d} {e:3d} {r.lower:9.6f} {r.upper:9.6f} "
              f"{r.upper - r.lower:8.1e} {dt:7.2f} {cpu:7.2f}  {d['upper_source']} / "
              f"{d['lower_source']} ({r.lower_confidence:g}); {d['upper_stratified']:.6f}"
              + (f"; split {d['split']['blocks']} {d['split']['accuracy_upper']:.6f}"
                 if "split" in d else ""), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a subset of the grid")
    ap.add_argument("--no-grid", action="store_true", help="skip the grid table")
    ap.add_argument("--grid-only", action="store_true", help="only the grid table")
    ap.add_argument("--corners", action="store_true", help="add the M/E corner cells")
    ap.add_argument("--only-corners", action="store_true", help="only the corner cells")
    ap.add_argument("--item2", action="store_true",
                    help="only the E = 1000 / M = 1000 cells of the 10 s target")
    ap.add_argument("--band", action="store_true",
                    help="only the σ 0.3–1.5, M 1e6–1e8, E 1e5–1e6 cells (hybrid grids)")
    ap.add_argument("--json", help="save the grid cells to this JSON file")
    ap.add_argument("--compare", help="JSON of an earlier grid run: overlap and max |d|")
    ap.add_argument("--cell-timeout", type=float, default=600.0, help="seconds per cell")
    ap.add_argument("--accountants", action="store_true", help="time published accountants")
    ap.add_argument("--issue29", action="store_true",
                    help="only the issue-29 calibration grid and the pld-accounting ratio")
    ap.add_argument("--pld-discretization", type=float, default=0.02)
    ap.add_argument("--pld-timeout", type=float, default=1800.0)
    ap.add_argument("--pld-cells", default="100:10:0.6,1000:100:0.6",
                    help="M:E:target,... for the pld-accounting search ('' for none)")
    ap.add_argument("--grid-cells", default="",
                    help="M:E:target,... instead of the full issue-29 grid")
    ap.add_argument("--baseline", default=None,
                    help="git ref whose package also runs every issue-29 cell (e.g. main)")
    ap.add_argument("--k-of-t", action="store_true",
                    help="only the k-of-t intervals at the docs' example points")
    args = ap.parse_args()
    if args.k_of_t:
        _k_of_t()
        return
    if args.issue29:
        def parse(text):
            return [(int(c.split(":")[0]), int(c.split(":")[1]), float(c.split(":")[2]))
                    for c in text.split(",") if c]
        _issue29(args.cell_timeout, parse(args.pld_cells), args.pld_discretization,
                 args.pld_timeout, parse(args.grid_cells), args.baseline)
        return
    if not args.grid_only:
        _closed_form()
        _calibration()
    if not args.no_grid:
        if args.item2:
            cells = list(ITEM2_CELLS)
        elif args.band:
            cells = list(BAND_CELLS)
        elif args.only_corners:
            cells = list(CORNER_CELLS)
        else:
            cells = _cells(args.quick, args.corners)
        _grid(cells, args.json, args.compare, args.cell_timeout)
    if args.accountants:
        cal = calibrate_noise_multiplier(0.6, steps_per_epoch=100, epochs=10)
        _accountants(cal.noise_multiplier)


if __name__ == "__main__":
    main()
