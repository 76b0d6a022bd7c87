"""``pacpriv pac run|posterior|budget``: the PAC main job and the MI ↔ posterior conversions."""

from __future__ import annotations

import json
import math
from pathlib import Path

from pacpriv.cli._args import UsageError, number
from pacpriv.datasets import BUNDLED_DATASETS, load_dataset
from pacpriv.pac.calibration import RULES
from pacpriv.pac.job import run_pac
from pacpriv.pac.posterior import mi_budget_for_accuracy, pinsker_bound, posterior_success_rate
from pacpriv.pac.samplers import ComplementaryPairsSampler, FixedSizeSampler, PoissonSampler
from pacpriv.registry import available_mechanisms, resolve_mechanism
from pacpriv.report import write_report


def add_parser(subparsers, name: str) -> None:
    """Register ``pacpriv pac ...``."""
    p = subparsers.add_parser(
        name, help="PAC Privacy for black-box mechanisms (Xiao & Devadas 2023)"
    )
    sub = p.add_subparsers(dest="command", metavar="{run,posterior,budget}")
    sub.required = True

    run = sub.add_parser(
        "run",
        help="simulate a mechanism on random subsets, calibrate noise, release, write the report",
        description="Run the PAC main job and write report.json / report.md (/ report.html).",
    )
    run.add_argument(
        "--mechanism",
        required=True,
        help=f"built-in name ({', '.join(available_mechanisms())}), module:function or "
        "path.py:function; a user function "
        "receives the subset as an array X, or as a tuple (X, y) for a labelled dataset",
    )
    run.add_argument(
        "--dataset",  # a labelled dataset reaches the mechanism as a tuple (X, y)
        required=True,
        help=f"bundled dataset ({', '.join(BUNDLED_DATASETS)}) or a .csv/.npy/.npz path",
    )
    run.add_argument(
        "--label-column",
        default=None,
        help="label column of a .csv/.npy dataset (index or header name)",
    )
    run.add_argument(
        "--mi-budget",
        type=number,
        default=None,
        help="mutual-information budget v in nats (> 0)",
    )
    run.add_argument(
        "--target-accuracy",
        type=number,
        default=None,
        help="alternatively: membership-inference accuracy bound a in (0.5, 1); v = ln 2 - H(a)",
    )
    run.add_argument("--trials", type=int, default=1000, help="number of simulated subsets (>= 2)")
    run.add_argument(
        "--sampler",
        default="poisson",
        choices=("poisson", "pairs", "fixed"),
        help="distribution of the secret subset (default: poisson)",
    )
    run.add_argument(
        "--sampling-rate",
        type=number,
        default=0.5,
        help="Poisson sampling rate in (0, 1) (default 0.5: membership prior 1/2)",
    )
    run.add_argument(
        "--subset-size", type=int, default=None, help="subset size for --sampler fixed"
    )
    run.add_argument("--rule", default="anisotropic", choices=RULES, help="noise rule")
    run.add_argument(
        "--confidence",
        type=number,
        default=None,
        help="Algorithm 1 confidence 1-gamma (rule algorithm1)",
    )
    run.add_argument(
        "--c", type=number, default=None, help="Algorithm 1 eigenvalue threshold c"
    )
    run.add_argument(
        "--beta", type=number, default=None, help="Algorithm 1 slack beta (nats)"
    )
    run.add_argument(
        "--output-bound",
        type=number,
        default=None,
        help="Algorithm 1 bound r on ||f(X)||_2",
    )
    run.add_argument("--n-jobs", type=int, default=None, help="joblib workers (-1: all cores)")
    run.add_argument("--backend", default=None, help="joblib backend (loky, threading, dask, ray)")
    run.add_argument(
        "--seed",
        type=int,
        default=None,
        help="root seed of the simulation (default: fresh OS entropy, recorded)",
    )
    run.add_argument(
        "--release-seed",
        type=int,
        default=None,
        help="seed of the secret subset and noise (tests/demos only; default OS entropy)",
    )
    run.add_argument("--no-release", action="store_true", help="calibrate only; do not release")
    run.add_argument(
        "--checkpoint", default=None, help="checkpoint directory (resume after interrupt)"
    )
    run.add_argument(
        "--retries", type=int, default=0, help="retries of a failing trial (same seed)"
    )
    run.add_argument("--timeout", type=number, default=None, help="per-trial timeout (s)")
    run.add_argument(
        "--out", default="pacpriv-report", help="report directory (default pacpriv-report)"
    )
    run.add_argument(
        "--format",
        dest="formats",
        default="json,md,html",
        help="comma-separated report formats among json, md, html",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--json", action="store_true", help="print the report JSON to stdout")
    run.set_defaults(handler=_run)

    post = sub.add_parser("posterior", help="MI budget (nats) -> posterior success bound")
    post.add_argument("--mi-budget", type=number, required=True, nargs="+")
    post.add_argument("--prior", type=number, default=0.5)
    post.add_argument("--json", action="store_true")
    post.set_defaults(handler=_posterior)

    bud = sub.add_parser("budget", help="target membership-inference accuracy -> MI budget (nats)")
    bud.add_argument("--target-accuracy", type=number, required=True, nargs="+")
    bud.add_argument("--prior", type=number, default=0.5)
    bud.add_argument("--json", action="store_true")
    bud.set_defaults(handler=_budget)


def _sampler(args):

    if args.sampler == "fixed":
        if args.subset_size is None:
            raise UsageError("--sampler fixed needs --subset-size")
        return FixedSizeSampler(subset_size=args.subset_size)
    if args.subset_size is not None:
        raise UsageError("--subset-size is only valid with --sampler fixed")
    if args.sampler == "pairs":
        return ComplementaryPairsSampler()
    return PoissonSampler(sampling_rate=args.sampling_rate)


def _run(args) -> int:

    if (args.mi_budget is None) == (args.target_accuracy is None):
        raise UsageError("give exactly one of --mi-budget (nats) and --target-accuracy")
    if args.mi_budget is not None and not (args.mi_budget > 0 and math.isfinite(args.mi_budget)):
        raise UsageError(f"--mi-budget must be a finite number > 0 (nats); got {args.mi_budget}")
    if args.trials < 2:
        raise UsageError(f"--trials must be >= 2; got {args.trials}")
    if args.target_accuracy is not None and not 0.5 < args.target_accuracy < 1:
        raise UsageError(f"--target-accuracy must be in (0.5, 1); got {args.target_accuracy}")
    if not 0 < args.sampling_rate < 1:
        raise UsageError(f"--sampling-rate must be in (0, 1); got {args.sampling_rate}")
    if args.subset_size is not None and args.subset_size < 1:
        raise UsageError(f"--subset-size must be >= 1; got {args.subset_size}")
    if args.n_jobs == 0:
        raise UsageError("--n-jobs must be a positive number of workers or negative (-1: all)")
    formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
    bad = set(formats) - {"json", "md", "html"}
    if bad or not formats:
        raise UsageError(f"--format must list json, md and/or html; got {args.formats!r}")
    budget = args.mi_budget

    label = args.label_column
    if label is not None and label.lstrip("-").isdigit():
        label = int(label)
    dataset = load_dataset(args.dataset, label_column=label)
    mechanism, mech_name = resolve_mechanism(args.mechanism, dataset_info=dataset.info())
    sampler = _sampler(args)
    if budget is None:
        # the report bounds success against the best blind guess max(q, 1 - q) (Thm 1)
        q = sampler.membership_prior(dataset.n_records)
        baseline = 0.5 if q is None else max(q, 1.0 - q)
        if not args.target_accuracy > baseline:
            raise UsageError(
                f"--target-accuracy {args.target_accuracy} is not above the blind-guess "
                f"success rate {baseline:.6g} of this sampler (membership prior {q})"
            )
        budget = float(mi_budget_for_accuracy(args.target_accuracy, prior=baseline))

    result = run_pac(
        mechanism,
        dataset.pool,
        mi_budget=budget,
        n_trials=args.trials,
        sampler=sampler,
        rule=args.rule,
        confidence=args.confidence,
        c=args.c,
        beta=args.beta,
        output_bound=args.output_bound,
        n_jobs=args.n_jobs,
        backend=args.backend,
        rng=args.seed,
        release=not args.no_release,
        release_rng=args.release_seed,
        progress=not args.no_progress,
        checkpoint=args.checkpoint,
        retries=args.retries,
        timeout=args.timeout,
        mechanism_name=mech_name,
        dataset=dataset.to_dict(),
    )
    paths = write_report(result, Path(args.out), formats=formats)
    if args.json:
        print(paths["json"].read_text() if "json" in paths else json.dumps(result.to_dict()))
        return 0
    acc = result.posterior_success_bound
    print(f"mechanism            {mech_name} on {dataset.name} ({dataset.n_records} records)")
    print(
        f"trials               {result.simulation.n_trials} (d = {result.simulation.dim}, "
        f"{result.simulation.elapsed_s:.1f} s)"
    )
    print(
        f"noise rule           {result.plan.rule}, "
        f"E||B||^2 = {result.plan.expected_noise_power:.6g}"
    )
    print(f"MI budget            {budget:.6g} nats (certified {result.plan.mi_bound:.6g})")
    print(
        f"posterior bound      {100 * acc:.2f}% "
        f"(membership prior {100 * result.membership_prior:.0f}%)"
    )
    for fmt, path in paths.items():
        print(f"{f'report ({fmt})':<21}{path}")
    return 0


def _posterior(args) -> int:

    rows = [
        {
            "mi_budget_nats": v,
            "prior": args.prior,
            "posterior_success_bound": float(posterior_success_rate(v, prior=args.prior)),
            "pinsker_bound": float(pinsker_bound(v, prior=args.prior)),
        }
        for v in args.mi_budget
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'mi_budget (nats)':>18} {'prior':>8} {'posterior bound':>16} {'Pinsker':>10}")
    for r in rows:
        print(
            f"{r['mi_budget_nats']:>18.6g} {r['prior']:>8.4g} "
            f"{r['posterior_success_bound']:>16.10f} {r['pinsker_bound']:>10.6f}"
        )
    return 0


def _budget(args) -> int:

    rows = [
        {
            "target_accuracy": a,
            "prior": args.prior,
            "mi_budget_nats": float(mi_budget_for_accuracy(a, prior=args.prior)),
        }
        for a in args.target_accuracy
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'target':>10} {'prior':>8} {'mi_budget (nats)':>18}")
    for r in rows:
        print(f"{r['target_accuracy']:>10.6g} {r['prior']:>8.4g} {r['mi_budget_nats']:>18.10g}")
    return 0
