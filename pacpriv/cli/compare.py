"""``pacpriv compare``: PAC Privacy vs DP-SGD at the same membership-inference accuracy bound."""

from __future__ import annotations

import sys

from pacpriv import _json
from pacpriv._validation import check_real
from pacpriv.cli._args import (
    WITHHOLD_HELP,
    UsageError,
    add_report_output,
    checkpoint_reminder,
    integer,
    number,
    pool_statistics,
    report_formats,
)
from pacpriv.cli._resources import (
    available_cpus,
    check_output_dir,
    effective_n_jobs,
    hold_report_folder,
)
from pacpriv.cli._specs import add_spec_flags, spec_from_args
from pacpriv.cli._user import (
    LABEL_NAMES,
    TRAINED_LABEL_HELP,
    TRAINED_RANGES_HELP,
    add_dataset_arguments,
    check_cli_class_labels,
    load_cli_dataset,
)
from pacpriv.compare import (
    ComparisonSettings,
    SgdBlackBox,
    StableBlackBox,
    compare_pac_dpsgd,
    compare_table,
)
from pacpriv.compare.effects import stabiliser_effects
from pacpriv.compare.render import CHANCE_NOTE_PREFIX
from pacpriv.compare.run import check_comparison
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.report import write_report


def add_parser(subparsers, name: str) -> None:
    """Register ``pacpriv compare``."""
    p = subparsers.add_parser(
        name,
        help="PAC noise vs DP-SGD at the same membership-inference accuracy bound",
        description=(
            "Train one logistic-regression model on a Poisson-1/2 half of a classification "
            "pool with DP-SGD (sigma from the closed form and the exact method) and with PAC "
            "Privacy (noise-free training simulated on random subsets, Gaussian noise for "
            "v = ln 2 - H(a) nats); print noise, test accuracy, bound and measured attack "
            "accuracy, and write the PAC report with the comparison section. An evaluation: "
            "its models derive from the recorded root seed, so no release is written."
        ),
    )
    p.add_argument("--dataset", default="breast_cancer",
                   help="bundled classification dataset or .csv/.npy/.npz path (a file needs "
                   "--label-column), or a comma-separated list of datasets: one table over "
                   "all of them (default breast_cancer)")
    add_dataset_arguments(p, label_help=TRAINED_LABEL_HELP, ranges_help=TRAINED_RANGES_HELP)
    p.add_argument("--target-accuracy", type=_bounds, default=(0.6,),
                   help="membership-inference accuracy bound a in (0.5, 1), or a comma-"
                   "separated list of bounds (e.g. 0.55,0.6); each dataset is simulated once "
                   "for all of them (default 0.6)")
    p.add_argument("--black-box", default="stable", choices=("stable", "sgd"),
                   help="what the PAC rows simulate: 'stable' (default: exact clipped, "
                   "L2-regularised logistic regression on the pool's whitened principal "
                   "directions) or 'sgd' (the DP-SGD rows' training without noise)")
    p.add_argument("--components", default="kaiser",
                   help="stable black box: principal directions of the pool kept: 'kaiser' "
                   "(default: eigenvalue >= the mean), 'broken_stick' (fewer), 'all' or a number")
    p.add_argument("--l2", type=number, default=0.03,
                   help="stable black box: L2 regularisation λ > 0 (default 0.03)")
    add_spec_flags(p, ComparisonSettings, defaults=True)
    p.add_argument("--effects", action="store_true",
                   help="also estimate what each stabiliser buys: per-record noise (plug-in on "
                   "16 trials, a sample of 20 records: an estimate, not a certificate) and test "
                   "accuracy of seven black boxes at the largest bound (about a minute per "
                   "dataset)")
    add_spec_flags(p, ExecutionOptions, only=("n_jobs", "progress", "checkpoint", "timeout"),
                   helps={
        "timeout": "time limit in seconds (> 0) of each trial of the PAC simulation: one "
        "that runs longer stops the comparison with an error (default: none)",
        "n_jobs": f"parallel workers of the PAC simulation (default 1: sequential; -1: all "
        f"{available_cpus()} CPU(s) this process may use; more is capped)",
        "checkpoint": "resumable checkpoint folder (created owner-only, mode 0700): every "
        "simulation keeps its finished trials there, and the same command resumes an "
        "interrupted run (without --seed it reuses the recorded seed). It holds un-noised trial "
        "outputs and subset masks: treat it like the raw data and delete it after the run"})
    p.add_argument("--seed", type=integer, default=None,
                   help="root seed of the evaluation, an integer >= 0 (default: fresh OS "
                        "entropy). Recorded in "
                   "the report either way, so the compared models are reproducible evaluation "
                   "artefacts, not private releases (no release is written)")
    p.add_argument("--withhold-pool-statistics", action="store_true", help=WITHHOLD_HELP)
    _add_curve_flag(p)
    add_report_output(p, default_out="pacpriv-compare",
                      out_help="output directory (created; must be writable)",
                      json_help="print the comparison JSON to stdout")
    p.set_defaults(handler=_compare)


def _check_labels(dataset, args) -> None:
    """compare trains a classifier: an unlabelled file gets a --label-column hint (naming the
    columns whose header looks like labels), continuous labels say so."""
    if dataset.y is None:
        suspects = [n for n in dataset.feature_names if n.strip().lower() in LABEL_NAMES]
        which = (f"--label-column {suspects[0]}" if suspects
                 else "--label-column NAME (the column holding the classes)")
        raise UsageError(f"--dataset {args.dataset!r} has no labels: compare trains a "
                         f"classifier on (X, y); pass {which}")
    check_cli_class_labels(dataset, args, "pacpriv compare")


def _bounds(text: str) -> tuple[float, ...]:
    """``0.6`` or ``0.55,0.6`` (each parsed like a number; the range is checked later)."""
    return tuple(number(part.strip()) for part in str(text).split(",") if part.strip())


def _black_box(args):
    if args.black_box == "sgd":
        return SgdBlackBox()
    comp = args.components.strip().lower()
    if comp == "all":
        components: int | str | None = None
    elif comp in ("kaiser", "broken_stick"):
        components = comp
    else:
        try:
            components = int(comp)
        except ValueError:
            components = 0
        if components < 1:  # one wording for every bad value (the API's names None for 'all')
            raise UsageError(f"--components must be 'kaiser', 'broken_stick', 'all' or a "
                             f"positive integer; got {args.components!r}")
    try:
        return StableBlackBox(l2=args.l2, components=components)
    except ValueError as err:
        raise UsageError(str(err).replace("`l2`", "--l2").replace("`components`",
                                                                  "--components")) from None


def _print_notes(notes) -> None:
    for note in notes:  # utility at chance: say it next to the table, not only in notes
        if note.startswith(CHANCE_NOTE_PREFIX):
            print(f"warning: {note}")
            print()


def _compare(args) -> int:
    formats = report_formats(args.formats)
    spec_from_args(ExecutionOptions, args)  # every execution flag, before any work
    out = check_output_dir(args.out, "--out")
    if args.checkpoint is not None:
        check_output_dir(args.checkpoint, "--checkpoint")
    n_jobs, cap_note = effective_n_jobs(args.n_jobs, None)
    if cap_note:
        print(f"pacpriv: note: {cap_note}", file=sys.stderr)
    names = [n.strip() for n in str(args.dataset).split(",") if n.strip()]
    targets = tuple(check_real(a, "target_accuracy", low=0.5, high=1.0, low_inclusive=False,
                               high_inclusive=False) for a in args.target_accuracy)
    if not names or not targets:
        raise UsageError("--dataset and --target-accuracy must each name at least one value")
    _check_curve(args, names)
    box = _black_box(args)
    execution = spec_from_args(ExecutionOptions, args, n_jobs=n_jobs)
    comparison = spec_from_args(ComparisonSettings, args, black_box=box)
    datasets = []
    for name in names:
        args.dataset = name
        dataset = load_cli_dataset(args)
        _check_labels(dataset, args)
        datasets.append(dataset)
    check_comparison(comparison, targets, datasets,  # before the folder is taken
                     what="--target-accuracy")
    if args.curve is not None:  # the curve's bounds derive budgets too
        check_comparison(comparison, args.curve, datasets, what="--curve")
    if args.curve is None and args.checkpoint is not None:  # another run's: refused first
        from pacpriv._random import as_seed_sequence
        from pacpriv.pac.engine._checkpoint import Checkpoint

        Checkpoint.check_kind(args.checkpoint, kind="pacpriv.compare", root=None
                              if args.seed is None else as_seed_sequence(args.seed))
    hold_report_folder(args)  # every flag is checked: take --out now, before any work
    if args.curve is not None:
        return _compare_curve(args, datasets[0], comparison, execution, out, formats)
    effects = [stabiliser_effects(ds, target_accuracy=max(targets), rng=args.seed,
                                  execution=execution) for ds in datasets] if args.effects else []
    if len(names) == 1 and len(targets) == 1:
        result = compare_pac_dpsgd(datasets[0], target_accuracy=targets[0],
                                   rng=args.seed, execution=execution,
                                   settings=comparison)
        paths = write_report(result.pac_result.with_sections(
            result.report_section(), *(e.report_section() for e in effects)), out,
            formats=formats, pool_statistics=pool_statistics(args))
        payload = result.to_dict()
        text = result.to_markdown().split("\n\nNotes:")[0]
        notes, elapsed = result.notes, result.elapsed_s
    else:
        table = compare_table(datasets, target_accuracies=targets,
                              settings=comparison, rng=args.seed,
                              execution=execution)
        paths = write_report(_TableReport(table, effects), out, formats=formats,
                             pool_statistics=pool_statistics(args))
        payload = table.to_dict()
        text = table.to_markdown()
        notes = tuple(n for r in table.results for n in r.notes)
        elapsed = table.elapsed_s
    if effects:
        payload = {**payload, "stabiliser_effects": [e.to_dict() for e in effects]}
        text += "".join("\n\n" + e.to_markdown() for e in effects)
    paths["comparison"] = out / "comparison.json"
    paths["comparison"].write_text(_json.dumps(payload, indent=2) + "\n")
    if args.json:
        print(_json.dumps(payload, indent=2))
        return 0
    print(text)
    print()
    _print_notes(dict.fromkeys(notes))
    print(f"time {elapsed:.1f} s; notes and threat models in the report")
    for fmt, path in paths.items():
        print(f"wrote ({fmt}){' ' * (11 - len(fmt))}{path}")
    checkpoint_reminder(args)
    return 0


def _add_curve_flag(p) -> None:
    from pacpriv.compare.curve import DEFAULT_CURVE_TARGETS

    default = ",".join(f"{a:g}" for a in DEFAULT_CURVE_TARGETS)
    p.add_argument("--curve", nargs="?", type=_bounds, const=DEFAULT_CURVE_TARGETS,
                   default=None, metavar="BOUNDS",
                   help="draw test accuracy against the membership-inference bound for PAC "
                   "per record, PAC whole subset and DP-SGD (exact sigma), sweeping the "
                   f"target over BOUNDS (comma-separated, >= 2; default {default}); one "
                   "dataset; replaces --target-accuracy; writes curve.json and curve.png beside "
                   "the report")


def _check_curve(args, names) -> None:
    """``--curve``: one dataset and at least two bounds in (0.5, 1), before any work."""
    if args.curve is None:
        return
    if len(names) != 1:
        raise UsageError(f"--curve draws one dataset; got {len(names)} in --dataset")
    for a in args.curve:
        if not 0.5 < a < 1.0:
            raise UsageError(f"--curve bounds must be in (0.5, 1); got {a!r}")
    if len(set(args.curve)) < 2:
        raise UsageError(f"--curve needs at least two distinct bounds; got {len(set(args.curve))}")
    if args.effects:
        raise UsageError("--effects applies to the table, not to --curve")


def _compare_curve(args, dataset, settings, execution, out, formats) -> int:
    """``compare --curve``: :func:`pacpriv.compare.privacy_utility_curve` into the report."""
    import importlib.util

    from pacpriv.compare.curve import privacy_utility_curve

    curve = privacy_utility_curve(dataset, targets=args.curve, settings=settings,
                                  rng=args.seed, execution=execution)
    paths = write_report(curve, out, formats=formats, pool_statistics=pool_statistics(args))
    payload = curve.to_dict()
    paths["curve"] = out / "curve.json"
    paths["curve"].write_text(_json.dumps(payload, indent=2) + "\n")
    if importlib.util.find_spec("matplotlib") is not None:
        paths["png"] = out / "curve.png"
        curve.figure().savefig(paths["png"], dpi=100)
    if args.json:
        print(_json.dumps(payload, indent=2))
        return 0
    print(curve.to_markdown())
    _print_notes(curve.notes)
    print(f"time {curve.elapsed_s:.1f} s; notes and threat models in the report")
    for fmt, path in paths.items():
        print(f"wrote ({fmt}){' ' * (11 - len(fmt))}{path}")
    return 0


class _TableReport:
    """Adapter: the report writers take any object with ``report_section()``; a table's
    report holds the table and its figure, then each comparison's section."""

    def __init__(self, table, effects=()) -> None:
        self._table = table
        self._effects = tuple(effects)

    def report_section(self) -> dict:
        section = self._table.report_section()
        parts = [section["markdown"]]
        for res in self._table.results:
            sub = res.report_section()
            parts += ["", f"### {res.dataset}: {sub['title']}", "", sub["markdown"]]
        for eff in self._effects:
            parts += ["", f"### {eff.report_section()['title']}", "", eff.to_markdown()]
        section["markdown"] = "\n".join(parts)
        section["threat_model"] = "\n\n".join(self._table.results[0].threat_models.values())
        return section
