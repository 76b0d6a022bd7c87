"""``pacpriv predict query``'s rows: read from ``--queries`` or ``--rows`` of ``--dataset`` and,
for a state whose fit preprocessed its pool, mapped into the worlds' feature space with the
*fit's* transformers (stored in the state), never with statistics of the query file.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from pacpriv.cli._args import UsageError
from pacpriv.cli._user import (
    _flag_names,
    _label_and_delimiter,
    _selection,
    load_cli_dataset,
    load_cli_rows,
    preprocessing_from_args,
)

__all__ = ["check_no_query_preprocessing", "query_rows"]


def check_no_query_preprocessing(args) -> None:
    """Refuse, before any work, ``--categorical``/``--missing``/``--standardize`` on a query:
    the rows are mapped with the preprocessing ``predict fit`` recorded in the state."""
    if preprocessing_from_args(args) is not None:
        raise UsageError("predict query takes no --categorical, --missing or --standardize: "
                         "the preprocessing predict fit applied (recorded in the state, see "
                         "predict status) is applied to the query rows automatically, with the "
                         "pool's statistics; drop the flag(s)")


def _rows_form(args) -> tuple[str, re.Match]:
    """``--rows START:STOP`` checked for its form (before any file is read)."""
    text = args.rows.strip()
    shown = text if len(text) <= 60 else text[:57] + "..."
    m = re.fullmatch(r"(\d+):(\d+)", text)  # keys: digit strings compared as integers
    start_key, stop_key = [(len(g.lstrip("0")), g.lstrip("0")) for g in (m.groups() if m
                                                                         else ("", ""))]
    if not m or start_key >= stop_key:
        raise UsageError("--rows must be START:STOP, two non-negative integers with START < STOP "
                         f"(e.g. 0:10, the first ten rows of --dataset); got {shown!r}")
    return shown, m


def _span(args, n_rows: int) -> slice:
    """``--rows START:STOP`` within ``n_rows`` rows (each row spends budget: no clamping)."""
    shown, m = _rows_form(args)
    if len(m.group(2).lstrip("0")) > 18 or int(m.group(2)) > n_rows:
        raise UsageError(f"--rows {shown}: STOP is beyond the {n_rows} rows of --dataset "
                         f"(START:STOP must lie within 0:{n_rows})")
    return slice(int(m.group(1)), int(m.group(2)))


def query_rows(args, preprocessing):
    """The query rows in the worlds' feature space: as read (a state fitted without
    preprocessing, as before) or raw rows mapped by ``preprocessing``, the state's
    :class:`~pacpriv.datasets.transform.FittedPreprocessing`."""
    if args.queries is None:
        _rows_form(args)  # its form before any file is read
    if preprocessing is None:
        if args.queries is not None:
            return load_cli_rows(args.queries, args, "--queries")
        X = load_cli_dataset(args).X
        return X[_span(args, len(X))]
    if not preprocessing.is_identity:
        print(f"pacpriv: preprocessing: {preprocessing.describe()}", file=sys.stderr)
    flag = "--queries" if args.queries is not None else "--dataset"
    text = args.queries if args.queries is not None else args.dataset
    try:
        if Path(text).suffix.lower() == ".csv":
            return _csv_rows(args, preprocessing, flag, text)
        if args.queries is not None:
            X = load_cli_rows(args.queries, args, "--queries")
        else:
            X = load_cli_dataset(args).X
            X = X[_span(args, len(X))]
        return preprocessing.transform_numeric(X, where=flag)
    except ValueError as err:
        raise UsageError(str(err).rstrip(".")) from None


def _csv_rows(args, preprocessing, flag: str, text: str):
    from pacpriv._files import check_input_file
    from pacpriv.datasets.files import read_csv_cells

    path = Path(text)
    check_input_file(path, f"{flag} file")
    label, delimiter = _label_and_delimiter(args)
    with _flag_names():
        cells, names, row_ids, has_header = read_csv_cells(
            path, label_column=label, delimiter=delimiter, **_selection(args))
    if args.queries is None:
        span = _span(args, len(cells))
        cells, row_ids = cells[span], row_ids[span]
    cells, names = _fit_columns(cells, names, preprocessing, flag, path.name, has_header)
    if has_header and tuple(names) != preprocessing.names and len(names) == len(
            preprocessing.names):
        j = next(j for j, (a, b) in enumerate(zip(names, preprocessing.names, strict=True))
                 if a != b)
        raise UsageError(f"{flag} {path.name!r}: feature column {j + 1} is {names[j]!r}, but "
                         f"predict fit read {preprocessing.names[j]!r} there; give the columns "
                         "in the fit's order (--columns)")
    return preprocessing.transform_cells(cells, where=path.name, row_ids=row_ids)


def _fit_columns(cells, names, preprocessing, flag: str, file: str, has_header: bool):
    """``(cells, names)`` of the fit's feature columns, picked by name from a file whose header
    holds each of them once among other columns (the pool file itself, with its label and
    dropped columns: fourteenth new-user pass); otherwise as read."""
    names = [str(n) for n in names]
    want = list(preprocessing.names)
    if (not has_header or names == want or len(set(names)) != len(names)
            or not set(want) <= set(names)):
        return cells, names
    at = [names.index(n) for n in want]
    rest = [n for n in names if n not in set(want)]
    print(f"pacpriv: note: {flag} {file!r}: the fit's feature columns ({', '.join(want)}) "
          f"taken by name; {len(rest)} other column(s) ignored", file=sys.stderr)
    return [[row[j] for j in at] for row in cells], want
