"""``pacpriv compare``: PAC Privacy vs DP-SGD at the same membership-inference accuracy bound."""

from __future__ import annotations

import json
from pathlib import Path

from pacpriv.cli._args import UsageError, number
from pacpriv.compare import compare_pac_dpsgd
from pacpriv.compare.run import COMPARISON_RULES
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
            "accuracy, and write the PAC report with the comparison section."
        ),
    )
    p.add_argument("--dataset", default="breast_cancer",
                   help="bundled classification dataset or .csv/.npz path (default breast_cancer)")
    p.add_argument("--target-accuracy", type=number, default=0.6,
                   help="membership-inference accuracy bound a in (0.5, 1) (default 0.6)")
    p.add_argument("--trials", type=int, default=500, help="PAC simulations (>= 2, default 500)")
    p.add_argument("--epochs", type=int, default=10, help="epochs E (default 10)")
    p.add_argument("--steps-per-epoch", type=int, default=5, help="steps per epoch M (default 5)")
    p.add_argument("--max-grad-norm", type=number, default=1.0,
                   help="DP-SGD clipping norm C (default 1)")
    p.add_argument("--learning-rate", type=number, default=0.5, help="SGD step size (default 0.5)")
    p.add_argument("--repeats", type=int, default=5,
                   help="models averaged per row in the test accuracy (default 5)")
    p.add_argument("--rule", default="anisotropic",
                   choices=COMPARISON_RULES,
                   help="PAC noise rule (default anisotropic)")
    p.add_argument("--no-exact", action="store_true", help="skip the exact DP-SGD calibration")
    p.add_argument("--public-seed", type=int, default=0,
                   help="public seed of the initialisation and the PAC batch order (default 0)")
    p.add_argument("--n-jobs", type=int, default=None, help="joblib workers (-1: all cores)")
    p.add_argument("--seed", type=int, default=None,
                   help="root seed (default: fresh OS entropy, recorded in the report)")
    p.add_argument("--out", default="pacpriv-compare", help="output directory")
    p.add_argument("--format", dest="formats", default="json,md,html",
                   help="comma-separated report formats among json, md, html")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the comparison JSON to stdout")
    p.set_defaults(handler=_compare)


def _compare(args) -> int:

    formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
    if not formats or set(formats) - {"json", "md", "html"}:
        raise UsageError(f"--format must list json, md and/or html; got {args.formats!r}")
    result = compare_pac_dpsgd(
        args.dataset,
        target_accuracy=args.target_accuracy,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        max_grad_norm=args.max_grad_norm,
        learning_rate=args.learning_rate,
        n_trials=args.trials,
        n_repeats=args.repeats,
        rule=args.rule,
        exact=not args.no_exact,
        public_seed=args.public_seed,
        n_jobs=args.n_jobs,
        rng=args.seed,
        progress=not args.no_progress,
    )
    out = Path(args.out)
    paths = write_report(result.pac_result.with_sections(result.report_section()), out,
                         formats=formats)
    paths["comparison"] = out / "comparison.json"
    paths["comparison"].write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    print(result.to_markdown().split("\n\nNotes:")[0])
    print()
    print(f"time {result.elapsed_s:.1f} s; notes and threat models in the report")
    for fmt, path in paths.items():
        print(f"wrote ({fmt}){' ' * (11 - len(fmt))}{path}")
    return 0
