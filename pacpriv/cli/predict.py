"""``pacpriv predict fit|query|status`` and ``pacpriv serve``: private prediction.

Source: Y. Zhu, M. Sridhar, S. Devadas. Private Prediction via PAC Privacy. arXiv:2601.14033, 2026.
"""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

from pacpriv import _json
from pacpriv._files import check_existing_dir, check_input_file
from pacpriv._numbers import format_bound, format_percent
from pacpriv._validation import integer_digits
from pacpriv.cli._args import (
    UsageError,
    add_force,
    add_show_errors,
    budget_number,
    check_exactly_one,
    check_positive_finite,
    integer,
    number,
)
from pacpriv.cli._predict_fit import (
    NOT_AN_ESTIMATOR,
    QUICK_WORLDS,
    check_fit_estimate,
    check_worlds_up_front,
)
from pacpriv.cli._predict_query import check_no_query_preprocessing, query_rows
from pacpriv.cli._resources import (
    check_output_dir,
    effective_n_jobs,
    hold_report_folder,
    ledger_location,
)
from pacpriv.cli._specs import add_spec_flags, spec_from_args
from pacpriv.cli._user import (
    add_cwd_to_path,
    add_dataset_arguments,
    check_cli_class_labels,
    load_cli_dataset,
)
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction._noise import NOISE_RULES
from pacpriv.prediction._settings import MAX_WORLDS
from pacpriv.registry import Registry, load_object


def _sklearn(path: str, *, scaled: bool = False, **params):
    """Factory of the scikit-learn estimator ``path`` (standardised first if ``scaled``)."""
    def build():
        module, _, name = path.rpartition(".")
        estimator = getattr(importlib.import_module(module), name)(**params)
        if not scaled:
            return estimator
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        return make_pipeline(StandardScaler(), estimator)
    return build


#: Built-in estimators for ``--estimator`` (scikit-learn; every world fits a fresh clone).
ESTIMATORS: Registry = Registry("estimator", callable_entries=True)
for _name, _factory, _doc in (
    ("logistic", _sklearn("sklearn.linear_model.LogisticRegression", scaled=True, max_iter=1000),
     "standardised multinomial logistic regression"),
    ("naive_bayes", _sklearn("sklearn.naive_bayes.GaussianNB"), "Gaussian naive Bayes"),
    ("decision_tree", _sklearn("sklearn.tree.DecisionTreeClassifier", max_depth=6,
                               random_state=0), "decision tree of depth 6"),
    ("random_forest", _sklearn("sklearn.ensemble.RandomForestClassifier", n_estimators=50,
                               random_state=0), "random forest of 50 trees"),
    ("mlp", _sklearn("sklearn.neural_network.MLPClassifier", scaled=True,
                     hidden_layer_sizes=(32,), max_iter=500, random_state=0),
     "standardised MLP, 32 hidden units"),
    ("ridge", _sklearn("sklearn.linear_model.Ridge", alpha=1.0), "ridge regression (alpha 1)"),
):
    ESTIMATORS.register(_name, _factory, doc=_doc)


def _estimator(name: str):
    """A built-in estimator, or an object loaded from ``module:attr`` / ``file.py:attr``."""
    if name in ESTIMATORS:
        return ESTIMATORS.get(name)()
    if ":" not in name:
        raise UsageError(f"--estimator must be one of {', '.join(ESTIMATORS.names())}, "
                         f"module:attr or file.py:attr; got {name!r}")
    where = name.rpartition(":")[0]
    if not (where.endswith(".py") or "/" in where):
        add_cwd_to_path()  # module:attr finds modules in the current folder
    obj = load_object(name, what="estimator")
    if isinstance(obj, type) or _is_factory(obj):  # a class (defaults) or a zero-argument
        from pacpriv.exceptions import WITHHELD_NOTE, UserCodeError  # factory returning an

        try:  # estimator, as `audit --model` takes them
            obj = obj()
        except Exception as err:
            raise UserCodeError(
                f"--estimator {name} raised {type(err).__qualname__} when called with no "
                f"arguments to make the estimator, before any data was read. {WITHHELD_NOTE}"
                ) from err
    return obj  # an estimator instance, or a fit function fit(subset) -> model


def _is_factory(obj) -> bool:
    """A plain function that takes no required argument (a fit function takes one)."""
    import inspect

    if not inspect.isfunction(obj):
        return False
    return not any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD,
                                                       p.KEYWORD_ONLY)
                   for p in inspect.signature(obj).parameters.values())


def _add_fit_parser(sub) -> None:
    """``pacpriv predict fit`` (ExecutionOptions' fields add the execution flags)."""
    fit = sub.add_parser(
        "fit", help="fit m world models on a private dataset into a state directory",
        description="Fit one model per world (complementary pairs), draw the secret world index "
        "from OS entropy and create the crash-safe state directory that `pacpriv serve` uses.",
    )
    fit.add_argument("--estimator", required=True,
                     help=f"built-in ({', '.join(ESTIMATORS.names())}), module:attr or "
                     "file.py:attr "
                     "(an sklearn estimator, its class or a zero-argument function returning "
                     "one, a pacpriv.prediction.TorchFit, or a function fit((X, y)) -> model)")
    fit.add_argument("--dataset", required=True,
                     help="bundled dataset (iris, wine, breast_cancer, digits, diabetes) or a "
                     ".csv/.npy/.npz path: the private pool")
    add_dataset_arguments(fit, feature_ranges=False,
                          label_help="label column of a .csv/.npy file (header name or index)")
    fit.add_argument("--state", required=True, help="state directory to create (or resume); "
                     "created owner-only (mode 0700): its world models are as private as "
                     "the data")
    fit.add_argument("--n-worlds", type=integer, default=64, help="number of worlds m, even, in "
                                                                  "[2, "
                     f"{MAX_WORLDS}] (default 64)")
    fit.add_argument("--per-query-budget", type=budget_number, required=True,
                     help="MI budget per answered query in nats, e.g. 2^-16")
    fit.add_argument("--total-budget", type=budget_number, default=None,
                     help="cap on the total spend in nats (default: the budget whose "
                     "membership bound is --target-accuracy)")
    fit.add_argument("--target-accuracy", type=number, default=None,
                     help="alternatively: cap the spend where the membership bound reaches this "
                     "accuracy in (0.5, 1)")
    fit.add_argument("--output", default=None, choices=("proba", "logits", "value", "label"),
                     help="what each query returns (default: proba, value for ridge; label = "
                     "one-hot votes, exact when all worlds agree)")
    fit.add_argument("--rule", default="anisotropic", choices=NOISE_RULES.choices(),
                     help="noise rule of each answer (see the README)")
    add_spec_flags(fit, ExecutionOptions, only=("n_jobs", "ensemble", "device", "progress",
                                                 "timeout"), helps={
        "ensemble": "fit TorchFit worlds one per engine task instead of as one vectorised "
        "ensemble (the same masks and seeds; parameters equal to float round-off)",
        "timeout": "time limit in seconds (> 0) of each world's fit, and of the timed fit "
        "before the worlds: a fit that runs longer stops the command with an error "
        "(default: none; --max-minutes still bounds the timed fit)"})
    fit.add_argument("--seed", type=integer, default=None,
                     help="seed of the public worlds, an integer >= 0 (recorded in config.json; "
                          "default OS "
                     "entropy); the secret index and the noise never derive from it")
    fit.add_argument("--secret-seed", type=integer, default=None,
                     help="seed of the secret world index and the noise (an integer >= 0 other "
                          "than "
                     "--seed), for tests and demos "
                     "only: never written to disk or to a report, but the state is marked "
                     "'caller-seeded secret (not for production)' (default OS entropy; must "
                     "differ from --seed)")
    fit.add_argument("--max-minutes", type=number, default=60.0, metavar="MINUTES",
                     help="refuse, before fitting, a fit estimated (from one timed world) to "
                     "take longer than this many minutes (> 0; default 60)")
    add_show_errors(fit)
    fit.set_defaults(handler=_fit)


def add_parser(subparsers, name: str) -> None:
    """Register ``pacpriv predict ...``."""
    p = subparsers.add_parser(
        name, help="PAC-private prediction: fit worlds, answer queries, budget and report",
    )
    sub = p.add_subparsers(dest="command", metavar="{fit,query,status}")
    sub.required = True
    _add_fit_parser(sub)
    query = sub.add_parser("query", help="answer query rows from a file or a bundled dataset",
                           description="Answer rows in order; each spends the per-query budget.")
    query.add_argument("--state", required=True, help="fitted state directory")
    src = query.add_mutually_exclusive_group(required=True)
    src.add_argument("--queries", help=".csv (header row optional), .npy or .npz file of raw "
                     "rows, read like predict fit's --dataset; the fit's preprocessing (its "
                     "pool's statistics, stored in the state) is applied automatically")
    src.add_argument("--dataset", help="take the rows from a bundled dataset or a data file "
                     "(see --rows)")
    query.add_argument("--rows", default="0:1", help="START:STOP rows of --dataset (default 0:1; "
                       "STOP at most the number of rows)")
    add_dataset_arguments(query, feature_ranges=False,
                          label_help="label column to drop from --queries/--dataset (header "
                          "name or index), as given to predict fit")
    query.add_argument("--json", action="store_true", help="print JSON instead of a table")
    query.add_argument("--ledger", default=None, type=ledger_location,
                       help="the ledger store when it is not "
                       "DIR/ledger.db (postgresql://... of the served replicas)")
    query.set_defaults(handler=_query)
    status = sub.add_parser("status", help="budget state; optionally write a report")
    status.add_argument("--state", required=True, help="fitted state directory")
    status.add_argument("--out", default=None, help="write report.json/report.md here")
    add_force(status)
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.add_argument("--ledger", default=None, type=ledger_location,
                        help="the ledger store when it is not "
                        "DIR/ledger.db (postgresql://... of the served replicas)")
    status.add_argument("--moved", action="store_true",
                        help="confirm that --state is the original state folder moved to a "
                        "new place across file systems (or restored), with nothing answered "
                        "at the old place since: a state whose recorded folder is gone and "
                        "whose ledger.db is another file is refused without it (a copy whose "
                        "original was deleted would miss the original's later answers); "
                        "once confirmed, every command opens it")
    status.set_defaults(handler=_status)


def add_serve_parser(subparsers, name: str) -> None:
    """Register ``pacpriv serve`` and ``pacpriv serve keys add|list|revoke``."""
    p = subparsers.add_parser(
        name, help="serve a fitted prediction state over HTTP (FastAPI + uvicorn)",
        description="POST /predict {\"rows\": [[...], ...]} answers rows in order; GET /budget. "
        "With API keys (pacpriv serve keys add), every request needs Authorization: Bearer "
        "<token>; without keys only 127.0.0.1 is served. Needs pip install 'pacpriv[serve]'.",
    )
    p.add_argument("--state", help="fitted state directory")
    p.add_argument("--ledger", default=None, type=ledger_location,
                   help="ledger store (default: DIR/ledger.db, "
                   "SQLite); postgresql://... to share one ledger between replicas")
    p.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1; any "
                   "other needs API keys)")
    p.add_argument("--port", type=integer, default=8000,
                   help="TCP port, in [1, 65535] (default 8000)")
    p.add_argument("--max-body-bytes", type=integer, default=1 << 20,
                   help="largest request body in bytes, >= 64 (default 1 MiB; larger: 413)")
    p.add_argument("--max-rows", type=integer, default=1000,
                   help="most query rows per request, >= 1 (default 1000; more: 413)")
    p.add_argument("--rate-limit", type=number, default=50.0, help="POST /predict requests "
                   "per second per key (default 50; over: 429); GET /budget is not limited")
    p.add_argument("--timeout", type=number, default=30.0,
                   help="seconds per request (default 30; past it: 503, charge refunded)")
    p.add_argument("--idempotency-ttl", type=number, default=86400.0,
                   help="seconds an Idempotency-Key's answer is kept for retries (default "
                   "86400 = 24 h); a retry after it gets 410 and is never charged twice")
    p.add_argument("--idempotency-max-rows", type=integer, default=100_000,
                   help="most idempotent answers kept, >= 1 (default 100000; the oldest go first, "
                   "their retries get 410)")
    p.set_defaults(handler=_serve)
    keys = p.add_subparsers(dest="keys_group", metavar="keys")
    group = keys.add_parser("keys", help="analysts' API keys: add, list, revoke")
    actions = group.add_subparsers(dest="keys_action", required=True, metavar="ACTION")
    for action, text in (("add", "add a key (the token is printed once)"),
                         ("list", "list the keys (ids, names, quotas, spend)"),
                         ("revoke", "revoke a key (its requests get 403 at once)")):
        a = actions.add_parser(action, help=text)
        a.add_argument("--state", required=True, help="the served state directory")
        a.add_argument("--ledger", default=None, type=ledger_location,
                       help="ledger store (as for pacpriv serve)")
        a.set_defaults(handler=_keys)
        if action == "add":
            a.add_argument("--name", required=True, help="the analyst's name (public)")
            a.add_argument("--quota", type=budget_number, default=None,
                           help="the key's cap in nats inside the global budget (default: none)")
        elif action == "revoke":
            a.add_argument("key_id", help="the key id (8 hex digits, from keys list)")
        else:
            a.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _keys(args) -> int:
    from pacpriv.storage import add_key

    check_existing_dir(args.state, "--state")
    if args.keys_action == "add" and args.quota is not None:
        check_positive_finite(args, "--quota", " (nats)")
    store = _checked_store(args)
    if args.keys_action == "add":
        if any(k.name == args.name and k.active for k in store.keys()):
            raise UsageError(f"--name {args.name!r} is already the name of an active key (see "
                             "pacpriv serve keys list); revoke it first or choose another name")
        total = _state_total_budget(args.state)
        earlier = [k for k in store.keys() if k.name == args.name]
        key_id, token = add_key(store, args.name, quota=args.quota)
        if earlier:  # a reissued key: its quota is its own, stated (never silently widened)
            spent = math.fsum(k.spent for k in earlier)
            print(f"pacpriv: note: {args.name!r} had {len(earlier)} revoked key(s), which spent "
                  f"{format_bound(spent)} nats; a quota is per key, so the new key's quota "
                  f"({'none' if args.quota is None else format_bound(args.quota, side='nearest')}"
                  " nats) comes on top of that spend (the global budget caps every key)",
                  file=sys.stderr)
        if args.quota is not None and total is not None and args.quota > total:
            print(f"pacpriv: warning: --quota {args.quota:g} nats is above the total budget "
                  f"{format_bound(total, side='nearest')} nats: the quota can never be reached "
                  "(the key is capped by the global budget)", file=sys.stderr)
        print(f"{'key id':<22}{key_id}")
        print(f"{'token':<22}{token}")
        print("pacpriv: note: the token is shown once and stored only as a salted hash; give it "
              "to the analyst over a private channel.", file=sys.stderr)
    elif args.keys_action == "revoke":
        if not store.revoke_key(args.key_id):
            raise UsageError(f"key_id {args.key_id!r} is not an active key of this ledger "
                             "(see pacpriv serve keys list)")
        print(f"{'revoked':<22}{args.key_id}")
    else:
        rows = [k.public() for k in store.keys()]
        if args.json:
            print(_json.dumps(rows, indent=2))
            return 0
        print(f"{'key id':<10}{'name':<24}{'quota (nats)':>14}{'spent (nats)':>14}  status")
        for k in rows:
            quota = "none" if k["quota"] is None else format_bound(k["quota"], side="nearest")
            status = "active" if k["revoked"] is None else "revoked"
            print(f"{k['key_id']:<10}{k['name'][:23]:<24}{quota:>14}"
                  f"{format_bound(k['spent']):>14}  {status}")
    return 0


def _checked_store(args):
    """The ledger store of ``--state`` after the checks ``serve`` makes (a fitted state; not a
    copy of another state, nor an unconfirmed move: twelfth new-user pass, H0n): keys added
    to a copy would be refused by ``serve`` on it anyway."""
    from pacpriv.prediction._state import StateDir

    st = StateDir(args.state)
    if not st.is_fitted():
        raise UsageError(f"--state {args.state!r} has no fitted worlds yet: run pacpriv predict "
                         "fit first, then add keys")
    store, _ = st.open_ledger(args.ledger, float(st.read_config()["per_query_budget"]))
    return store


def _state_total_budget(state) -> float | None:
    """The total budget (nats) in the state's config.json (None if it cannot be read)."""
    import json
    try:
        return float(json.loads((Path(state) / "config.json").read_text())["total_budget"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _total_budget(args) -> float:
    from pacpriv.pac.bounds._posterior import mi_budget_for_accuracy
    check_exactly_one(args, "--total-budget", "--target-accuracy", " (nats)")
    if args.total_budget is not None:
        return args.total_budget
    if not 0.5 < args.target_accuracy < 1:
        raise UsageError(f"--target-accuracy must be in (0.5, 1); got {args.target_accuracy}")
    total = float(mi_budget_for_accuracy(args.target_accuracy, prior=0.5))
    if not total > 0:  # a rounding step above the blind guess: no budget at all
        raise UsageError(f"--target-accuracy {args.target_accuracy!r} is too close to the blind-"
                         "guess rate 0.5: it allows a total budget of 0 nats; give a larger one")
    return total


def _fit(args) -> int:
    from pacpriv.prediction import PrivatePredictor

    check_output_dir(args.state, "--state")  # before any work: a file, no permission
    spec_from_args(ExecutionOptions, args)  # every execution flag, before any work
    if not 2 <= args.n_worlds <= MAX_WORLDS or args.n_worlds % 2:
        shown = args.n_worlds if args.n_worlds.bit_length() <= 132 else (
            f"an integer of {integer_digits(args.n_worlds)} digits")
        raise UsageError(f"--n-worlds must be an even integer in [2, {MAX_WORLDS}]; got {shown}")
    for flag, value in (("--seed", args.seed), ("--secret-seed", args.secret_seed)):
        if value is not None and value < 0:
            raise UsageError(f"{flag} must be a non-negative integer; got {value}")
    if args.secret_seed is not None and args.secret_seed == args.seed:
        raise UsageError(f"--secret-seed must differ from --seed (the worlds' seed is public, so "
                         f"a secret drawn from it could be searched for); got {args.seed} for both")
    check_positive_finite(args, "--per-query-budget", " (nats)")
    total = _total_budget(args)
    if args.per_query_budget > total:
        given = (f"--total-budget {args.total_budget:g}" if args.total_budget is not None else
                 f"the total budget {format_bound(total, side='nearest')} nats that "
                 f"--target-accuracy {args.target_accuracy:g} allows")
        raise UsageError(f"--per-query-budget {args.per_query_budget:g} nats exceeds {given}: "
                         "not even one query could be answered; lower --per-query-budget")
    estimator = _estimator(args.estimator)
    _check_estimator_kind(args, estimator)
    output = _check_output(args, estimator)
    dataset = load_cli_dataset(args)
    if dataset.y is None:
        raise UsageError(f"--dataset {args.dataset!r} has no labels; prediction needs (X, y)")
    _check_labels_and_budget(args, dataset, output, estimator)  # before the state folder
    n_jobs, cap_note = effective_n_jobs(args.n_jobs, None)
    if cap_note:
        print(f"pacpriv: note: {cap_note}", file=sys.stderr)
    # the first worlds' classes before the probe; a huge --n-worlds' estimate before the rest
    seed = check_worlds_up_front(args, estimator, output, dataset.pool, first=QUICK_WORLDS)
    check_fit_estimate(args, dataset.pool, n_jobs, estimator, output)  # before the state
    if args.n_worlds > QUICK_WORLDS:
        check_worlds_up_front(args, estimator, output, dataset.pool, seed=seed)
    pp = PrivatePredictor(estimator, dataset.pool, n_worlds=args.n_worlds,
                          per_query_budget=args.per_query_budget, total_budget=total,
                          output=output, rule=args.rule, state=args.state, rng=seed,
                          secret_rng=args.secret_seed)
    pp.fit(execution=spec_from_args(ExecutionOptions, args, n_jobs=n_jobs),
           preprocessing=_fit_map(dataset),
           label_names=dataset.target_names if output != "value" else None)
    _print_budget(pp.budget())
    print(f"{'secret index, noise':<22}{pp.secret_randomness}")
    print(f"{'state':<22}{args.state}")
    return 0


def _fit_map(dataset):
    """The state's raw-row map: the dataset's preprocessing, or for a CSV pool read with a
    header the names of its feature columns alone (a query file may then give them by name:
    fourteenth new-user pass, where a reordered header was answered column for column)."""
    if dataset.transform is not None:
        return dataset.transform
    names = tuple(dataset.feature_names)
    synthetic = names == tuple(f"x{j}" for j in range(len(names)))  # a file without a header
    if str(dataset.source).lower().endswith(".csv") and not synthetic:
        from pacpriv.datasets.transform import FittedPreprocessing

        return FittedPreprocessing.names_only(names)
    return None


def _check_output(args, estimator) -> str:
    """The ``--output`` (default ``proba``, or ``value`` where the estimator has no
    ``predict_proba``), refused before any work when the estimator cannot give it: the
    supported set is asked of the estimator itself (``supported_outputs``), for the built-in
    ones of :data:`ESTIMATORS` and a ``module:attr`` scikit-learn estimator alike."""
    from pacpriv.prediction._evaluate import supported_outputs

    if not (hasattr(estimator, "fit") and hasattr(estimator, "get_params")):
        return args.output or "proba"  # a fit function: its models are not known before fit
    supported = supported_outputs(estimator)
    output = args.output or ("proba" if "proba" in supported else "value")
    if output not in supported:
        raise UsageError(
            f"--output {output} is not available for --estimator {args.estimator} "
            f"({type(estimator).__name__}); it supports "
            f"{', '.join(supported) or 'none of the built-in outputs'}")
    return output


def _check_labels_and_budget(args, dataset, output: str, estimator) -> None:
    """Refuse a classifier on a label column that is not class labels (continuous, about one
    record per class) or has a single class, and a per-query budget too small for the grid
    release of the answers' ``d`` coordinates (every query would fail)."""
    import numpy as np

    from pacpriv.prediction._settings import check_query_floor, output_dim
    from pacpriv.prediction._worlds import as_world_fitter, trains_classifier

    y = dataset.y
    if trains_classifier(as_world_fitter(estimator), output):
        check_cli_class_labels(dataset, args, "pacpriv predict fit")
    n_classes = int(np.unique(np.asarray(y)).size)
    if output != "value" and n_classes < 2:
        raise UsageError(f"--estimator {args.estimator} needs >= 2 classes in --dataset "
                         f"{args.dataset!r}'s labels; got {n_classes}")
    d = output_dim(output, y)
    try:
        check_query_floor(args.per_query_budget, d or 1, name="--per-query-budget",
                          output=f"--output {output}")
    except ValueError as err:
        raise UsageError(str(err).rstrip(".")) from None



def _check_estimator_kind(args, estimator) -> None:
    """Refuse, before any work, an ``--estimator`` that is neither a scikit-learn-style
    estimator, a torch fitter nor a callable (a fit function ``fit((X, y)) -> model``)."""
    if hasattr(estimator, "fit") and hasattr(estimator, "get_params"):
        from pacpriv.estimators._meta import check_estimator_kind  # a clusterer's ids were
        return check_estimator_kind(estimator, ("classifier", "regressor"),  # released
                                    f"--estimator {args.estimator!r}", "predict fit needs a "
                                    "classifier or a regressor, fitted on the labels")
    from pacpriv.prediction._worlds import as_world_fitter

    try:
        as_world_fitter(estimator)
    except TypeError:
        has = " (it has fit() but no get_params())" if hasattr(estimator, "fit") else ""
        raise UsageError(f"--estimator {args.estimator} is of type {type(estimator).__name__}"
                         f"{has}: {NOT_AN_ESTIMATOR}, nor a fit function fit((X, y)) -> "
                         "model") from None


def _query(args) -> int:
    from pacpriv.prediction import PrivatePredictor
    from pacpriv.prediction._reporting import column_names
    from pacpriv.prediction._sklearn import labels_of

    check_no_query_preprocessing(args)  # the state's fit-time preprocessing applies
    check_existing_dir(args.state, "--state")
    if args.queries is not None:  # before the state is loaded
        check_input_file(args.queries, "--queries file")
    add_cwd_to_path()  # world models of a module:attr estimator import it by name
    pp = PrivatePredictor.load(args.state, ledger=args.ledger)
    X = query_rows(args, pp.preprocessing)
    source = "--queries" if args.queries is not None else "--dataset rows"
    shape = tuple(pp.feature_shape or ())
    if tuple(X.shape[1:]) != shape:
        hint = ("; if a column holds the label, pass --label-column (as to predict fit)"
                if args.label_column is None and X.ndim == 2 and len(shape) == 1
                and X.shape[1] == shape[0] + 1 else "")
        raise UsageError(f"{source} must have rows of shape {shape} (the "
                         f"fitted models' features); got {tuple(X.shape[1:])}{hint}")
    try:
        out = pp.answer(X, progress=len(X) >= 1000)
    except (ValueError, TypeError) as err:
        err.args = (str(err).replace("`X_queries`", source),)
        raise
    state = pp.budget()
    facts = pp.to_dict()
    classes = pp.display_classes  # classifier outputs only; by the pool's label names
    labels = None if classes is None else labels_of(out, classes)
    columns = column_names(facts["output"], classes, out.shape[1])
    if args.json:
        print(_json.dumps({"columns": columns, "outputs": out.tolist(),
                           "labels": None if labels is None else labels.tolist(),
                           "release": facts["release"], **state,
                           "secret_randomness": pp.secret_randomness}, indent=2))
        return 0
    _print_answers(out, columns, labels, facts["output"])
    print(f"{'released':<22}{facts['release']}")
    _print_budget(state)
    if pp.secret_randomness != "OS entropy (not recorded)":
        print(f"{'secret index, noise':<22}{pp.secret_randomness}")
    return 0


def _print_answers(out, columns: list[str], labels, output: str) -> None:
    """The answers as a table with a header row (one row per query, then the label)."""
    number = "{:.4f}" if output in ("proba", "label") else "{:.6g}"
    names = [*columns, *(["label"] if labels is not None else [])]
    width = max(10, *(len(n) + 2 for n in names))
    print(f"{'row':>5}  " + "".join(f"{n:>{width}}" for n in names))
    for i, row in enumerate(out):
        cells = [number.format(v) for v in row]
        if labels is not None:
            cells.append(str(labels[i]))
        print(f"{i:>5}  " + "".join(f"{c:>{width}}" for c in cells))


def _print_budget(state: dict) -> None:
    bound = state["membership_bound"]
    print(f"{'worlds':<22}{state['n_worlds']}")
    print(f"{'queries answered':<22}{state['n_answered']} of {state['max_queries']}")
    print(f"{'MI spent':<22}{format_bound(state['spent'])} of "
          f"{format_bound(state['total_budget'], side='nearest')} nats")
    if bound is not None:
        print(f"{'membership bound':<22}{format_percent(bound, 4)} — {state['bound_kind']}")


def _status(args) -> int:
    from pacpriv.prediction import PrivatePredictor
    from pacpriv.report import write_report

    check_existing_dir(args.state, "--state")
    if args.out is not None:
        check_output_dir(args.out, "--out")
    add_cwd_to_path()  # world models of a module:attr estimator import it by name
    pp = PrivatePredictor.load(args.state, ledger=args.ledger, moved=args.moved)
    if args.out is not None:  # the state is loaded: take --out now, before printing anything
        hold_report_folder(args)
    if args.json:
        print(_json.dumps(pp.to_dict(), indent=2))
    else:
        _print_budget(pp.budget())
        print(f"{'secret index, noise':<22}{pp.secret_randomness}")
        if pp.preprocessing is not None:
            print(f"{'preprocessing':<22}{pp.preprocessing.describe()}")
    if args.out is not None:
        for fmt, path in write_report(pp, Path(args.out), formats=("json", "md")).items():
            print(f"{f'report ({fmt})':<22}{path}")
    return 0


def _serve(args) -> int:  # pragma: no cover - blocks; exercised by the uvicorn test
    from pacpriv.prediction._app import check_port, serve
    from pacpriv.prediction._limits import ServeLimits

    if args.state is None:
        raise UsageError("--state is required (the fitted state directory to serve)")
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be in [1, 65535]; got {args.port}")
    for flag, low in (("--max-body-bytes", 64), ("--max-rows", 1),
                      ("--idempotency-max-rows", 1)):
        value = getattr(args, flag[2:].replace("-", "_"))
        if value < low:
            raise UsageError(f"{flag} must be an integer >= {low}; got {value}")
    check_positive_finite(args, "--rate-limit", " (requests per second)")
    check_positive_finite(args, "--timeout", " (seconds)")
    check_positive_finite(args, "--idempotency-ttl", " (seconds)")
    limits = ServeLimits(max_body_bytes=args.max_body_bytes, max_rows=args.max_rows,
                         rate=args.rate_limit, burst=max(1, int(2 * args.rate_limit)),
                         timeout=args.timeout, idempotency_ttl=args.idempotency_ttl,
                         idempotency_max_rows=args.idempotency_max_rows)
    check_existing_dir(args.state, "--state")
    check_port(args.host, args.port)  # before anything loads: not uvicorn's own error
    add_cwd_to_path()  # world models of a module:attr estimator import it by name
    import signal

    stopped_by = serve(args.state, host=args.host, port=args.port, ledger=args.ledger,
                       limits=limits)
    if stopped_by == signal.SIGINT:  # Ctrl-C: the CLI's convention, one line and 130
        print("pacpriv: interrupted; the server stopped (every answer given is in the "
              "ledger)", file=sys.stderr)
        return 130
    return 0
