"""``pacpriv pac run|records|posterior|budget``: main job, per-record exposure, MI ↔ posterior."""

from __future__ import annotations

import math
from pathlib import Path

from pacpriv import _json
from pacpriv.cli._args import UsageError, number, print_rows, report_formats
from pacpriv.cli.pac_records import add_records_parser
from pacpriv.datasets import BUNDLED_DATASETS, load_dataset
from pacpriv.pac._rules import RULE_TABLE
from pacpriv.pac.calibration import DEFAULT_RULE, RULES
from pacpriv.pac.job import run_pac
from pacpriv.pac.posterior import mi_budget_for_accuracy, pinsker_bound, posterior_success_rate
from pacpriv.pac.samplers import ComplementaryPairsSampler, FixedSizeSampler, PoissonSampler
from pacpriv.registry import available_mechanisms, resolve_mechanism
from pacpriv.report import write_report


def _strict_rows(rows: list[dict]) -> str:
    return _json.dumps(rows, indent=2)


def add_parser(subparsers, name: str) -> None:
    """Register ``pacpriv pac ...``."""
    p = subparsers.add_parser(
        name, help="PAC Privacy for black-box mechanisms (Xiao & Devadas 2023)"
    )
    sub = p.add_subparsers(dest="command", metavar="{run,records,posterior,budget,trials}")
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
    run.add_argument(
        "--rule", default=DEFAULT_RULE, choices=RULES,
        help=f"noise rule (default {DEFAULT_RULE}: certified with confidence 1-gamma; "
        + ", ".join(k for k, i in RULE_TABLE.items() if not i.certified)
        + " are estimates)",
    )
    run.add_argument(
        "--confidence",
        type=number,
        default=None,
        help="confidence 1-gamma (rule certified: default 0.95; algorithm1: required minimum)",
    )
    run.add_argument(
        "--target-inflation",
        type=number,
        default=1.2,
        help="rule certified: warn when --trials is below what this noise power over the "
        "oracle square-root rule needs (default 1.2; see 'pacpriv pac trials')",
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
        help="public bound r on ||f(X)||_2 (certified: clip radius and minimum noise for "
        "constant outputs; algorithm1: required)",
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

    add_records_parser(sub)
    tri = sub.add_parser(
        "trials",
        help="how many trials the certified rule needs for a target noise inflation",
        description="Planning model of pacpriv.pac.certificate.trials_for_inflation: the "
        "smallest n_trials whose predicted certified noise power is within --target-inflation "
        "of the oracle square-root rule (Gaussian outputs, flat spectrum of --effective-dim).",
    )
    tri.add_argument("--dim", type=int, required=True, nargs="+", help="output dimension(s) d")
    tri.add_argument("--target-inflation", type=number, default=1.2)
    tri.add_argument("--confidence", type=number, default=0.95)
    tri.add_argument("--effective-dim", type=number, default=None)
    tri.add_argument("--json", action="store_true")
    tri.set_defaults(handler=_trials)


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
    if not args.target_inflation > 1:
        raise UsageError(f"--target-inflation must be > 1; got {args.target_inflation}")
    if args.n_jobs == 0:
        raise UsageError("--n-jobs must be a positive number of workers or negative (-1: all)")
    formats = report_formats(args.formats)
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
        target_inflation=args.target_inflation,
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
        print(paths["json"].read_text() if "json" in paths else _json.dumps(result.to_dict()))
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
    print(f"MI budget            {budget:.6g} nats, {result.label}")
    cert = result.certification()
    if "n_shape_trials" in cert:
        print(
            f"certificate          {cert['method']}, {cert['n_shape_trials']} shape trials + "
            f"{cert['n_certificate_pairs']} pairs, noise x{cert['noise_inflation_vs_plugin']:.3g} "
            f"vs plug-in, {cert['n_clipped_simulated_outputs']} simulated outputs clipped"
        )
    print(
        f"posterior bound      {math.ceil(10000 * acc) / 100:.2f}% {result.label} "
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
    columns = [("mi_budget_nats", "mi_budget (nats)", 18, ".6g"), ("prior", "prior", 8, ".4g"),
               ("posterior_success_bound", "posterior bound", 16, ".10f"),
               ("pinsker_bound", "Pinsker", 10, ".6f")]
    return print_rows(rows, columns, as_json=args.json, dumps=_strict_rows)


def _budget(args) -> int:
    rows = [
        {
            "target_accuracy": a,
            "prior": args.prior,
            "mi_budget_nats": float(mi_budget_for_accuracy(a, prior=args.prior)),
        }
        for a in args.target_accuracy
    ]
    columns = [("target_accuracy", "target", 10, ".6g"), ("prior", "prior", 8, ".4g"),
               ("mi_budget_nats", "mi_budget (nats)", 18, ".10g")]
    return print_rows(rows, columns, as_json=args.json, dumps=_strict_rows)


def _trials(args) -> int:
    from pacpriv.pac.certificate import predicted_inflation, trials_for_inflation

    rows = []
    for d in args.dim:
        try:
            m = trials_for_inflation(d, target_inflation=args.target_inflation,
                                     confidence=args.confidence,
                                     effective_dim=args.effective_dim)
        except ValueError as err:
            raise UsageError(str(err)) from None
        rows.append({"dim": d, "target_inflation": args.target_inflation,
                     "confidence": args.confidence, "n_trials": m,
                     "predicted_inflation": predicted_inflation(
                         m, d, confidence=args.confidence, effective_dim=args.effective_dim)})
    columns = [("dim", "d", 8, "d"), ("target_inflation", "target", 8, ".4g"),
               ("confidence", "1-gamma", 8, ".4g"), ("n_trials", "n_trials", 10, "d"),
               ("predicted_inflation", "predicted", 10, ".4f")]
    return print_rows(rows, columns, as_json=args.json)
