"""Preprocessing of real tables: categorical columns, missing values, standardisation.

One frozen spec, :class:`Preprocessing`, says what to do; :func:`encode_table` does it with
scikit-learn's transformers (``ColumnTransformer`` of ``SimpleImputer``, ``OneHotEncoder`` /
``OrdinalEncoder`` and ``StandardScaler``), and :func:`standardize` scales a numeric pool. The
CLI builds the spec from its flags in one place (each field's ``metadata`` holds its flag and
help), and every command that reads a dataset (``pac run``, ``pac records``, ``compare``,
``predict fit``, ``audit``) passes it to :func:`pacpriv.datasets.load_dataset`.

What it changes about the threat model
--------------------------------------
Every transformer is fit on the **whole pool**: the imputed medians or most frequent values,
the category lists and the scaler's means and standard deviations are *pool statistics*.
They do not depend on which records the secret subset holds, so the map applied to every
subset is the same, and in the PAC Privacy membership game -- where the adversary is given the
pool [1]_ -- it reveals nothing about membership: the certified bounds keep their meaning. They
are not public in any wider sense (a median or a category is some record's value), so reports
name what was applied and which columns were encoded, never a statistic, a category or a
record. Standardising also changes the *units of the release*: a mean of standardised columns
is in standard deviations of the pool, and to read it in the original units one needs the
pool's means and standard deviations, which are not released.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np

from pacpriv._optional import import_optional

__all__ = [
    "CATEGORICAL_CHOICES",
    "COLUMN_SCALE_RANGE",
    "MISSING_CHOICES",
    "MISSING_MARKERS",
    "Preprocessing",
    "check_column_scales",
    "encode_table",
    "fit_standardize",
    "standardize",
]

#: ``categorical`` values: how text columns become numbers.
CATEGORICAL_CHOICES = ("one-hot", "ordinal")
#: ``missing`` values: what to do with empty cells and missing-value markers.
MISSING_CHOICES = ("error", "drop", "impute-median", "impute-most-frequent")
#: Missing-value markers (compared case-insensitively), besides an empty cell.
MISSING_MARKERS = frozenset({"na", "n/a", "nan", "null", "none", "-", "?", "#n/a"})


@dataclass(frozen=True)
class Preprocessing:
    """How a table's columns become the pool's features (scikit-learn transformers).

    Parameters
    ----------
    categorical : {"one-hot", "ordinal"} or None
        Encoding of text columns (a column with any non-numeric cell): one 0/1 column per
        category (``OneHotEncoder``) or one column of category codes ``0..K-1`` in sorted
        order (``OrdinalEncoder``). ``None`` (default): a text column is an error naming its
        line and column (never its value).
    missing : {"error", "drop", "impute-median", "impute-most-frequent"}
        Empty cells and markers (``NA``, ``NaN``, ``null``, ``?``, ...): ``"error"``
        (default) refuses the file with the number of rows and columns affected; ``"drop"``
        removes the rows holding one (feature or label); the imputers fill numeric columns
        with the pool's median or most frequent value (``SimpleImputer``) and text columns
        with their most frequent category (a median has no meaning there). A missing label
        is dropped under ``"drop"`` and refused otherwise.
    standardize : bool
        Scale each numeric feature to mean 0 and standard deviation 1 with the pool's
        statistics (``StandardScaler``); encoded categorical columns are left as they are.

    Raises
    ------
    ValueError
        A value outside the choices above (the message names the argument and the choices).

    Notes
    -----
    Every statistic (median, category list, mean, standard deviation) is the *pool's*; see
    the module docstring for what that means for the threat model.
    """

    categorical: str | None = field(default=None, metadata={
        "flag": "--categorical", "choices": CATEGORICAL_CHOICES,
        "help": "encode text columns of a .csv: one-hot (a 0/1 column per category) or "
                "ordinal (codes 0..K-1); default: a text column is an error"})
    missing: str = field(default="error", metadata={
        "flag": "--missing", "choices": MISSING_CHOICES,
        "help": "empty cells and NA markers of a .csv: error (with the row and column "
                "count), drop the rows, or impute the pool's median / most frequent value"})
    standardize: bool = field(default=False, metadata={
        "flag": "--standardize",
        "help": "scale each numeric feature to mean 0, std 1 with the pool's statistics "
                "(the release is then in pool standard deviations; the scaler's statistics "
                "are pool statistics, never reported)"})

    def __post_init__(self) -> None:
        if self.categorical is not None and self.categorical not in CATEGORICAL_CHOICES:
            raise ValueError(f"`categorical` must be one of {', '.join(CATEGORICAL_CHOICES)} "
                             f"(or None); got {self.categorical!r}.")
        if self.missing not in MISSING_CHOICES:
            raise ValueError(f"`missing` must be one of {', '.join(MISSING_CHOICES)}; got "
                             f"{self.missing!r}.")
        if not isinstance(self.standardize, (bool, np.bool_)):
            raise TypeError(f"`standardize` must be a bool; got "
                            f"{type(self.standardize).__name__}.")

    @property
    def is_default(self) -> bool:
        """Whether every field has its default (numeric tables, nothing transformed)."""
        return all(getattr(self, f.name) == f.default for f in fields(self))

    def to_dict(self) -> dict:
        """The spec's fields (public: what the user asked for)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def is_missing(text: str) -> bool:
    """Whether a CSV cell is missing: empty, or a marker of :data:`MISSING_MARKERS`."""
    return not text or text.lower() in MISSING_MARKERS


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _column_pipeline(spec: Preprocessing, is_text: bool):
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

    steps: list = []
    if spec.missing.startswith("impute"):
        strategy = "median" if spec.missing == "impute-median" and not is_text else "most_frequent"
        steps.append(SimpleImputer(strategy=strategy))
    if is_text:
        steps.append(OneHotEncoder(sparse_output=False, dtype=np.float64)
                     if spec.categorical == "one-hot" else OrdinalEncoder(dtype=np.float64))
    elif spec.standardize:
        steps.append(StandardScaler())
    return make_pipeline(*steps) if steps else "passthrough"


def encode_table(cells: list[list[str]], names: list[str], spec: Preprocessing, *,
                 where: str, row_ids: list[int], labels: list[str] | None = None):
    """Turn a table of CSV cells into float features with ``spec``.

    Parameters
    ----------
    cells : list of n rows, each a list of p str
        The feature cells (stripped), row-major.
    names : list of p str
        Column names.
    spec : Preprocessing
        What to apply.
    where : str
        The file's name, for messages.
    row_ids : list of n int
        Each row's line number in the file, for messages.
    labels : list of n str or None
        The label cells, if any (a missing label is dropped under ``"drop"``).

    Returns
    -------
    X : ndarray of shape (n_kept, p_out), float64
    feature_names : list of str, length p_out
        One-hot columns are ``name[k]`` (``k``-th category in sorted order: the category
        itself is a record's value and is never shown).
    labels : list of str or None
        The kept rows' labels.
    applied : str or None
        One line for reports: what was applied, with counts (``None`` if nothing was).
    fitted : tuple (ColumnTransformer, tuple of bool)
        The fitted transformer (DataFrame columns ``c0..c{p-1}``) and which columns were
        text, for :class:`~pacpriv.datasets.transform.FittedPreprocessing` (never printed:
        pool statistics).

    Raises
    ------
    ValueError
        A non-finite number, a text column without ``categorical``, missing cells with
        ``missing="error"`` (the message gives the counts of rows and columns affected and
        the first cell's line and column), a column with no value at all, or no row left.
        No message quotes a cell.
    """
    n, p = len(cells), len(names)
    missing = np.zeros((n, p), dtype=bool)
    text = np.zeros(p, dtype=bool)
    first_text: tuple[int, int] | None = None
    for i, row in enumerate(cells):
        for j, t in enumerate(row):
            if is_missing(t):
                missing[i, j] = True
                continue
            v = _number(t)
            if v is None:
                text[j] = True
                first_text = first_text or (i, j)
            elif not math.isfinite(v):
                raise ValueError(f"{where}, line {row_ids[i]}, column {j + 1}: non-finite value "
                                 "(infinity or beyond the float range); features must be finite "
                                 "numbers.")
    label_missing = (np.array([is_missing(t) for t in labels], dtype=bool)
                     if labels is not None else np.zeros(n, dtype=bool))
    if text.any() and spec.categorical is None:
        i, j = first_text  # type: ignore[misc]
        raise ValueError(f"{where}, line {row_ids[i]}, column {j + 1}: non-numeric value; "
                         "features must be finite numbers (to encode text columns set "
                         "`categorical` to 'one-hot' or 'ordinal')")
    rows_missing = missing.any(axis=1) | label_missing
    if rows_missing.any() and (spec.missing == "error" or (label_missing.any()
                                                           and spec.missing != "drop")):
        i = int(np.flatnonzero(rows_missing)[0])
        at = "the label is missing"
        if missing[i].any():
            j = int(np.flatnonzero(missing[i])[0])
            at = f"column {j + 1}: " + ("missing-value marker" if cells[i][j] else "empty value")
        what = (f"{int(rows_missing.sum())} of {n} rows and {int(missing.any(axis=0).sum())} "
                f"of {p} feature columns{' (and the label)' if label_missing.any() else ''}")
        fix = ("'drop' (labels are never imputed)" if spec.missing != "error"
               else "'drop', 'impute-median' or 'impute-most-frequent'")
        raise ValueError(f"{where}, line {row_ids[i]}, {at}; missing values (empty or NA) in "
                         f"{what}; set `missing` to {fix}.")
    keep = ~rows_missing if spec.missing == "drop" else np.ones(n, dtype=bool)
    if not keep.any():
        raise ValueError(f"{where}: no row is left after dropping the {n} rows with missing "
                         "values.")
    empty = missing[keep].all(axis=0)
    if empty.any():
        j = int(np.flatnonzero(empty)[0])
        raise ValueError(f"{where}: column {names[j]!r} has no value in any row; leave it out "
                         "with `drop_columns`.")
    X, out_names, ct = _transform(cells, names, spec, keep, missing, text, where)
    kept_labels = None if labels is None else [t for t, k in zip(labels, keep, strict=True) if k]
    fitted = (ct, tuple(bool(t) for t in text))
    return (X, out_names, kept_labels, _applied(spec, names, text, missing, int((~keep).sum())),
            fitted)


def _transform(cells, names, spec, keep, missing, text, where):
    pd = import_optional("pandas", "CSV preprocessing", extra="compare",
                         hint="pip install 'pandas>=1.5' (a dependency of pacpriv)")
    from sklearn.compose import ColumnTransformer

    kept = [r for r, k in zip(cells, keep, strict=True) if k]
    miss = missing[keep]
    columns = {}
    for j in range(len(names)):
        col = [r[j] for r in kept]
        columns[f"c{j}"] = (
            pd.Series([np.nan if m else t for t, m in zip(col, miss[:, j], strict=True)],
                      dtype=object)
            if text[j] else
            pd.Series([np.nan if m else float(t) for t, m in zip(col, miss[:, j], strict=True)],
                      dtype=np.float64))
    frame = pd.DataFrame(columns)
    if spec.standardize:  # raw numeric columns, before their variance is computed
        numeric = [j for j in range(len(names)) if not text[j]]
        check_column_scales(frame[[f"c{j}" for j in numeric]].to_numpy(dtype=np.float64),
                            [names[j] for j in numeric], where=where, missing_ok=True)
    transformers = [(f"c{j}", _column_pipeline(spec, bool(text[j])), [f"c{j}"])
                    for j in range(len(names))]
    ct = ColumnTransformer(transformers, sparse_threshold=0.0)
    X = np.asarray(ct.fit_transform(frame), dtype=np.float64)
    out_names: list[str] = []
    for j, name in enumerate(names):
        if text[j] and spec.categorical == "one-hot":
            k = len(ct.named_transformers_[f"c{j}"][-1].categories_[0])
            out_names += [f"{name}[{c}]" for c in range(k)]
        else:
            out_names.append(name)
    return X, out_names, ct


def _applied(spec: Preprocessing, names, text, missing, n_dropped: int) -> str | None:
    parts = []
    cat = [names[j] for j in np.flatnonzero(text)]
    if cat:
        how = ("one-hot encoded (columns name[k], k-th category in sorted order)"
               if spec.categorical == "one-hot" else "ordinal encoded (codes 0..K-1)")
        parts.append(f"{len(cat)} text column(s) {how}: {', '.join(cat)}")
    n_missing_cols = int(missing.any(axis=0).sum())
    if spec.missing == "drop" and n_dropped:
        parts.append(f"{n_dropped} row(s) with missing values dropped")
    elif spec.missing.startswith("impute") and n_missing_cols:
        stat = "median" if spec.missing == "impute-median" else "most frequent value"
        parts.append(f"missing values in {n_missing_cols} column(s) imputed with the pool's "
                     f"{stat} (most frequent category for text columns)")
    if spec.standardize:
        parts.append(f"{int((~text).sum())} numeric column(s) standardized with the pool's "
                     "mean and standard deviation")
    if not parts:
        return None
    return ("; ".join(parts) + " (scikit-learn transformers fit on the whole pool: pool "
            "statistics, the same for every subset; none is shown)")


#: A feature column's largest magnitude must lie in ``[2^-400, 2^400]`` (about 3.9e-121 to
#: 2.6e120), the range of non-zero outputs the PAC engine accepts
#: (:data:`pacpriv.pac.engine._mechanism.MIN_OUTPUT_MAGNITUDE`): outside it a mechanism's
#: statistics of the column (a mean, a variance) under- or overflow float64. Subnormal
#: numbers (below 2.2e-308) are far below it.
COLUMN_SCALE_RANGE = (2.0**-400, 2.0**400)


def check_column_scales(X: np.ndarray, names, *, where: str, missing_ok: bool = False) -> None:
    """Refuse, before any work, a column that is non-finite or whose scale float64 cannot
    carry through a mechanism (:data:`COLUMN_SCALE_RANGE`).

    An all-zero column is accepted; within a column of a valid scale, smaller values (even
    subnormal ones) are accepted. ``missing_ok``: NaN cells are missing values, not faults.
    Called on raw columns before standardisation and on the final pool. The message names the
    column, the valid range and the count of rows at fault, never a value.

    Raises
    ------
    ValueError
        Naming the first such column.
    """
    X = np.asarray(X, dtype=np.float64)
    low, high = COLUMN_SCALE_RANGE
    with np.errstate(invalid="ignore"):
        mag = np.abs(X)
        finite = np.isfinite(mag) | (np.isnan(mag) if missing_ok else False)
        mag = np.where(np.isnan(mag), 0.0, mag)
        top = np.where(finite, mag, 0.0).max(axis=0) if X.shape[0] else np.zeros(X.shape[1])
    for j in range(X.shape[1]):
        name = names[j] if j < len(names) else f"x{j}"
        bad = int(np.count_nonzero(~finite[:, j]))
        if bad:
            raise ValueError(
                f"{where}: column {name!r} holds {bad} non-finite value(s) (NaN or infinity); "
                "features must be finite numbers.")
        if top[j] > high or 0.0 < top[j] < low:
            side = "above" if top[j] > high else "below"
            n_off = int(np.count_nonzero(mag[:, j] > high)) if side == "above" else X.shape[0]
            raise ValueError(
                f"{where}: column {name!r} has {'values' if side == 'above' else 'a scale'} "
                f"{side} the range [{low:.3g}, {high:.3g}] in magnitude ({n_off} of "
                f"{X.shape[0]} rows): a mechanism's statistics of it would under- or overflow "
                "float64. Rescale the column in the file by a power of ten, or leave it out "
                "with --drop-columns (values not shown).")


def standardize(X: np.ndarray, *, names=None, where: str = "the pool") -> tuple[np.ndarray, str]:
    """Standardise every column of a numeric pool: :func:`fit_standardize` without the
    fitted transform (same parameters; returns ``(X_scaled, applied)``)."""
    return fit_standardize(X, names=names, where=where)[:2]


def fit_standardize(X: np.ndarray, *, names=None, where: str = "the pool"):
    """Standardise every column of a numeric pool (``StandardScaler``, pool statistics).

    Parameters
    ----------
    X : ndarray of shape (n, p), float64
    names : sequence of p str, optional
        Column names for messages (default ``x0, x1, ...``).
    where : str
        The pool's name, for messages.

    Returns
    -------
    X_scaled : ndarray of shape (n, p), float64
        Mean 0 and standard deviation 1 per column (a constant column maps to 0).
    applied : str
        One line for reports.
    scaler : sklearn.preprocessing.StandardScaler
        The fitted scaler, to map later raw rows into the same features
        (:class:`~pacpriv.datasets.transform.FittedPreprocessing`).

    Raises
    ------
    ValueError
        A column outside :data:`COLUMN_SCALE_RANGE` (its variance would overflow or vanish).
    """
    from sklearn.preprocessing import StandardScaler

    X = np.asarray(X, dtype=np.float64)
    check_column_scales(X, list(names or [f"x{j}" for j in range(X.shape[1])]), where=where)
    scaler = StandardScaler().fit(X)
    applied = (f"{X.shape[1]} numeric column(s) standardized with the pool's mean and "
               "standard deviation (scikit-learn StandardScaler fit on the whole pool: pool "
               "statistics, the same for every subset; none is shown)")
    return scaler.transform(X), applied, scaler
