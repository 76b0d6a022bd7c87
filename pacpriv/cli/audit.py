"""``pacpriv audit``: membership-inference attacks at low FPR against the certified curve."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys

import numpy as np

from pacpriv import _json
from pacpriv._numbers import format_bound
from pacpriv.cli._args import (
    UsageError,
    add_report_output,
    integer,
    number,
    report_formats,
)
from pacpriv.cli._resources import (
    available_cpus,
    check_output_dir,
    effective_n_jobs,
    hold_report_folder,
)
from pacpriv.cli._specs import add_spec_flags, given_fields, spec_from_args
from pacpriv.cli._user import (
    TRAINED_LABEL_HELP,
    TRAINED_RANGES_HELP,
    add_dataset_arguments,
    check_cli_class_labels,
    load_cli_dataset,
)
from pacpriv.exceptions import DISK_ADVICE
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._simulate import _check_memory
from pacpriv.report.audit import verdict

__all__ = ["add_parser"]


def add_parser(subparsers, name: str) -> None:
    """Register ``pacpriv audit``."""
    p = subparsers.add_parser(
        name,
        help="membership-inference audit: LiRA, RMIA, LOSS at low FPR vs the certified curve",
        description=(
            "Train a batch of reference models (each record in half of them, every model the "
            "target in turn) with DP-SGD or its non-private twin, run online/offline LiRA, "
            "online/offline RMIA and the loss attack, and report TPR at FPR 0.01%-10% with "
            "Clopper-Pearson intervals beside the certified trade-off curve, optionally with "
            "the one-run epsilon lower bound (Steinke, Nasr & Jagielski 2023). Writes "
            "report.json, report.md, report.html and roc.png. An evaluation: every model "
            "derives from the recorded root seed."
        ),
    )
    p.add_argument("--dataset", default="digits",
                   help="bundled classification dataset or .csv/.npy/.npz path (a file needs "
                   "--label-column; default digits)")
    add_dataset_arguments(p, label_help=TRAINED_LABEL_HELP, ranges_help=TRAINED_RANGES_HELP)
    from pacpriv.audit._families import MODELS, DPSGDModel

    p.add_argument("--model", default="mlp",
                   metavar=f"{{{','.join(MODELS.choices())},module:attr,file.py:attr}}",
                   help="the audited model: a built-in torch classifier (multinomial logistic "
                   "regression, or a one-hidden-layer tanh MLP), or your own: a scikit-learn "
                   "classifier (instance, class or factory; trained non-privately: pass "
                   "--non-private) or a torch model factory, factory() or factory(n_features, "
                   "n_classes) -> nn.Module returning logits (trained with DP-SGD) "
                   "(default mlp)")
    p.add_argument("--hidden", type=integer, default=128,
                   help="hidden width of the MLP, in [1, 65536] (default 128)")
    privacy = p.add_mutually_exclusive_group(required=True)
    privacy.add_argument("--non-private", action="store_true",
                         help="the non-private twin: sigma = 0, no clipping")
    privacy.add_argument("--noise-multiplier", type=number, default=None,
                         help="DP-SGD noise multiplier sigma > 0")
    privacy.add_argument("--target-accuracy", type=number, default=None,
                         help="calibrate sigma so the certified exact membership-inference "
                         "accuracy is at most this, in (0.5, 1)")
    p.add_argument("--reference-models", type=integer, default=16,
                   help="K, even and >= 4: models of the batch, each the target once "
                   "(default 16)")
    add_spec_flags(p, DPSGDModel, defaults=_TRAINING_DEFAULTS)  # the DP-SGD training flags
    p.add_argument("--population", type=number, default=0.2,
                   help="fraction of the records held out as population samples, never "
                   "trained on (RMIA's z), in (0, 1) (default 0.2)")
    p.add_argument("--augment", choices=("none", "shifts"), default="none",
                   help="extra queries for LiRA/RMIA: one-pixel shifts of square images "
                   "(e.g. digits); tabular data has none (default none)")
    _add_attacks(p)
    p.add_argument("--offline-a", type=number, default=0.3,
                   help="a of offline RMIA, in [0, 1] (default 0.3)")
    p.add_argument("--confidence", type=number, default=0.95,
                   help="level in (0, 1) of the intervals and of the one-run bound (default 0.95)")
    p.add_argument("--one-run", action="store_true",
                   help="also run the one-run epsilon audit (one extra training with canaries)")
    p.add_argument("--canaries", type=integer, default=None,
                   help="canaries (>= 2) of the one-run audit, each included with probability 1/2 "
                   "(default 200; needs --one-run)")
    p.add_argument("--delta", type=number, default=1e-5,
                   help="delta in (0, 1) of the one-run audit's (epsilon, delta) claims "
                        "(default 1e-5)")
    p.add_argument("--seed", type=integer, default=None,
                   help="root seed of the audit, an integer >= 0 (default: fresh OS entropy, or "
                        "the seed a --checkpoint recorded; recorded either way)")
    add_spec_flags(p, ExecutionOptions, only=("n_jobs", "checkpoint", "progress", "timeout",
                                              "time_limit"), helps={
        "n_jobs": f"parallel workers training reference models (default 1; -1: all "
        f"{available_cpus()} CPU(s) this process may use; more is capped)",
        "checkpoint": "resumable checkpoint of the reference models (it holds every model's "
        "scores on every record: treat it like the data; delete it after the run)",
        "timeout": "time limit in seconds (> 0) of each reference model's training: one "
        "that runs longer stops the audit with an error (default: none)",
        "time_limit": "limit in seconds (> 0) on training all reference models: refused before "
        "any training when a timed probe (one model) estimates more; stopped at the limit "
        "otherwise (finished models stay in --checkpoint: rerun the same command to resume). "
        "Default: none"})
    add_report_output(p, default_out="pacpriv-audit",
                      out_help="output directory (created; must be writable)",
                      json_help="print the audit JSON (attacks, certified_curve, one_run)")
    p.set_defaults(handler=_audit)


#: the audit's own defaults for the DP-SGD fields it exposes (DPSGDModel has none for M, E)
_TRAINING_DEFAULTS = {"epochs": 30, "steps_per_epoch": 10, "learning_rate": 0.5,
                      "max_grad_norm": 1.0}


def _add_attacks(p) -> None:
    """``--attacks``: the names of the attack registry (pacpriv.audit.ATTACKS)."""
    from pacpriv.audit._suite import ATTACKS

    p.add_argument("--attacks", nargs="+", choices=ATTACKS.choices(), default=None,
                   metavar="ATTACK", help="attacks to run (default: all of "
                   f"{', '.join(ATTACKS.choices())})")


#: Widest ``--hidden`` layer: 2**16 units (a reference model of 2**16 x p weights per
#: feature column is already far past what an audit of tabular data needs).
MAX_HIDDEN = 2**16


def _check(args) -> None:
    """Every flag's range, before any data is read or any model trained."""
    if args.reference_models < 4 or args.reference_models % 2:
        raise UsageError(f"--reference-models must be an even number >= 4; got "
                         f"{args.reference_models}")
    if not 1 <= args.hidden <= MAX_HIDDEN:
        raise UsageError(f"--hidden must be an integer in [1, {MAX_HIDDEN}]; got {args.hidden}")
    from pacpriv.audit import DPSGDModel, MLPFactory

    # every DP-SGD training flag, before any work (the field checks of the family itself)
    spec_from_args(DPSGDModel, args, model_factory=MLPFactory(1, 2, ()), noise_multiplier=0.0)
    spec_from_args(ExecutionOptions, args)  # every execution flag, before any work
    if args.noise_multiplier is not None and not (args.noise_multiplier > 0
                                                  and math.isfinite(args.noise_multiplier)):
        raise UsageError(f"--noise-multiplier must be a finite number > 0; got "
                         f"{args.noise_multiplier}")
    if args.target_accuracy is not None and not 0.5 < args.target_accuracy < 1:
        raise UsageError(f"--target-accuracy must be in (0.5, 1); got {args.target_accuracy}")
    for flag, value in (("--population", args.population), ("--confidence", args.confidence),
                        ("--delta", args.delta)):
        if not 0 < value < 1:
            raise UsageError(f"{flag} must be in (0, 1); got {value}")
    if not 0 <= args.offline_a <= 1:
        raise UsageError(f"--offline-a must be in [0, 1]; got {args.offline_a}")
    if args.canaries is not None and not args.one_run:
        raise UsageError("--canaries needs --one-run")
    if args.canaries is not None and args.canaries < 2:
        raise UsageError(f"--canaries must be >= 2; got {args.canaries}")
    from pacpriv.audit._families import MODELS

    if args.model not in MODELS and ":" not in args.model:
        raise UsageError(f"--model must be {', '.join(MODELS.choices())}, module:attr or "
                         f"file.py:attr; got {args.model!r}")


def _load_user_model(args):
    """The ``--model module:attr`` object (None for a built-in), before any data is read."""
    from pacpriv.audit._families import MODELS

    if args.model in MODELS:
        return None
    from pacpriv.cli._user import add_cwd_to_path, check_mechanism_file
    from pacpriv.registry import load_object

    check_mechanism_file(args.model)
    add_cwd_to_path()
    try:
        model = load_object(args.model, what="model")
    except (ValueError, TypeError, FileNotFoundError) as err:
        raise UsageError(f"--model {args.model!r}: {err}") from None
    from pacpriv.estimators._meta import check_estimator_kind

    instance = model
    with contextlib.suppress(Exception):  # a class needing arguments is checked where used
        instance = model() if isinstance(model, type) else model
    check_estimator_kind(instance, ("classifier",), f"--model {args.model!r}",  # not in trial 0
                         "the audit's membership attacks need a classifier")
    return model


def _classes(dataset, args) -> tuple[np.ndarray, int]:
    if dataset.y is None:
        raise UsageError("the audit needs a labelled classification dataset (give "
                         "--label-column for a file)")
    classes, labels = np.unique(np.asarray(dataset.y), return_inverse=True)
    check_cli_class_labels(dataset, args, "pacpriv audit")
    if classes.size < 2:
        raise UsageError(f"the audit needs at least 2 classes; the dataset has {classes.size}")
    return labels.astype(np.int64), int(classes.size)


def _family(args, n_features: int, n_classes: int, user_model=None):
    from pacpriv.audit import DPSGDModel, user_model_family
    from pacpriv.audit._families import MODELS

    common = given_fields(DPSGDModel, args)  # the training flags (or the audit's defaults)
    sigma, target = args.noise_multiplier, args.target_accuracy
    if target is not None:
        from pacpriv.dpsgd import noise_multiplier_for_accuracy

        sigma = float(noise_multiplier_for_accuracy(
            target_accuracy=target, steps_per_epoch=args.steps_per_epoch, epochs=args.epochs,
            method="exact"))
    if user_model is not None:
        try:
            return user_model_family(
                user_model, n_features=n_features, n_classes=n_classes,
                noise_multiplier=0.0 if args.non_private else sigma, target_accuracy=target,
                **common)
        except ValueError as err:
            if "scikit-learn" in str(err):
                raise UsageError(f"--model {args.model!r} is a scikit-learn estimator, trained "
                                 "non-privately: pass --non-private (--noise-multiplier and "
                                 "--target-accuracy apply to torch models)") from None
            raise
        except TypeError as err:  # "`model` must be ..." in the flag's words
            text = str(err).replace("`model` must", "it must", 1)
            raise UsageError(f"--model {args.model!r}: {text}") from None
    factory = MODELS.get(args.model)(n_features, n_classes, args.hidden)
    if args.non_private:
        return DPSGDModel(factory, **(common | {"noise_multiplier": 0.0, "max_grad_norm": None}))
    return DPSGDModel(factory, noise_multiplier=sigma, target_accuracy=target, **common)


def _attacks(args) -> tuple:
    """The ``--attacks`` (default all registered), offline RMIA with ``--offline-a``."""
    from pacpriv.audit._suite import ATTACKS

    attacks = [ATTACKS.get(n)() for n in (args.attacks or ATTACKS.names())]
    return tuple(dataclasses.replace(a, offline_a=args.offline_a)
                 if getattr(a, "offline_a", None) is not None else a for a in attacks)


def _augmentations(args, n_features: int) -> tuple:
    if args.augment == "none":
        return ()
    side = math.isqrt(n_features)
    if side * side != n_features:
        raise UsageError(f"--augment shifts needs square images (a square number of "
                         f"features); the dataset has {n_features} features")
    from pacpriv.audit import image_shifts

    return image_shifts(side, side)


def _audit(args) -> int:
    _check(args)
    formats = report_formats(args.formats)
    out = check_output_dir(args.out, "--out")
    n_jobs, cap_note = effective_n_jobs(args.n_jobs, None)
    if cap_note:
        print(f"pacpriv: note: {cap_note}", file=sys.stderr)
    from pacpriv.audit import AuditSettings, OneRunSpec, run_audit
    from pacpriv.datasets.scaling import scale_to_unit_box

    user_model = _load_user_model(args)
    dataset = load_cli_dataset(args)
    labels, n_classes = _classes(dataset, args)
    X = scale_to_unit_box(dataset.X, dataset.feature_low, dataset.feature_high)
    family = _family(args, X.shape[1], n_classes, user_model)
    settings = AuditSettings(
        attacks=_attacks(args),
        confidence=args.confidence, population=args.population,
        augmentations=_augmentations(args, X.shape[1]))
    one_run = None
    if args.one_run:
        one_run = OneRunSpec(canaries=200 if args.canaries is None else args.canaries,
                             delta=args.delta, confidence=args.confidence)
    described = dataset.to_dict()
    execution = spec_from_args(ExecutionOptions, args, n_jobs=n_jobs)
    try:  # the engine's refusal of masks too large for memory, named by this command's flag
        _check_memory(args.reference_models, len(labels), None)
    except ValueError as err:
        raise UsageError(str(err).replace("`n_trials`", "--reference-models").replace(
            f"; use fewer trials, or {DISK_ADVICE}",
            "; use fewer --reference-models")) from None
    hold_report_folder(args)  # every flag is checked: take --out now, before any work
    report = run_audit(
        X, labels, model=family, reference_models=args.reference_models, settings=settings,
        one_run=one_run, rng=args.seed,
        dataset={k: described[k] for k in ("name", "n_records", "n_features", "source",
                                           "description", "preprocessing") if k in described}
        | {"n_classes": n_classes},
        execution=execution)
    paths = report.write(out, formats=formats)
    if args.json:
        print(_json.dumps(report.compact_dict(), indent=2))
        return 0
    _print_summary(report, paths)
    return 0


def _cell(entry) -> str:
    if not entry.resolved:
        return "unresolved"
    lo, hi = entry.ci
    return (f"{format_bound(entry.tpr, 3, side='nearest')} "
            f"[{format_bound(lo, 3, side='down')}, {format_bound(hi, 3, side='up')}]")


def _print_summary(report, paths) -> None:
    fprs = report.setup["fprs"]
    heads = [f"TPR@{format_bound(100 * a, 4, side='nearest')}%" for a in fprs]
    width = max(len(a.name) for a in report.attacks)
    print(f"{'attack':<{width}}  {'AUC':>6}  " + "  ".join(f"{h:<26}" for h in heads))
    for a in report.attacks:
        print(f"{a.name:<{width}}  {format_bound(a.auc, 3, side='nearest'):>6}  "
              + "  ".join(f"{_cell(t):<26}" for t in a.tpr_at_fpr))
    gaps = report.gaps()
    print(f"{'certified TPR (up)':<{width}}  {'':>6}  "
          + "  ".join(f"{format_bound(g['certified_tpr'], 3, side='up'):<26}" for g in gaps))
    print(f"certified curve: {report.curves[0].label}")
    said = verdict(gaps)
    print(f"warning: {said}" if said[0].isdigit() else said)
    for g in gaps:
        if not g["resolved"]:
            print(f"FPR {g['fpr']:g}: {g['reason']}")
    o = report.one_run
    if o is not None:
        acc = ("∞ (not private)" if o.epsilon_accountant == math.inf
               else format_bound(o.epsilon_accountant, 4, side="up"))
        print(f"one-run audit: epsilon >= {format_bound(o.epsilon_lower, 4, side='down')} at "
              f"{100 * o.confidence:g}% (m = {o.canaries} canaries, delta = {o.delta:g}); "
              f"accountant epsilon <= {acc}")
    print(f"time {report.timings['total_s']:.1f} s "
          f"(reference models {report.timings['reference_models_s']:.1f} s)")
    for fmt, path in paths.items():
        print(f"wrote ({fmt}){' ' * (6 - len(fmt))}{path}")
