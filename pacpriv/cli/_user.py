"""The user's own files and functions on the command line: datasets, mechanisms, clusters.

Errors here are about the user's files, so they name the user's file and line
(``myfunc.py:fn``, ``myfunc.py, line 3``), never an internal module.
"""

from __future__ import annotations

import contextlib
import csv
import os
import re
import sys
from pathlib import Path

from pacpriv._files import check_input_file
from pacpriv._optional import import_optional
from pacpriv.cli._args import UsageError
from pacpriv.cli._specs import add_spec_flags, flagged_fields, spec_from_args
from pacpriv.datasets import Dataset, Preprocessing, load_dataset
from pacpriv.exceptions import MechanismError, UserCodeError
from pacpriv.registry import resolve_mechanism

__all__ = [
    "check_cli_class_labels",
    "LABEL_NAMES",
    "add_dataset_arguments",
    "add_preprocessing_arguments",
    "preprocessing_from_args",
    "explain_mechanism_error",
    "load_cli_dataset",
    "load_cli_rows",
    "add_cwd_to_path",
    "resolve_cli_mechanism",
    "scheduler_context",
    "user_names",
]

#: Header names that usually hold labels; read as a feature without --label-column (hinted).
LABEL_NAMES = ("label", "labels", "target", "class", "y")

#: Keywords of load_dataset -> the CLI flags that set them (function keywords, not spec fields;
#: the Preprocessing fields' flags come from their metadata).
_FLAGS = {"spec": "--dataset", "feature_ranges": "--feature-ranges",
          "label_column": "--label-column",
          "delimiter": "--delimiter", "drop_columns": "--drop-columns", "columns": "--columns",
          **{f.name: f.metadata["flag"] for f in flagged_fields(Preprocessing)}}

_PRIVATE_MODULE = re.compile(r"_pacpriv_user_mechanism_[0-9a-f]+\.")


#: ``--label-column`` / ``--feature-ranges`` help of the commands that train models themselves
#: (compare, audit: no user mechanism).
TRAINED_LABEL_HELP = ("label column of a .csv/.npy dataset (header name or index): the class "
                      "labels the models are trained on")
TRAINED_RANGES_HELP = ("feature ranges you declare public: 'low:high' for every feature, "
                       "'l1:h1,l2:h2,...' one per feature, or a file with one 'low,high' line "
                       "per feature; used to scale the features to [-1, 1] (default: bundled "
                       "datasets use published ranges, others the pool's own min/max)")


def add_dataset_arguments(parser, *, feature_ranges: bool = True,
                          label_help: str | None = None, ranges_help: str | None = None) -> None:
    """``--label-column``, ``--delimiter``, ``--columns``/``--drop-columns`` and
    ``--feature-ranges`` (shared by every command that reads a dataset: pac run, pac records,
    compare, predict fit/query; ``feature_ranges=False`` leaves out the last)."""
    parser.add_argument(
        "--label-column", default=None, metavar="COLUMN",
        help=label_help or "label column of a .csv/.npy dataset (header name or index); the "
        "mechanism then receives subsets as a tuple (X, y)")
    parser.add_argument(
        "--delimiter", default=",",
        help="field delimiter of a .csv dataset (one character; '\\t' for tab)")
    cols = parser.add_mutually_exclusive_group()
    cols.add_argument(
        "--columns", default=None, metavar="COL,...",
        help="feature columns to use, in this order (header names or 0-based indices of the "
        "file's columns; a name with a comma in double quotes); the others, e.g. a text "
        "column, are never read")
    cols.add_argument(
        "--drop-columns", default=None, metavar="COL,...",
        help="columns to leave out (header names or 0-based indices; a name with a comma in "
        "double quotes), e.g. a text column")
    add_preprocessing_arguments(parser)
    if not feature_ranges:
        return
    parser.add_argument(
        "--feature-ranges", default=None, metavar="FILE|LOW:HIGH,...",
        help=ranges_help or "feature ranges you declare public: 'low:high' for every feature, "
        "'l1:h1,l2:h2,...' one per feature, or a file with one 'low,high' line per feature; "
        "used by built-in mechanisms and printed in the report (default: bundled datasets "
        "use published ranges; a file's own ranges are used but never printed)")


def add_preprocessing_arguments(parser) -> None:
    """``--categorical``, ``--missing``, ``--standardize``: the flags of
    :class:`~pacpriv.datasets.Preprocessing`'s fields (:func:`~pacpriv.cli._specs.add_spec_flags`),
    so every command that reads a dataset offers the same flags."""
    add_spec_flags(parser.add_argument_group(
        "preprocessing (scikit-learn transformers fit on the whole pool: pool statistics, the "
        "same for every subset, never reported)"), Preprocessing)


def preprocessing_from_args(args) -> Preprocessing | None:
    """The one :class:`~pacpriv.datasets.Preprocessing` built from the flags (``None`` when
    every flag has its default, or the parser has none)."""
    spec = spec_from_args(Preprocessing, args)
    return None if spec.is_default else spec


def _column_list(text: str | None) -> list[str] | None:
    """``--columns``/``--drop-columns`` text as a list (indices stay text: the loader parses);
    a name with a comma in double quotes."""
    if text is None:
        return None
    # CSV rules: a name that holds a comma is given in double quotes ('"income, usd",age')
    fields = next(csv.reader([text], skipinitialspace=True), [])
    items = [c.strip() for c in fields if c.strip()]
    if not items:
        raise UsageError(f"give at least one column name or index; got {text!r}")
    return items


def _selection(args) -> dict:
    return {"columns": _column_list(getattr(args, "columns", None)),
            "drop_columns": _column_list(getattr(args, "drop_columns", None))}


def _label_and_delimiter(args) -> tuple[int | str | None, str]:
    label = args.label_column
    if label is not None and label.lstrip("-").isdigit():
        label = int(label)
    return label, "\t" if args.delimiter in ("\\t", "tab") else args.delimiter


@contextlib.contextmanager
def _flag_names():
    """Name the flags, not the API arguments, in a ValueError/TypeError raised inside."""
    try:
        yield
    except (ValueError, TypeError) as err:
        text = str(err)
        for api, flag in _FLAGS.items():
            text = text.replace(f"`{api}`=", f"{flag} ").replace(f"`{api}`", flag)
        err.args = (text,)
        raise


def load_cli_dataset(args) -> Dataset:
    """Load ``--dataset`` with the dataset flags; print a hint when a column looks like labels."""
    label, delimiter = _label_and_delimiter(args)
    with _flag_names():
        dataset = load_dataset(args.dataset, label_column=label, delimiter=delimiter,
                               feature_ranges=getattr(args, "feature_ranges", None),
                               preprocessing=preprocessing_from_args(args), **_selection(args))
    if dataset.preprocessing:
        print(f"pacpriv: preprocessing: {dataset.preprocessing}", file=sys.stderr)
    if dataset.y is None:
        suspects = [n for n in dataset.feature_names if n.strip().lower() in LABEL_NAMES]
        if suspects:
            print(f"pacpriv: note: column {suspects[0]!r} is read as a feature; if it holds "
                  f"labels, pass --label-column {suspects[0]} (the mechanism then receives "
                  "(X, y))", file=sys.stderr)
    return dataset


def check_cli_class_labels(dataset: Dataset, args, purpose: str) -> None:
    """Refuse, before any work, a label column that is not class labels (continuous values, or
    about one record per class) for a command that trains a classifier: the one message of
    :func:`pacpriv._validation.check_class_labels`, naming the flag."""
    from pacpriv._validation import check_class_labels, class_labels_message

    where = (f"--label-column {args.label_column} of {args.dataset!r}"
             if getattr(args, "label_column", None) is not None
             else f"the label column of --dataset {args.dataset!r}")
    if dataset.y is not None and dataset.classes is None:  # a regression target (diabetes)
        raise UsageError(class_labels_message(where, purpose, None, dataset.n_records))
    try:
        check_class_labels(dataset.y, where, purpose)
    except ValueError as err:
        raise UsageError(str(err)) from None


def load_cli_rows(path_text: str, args, flag: str):
    """Rows of a ``.csv``/``.npy``/``.npz`` file read like ``--dataset`` (header row optional,
    ``--delimiter``, the ``--label-column`` column dropped, ``--columns``/``--drop-columns``
    applied), any number of rows >= 1.

    A ``.npy`` file without ``--label-column`` may hold any shape ``(n, *feature_shape)``.
    Errors name ``flag`` and never quote a value.
    """
    import numpy as np

    from pacpriv.datasets.files import load_numpy, read_csv, read_numpy, select_columns

    path = Path(path_text)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".npy", ".npz"):
        raise UsageError(f"{flag} must be a .csv, .npy or .npz file; got {path_text!r}")
    check_input_file(path, f"{flag} file")  # missing, a folder, unreadable: one line
    if path.stat().st_size == 0:
        raise UsageError(f"{flag} file {path_text!r} is empty")
    label, delimiter = _label_and_delimiter(args)
    if len(delimiter) != 1:
        raise UsageError(f"--delimiter must be one character; got {args.delimiter!r}")
    selection = _selection(args)
    if preprocessing_from_args(args) is not None:
        raise UsageError(f"{flag}: --categorical, --missing and --standardize apply to "
                         "--dataset only (fit on its pool); give rows already in the pool's "
                         "feature space, or query --rows of --dataset")
    with _flag_names():
        if suffix == ".csv":
            X = read_csv(path, label_column=label, delimiter=delimiter, **selection)[0]
        elif suffix == ".npy" and label is None and not any(selection.values()):
            try:
                X = load_numpy(path)
            except (ValueError, OSError) as err:
                # (the problem in words, never the file's content)
                raise UsageError(f"{flag}: {str(err).replace(repr(str(path)), repr(path_text))}"
                                 ) from None
        else:
            X, _, names, _ = read_numpy(path, label_column=label)
            X = X[:, select_columns(list(names), where=repr(path.name), **selection)]
    return np.atleast_2d(X)


def user_names(text: str, spec: str) -> str:
    """Replace the private module name of a ``file.py:function`` mechanism by ``file.py:``."""
    target = spec.rsplit(":", 1)[0] if ":" in spec else spec
    return _PRIVATE_MODULE.sub(f"{Path(target).name}:", text)


def add_cwd_to_path() -> None:
    """Let ``module:attr`` find modules in the current folder, as ``python -m`` does (loky
    workers inherit ``sys.path``; a prediction state's models import their classes)."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())


def check_mechanism_file(spec: str) -> None:
    """A ``file.py:function`` spec whose file is missing fails here, before the dataset loads
    (one line, before any work)."""
    target = spec.rsplit(":", 1)[0] if ":" in spec else ""
    if target and (target.endswith(".py") or "/" in target or os.sep in target):
        from pacpriv._files import check_input_file

        check_input_file(target, "mechanism file")


def check_ranges_reach_the_mechanism(args) -> None:
    """``--feature-ranges`` with ``--mechanism module:function``: only a built-in mechanism
    receives the declared ranges (they were accepted and ignored: seventh new-user pass,
    #385). Refused before the dataset is read."""
    spec = getattr(args, "mechanism", None)
    if spec and ":" in spec and getattr(args, "feature_ranges", None) is not None:
        raise UsageError(
            f"--feature-ranges declares the public ranges that the built-in mechanisms clip "
            f"to; --mechanism {spec!r} is your own function and does not receive them: clip "
            "inside it (to ranges you declare public), or drop --feature-ranges")


def resolve_cli_mechanism(spec: str, dataset: Dataset, args=None):
    """:func:`pacpriv.registry.resolve_mechanism` for the CLI: ``module:function`` also finds
    modules in the current folder, and errors in the user's file are one line with file:line.
    A supervised built-in refused for its labels gets the one label message
    (:func:`check_cli_class_labels`, naming ``--label-column``) when ``args`` is given."""
    target = spec.rsplit(":", 1)[0] if ":" in spec else ""
    is_file = target.endswith(".py") or "/" in target or os.sep in target
    if target and not is_file:
        add_cwd_to_path()
    try:
        return resolve_mechanism(spec, dataset_info=dataset.info())
    except SyntaxError as err:
        where = Path(err.filename).name if err.filename else target
        raise UsageError(f"syntax error in {where}, line {err.lineno}: {err.msg} "
                         f"(mechanism {spec!r})") from None
    except (UsageError, UserCodeError):
        raise  # UserCodeError: one line, the user's message only with --show-errors
    except Exception as err:
        if isinstance(err, (ValueError, TypeError, FileNotFoundError, KeyError)):
            if (args is not None and dataset.y is not None and isinstance(err, ValueError)
                    and "is supervised" in str(err)):
                check_cli_class_labels(dataset, args, f"mechanism {spec!r}")
            raise
        tb = err.__traceback__
        line = None
        while tb is not None:  # the innermost frame in the user's file
            if Path(tb.tb_frame.f_code.co_filename).name == Path(target).name:
                line = tb.tb_lineno
            tb = tb.tb_next
        where = f"{Path(target).name}, line {line}" if line else repr(target)
        raise UsageError(f"loading mechanism {spec!r} failed in {where}: "
                         f"{type(err).__name__}: {err}") from None


#: What a function that treats the ``(X, y)`` tuple as an array raises (``subset.mean``,
#: ``subset[:, 0]``, ``np.asarray(subset) @ w``, ``a, b, c = subset``).
_UNPACK_ERRORS = (AttributeError, TypeError, IndexError, KeyError, ValueError)
#: ... and what their messages then say ("'tuple' object has no attribute", "tuple indices",
#: "inhomogeneous shape", "values to unpack"); a KeyError of f's own after ``X, y = subset``
#: gets no hint (eighth new-user pass)
_TUPLE_MISUSE = re.compile(r"tuple|inhomogeneous|unpack")


def explain_mechanism_error(err: BaseException, spec: str, dataset: Dataset) -> None:
    """Rewrite ``err``'s message in place with the user's names and, when an ``(X, y)``
    function got an array, a hint about ``--label-column``.

    The hint reads the chained original exception too (a :class:`MechanismError` withholds
    its message, which may quote records), but adds only pacpriv's own words.
    """
    text = user_names(str(err), spec)
    cause = err.__cause__
    probe = text if cause is None else f"{text} {type(cause).__name__}: {cause}"
    # only where f itself raised: never for an output pacpriv could not cast, a checkpoint, a
    # timeout or an exit (eighth new-user pass: a str output, a corrupt manifest)
    raised = isinstance(err, MechanismError) and " raised " in str(err)
    if not raised:
        pass
    elif dataset.y is None and "unpack" in probe:
        text += (" -- the subset is an array X because no --label-column was given; pass "
                 "--label-column NAME to receive (X, y)")
    elif (dataset.y is not None and isinstance(cause, _UNPACK_ERRORS)
          and _TUPLE_MISUSE.search(str(cause))):
        # bundled datasets are labelled too (no --label-column): say so whenever f raised
        # what using a tuple as an array raises -- never for a timeout, MemoryError or exit,
        # where it misled (seventh new-user pass, #247)
        text += (" -- this dataset is labelled: f receives (X, y); unpack it with "
                 "`X, y = subset`")
    if text != str(err) and err.args:
        err.args = (text, *err.args[1:])


#: Seconds to reach a Ray head given by --ray-address before refusing it
RAY_CONNECT_S = 5.0


def _check_reachable(address: str) -> None:
    """Refuse, in one line, a ``--ray-address`` ``host:port`` (or ``ray://host:port``) that no
    server answers within :data:`RAY_CONNECT_S` (thirteenth new-user pass: Ray retried
    ``nowhere:1`` for minutes with its own warnings only). ``auto`` and other forms pass."""
    import socket

    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_CONNECT_S).close()
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise UsageError(f"--ray-address {address!r}: no Ray head answers at {host}:{port} "
                         f"({reason}); start one (ray start --head) or fix the address"
                         ) from None


@contextlib.contextmanager
def scheduler_context(args):
    """Connect to ``--scheduler`` (Dask) or ``--ray-address`` (Ray) for the run, if given."""
    if getattr(args, "scheduler", None):
        distributed = import_optional("dask.distributed", "--scheduler", extra="dask")
        try:
            client = distributed.Client(args.scheduler, timeout=10)
        except OSError as err:
            raise UsageError(f"--scheduler {args.scheduler!r}: cannot connect ({err})") from None
        with client:
            yield
        return
    if getattr(args, "ray_address", None):
        ray = import_optional("ray", "--ray-address", extra="ray")
        _check_reachable(args.ray_address)  # ray.init retries an unreachable head forever
        ray.init(address=args.ray_address)
        try:
            yield
        finally:
            ray.shutdown()
        return
    yield
