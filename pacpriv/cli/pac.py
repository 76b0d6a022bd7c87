"""``pacpriv pac run|records|posterior|budget``: main job, per-record exposure, MI ↔ posterior."""

from __future__ import annotations

import math
import sys

import numpy as np

from pacpriv import _json
from pacpriv._numbers import format_bound, format_percent
from pacpriv.cli._args import (
    UsageError,
    add_pool_statistics,
    add_report_output,
    budget_number,
    check_exactly_one,
    check_positive_finite,
    check_trials,
    check_unit_interval,
    checkpoint_reminder,
    integer,
    number,
    pool_statistics,
    print_rows,
    report_formats,
)
from pacpriv.cli._resources import check_output_dir, effective_n_jobs, hold_report_folder
from pacpriv.cli._specs import add_spec_flags, flagged_fields, spec_from_args
from pacpriv.cli._user import (
    add_dataset_arguments,
    check_mechanism_file,
    check_ranges_reach_the_mechanism,
    explain_mechanism_error,
    load_cli_dataset,
    resolve_cli_mechanism,
    scheduler_context,
)
from pacpriv.cli.pac_records import add_records_parser
from pacpriv.datasets import BUNDLED_DATASETS
from pacpriv.pac.bounds._posterior import (
    mi_budget_for_accuracy,
    pinsker_bound,
    posterior_success_rate,
)
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.job import run_pac
from pacpriv.pac.noise import DEFAULT_RULE, RULE_CLASSES
from pacpriv.pac.noise._calibration import MIN_MI_BUDGET
from pacpriv.pac.samplers import SAMPLERS
from pacpriv.registry import available_mechanisms
from pacpriv.report import build_report, write_report
from pacpriv.report.builder import local_base_name
from pacpriv.report.layout import posterior_command
from pacpriv.report.pool import pool_hidden


def _strict_rows(rows: list[dict]) -> str:
    return _json.dumps(rows, indent=2)


def add_parser(subparsers, name: str) -> None:
    """Register ``pacpriv pac ...``."""
    p = subparsers.add_parser(
        name, help="PAC Privacy for black-box mechanisms (Xiao & Devadas 2023)"
    )
    sub = p.add_subparsers(dest="command", metavar="{run,records,posterior,budget,trials}")
    sub.required = True

    _add_run_parser(sub)
    post = sub.add_parser(
        "posterior", help="MI budget (nats) -> posterior success bound",
        description="Posterior success bound of any adversary for an MI budget (KL inversion, "
        "Xiao & Devadas 2023, Thm 1). The report of `pac run` prints the exact command that "
        "reproduces its headline.")
    post.add_argument("--mi-budget", type=budget_number, required=True, nargs="+", metavar="NATS",
                      help="mutual-information budget(s) v in nats (> 0), e.g. 0.05 or 2^-6; "
                      "at most 1000 values")
    post.add_argument("--prior", type=number, default=0.5,
                      help="blind-guess success rate p0 in [0.5, 1): max(q, 1 - q) for "
                      "inclusion probability q")
    post.add_argument("--json", action="store_true", help="print JSON instead of a table")
    post.set_defaults(handler=_posterior)

    bud = sub.add_parser("budget", help="target membership-inference accuracy -> MI budget (nats)",
                         description="MI budget v = KL(Bern(a) || Bern(p0)) for a target "
                         "posterior success rate a (Xiao & Devadas 2023, Thm 1).")
    bud.add_argument("--target-accuracy", type=number, required=True, nargs="+", metavar="A",
                     help="target posterior success rate(s) a in (prior, 1); at most 1000 values")
    bud.add_argument("--prior", type=number, default=0.5,
                     help="blind-guess success rate p0 in [0.5, 1)")
    bud.add_argument("--json", action="store_true", help="print JSON instead of a table")
    bud.set_defaults(handler=_budget)

    add_records_parser(sub)
    tri = sub.add_parser(
        "trials",
        help="how many trials the certified rule needs for a target noise inflation",
        description="Planning model of pacpriv.pac.noise.trials_for_inflation: the "
        "smallest n_trials whose predicted certified noise power is within --target-inflation "
        "of the oracle square-root rule (Gaussian outputs, flat spectrum of --effective-dim).",
    )
    tri.add_argument("--dim", type=integer, required=True, nargs="+",
                     help="output dimension(s) d >= 1; at most 1000 values")
    tri.add_argument("--target-inflation", type=number, default=1.2,
                     help="largest acceptable noise power over the oracle square-root rule (> 1)")
    tri.add_argument("--confidence", type=number, default=0.95,
                     help="confidence 1-gamma in (0, 1) of the certificate")
    tri.add_argument("--effective-dim", type=number, default=None,
                     help="effective dimension of the output in [1, d], if known (default: d)")
    tri.add_argument("--json", action="store_true", help="print JSON instead of a table")
    tri.set_defaults(handler=_trials)


def _add_run_parser(sub) -> None:
    """``pacpriv pac run``: its flags (the spec objects' fields add theirs)."""
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
    add_dataset_arguments(run)
    run.add_argument(
        "--mi-budget",
        type=budget_number,
        default=None,
        help="mutual-information budget v in nats (> 0), e.g. 0.05 or 2^-6",
    )
    run.add_argument(
        "--target-accuracy",
        type=number,
        default=None,
        help="alternatively: membership-inference accuracy bound a in (0.5, 1); v = ln 2 - H(a)",
    )
    run.add_argument("--trials", type=integer, default=1000,
                     help="number of simulated subsets, an integer in [2, 2^63 - 1]; the rules "
                     "with a confidence bound (certified, asymptotic-t) need at least 6")
    run.add_argument(
        "--sampler", default="poisson", choices=SAMPLERS.choices(),
        help="distribution of the secret subset (default: poisson): "
        + "; ".join(f"{n}: {SAMPLERS.doc(n)}" for n in SAMPLERS.names()),
    )
    add_spec_flags(run, *SAMPLERS.values(), notes={
        f.name: f" (--sampler {n})" for n, c in SAMPLERS.items() for f in flagged_fields(c)})
    run.add_argument(
        "--rule", default=DEFAULT_RULE, choices=RULE_CLASSES.choices(),
        help=f"noise rule (default {DEFAULT_RULE}: certified with confidence 1-gamma; "
        + ", ".join(k for k, cls in RULE_CLASSES.items() if not cls.certified)
        + " are estimates)",
    )
    add_spec_flags(run, *RULE_CLASSES.values(), notes={
        p: f" (--rule {_takers(p)})" for cls in RULE_CLASSES.values()
        for p in cls.parameter_names()})
    add_spec_flags(run, ExecutionOptions, only=(
        "n_jobs", "ensemble", "backend", "checkpoint", "output_dtype", "memory_map", "retries",
        "timeout", "progress", "time_limit"))
    run.add_argument("--scheduler", default=None, metavar="ADDRESS",
                     help="Dask scheduler address (e.g. tcp://host:8786), with --backend dask")
    run.add_argument("--ray-address", default=None, metavar="ADDRESS",
                     help="Ray cluster address (e.g. ray://host:10001 or auto), "
                     "with --backend ray")
    run.add_argument(
        "--seed",
        type=integer,
        default=None,
        help="root seed of the simulation, an integer >= 0 (default: OS entropy, recorded)",
    )
    run.add_argument(
        "--release-seed",
        type=integer,
        default=None,
        help="secret subset and noise seed, an integer >= 0 (tests/demos; default OS entropy)",
    )
    run.add_argument("--no-release", action="store_true", help="calibrate only; do not release")
    add_pool_statistics(
        run, report_help="include the output spectrum's and the noise's absolute values in the "
        "report (statistics of f over subsets of the pool: for a mean, the top eigenvalue gives "
        "the scale of an outlier's value). Default: shown only for a bundled public dataset; "
        "otherwise only the release's error bar (noise std per output coordinate) and the "
        "noise/spread ratio to one digit")
    add_report_output(run, default_out="pacpriv-report",
                      out_help="report directory (default pacpriv-report)",
                      json_help="print the report JSON to stdout")
    run.set_defaults(handler=_run)


def _sampler(args):
    """The ``--sampler`` object, built from its fields' flags."""
    return spec_from_args(SAMPLERS.get(args.sampler), args, among=SAMPLERS.values(),
                          selector=f"--sampler {args.sampler}")


def _check_args(args) -> None:
    """Every argument check that needs no data: runs before anything is loaded or simulated."""
    check_exactly_one(args, "--mi-budget", "--target-accuracy", " (nats)")
    check_positive_finite(args, "--mi-budget", " (nats)")
    low = max(2, RULE_CLASSES.get(args.rule).min_trials)  # the rule's own minimum, if higher
    check_trials(args, low, why=f" with --rule {args.rule}, which needs at least {low} trials"
                 if low > 2 else "")
    if args.target_accuracy is not None and not 0.5 < args.target_accuracy < 1:
        raise UsageError(f"--target-accuracy must be in (0.5, 1); got {args.target_accuracy}")
    _sampler(args)  # a flag the sampler does not take, or a bad value, fails here
    if args.no_release and args.release_seed is not None:
        raise UsageError("--release-seed seeds the release, and --no-release draws none: give "
                         "one of them")
    if args.release_seed is not None and args.release_seed == args.seed:
        raise UsageError(f"--release-seed must differ from --seed (the simulation seed is "
                         f"recorded in the report, so a release drawn from it could be "
                         f"regenerated); got {args.seed} for both")
    if args.memory_map and args.checkpoint is None:
        raise UsageError("--memory-map keeps the outputs in the checkpoint folder: give "
                         "--checkpoint DIR too")
    spec_from_args(ExecutionOptions, args)  # --retries, --timeout, --backend... fail here
    for flag, value, what in (
            ("--scheduler", args.scheduler, "Dask scheduler (e.g. tcp://host:8786)"),
            ("--ray-address", args.ray_address, "Ray head (e.g. host:6379, or auto)")):
        if value is not None and not value.strip():  # '' would start a local cluster
            raise UsageError(f"{flag} must not be empty: give the address of a running {what}")
    if args.scheduler is not None and args.backend != "dask":
        raise UsageError("--scheduler applies to --backend dask only")
    if args.backend == "dask" and args.scheduler is None:
        raise UsageError("--backend dask needs --scheduler ADDRESS (a running Dask scheduler, "
                         "e.g. tcp://host:8786); for this machine alone use --n-jobs")
    if args.ray_address is not None and args.backend != "ray":
        raise UsageError("--ray-address applies to --backend ray only")
    check_unit_interval(args, "--confidence")
    _rule_from_flags(args)  # a flag the rule does not take, or a bad value, fails here


def _takers(parameter: str) -> str:
    """The rules that take ``parameter`` (for help texts and errors)."""
    return "/".join(n for n, cls in RULE_CLASSES.items() if parameter in cls.parameter_names())


def _rule_from_flags(args):
    """The rule object of ``--rule`` from its parameters' flags (UsageError naming a flag)."""
    return spec_from_args(RULE_CLASSES.get(args.rule), args, among=RULE_CLASSES.values(),
                          selector=f"--rule {args.rule}")


def _run(args) -> int:
    _check_args(args)
    formats = report_formats(args.formats)
    out = check_output_dir(args.out, "--out")
    if args.checkpoint is not None:
        check_output_dir(args.checkpoint, "--checkpoint")
    n_jobs, cap_note = effective_n_jobs(args.n_jobs, args.backend)
    if cap_note:
        print(f"pacpriv: note: {cap_note}", file=sys.stderr)
    budget = args.mi_budget

    check_mechanism_file(args.mechanism)
    check_ranges_reach_the_mechanism(args)
    dataset = load_cli_dataset(args)
    mechanism, mech_name = resolve_cli_mechanism(args.mechanism, dataset, args)
    mech_name = local_base_name(mech_name)  # no local directories in output
    sampler = _sampler(args)
    q = sampler.membership_prior(dataset.n_records)
    baseline = 0.5 if q is None else max(q, 1.0 - q)
    if budget is None:
        # the report bounds success against the best blind guess max(q, 1 - q) (Thm 1)
        if not args.target_accuracy > baseline:
            raise UsageError(
                f"--target-accuracy {args.target_accuracy} is not above the blind-guess "
                f"success rate {format_bound(baseline)} of this sampler (inclusion probability "
                f"{format_bound(q)})"
            )
        budget = float(mi_budget_for_accuracy(args.target_accuracy, prior=baseline))
        if not budget >= MIN_MI_BUDGET:  # a target a rounding step above the blind guess
            raise UsageError(
                f"--target-accuracy {args.target_accuracy!r} is too close to the blind-guess "
                f"rate {format_bound(baseline)}: its MI budget {budget:g} nats is below "
                f"{MIN_MI_BUDGET:g} (no noise scale can meet it); give a larger target")

    rule = _rule_from_flags(args)
    execution = spec_from_args(ExecutionOptions, args, n_jobs=n_jobs)
    hold_report_folder(args)  # every flag is checked: take --out now, before any work
    with scheduler_context(args):
        try:
            result = run_pac(
                mechanism,
                dataset.pool,
                mi_budget=budget,
                n_trials=args.trials,
                sampler=sampler,
                rule=rule,
                rng=args.seed,
                release=not args.no_release,
                release_rng=args.release_seed,
                execution=execution,
                mechanism_name=mech_name,
                dataset=dataset.to_dict(),
            )
        except Exception as err:
            explain_mechanism_error(err, args.mechanism, dataset)
            raise
    show_pool = pool_statistics(args)
    paths = write_report(result, out, formats=formats, pool_statistics=show_pool)
    checkpoint_reminder(args)
    if args.json:
        # the report dict, not result.to_dict(): the same public facts as report.json
        print(paths["json"].read_text() if "json" in paths
              else _json.dumps(build_report(result, pool_statistics=show_pool)))
        return 0
    _summary(result, mech_name, dataset, budget, n_jobs, args, paths)
    return 0


def _error_bar_line(noise: dict) -> str | None:
    """The release's error bar on the terminal (None when withheld)."""
    bar = noise.get("noise_std_per_coordinate")
    if bar is None:
        return None
    shown = ", ".join(format_bound(v, 4, side="up") for v in bar[:6])
    more = f", ... ({len(bar)} shown in the report)" if len(bar) > 6 else ""
    return (f"error bar            noise std per coordinate [{shown}{more}] in the output's "
            f"units (max {format_bound(noise['noise_std_per_coordinate_max'], 4, side='up')}); "
            "it reveals diag(Σ_B), a statistic of the pool, not of the secret subset (harmless "
            "under the PAC threat model, where the pool is known; but from it and the other "
            "records an outlier's value can be estimated: --withhold-pool-statistics if the "
            "pool itself is confidential)")


def _summary(result, mech_name, dataset, budget, n_jobs, args, paths) -> None:
    from pacpriv.report.layout import pac_layout

    report = build_report(result, pool_statistics=pool_statistics(args))
    p = report["privacy"]
    acc = result.posterior_success_bound
    sim = result.simulation
    jobs = f"n_jobs {n_jobs}" + (f" (asked {args.n_jobs})" if args.n_jobs not in (None, n_jobs)
                                 else "")
    print(f"mechanism            {mech_name} on {dataset.name} ({dataset.n_records} records)")
    print(f"trials               {sim.n_trials} (d = {sim.dim}, {sim.elapsed_s:.1f} s, "
          f"{sim.backend}, {jobs})")
    if pool_hidden(report["noise"]):  # the pool is not public: scale-free only
        ratio = report["noise"].get("noise_to_spread_rms")
        why = ("withheld: --withhold-pool-statistics" if args.withhold_pool_statistics else
               "the pool is not public; --report-pool-statistics to include it")
        print(f"noise rule           {result.plan.rule}, absolute scale not shown ({why})"
              + (f"; noise / spread {format_bound(ratio, 3, side='down')}" if ratio else ""))
    else:
        print(f"noise rule           {result.plan.rule}, "
              f"E||B||^2 = {format_bound(result.plan.expected_noise_power, side='up')}")
    private = pool_hidden(report["noise"])  # real functions of the spectrum hidden
    print(f"MI budget            {format_bound(budget)} nats, {result.label}"
          + ("" if private else f" (plan bound {format_bound(result.plan.mi_bound, side='up')})"))
    cert = result.certification()
    if "n_shape_trials" in cert:
        inflation = cert["noise_inflation_vs_plugin"]
        print(
            f"certificate          {cert['method']}, {cert['n_shape_trials']} shape trials + "
            f"{cert['n_certificate_trials']} certificate trials, "
            + ("" if private else
               f"noise x{format_bound(inflation, 3, side='up')} vs plug-in, "
               if math.isfinite(inflation) else "noise n/a vs plug-in (0), ")
            + f"{cert['n_clipped_simulated_outputs']} simulated outputs clipped"
        )
    q = result.membership_prior
    prior = p.get("blind_guess_prior") or max(q, 1 - q)
    print(f"posterior bound      {format_percent(acc, vacuous=acc >= 1)} {result.posterior_label} "
          f"(prior {format_percent(prior)} = best blind guess max(q, 1 - q), "
          f"inclusion probability q = {format_bound(q)})")
    print(f"reproduce with       {posterior_command(p)}")
    head = dict(pac_layout(report))["Headline"]
    for kind, text, *_ in head:
        if kind == "text" and text.startswith(("f was released", "Utility")):
            print(text.replace("`", ""))
    bar_line = _error_bar_line(report["noise"])
    if bar_line:
        print(bar_line)
    if args.no_release:
        print("release              none (--no-release)")
    elif result.release is not None:  # the report's release_randomness, on the screen too
        print("release randomness   " + ("seeded, not for release (caller-seeded): --release-seed "
                                         "fixes the secret subset and the noise"
                                         if result.release_seeded
                                         else "fresh OS entropy (not recorded)"))
    for fmt, path in paths.items():
        print(f"{f'report ({fmt})':<21}{path}")


def _check_prior(prior: float) -> None:
    """Membership: the blind-guess success rate ``max(q, 1 − q)`` is in ``[0.5, 1)``; a value
    below ½ (e.g. the inclusion probability itself) would understate the risk."""
    if not 0.5 <= prior < 1:
        hint = (f" (for an inclusion probability q = {prior:g}, pass --prior "
                f"{max(prior, 1 - prior):g} = max(q, 1 - q))" if 0 < prior < 0.5 else "")
        raise UsageError(
            f"--prior is the blind-guess success rate max(q, 1 - q) and must be in [0.5, 1); "
            f"got {prior:g}{hint}")


def _print_bounds(args, rows: list[dict], shown: dict, columns: list) -> int:
    """``rows`` as strict JSON with ``--json``, else a table of the values formatted by the
    ``shown`` functions (key -> formatter)."""
    if args.json:
        return print_rows(rows, [], as_json=True, dumps=_strict_rows)
    table = [{key: fmt(r[key]) for key, fmt in shown.items()} for r in rows]
    return print_rows(table, columns, as_json=False)


#: Most values one call of `pac posterior`, `pac budget` or `pac trials` answers (bounded time
#: and output; the Python functions take arrays of any size)
MAX_LISTED = 1000


def _check_listed(values, flag: str, api: str) -> None:
    if len(values) > MAX_LISTED:
        raise UsageError(
            f"{flag} takes at most {MAX_LISTED} values per call; got {len(values)}: split them "
            f"over several calls, or pass an array to {api} in Python")


def _posterior(args) -> int:
    _check_prior(args.prior)
    _check_listed(args.mi_budget, "--mi-budget", "pacpriv.posterior_success_rate")
    for v in args.mi_budget:
        if not (v >= 0 and math.isfinite(v)):
            raise UsageError(f"--mi-budget must be finite numbers >= 0 (nats); got {v}")
    budgets = np.asarray(args.mi_budget, dtype=np.float64)  # one vectorised root for every value
    exact = np.atleast_1d(posterior_success_rate(budgets, prior=args.prior))
    pinsker = np.atleast_1d(pinsker_bound(budgets, prior=args.prior))
    rows = [
        {
            "mi_budget_nats": v,
            "prior": args.prior,
            "posterior_success_bound": float(exact[i]),
            "pinsker_bound": float(pinsker[i]),
        }
        for i, v in enumerate(args.mi_budget)
    ]
    shown = {"mi_budget_nats": format_bound,
             "prior": format_bound,
             "posterior_success_bound": lambda x: format_bound(x, 10, side="up"),
             "pinsker_bound": lambda x: format_bound(x, 6, side="up")}
    columns = [("mi_budget_nats", "mi_budget (nats)", 18, ""), ("prior", "prior", 8, ""),
               ("posterior_success_bound", "posterior bound", 16, ""),
               ("pinsker_bound", "Pinsker", 10, "")]
    return _print_bounds(args, rows, shown, columns)


def _budget(args) -> int:
    _check_prior(args.prior)
    _check_listed(args.target_accuracy, "--target-accuracy", "pacpriv.mi_budget_for_accuracy")
    for a in args.target_accuracy:
        if not max(args.prior, 1 - args.prior) <= a < 1:
            raise UsageError(
                f"--target-accuracy must be in [{format_bound(max(args.prior, 1 - args.prior))}"
                f", 1) for --prior {args.prior} (no budget gives less than the blind guess); "
                f"got {a}")
    budgets = np.atleast_1d(mi_budget_for_accuracy(  # one vectorised inverse for every value
        np.asarray(args.target_accuracy, dtype=np.float64), prior=args.prior))
    rows = [
        {
            "target_accuracy": a,
            "prior": args.prior,
            "mi_budget_nats": float(budgets[i]),
        }
        for i, a in enumerate(args.target_accuracy)
    ]
    # the budget is what a user will run with: round it down (a smaller budget is safer)
    # the inputs are shown as given (shortest exact text), never rounded
    shown = {"target_accuracy": lambda x: repr(float(x)),
             "prior": lambda x: repr(float(x)),
             "mi_budget_nats": lambda x: format_bound(x, 10, side="down")}
    columns = [("target_accuracy", "target", 10, ""), ("prior", "prior", 8, ""),
               ("mi_budget_nats", "mi_budget (nats)", 18, "")]
    return _print_bounds(args, rows, shown, columns)


#: Largest trial count ``pac trials`` plans (``--trials`` takes up to 2^63 - 1).
_PLAN_CAP = 2**62


def _trials(args) -> int:
    from pacpriv.pac.noise import (
        InflationUnreachable,
        predicted_inflation,
        shown_inflation,
        trials_for_inflation,
    )

    _check_listed(args.dim, "--dim", "pacpriv.pac.noise.trials_for_inflation (one d at a time)")
    rows = []
    for d in args.dim:
        try:
            # any count a run takes (--trials up to 2^63 - 1), not the library's default cap
            # of 1e8: a planner answers for every --dim (the certificate needs n > d)
            m = trials_for_inflation(d, target_inflation=args.target_inflation,
                                     confidence=args.confidence,
                                     effective_dim=args.effective_dim, max_trials=_PLAN_CAP)
        except InflationUnreachable as err:
            if not math.isfinite(float(err.smallest)):  # none at all ("pass >= inf" said nothing)
                raise UsageError(
                    f"--dim {d} cannot be planned at --confidence {args.confidence!r}: the "
                    "certified rule needs more trials than output dimensions, past the "
                    f"planning model's cap of {err.n_trials} trials; give a smaller --dim"
                    ) from None
            why = ("the trial cap" if err.capped else
                   "beyond it the model leaves its range: its clip correction dominates and it "
                   "bends to its floor")
            raise UsageError(
                f"--target-inflation {args.target_inflation!r} cannot be planned for --dim {d} "
                f"at --confidence {args.confidence!r}: the smallest target the planning model "
                f"resolves there is {err.smallest} (at {err.n_trials} trials, {why}); pass "
                f"--target-inflation >= {err.smallest}") from None
        except ValueError as err:
            raise UsageError(str(err)) from None
        predicted = predicted_inflation(m, d, confidence=args.confidence,
                                        effective_dim=args.effective_dim)
        rows.append({"dim": d, "target_inflation": args.target_inflation,
                     "confidence": args.confidence, "n_trials": m,
                     "predicted_inflation": predicted,
                     # rounded up, with the digits that keep a reached target reached
                     "predicted_shown": shown_inflation(predicted, args.target_inflation),
                     "target_shown": repr(float(args.target_inflation)),  # as given
                     # as given too: never rounded up to a certainty of 1
                     "confidence_shown": repr(float(args.confidence))})
    columns = [("dim", "d", 8, "d"), ("target_shown", "target", 8, ""),
               ("confidence_shown", "1-gamma", 8, ""), ("n_trials", "n_trials", 10, "d"),
               ("predicted_shown", "predicted", 10, "")]
    if args.json:
        for r in rows:
            del r["predicted_shown"], r["target_shown"], r["confidence_shown"]
    return print_rows(rows, columns, as_json=args.json)
