"""Readers for data-pool files (.csv, .npy, .npz), used by :mod:`pacpriv.datasets`.

Each reader returns ``(X, y, feature_names, target_names)`` with ``X`` float64 of shape
``(n, p)``, ``y`` an array of shape ``(n,)`` or ``None``, and raises ``ValueError`` with the
file, line and column of the first problem.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from pacpriv._validation import describe_invalid
from pacpriv.datasets.preprocessing import (
    MISSING_MARKERS,
    Preprocessing,
    encode_table,
    fit_standardize,
    is_missing,
)
from pacpriv.datasets.transform import FittedPreprocessing

__all__ = ["read_csv", "read_csv_cells", "read_numpy", "select_columns"]


def _float_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _label_index(label_column, header: list[str] | None, n_cols: int, path: Path) -> int | None:
    return None if label_column is None else _column_index(label_column, header, n_cols, path)


def _column_index(label_column, header: list[str] | None, n_cols: int, path: Path) -> int:
    if isinstance(label_column, str):
        if header is None:
            raise ValueError(
                f"`label_column`={label_column!r} is a name but {str(path)!r} has no header row; "
                "give a column index."
            )
        if label_column not in header:
            raise ValueError(
                f"`label_column`={label_column!r} is not a column of {str(path)!r}; "
                f"columns: {header}."
            )
        return header.index(label_column)
    if isinstance(label_column, bool) or not isinstance(label_column, (int, np.integer)):
        raise TypeError(
            f"`label_column` must be an int or a str; got {type(label_column).__name__}."
        )
    if not -n_cols <= int(label_column) < n_cols:
        raise ValueError(
            f"`label_column` must be in [{-n_cols}, {n_cols - 1}] for {n_cols} columns; "
            f"got {label_column}."
        )
    return int(label_column) % n_cols


def _hint(text: str, column: int, header, delimiter: str, label) -> str:
    """Why a field may not be a number: another delimiter, an unnamed label column, or a text
    column to leave out. (The value itself is not repeated: it is a record's.)"""
    for other in (";", "\t", ",", "|"):
        if other != delimiter and other in text:
            shown = "\\t" if other == "\t" else other
            # argument names in backticks: the CLI turns them into its flags (cli/_user.py)
            return f" (the line looks {shown!r}-separated: pass `delimiter`='{shown}')"
    name = header[column] if header is not None else str(column)
    drop = (f"to leave a text column out, add {name!r} to `drop_columns`, or list the "
            "feature columns in `columns`")
    if label is None:
        return f"; if column {name!r} holds labels, pass it as `label_column`; {drop}"
    return f"; {drop}"


def _parse_columns(spec) -> list[str | int]:
    """A ``columns``/``drop_columns`` value as a list of names (str) and indices (int)."""
    if spec is None:
        return []
    if isinstance(spec, (str, int, np.integer)):
        spec = [spec]
    out: list[str | int] = []
    for c in spec:
        if isinstance(c, str) and c.strip().lstrip("-").isdigit():
            out.append(int(c))
        elif isinstance(c, bool) or not isinstance(c, (str, int, np.integer)):
            raise TypeError(f"a column must be a name (str) or an index (int); got "
                            f"{type(c).__name__}.")
        else:
            out.append(c.strip() if isinstance(c, str) else int(c))
    return out


def _comma_hint(name: str, names: list[str]) -> str:
    """Where ``name`` is a comma-separated part of a header name (``"income, usd"`` cut at the
    comma of a ``--columns`` list: seventh new-user pass, #5): how to name that column."""
    for k, full in enumerate(names):
        if "," in full and name in (part.strip() for part in full.split(",")):
            return (f" ({full!r} holds a comma: give its 0-based index {k}, or its name in "
                    f"double quotes on the command line)")
    return ""


def select_columns(names: list[str], *, columns=None, drop_columns=None,
                   exclude: tuple[int, ...] = (), where: str = "the data") -> list[int]:
    """Indices of the feature columns to keep, in order: ``columns`` (names or indices into
    ``names``) if given, else every column but ``drop_columns`` and ``exclude`` (the label).

    Raises
    ------
    ValueError
        Both given, an unknown or repeated column, the label among ``columns`` or
        ``drop_columns``, or nothing left. Column names (public facts of the file's header)
        are named; no value is read.
    """
    keep_spec, drop_spec = _parse_columns(columns), _parse_columns(drop_columns)
    if keep_spec and drop_spec:
        raise ValueError("give either `columns` or `drop_columns`, not both.")
    if columns is not None and not keep_spec:
        raise ValueError("`columns` must list at least one column.")
    n = len(names)

    def index(c, arg: str) -> int:
        if isinstance(c, str):
            if c not in names:
                raise ValueError(f"`{arg}`: {c!r} is not a column of {where}; columns: "
                                 f"{list(names)}{_comma_hint(c, names)}.")
            return names.index(c)
        if not -n <= c < n:
            raise ValueError(f"`{arg}`: index {c} is out of range for {n} columns.")
        return c % n

    if keep_spec:
        keep = [index(c, "columns") for c in keep_spec]
        if len(set(keep)) != len(keep):
            raise ValueError(f"`columns` repeats a column; got {keep_spec}.")
        if set(keep) & set(exclude):
            raise ValueError("`columns` must not list the label column (it is read as the "
                             "labels).")
        return keep
    dropped = {index(c, "drop_columns") for c in drop_spec}
    if dropped & set(exclude):
        raise ValueError("`drop_columns` must not list the label column (it is read as the "
                         "labels, never as a feature): leave it out of `drop_columns`.")
    keep = [j for j in range(n) if j not in dropped and j not in exclude]
    if not keep:
        # name only what took the columns away: the label column and/or `drop_columns`
        took = [what for what, given in (("the label column", bool(exclude)),
                                         ("`drop_columns`", bool(drop_spec))) if given]
        after = f" after {' and '.join(took)}" if took else ""
        raise ValueError(f"no feature column is left of {where}{after}.")
    return keep


#: Missing-value markers: a first row holding one is a record, not a header
_MISSING_MARKERS = MISSING_MARKERS


def _looks_like_name(text: str) -> bool:
    """A column name: blank (a pandas index column), or text with a letter that is neither a
    number, a formatted number (``$1,234.5``, ``12 %``) nor a missing-value marker."""
    if not text:
        return True
    if text.lower() in _MISSING_MARKERS or _float_or_none(text) is not None:
        return False
    if _float_or_none(re.sub(r"[\s$€£¥,%+()']", "", text)) is not None:
        return False
    return any(ch.isalpha() for ch in text)


def _is_header(fields: list[str]) -> bool:
    """A first row is a header when every field looks like a column name.

    A row with a number (plain or formatted) or a missing-value marker among its fields is a
    record: taking it as a header would publish its values as column names and drop it.
    """
    return any(fields) and all(_looks_like_name(f) for f in fields)


def _refuse_duplicate_names(header: list[str], path: Path) -> None:
    """Two columns of one name are ambiguous (``columns=["age"]`` would pick one silently):
    refused, naming the duplicated names (public schema facts; no value is read)."""
    seen: dict[str, int] = {}
    for name in header:
        seen[name] = seen.get(name, 0) + 1
    dups = [name for name, count in seen.items() if count > 1]
    if dups:
        raise ValueError(f"dataset file {str(path)!r} has duplicate column names {dups} in its "
                         "header; rename them so each column has one name.")


def _split_header(rows: list, path: Path) -> tuple[list[str] | None, list]:
    """``(header or None, data rows)``; a header's names must be distinct."""
    if not _is_header(rows[0][1]):
        return None, rows
    _refuse_duplicate_names(rows[0][1], path)
    return rows[0][1], rows[1:]


def _table(path: Path, label_column, delimiter: str, columns, drop_columns):
    """A CSV's header (or None), its data rows ``(line, fields)``, column names, label index
    and kept feature columns (errors name the file and line, never a cell)."""
    with open(path, newline="", encoding="utf-8-sig") as fh:  # a BOM is not part of a name
        reader = csv.reader(fh, delimiter=delimiter)
        try:
            rows = [
                (lineno, [f.strip() for f in row])
                for lineno, row in enumerate(reader, start=1)
                if row and any(f.strip() for f in row)
            ]
        except UnicodeDecodeError:  # its message quotes the undecodable byte: not repeated
            raise ValueError(
                f"{path.name}: not UTF-8 text (a byte could not be decoded); save the file as "
                "UTF-8."
            ) from None
        except csv.Error as err:
            raise ValueError(
                f"{path.name}, line {reader.line_num}: malformed CSV ({err})."
            ) from None
    if not rows:
        raise ValueError(f"dataset file {str(path)!r} is empty.")
    header, rows = _split_header(rows, path)
    if not rows:
        raise ValueError(f"dataset file {str(path)!r} has a header but no data rows.")
    n_cols = len(header) if header is not None else len(rows[0][1])
    label = _label_index(label_column, header, n_cols, path)
    names = header if header is not None else [f"x{j}" for j in range(n_cols)]
    keep = select_columns(names, columns=columns, drop_columns=drop_columns,
                          exclude=() if label is None else (label,), where=repr(path.name))
    return header, rows, names, label, keep


def read_csv_cells(path: Path, *, label_column=None, delimiter: str = ",", columns=None,
                   drop_columns=None):
    """The raw feature cells of a CSV, read as :func:`read_csv` reads its columns (the label
    column left out, ``columns``/``drop_columns`` applied), nothing parsed or transformed:
    for :meth:`~pacpriv.datasets.transform.FittedPreprocessing.transform_cells`.

    Returns ``(cells, names, row_ids, has_header)``: ``cells`` one list of str per data row,
    ``names`` the kept columns' names, ``row_ids`` each row's line number.

    Raises
    ------
    ValueError
        As :func:`read_csv` for the file's layout, or a row with another number of fields.
    """
    header, rows, names, _, keep = _table(path, label_column, delimiter, columns, drop_columns)
    cells = []
    for lineno, fields in rows:
        if len(fields) != len(names):
            raise ValueError(f"{path.name}, line {lineno}: expected {len(names)} fields, found "
                             f"{len(fields)}.")
        cells.append([fields[j] for j in keep])
    return cells, [names[j] for j in keep], [lineno for lineno, _ in rows], header is not None


def read_csv(path: Path, *, label_column=None, delimiter: str = ",", columns=None,
             drop_columns=None, preprocessing: Preprocessing | None = None):
    """Read a CSV; the first row is a header when every field looks like a name.

    ``columns`` (the feature columns to keep) or ``drop_columns`` (columns to leave out, e.g. a
    text column) name header names or file column indices; a left-out column is never parsed.
    ``preprocessing`` (:class:`~pacpriv.datasets.preprocessing.Preprocessing`) encodes text
    columns, handles missing cells and standardises; without it the features must be finite
    numbers. Error messages name the file, line and column, never a cell's text (it is a
    record's value): a non-numeric, non-finite or undecodable cell is described, not quoted.

    Returns ``(X, y, feature_names, target_names, applied, fitted)``: ``applied`` is one line
    saying what ``preprocessing`` did (``None`` if nothing), ``fitted`` the
    :class:`~pacpriv.datasets.transform.FittedPreprocessing` (``None`` without
    ``preprocessing``).
    """
    spec = preprocessing if preprocessing is not None else Preprocessing()
    header, rows, names, label, keep = _table(path, label_column, delimiter, columns,
                                              drop_columns)
    n_cols = len(names)
    wanted = set(keep)
    values = np.empty((len(rows), n_cols))
    labels: list[str] = []
    encode = False  # a missing cell, or a text cell under --categorical: the encoder reads all
    for i, (lineno, fields) in enumerate(rows):
        if len(fields) != n_cols:
            raise ValueError(
                f"{path}, line {lineno}: expected {n_cols} fields, found {len(fields)}."
            )
        for j, text in enumerate(fields):
            if j == label:
                labels.append(text)
                encode = encode or is_missing(text)
                continue
            if j not in wanted or encode:  # a left-out column (e.g. text) is never parsed
                continue
            v = _float_or_none(text)
            if is_missing(text) or (v is None and spec.categorical is not None):
                encode = True
                continue
            if v is None or not math.isfinite(v):
                # the value itself is a record's: described, never quoted (a 1e400 is one)
                kind = ("non-numeric value" if v is None
                        else "non-finite value (NaN, infinity or beyond the float range)")
                more = (" (or encode text columns: `categorical`='one-hot' or 'ordinal')"
                        if v is None else "")
                raise ValueError(
                    f"{path.name}, line {lineno}, column {j + 1}: {kind}; features "
                    f"must be finite numbers{_hint(text, j, header, delimiter, label)}{more}."
                )
            values[i, j] = v
    applied, fitted = None, None
    if encode:
        X, feature_names, kept_labels, applied, table = encode_table(
            [[fields[j] for j in keep] for _, fields in rows], [names[j] for j in keep], spec,
            where=path.name, row_ids=[lineno for lineno, _ in rows],
            labels=labels if label is not None else None)
        fitted = FittedPreprocessing.of(spec, [names[j] for j in keep], table, encoded=True)
        labels = kept_labels or []
    else:
        X, feature_names = values[:, keep], [names[j] for j in keep]
        scaler = None
        if spec.standardize:
            X, applied, scaler = fit_standardize(X, names=feature_names, where=repr(path.name))
        if preprocessing is not None:  # recorded even when nothing changed (no imputer then)
            fitted = FittedPreprocessing.of(spec, feature_names, scaler, encoded=False)
    if label is None:
        return X, None, feature_names, None, applied, fitted
    numeric = [_float_or_none(t) for t in labels]
    if all(v is not None and math.isfinite(v) for v in numeric):
        return X, np.asarray(numeric, dtype=np.float64), feature_names, None, applied, fitted
    target_names, y = np.unique(np.asarray(labels), return_inverse=True)
    return (X, y.astype(np.int64), feature_names, [str(t) for t in target_names], applied,
            fitted)


#: How each NumPy file begins: ``numpy.save``'s header, a ZIP archive (``numpy.savez``).
_NUMPY_MAGIC = {".npy": (b"\x93NUMPY",), ".npz": (b"PK\x03\x04", b"PK\x05\x06")}


def load_numpy(path: Path) -> Any:
    """``numpy.load(path, allow_pickle=False)`` of a ``.npy`` or ``.npz`` file, after checking
    that the file begins as one: anything else (a text file named ``.npy``) is "not a NumPy
    file" in one line, not numpy's "Cannot load file containing pickled data" (ninth new-user
    pass, #232). Nothing of the file's content is quoted.

    Raises
    ------
    ValueError
        The file is empty, not a NumPy file of its suffix, or numpy cannot read it.
    """
    suffix = Path(path).suffix.lower()
    magic = _NUMPY_MAGIC.get(suffix, _NUMPY_MAGIC[".npy"] + _NUMPY_MAGIC[".npz"])
    with open(path, "rb") as fh:
        head = fh.read(6)
    if not head:
        raise ValueError(f"cannot read {str(path)!r} as a NumPy file: the file is empty.")
    if not head.startswith(magic):
        made = "numpy.savez" if suffix == ".npz" else "numpy.save"
        header = "a ZIP archive's" if suffix == ".npz" else "NumPy's"
        raise ValueError(f"cannot read {str(path)!r}: it is not a NumPy {suffix or '.npy'} file "
                         f"(its first bytes are not {header} header): give a file written by "
                         f"{made}, or a .csv file")
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise ValueError(f"cannot read {str(path)!r} as a NumPy file: {err}") from err


def read_numpy(path: Path, *, label_column=None):
    """Read a 2-D ``.npy`` array (optionally splitting off ``label_column``) or an ``.npz``
    archive holding ``X`` and optional ``y``."""
    loaded = load_numpy(path)
    if path.suffix.lower() == ".npz":
        with loaded:
            if label_column is not None:
                raise ValueError("`label_column` does not apply to .npz files; store `y`.")
            if "X" not in loaded.files:
                raise ValueError(
                    f"{str(path)!r} must hold an array named 'X' (and optionally 'y'); "
                    f"found {loaded.files}."
                )
            X = _numeric(loaded["X"], path, "X")
            y = _numeric(loaded["y"], path, "y").reshape(-1) if "y" in loaded.files else None
    else:
        X, y = _numeric(loaded, path, "array"), None
        if X.ndim == 2 and label_column is not None:
            if isinstance(label_column, str):
                raise TypeError("`label_column` must be an int index for a .npy file.")
            label = _column_index(label_column, None, X.shape[1], path)
            y = X[:, label]
            X = np.delete(X, label, axis=1)
    if X.ndim != 2:
        raise ValueError(f"{str(path)!r}: X must be a 2-D array (n, p); got shape {X.shape}.")
    if y is not None and y.shape[0] != X.shape[0]:
        raise ValueError(
            f"{str(path)!r}: X has {X.shape[0]} rows but y has {y.shape[0]} entries."
        )
    return X, y, [f"x{j}" for j in range(X.shape[1])], None


def _numeric(a: np.ndarray, path: Path, what: str) -> np.ndarray:
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{str(path)!r}: {what} must be numeric; got dtype {a.dtype}.")
    a = np.asarray(a, dtype=np.float64)
    finite = np.isfinite(a)
    if not np.all(finite):
        raise ValueError(f"{str(path)!r}: {what} holds NaN or infinite values in "
                         f"{describe_invalid(~finite)} (values not shown).")
    return a
