"""``pacpriv pac records``: per-record membership exposure (informed adversary) of a mechanism.

Either measures each record's exposure under a given isotropic noise (``--noise-std``) or
calibrates the noise to a per-record target (``--target-accuracy``), and writes the report
(JSON / Markdown / HTML) with the per-record section (PAC Privacy, Xiao & Devadas 2023, §2).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pacpriv import _json
from pacpriv._files import INDEX_LIST_MARKER, atomic_write, check_not_in_report, check_output_file
from pacpriv._numbers import format_bound, format_percent
from pacpriv.cli import _args
from pacpriv.cli._args import (
    UsageError,
    add_report_output,
    integer,
    number,
    report_formats,
)
from pacpriv.cli._resources import check_output_dir, effective_n_jobs, hold_report_folder
from pacpriv.cli._specs import add_spec_flags, spec_from_args
from pacpriv.cli._user import (
    add_dataset_arguments,
    check_mechanism_file,
    check_ranges_reach_the_mechanism,
    load_cli_dataset,
    resolve_cli_mechanism,
)
from pacpriv.pac.engine._limit import carry_over, whole_run_words
from pacpriv.pac.engine._options import ExecutionOptions
from pacpriv.pac.engine._probe import duration_text
from pacpriv.pac.engine._simulate import _check_memory
from pacpriv.pac.per_record._calibration import BOUNDS, SHAPES, calibrate_per_record
from pacpriv.pac.per_record._exposure import record_exposure
from pacpriv.pac.per_record._report import aggregates_line
from pacpriv.pac.samplers import PoissonSampler
from pacpriv.report import write_report
from pacpriv.report.builder import build_report, local_base_name
from pacpriv.report.pool import is_public_pool

__all__ = ["add_records_parser", "parse_records"]

#: Public seed of ``--records sample:K`` (the audited sample is not secret).
SAMPLE_SEED = 0


def parse_records(spec: str | None, n_records: int) -> np.ndarray | None:
    """Parse ``--records``: ``all``, ``sample:K`` or a list ``0-99,120,200-210`` (inclusive).

    Raises
    ------
    UsageError
        For a malformed spec or indices outside ``[0, n_records)``.
    """
    if spec is None or spec.strip() == "all":
        return None
    text = spec.strip()
    if text.startswith("sample:"):
        try:
            k = int(text.split(":", 1)[1])
        except ValueError:
            raise UsageError(f"--records sample:K needs an integer K; got {spec!r}") from None
        if not 1 <= k <= n_records:
            raise UsageError(f"--records sample:K needs 1 <= K <= {n_records}; got {k}")
        gen = np.random.default_rng(SAMPLE_SEED)
        return np.sort(gen.choice(n_records, size=k, replace=False))
    shown = spec if len(spec) <= 60 else spec[:57] + "..."
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part[1:]:
                a, b = part.split("-", 1)
                lo, hi = int(a), int(b)
                if hi < lo:
                    raise ValueError
            else:
                lo = hi = int(part)
        except ValueError:
            raise UsageError(
                f"--records must be 'all', 'sample:K' or indices/ranges like 0-99,120; "
                f"got {shown!r}"
            ) from None
        # checked before a range is expanded: a huge index is refused, never materialised
        if lo < 0 or hi >= n_records:
            raise UsageError(
                f"--records indices must be in [0, {n_records - 1}]; got {shown!r}")
        out.extend(range(lo, hi + 1))
    arr = np.asarray(out, dtype=np.int64)
    if np.unique(arr).size != arr.size:
        raise UsageError(f"--records must not repeat an index; got {shown!r}")
    return arr


def add_records_parser(sub) -> None:
    """Register ``pacpriv pac records`` on the ``pac`` sub-parsers."""
    p = sub.add_parser(
        "records",
        help="per-record membership exposure (informed adversary); calibrate or measure noise",
        description="Per-record PAC membership privacy: each record's exposure to an adversary "
        "who knows every other record's membership, and noise for a per-record target. "
        "Writes report.json / report.md (/ report.html).",
    )
    p.add_argument("--mechanism", required=True,
                   help="built-in name, module:function or path.py:function")
    p.add_argument("--dataset", required=True,
                   help="bundled dataset (iris, wine, breast_cancer, digits, diabetes) or a path")
    add_dataset_arguments(p, feature_ranges=False)
    p.add_argument("--target-accuracy", type=number, default=None,
                   help="per-record accuracy target in (max(q, 1-q), 1): calibrate the noise")
    p.add_argument("--noise-std", type=number, default=None,
                   help="alternatively: isotropic noise std (> 0) to measure the exposure of")
    _args.add_pool_statistics(
        p, report_help="include the calibrated noise's absolute scale in the report and here "
        "(a statistic of f over subsets of the pool). Default: shown only for a bundled public "
        "dataset or a --noise-std you chose")
    p.add_argument("--trials", type=integer, default=200,
                   help="simulated subsets (>= 2); each costs 1 + (audited records) "
                   "evaluations (default 200)")
    p.add_argument("--records", default="all",
                   help="audited records: all, sample:K (public seed 0) or 0-99,120 (default all)")
    p.add_argument("--confidence", type=number, default=0.95,
                   help="1−γ in (0, 1): all per-record upper bounds hold at once (default 0.95)")
    p.add_argument("--sampling-rate", type=number, default=0.5,
                   help="Poisson membership prior q in (0, 1) (default 0.5)")
    p.add_argument("--shape", default="isotropic",
                   choices=SHAPES.choices(),
                   help="noise shape for --target-accuracy, fitted on the shape trials "
                   "(default isotropic)")
    p.add_argument("--bound", default="betting", choices=BOUNDS,
                   help="per-record certificate: betting confidence bounds (default; "
                   "Waudby-Smith & Ramdas 2024) or empirical Bernstein (Maurer & Pontil 2009: "
                   "needs more trials)")
    p.add_argument("--seed", type=integer, default=None,
                   help="root seed of the simulation, an integer >= 0 (default: OS entropy)")
    add_spec_flags(p, ExecutionOptions, only=("n_jobs", "backend", "ensemble", "checkpoint",
                                               "progress", "record_block", "timeout",
                                               "time_limit"),
                  helps={"time_limit": "limit in seconds on the whole run (> 0): every "
                         "simulation of the command (with --target-accuracy: the shape and "
                         "certification trials and the whole-subset plan) shares it; refused "
                         "before any trial when the estimated time of all of them (printed "
                         "first, from a short timed probe of the mechanism) exceeds it; "
                         "stopped at the limit otherwise (finished trials stay in "
                         "--checkpoint: rerun the same command to resume). Default: none"})
    add_report_output(p, default_out="pacpriv-records", out_help="report directory (created; "
                                                                 "must be writable)",
                      json_help="print the report JSON to stdout")
    p.add_argument("--private-index-list", default=None, metavar="FILE.json",
                   help="PRIVATE output: also write every audited record's index with its "
                   "per-record upper bound, most exposed first, to this new owner-only (0600) "
                   "JSON file outside --out. Reports and the screen never name a record; this "
                   "file does (it tells which records are outliers): keep it private")
    p.set_defaults(handler=_records)


def _check_index_list(args) -> Path | None:
    """``--private-index-list``: a new ``.json`` file outside ``--out`` (checked before work)."""
    if args.private_index_list is None:
        return None
    out, wanted = Path(args.out).resolve(), Path(args.private_index_list).resolve()
    if out == wanted.parent or out in wanted.parents:
        raise UsageError("--private-index-list must lie outside --out (the report folder may "
                         "be shared; the index list is private)")
    path = check_output_file(args.private_index_list, "--private-index-list", suffix=".json")
    check_not_in_report(path, "--private-index-list")
    if path.exists():
        raise UsageError(f"--private-index-list {str(path)!r} exists; give a new file (it is "
                         "never replaced)")
    return path


def _write_index_list(path: Path, exposure) -> None:
    """The private list: owner-only, atomic, never part of the report."""
    body = {"private": INDEX_LIST_MARKER,
            "accuracy_upper_kind": f"certified (1-gamma = {exposure.confidence})",
            "records": exposure.ranked()}
    atomic_write(path, (_json.dumps(body, indent=1) + "\n").encode())
    print(f"pacpriv: note: private output: {len(body['records'])} record indices with their "
          f"bounds written to {str(path)!r} (owner-only; not part of the report)",
          file=sys.stderr)


class _Report:
    """Adapter: the report writers take any object with ``report_section()``."""

    def __init__(self, section: dict) -> None:
        self._section = section

    def report_section(self) -> dict:
        return self._section


def _check(args) -> tuple[str, ...]:
    _args.check_exactly_one(args, "--target-accuracy", "--noise-std")
    _args.check_positive_finite(args, "--noise-std")
    if args.noise_std is not None and not 1e-150 <= args.noise_std <= 1e150:
        # its square, the noise variance, must be a normal positive float64
        raise UsageError(f"--noise-std must be in [1e-150, 1e+150] (its square is the noise "
                         f"variance, a float64); got {args.noise_std:g}")
    _args.check_trials(args)
    _args.check_unit_interval(args, "--confidence")
    _args.check_unit_interval(args, "--sampling-rate")
    base = max(args.sampling_rate, 1 - args.sampling_rate)
    if args.target_accuracy is not None and not base < args.target_accuracy < 1:
        raise UsageError(
            f"--target-accuracy must be in ({base:g}, 1) for --sampling-rate "
            f"{args.sampling_rate:g}; got {args.target_accuracy}")
    spec_from_args(ExecutionOptions, args)  # every execution flag (--time-limit too)
    return report_formats(args.formats)


#: Runs estimated shorter than this print no estimate (unless --time-limit is given).
_SAY_ESTIMATE_FROM_S = 10.0


def _estimate(mechanism, dataset, records, n_jobs, args) -> None:
    """Print the run's time estimate (stderr) before any trial; refuse above --time-limit."""
    from pacpriv.pac.engine._probe import ProbeTimeoutError, bounded_probe, probe_limit
    from pacpriv.pac.per_record._checks import check_records
    from pacpriv.pac.per_record._estimate import timed_probe

    recs = check_records(records, dataset.n_records)
    execution = spec_from_args(ExecutionOptions, args, n_jobs=n_jobs)
    on_disk = execution.output_path or (execution.checkpoint if execution.memory_map else None)
    try:  # the engine's refusal of a run too large for memory, before the estimate
        _check_memory(args.trials, dataset.n_records, on_disk)
    except ValueError as err:
        raise UsageError(str(err).replace("`n_trials`", "--trials")) from None
    workers = n_jobs if n_jobs and n_jobs > 0 else 1
    # the probe runs the mechanism before any trial: bounded by --time-limit and --timeout
    limit = probe_limit((args.time_limit, "--time-limit"), (execution.timeout, "--timeout"))
    try:
        with bounded_probe(limit, what="the timed probe of the mechanism (before the run)",
                           hint="pass --time-limit SECONDS to bound it"):
            est = timed_probe(mechanism, dataset.pool, recs, n_records=dataset.n_records,
                              n_trials=args.trials, sampling_rate=args.sampling_rate,
                              workers=workers, record_block=args.record_block)
    except ProbeTimeoutError as err:
        raise UsageError(str(err)) from None
    except Exception:  # the run reports a failing mechanism with its trial and seed
        return
    text = est.text()
    if args.target_accuracy is not None:  # the whole-subset plan's trials, one call each
        whole = math.ceil(args.trials / est.workers) * est.per_trial_s / est.evaluations_per_trial
        est = dataclasses.replace(est, seconds=est.seconds + whole)
        text += (f", and {duration_text(whole)} for the whole-subset plan it is compared with "
                 f"({args.trials} trials x 1 evaluation): about {duration_text(est.seconds)} "
                 "in all")
    if est.seconds >= _SAY_ESTIMATE_FROM_S or args.time_limit is not None:
        print(f"pacpriv: estimate: {text}", file=sys.stderr)
    if args.time_limit is not None and est.seconds > args.time_limit:
        raise UsageError(f"the run would take {text}, over --time-limit "
                         f"{args.time_limit:g} s: use fewer --trials or --records, more "
                         f"--n-jobs, or a larger --time-limit (nothing was run)")


def _refuse_other_checkpoint(args, mechanism, dataset, records) -> None:
    """A --checkpoint of another run is refused in words before the probe and its estimate
    (ninth new-user pass, #64/#67): another kind of run (pac run, compare), other --records,
    and for a calibration its mechanism, --dataset, --sampling-rate and --seed too (a
    per-record simulation's whole fingerprint is checked when it opens)."""
    if args.checkpoint is None:
        return
    from pacpriv._random import as_seed_sequence
    from pacpriv.pac.engine._checkpoint import Checkpoint
    from pacpriv.pac.engine._checkpoint_words import records_text
    from pacpriv.pac.engine._simulate import _check_pool
    from pacpriv.pac.per_record._calibration import calibration_fingerprint
    from pacpriv.pac.per_record._checks import check_records

    recs = check_records(records, dataset.n_records)
    if args.target_accuracy is not None and args.bound == "betting":
        import inspect

        fraction = inspect.signature(calibrate_per_record).parameters["shape_fraction"].default
        fingerprint = calibration_fingerprint(mechanism, _check_pool(dataset.pool)[0], recs,
                                              PoissonSampler(args.sampling_rate),
                                              shape=args.shape, shape_fraction=fraction)
        Checkpoint.check(args.checkpoint, fingerprint=fingerprint,
                         root=None if args.seed is None else as_seed_sequence(args.seed))
    else:
        Checkpoint.check_kind(args.checkpoint, kind="per_record_simulation",
                              records=records_text(recs))


def _pool_shown(args, dataset) -> bool:
    """Whether the pool's statistics are shown (the terminal and the report alike): never with
    --withhold-pool-statistics; else for a public pool, with --report-pool-statistics, or with
    --noise-std (the scale is the user's, not calibrated on the pool)."""
    return not args.withhold_pool_statistics and bool(
        args.target_accuracy is None or args.report_pool_statistics
        or is_public_pool({"source": dataset.source}))


def _check_against_whole_subset(plan, mechanism, dataset, args, execution,
                                started: float) -> None:
    """Warn when the per-record plan needs more noise than the whole-subset plan for the same
    target (:func:`pacpriv.pac.noise._plan.per_record_noise_excess`): that plan is calibrated
    here too, on ``--trials`` more evaluations (the audit costs ``1 + k`` per trial), within
    what is left of --time-limit (the whole command's); past it, the comparison is skipped
    with a warning (the per-record plan stands)."""
    import warnings

    from pacpriv.exceptions import CalibrationError, PacprivWarning, TimeLimitError
    from pacpriv.pac.bounds._posterior import mi_budget_for_accuracy
    from pacpriv.pac.job import run_pac
    from pacpriv.pac.noise._plan import per_record_noise_excess

    prior = max(args.sampling_rate, 1.0 - args.sampling_rate)
    budget = float(mi_budget_for_accuracy(args.target_accuracy, prior=prior))
    if execution.checkpoint is not None:  # its own subfolder, beside "shape" and "certify"
        # (the per-record checkpoint itself belongs to another run: a CheckpointError, and no
        # comparison, on every run with --checkpoint: seventh new-user pass, #504)
        execution = execution.replace(
            checkpoint=os.path.join(os.fspath(execution.checkpoint), "whole-subset"))
    try:
        execution = carry_over(execution, started, args.time_limit,
                               before="the whole-subset comparison")
        with warnings.catch_warnings():  # the reference plan's own caveats are not ours
            warnings.simplefilter("ignore")
            whole = run_pac(mechanism, dataset.pool, mi_budget=budget, n_trials=args.trials,
                            sampler=PoissonSampler(args.sampling_rate), rng=args.seed,
                            release=False, execution=execution)
    except TimeLimitError:
        warnings.warn(f"--time-limit {args.time_limit:g} s (the whole command) ran out before "
                      "the whole-subset plan for the same target was calibrated; the "
                      "per-record plan was not checked against it.", PacprivWarning,
                      stacklevel=2)
        return
    except (ValueError, CalibrationError) as err:
        warnings.warn(f"the whole-subset plan for the same target could not be calibrated "
                      f"for comparison ({type(err).__name__}); the per-record plan was not "
                      "checked against it.", PacprivWarning, stacklevel=2)
        return
    # ratios only (no absolute scale) unless the pool's statistics are withheld: then none
    excess = per_record_noise_excess(plan, whole.plan, ratios=not args.withhold_pool_statistics)
    if excess is not None:
        warnings.warn(excess, PacprivWarning, stacklevel=2)


def _drop_empty_checkpoint(path) -> None:
    """Remove a --checkpoint folder this command created when it holds no trial (only
    manifests: a later phase's time limit refused the run before any trial)."""
    import shutil

    files = [f for _, _, names in os.walk(path) for f in names]
    if all(name == "manifest.json" for name in files):
        shutil.rmtree(path, ignore_errors=True)


def _records(args) -> int:
    formats = _check(args)
    check_output_dir(args.out, "--out")  # before any work
    index_list = _check_index_list(args)
    if args.checkpoint is not None:
        check_output_dir(args.checkpoint, "--checkpoint")
    check_mechanism_file(args.mechanism)
    check_ranges_reach_the_mechanism(args)
    dataset = load_cli_dataset(args)
    records = parse_records(args.records, dataset.n_records)
    mechanism, mech_name = resolve_cli_mechanism(args.mechanism, dataset, args)
    mech_name = local_base_name(mech_name)  # no local directories in output
    n_jobs, cap_note = effective_n_jobs(args.n_jobs, args.backend)
    if cap_note:
        print(f"pacpriv: note: {cap_note}", file=sys.stderr)
    common = dict(n_trials=args.trials, sampler=PoissonSampler(args.sampling_rate),
                  records=records, confidence=args.confidence, rng=args.seed,
                  bound=args.bound,
                  execution=spec_from_args(ExecutionOptions, args, n_jobs=n_jobs))
    _refuse_other_checkpoint(args, mechanism, dataset, records)  # before any estimate
    fresh = args.checkpoint is not None and not os.path.lexists(args.checkpoint)
    hold_report_folder(args)  # every flag is checked: take --out now, before any work
    started = time.monotonic()  # --time-limit covers the whole command, probe included
    _estimate(mechanism, dataset, records, n_jobs, args)
    execution = common["execution"]
    common["execution"] = carry_over(execution, started, args.time_limit,
                                     before="the per-record trials")
    try:
        if args.target_accuracy is not None:
            with whole_run_words(args.time_limit):
                plan = calibrate_per_record(mechanism, dataset.pool,
                                            target_accuracy=args.target_accuracy,
                                            shape=args.shape, **common)
            section = plan.report_section(n_pool_records=dataset.n_records)
            exposure = plan.exposure
            summary: dict[str, Any] = {"noise": plan.to_dict(),
                                       "plan_bound": plan.max_accuracy_upper,
                                       "label": plan.bound_label, "method": plan.method}
            _check_against_whole_subset(plan, mechanism, dataset, args, execution, started)
        else:
            with whole_run_words(args.time_limit):
                exposure = record_exposure(mechanism, dataset.pool,
                                           noise_cov=args.noise_std**2, **common)
            section = exposure.report_section(n_pool_records=dataset.n_records)
            summary = {"noise": {"noise_std": args.noise_std}, "plan_bound": None}
    except ValueError as err:  # e.g. an uncertifiable target: say why, no traceback
        if fresh:
            _drop_empty_checkpoint(args.checkpoint)
        raise UsageError(str(err)) from err
    except BaseException:  # e.g. a later phase's time limit refused the run before any
        if fresh:  # trial: a --checkpoint this run made that holds no trial goes ("nothing
            _drop_empty_checkpoint(args.checkpoint)  # was run or created")
        raise
    if index_list is not None and exposure is not None:
        _write_index_list(index_list, exposure)
    section["title"] += f" — {mech_name} on {dataset.name}"
    section["per_record"]["mechanism"] = mech_name
    section["per_record"]["dataset"] = dataset.name
    if dataset.preprocessing:  # what --categorical/--missing/--standardize applied
        section["per_record"]["preprocessing"] = dataset.preprocessing
        section["markdown"] = (f"Dataset preprocessing: {dataset.preprocessing}.\n\n"
                               + section["markdown"])
    if args.seed is not None:  # the root seed of the simulation (public: the trials' seeds)
        section["root_seed"] = {"entropy": int(args.seed), "spawn_key": []}
    section["per_record"]["noise_plan"] = summary["noise"]
    # a calibrated noise scale is a statistic of f over subsets of the pool (see write_report's
    # pool_statistics): hidden unless the pool is public or asked for
    show_scale = _pool_shown(args, dataset)
    policy = False if args.withhold_pool_statistics else show_scale
    paths = write_report(_Report(section), Path(args.out), formats=formats,
                         pool_statistics=policy)
    _args.checkpoint_reminder(args)
    if args.json:
        print(paths["json"].read_text() if "json" in paths
              else _json.dumps(build_report(_Report(section), pool_statistics=policy)))
        return 0
    _print_summary(args, section["per_record"], summary, dataset, mech_name, show_scale)
    for fmt, path in paths.items():
        print(f"{f'report ({fmt})':<21}{path}")
    return 0


def _print_summary(args, d: dict, summary: dict, dataset, mech_name: str,
                   show_scale: bool) -> None:
    """The terminal summary of ``pac records`` (public facts of the report only)."""
    print(f"mechanism            {mech_name} on {dataset.name} ({dataset.n_records} records)")
    shape_note = (f" (the other {args.trials - d['n_trials']} of the {args.trials} trials fixed "
                  "the noise shape)" if args.trials > d["n_trials"] else "")
    print(f"audited records      {d['n_audited']} over {d['n_trials']} trials{shape_note}")
    if summary["plan_bound"] is not None and show_scale:
        print(f"noise ({args.shape})".ljust(21)
              + f"std max {format_bound(summary['noise']['noise_std_max'], side='up')}, "
              f"E||B||^2 = "
              f"{format_bound(summary['noise']['expected_noise_power'], side='up')}")
    elif summary["plan_bound"] is not None:
        why = ("withheld: --withhold-pool-statistics" if args.withhold_pool_statistics else
               "the pool is not public; --report-pool-statistics to include it")
        print(f"noise ({args.shape})".ljust(21) + f"absolute scale not shown ({why})")
    if summary["plan_bound"] is not None:
        print(f"plan bound           {format_percent(summary['plan_bound'])} "
              f"{summary['label']}, target {args.target_accuracy:g}")
        print(f"certificate          {summary['method']}")
    if d["n_audited"] >= dataset.n_records:
        print(f"coverage             every record of the pool ({dataset.n_records})")
    else:
        print(f"coverage             a SAMPLE: the {d['n_audited']} audited records only: the "
              f"other {dataset.n_records - d['n_audited']} records (including any outlier) "
              "are not bounded; audit them all (omit --records) before releasing")
    # --noise-std: the per-record empirical-Bernstein bounds hold at once with 1−γ. With a
    # calibrated plan the scale was chosen on these trials, so only the plan bound (uniform
    # over scales) is certified; the per-record values at that scale are estimates below it.
    kind = (f"certified (1−γ = {args.confidence:g})" if summary["plan_bound"] is None
            else "per-record upper bounds at the calibrated scale (what is certified for "
            "every audited record at once is the plan bound above)")
    print(f"max exposure         {format_percent(d['max_accuracy_upper'])} {kind}; "
          f"median {format_percent(d['median_accuracy_upper'])}")
    if show_scale:  # the plug-in MI is a function of the pool's spectrum: shown with it
        print(f"whole-subset MI      {format_bound(d['whole_subset_mi'])} nats (estimated), "
              f"posterior bound {format_percent(d['whole_subset_accuracy_bound'])}")
    print("exposure over records " + aggregates_line(d, args.target_accuracy)
          + " (aggregates; no record is named)")
