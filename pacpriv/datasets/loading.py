"""Data pools: scikit-learn's bundled datasets, CSV and NumPy files.

:func:`load_dataset` returns a frozen :class:`Dataset` whose :attr:`Dataset.pool` is what the
PAC engine draws subsets from (``X`` or ``(X, y)``) and whose :meth:`Dataset.info` gives the
mechanism registry the public facts it needs (:class:`DatasetInfo`).

Public feature ranges
---------------------
Mechanisms clip or bin features with ranges that must not depend on the secret subset. For the
bundled datasets we treat the published feature ranges as public knowledge: the summary tables
of iris, wine and breast cancer (scikit-learn's ``DESCR``, from the UCI repository) list each
feature's min and max, which equal the pool's; digits pixels are published as integers in
``[0, 16]``; diabetes features are published pre-scaled and we use the pool's range
(``bounds_source="published"``). A user may declare ranges public (``feature_ranges=``, CLI
``--feature-ranges``; ``bounds_source="declared"``). Otherwise, for a user file, mechanisms get
the whole pool's range (``bounds_source="pool"``): it is independent of which subset is drawn,
and the PAC Privacy membership game gives the adversary the pool, so it reveals nothing about
membership [1]_. It is *not* public in any wider sense -- each end is a record's value -- so
:meth:`Dataset.to_dict` (what reports print) leaves pool ranges out.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TypeVar

import numpy as np

from pacpriv._files import check_input_file
from pacpriv._stats import clipping_problem
from pacpriv.datasets.files import read_csv, read_numpy, select_columns
from pacpriv.datasets.preprocessing import Preprocessing, check_column_scales, fit_standardize
from pacpriv.datasets.transform import FittedPreprocessing
from pacpriv.exceptions import ClippingWarning, warn_user

__all__ = [
    "BUNDLED_DATASETS",
    "MIN_RECORDS",
    "Dataset",
    "DatasetInfo",
    "Preprocessing",
    "load_dataset",
    "parse_feature_ranges",
]

#: Smallest pool accepted: a subset-membership secret needs at least two records.
MIN_RECORDS = 2

#: ``bounds_source`` values whose ranges are public and may be printed in reports.
PUBLIC_BOUNDS = ("published", "declared")

#: Bundled scikit-learn datasets: name -> (loader name, one-line description).
BUNDLED_DATASETS: dict[str, tuple[str, str]] = {
    "iris": ("load_iris", "Fisher's iris: 150 flowers, 4 measurements (cm), 3 species."),
    "wine": ("load_wine", "UCI wine recognition: 178 wines, 13 chemical features, 3 cultivars."),
    "breast_cancer": (
        "load_breast_cancer",
        "UCI breast cancer Wisconsin (diagnostic): 569 tumours, 30 features, 2 classes.",
    ),
    "digits": ("load_digits", "UCI optical digits: 1797 8x8 images, pixels 0..16, 10 classes."),
    "diabetes": (
        "load_diabetes",
        "Efron et al. diabetes: 442 patients, 10 scaled features, continuous target.",
    ),
}


def is_bundled_source(source: str) -> bool:
    """Whether ``source`` is exactly a bundled dataset's loader (``sklearn.datasets.load_*``).

    An exact match: a user file merely *named* ``sklearn.<anything>.csv`` is not public.
    """
    return source in {f"sklearn.datasets.{loader}" for loader, _ in BUNDLED_DATASETS.values()}


@dataclass(frozen=True)
class DatasetInfo:
    """Public facts about a data pool, as used by the mechanism registry.

    Attributes
    ----------
    name : str
        Dataset name.
    n_records : int
        Pool size.
    n_features : int
        Number of features ``p``.
    feature_low, feature_high : tuple of float
        Per-feature range treated as public (see the module docstring), length ``p``.
    classes : tuple or None
        Sorted class labels for a classification pool, ``None`` otherwise.
    feature_names : tuple of str
        Feature names, length ``p``.
    bounds_source : {"published", "declared", "pool"}
        Where the ranges come from (``"pool"`` ranges are never printed).
    """

    name: str
    n_records: int
    n_features: int
    feature_low: tuple[float, ...]
    feature_high: tuple[float, ...]
    classes: tuple | None
    feature_names: tuple[str, ...]
    bounds_source: str

    def to_dict(self) -> dict:
        """JSON-serialisable public facts: ranges only when public (published or declared)."""
        out: dict = {
            "name": self.name,
            "n_records": self.n_records,
            "n_features": self.n_features,
        }
        if self.bounds_source in PUBLIC_BOUNDS:
            out["feature_low"] = list(self.feature_low)
            out["feature_high"] = list(self.feature_high)
        else:
            out["feature_ranges"] = (
                "not shown: taken from the pool, which is not public (declare public ranges "
                "with feature_ranges= or --feature-ranges)"
            )
        out["n_classes"] = None if self.classes is None else len(self.classes)
        out["feature_names"] = list(self.feature_names)
        out["bounds_source"] = self.bounds_source
        return out


@dataclass(frozen=True, eq=False)
class Dataset:
    """A data pool (arrays are read-only).

    Attributes
    ----------
    name : str
        Bundled name or the file's stem.
    X : ndarray of shape (n_records, n_features), float64
        Features.
    y : ndarray of shape (n_records,) or None
        Labels: int64 class labels, or float64 targets for regression; ``None`` if unlabelled.
    feature_names : tuple of str
        Length ``n_features``.
    classes : tuple or None
        Sorted distinct labels of a classification pool; ``None`` for regression / unlabelled.
    target_names : tuple of str or None
        Human-readable class names, aligned with ``classes``.
    description : str
        One-line description.
    source : str
        Where the data came from (loader or absolute path).
    feature_low, feature_high : tuple of float
        Per-feature public range (see the module docstring).
    bounds_source : {"published", "declared", "pool"}
        Where the ranges come from.
    preprocessing : str or None
        What :class:`Preprocessing` applied (one line, no statistic), ``None`` if nothing.
    transform : FittedPreprocessing or None
        The fitted transformers of ``preprocessing`` (pool statistics: never printed), to map
        later raw rows into these features
        (:class:`~pacpriv.datasets.transform.FittedPreprocessing`); ``None`` without a
        :class:`Preprocessing`.
    """

    name: str
    X: np.ndarray
    y: np.ndarray | None
    feature_names: tuple[str, ...]
    classes: tuple | None
    target_names: tuple[str, ...] | None
    description: str
    source: str
    feature_low: tuple[float, ...]
    feature_high: tuple[float, ...]
    bounds_source: str
    preprocessing: str | None = None
    transform: FittedPreprocessing | None = None

    @property
    def n_records(self) -> int:
        """Number of records in the pool."""
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        """Number of features ``p``."""
        return int(self.X.shape[1])

    @property
    def pool(self):
        """``(X, y)`` for a labelled pool, ``X`` otherwise: what mechanisms receive subsets of."""
        return self.X if self.y is None else (self.X, self.y)

    def info(self) -> DatasetInfo:
        """Public facts for :func:`pacpriv.registry.resolve_mechanism`.

        Each field of :class:`DatasetInfo` is the attribute of the same name of this dataset.
        """
        return DatasetInfo(**{f.name: getattr(self, f.name) for f in fields(DatasetInfo)})

    def to_dict(self) -> dict:
        """JSON-serialisable public summary, what reports print (no arrays, no pool statistic).

        Pool-derived feature ranges, a file's class labels and its local path are left out:
        each is a value of some record (or of the user's machine). Bundled datasets keep
        their published ranges and class names.
        """
        bundled = is_bundled_source(self.source)
        return {
            **self.info().to_dict(),
            "labelled": self.y is not None,
            "target_names": (
                list(self.target_names) if bundled and self.target_names is not None else None
            ),
            "description": self.description,
            "source": self.source if bundled else Path(self.source).name,
            **({"preprocessing": self.preprocessing} if self.preprocessing else {}),
        }


#: An array, or None (``y`` of an unlabelled pool): :func:`_freeze` returns the same kind.
_ArrayOrNone = TypeVar("_ArrayOrNone", np.ndarray, None)


def _freeze(a: _ArrayOrNone) -> _ArrayOrNone:
    if a is not None:
        a = np.ascontiguousarray(a)
        a.setflags(write=False)
    return a


def _make(
    name, X, y, feature_names, target_names, description, source, low, high, bounds,
    *, regression: bool = False,
):  # fmt: skip
    X = np.asarray(X, dtype=np.float64)
    classes = None
    if y is not None:
        y = np.asarray(y)
        integral = y.dtype.kind in "iub" or (y.dtype.kind == "f" and np.all(y == np.round(y)))
        if integral and not regression:
            y = y.astype(np.int64)
            classes = tuple(int(c) for c in np.unique(y))
        else:
            y = y.astype(np.float64)
            target_names = None
    return Dataset(
        name=name,
        X=_freeze(X),
        y=_freeze(y),
        feature_names=tuple(str(f) for f in feature_names),
        classes=classes,
        target_names=None if target_names is None else tuple(str(t) for t in target_names),
        description=description,
        source=source,
        feature_low=tuple(float(v) for v in low),
        feature_high=tuple(float(v) for v in high),
        bounds_source=bounds,
    )


def _load_bundled(name: str) -> Dataset:
    import sklearn.datasets

    loader_name, description = BUNDLED_DATASETS[name]
    bunch = getattr(sklearn.datasets, loader_name)()
    X = np.asarray(bunch.data, dtype=np.float64)
    if name == "digits":  # published pixel range, wider than the pool's for edge pixels
        low, high = np.zeros(X.shape[1]), np.full(X.shape[1], 16.0)
    else:
        low, high = X.min(axis=0), X.max(axis=0)
    y = np.asarray(bunch.target)
    names = getattr(bunch, "feature_names", None)
    if names is None:
        names = [f"x{j}" for j in range(X.shape[1])]
    target_names = getattr(bunch, "target_names", None) if name != "diabetes" else None
    return _make(
        name, X, y, names, target_names, description,
        f"sklearn.datasets.{loader_name}", low, high, "published",
        regression=name == "diabetes",
    )  # fmt: skip


#: Largest magnitude of a declared feature-range end: a mechanism's outputs must stay within
#: it (``pacpriv.pac.engine._mechanism.MAX_OUTPUT_MAGNITUDE``), so a range beyond it would
#: fail only inside the trials.
MAX_RANGE_MAGNITUDE = 2.0**400


#: The forms of declared feature ranges, as the README and ``--help`` write them.
_RANGES_FORMS = ("'low:high' (every feature), 'l1:h1,l2:h2,...' (one per feature) or a file "
                 "of 'low,high' lines")


def _cut(text: str, limit: int = 40) -> str:
    """``repr`` of user text, cut to ``limit`` characters (ranges are public, but a pasted
    line may be long)."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _file_pair(text: str, at: str) -> tuple[float, float]:
    """One ``low,high`` (or ``low:high``) line of a feature ranges file; ``at`` names the file
    and line in the error."""
    parts = text.replace(":", ",").split(",")
    try:
        if len(parts) != 2:
            raise ValueError
        return float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError(f"{at}: expected one 'low,high' pair (e.g. '0,120'); got "
                         f"{_cut(text)}.") from None


def parse_feature_ranges(spec, n_features: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Turn declared public feature ranges into ``(low, high)`` tuples of length ``n_features``.

    Parameters
    ----------
    spec : str, path, or sequence of (low, high) pairs
        ``"low:high"`` (the same range for every feature), ``"l1:h1,l2:h2,..."`` (one per
        feature), the path of a file holding that text or one ``low,high`` (or ``low:high``)
        line per feature, or a sequence of ``(low, high)`` pairs (one, or one per feature).
    n_features : int
        Number of features ``p``.

    Returns
    -------
    low, high : tuple of float, length ``n_features``

    Raises
    ------
    ValueError
        Malformed text, a non-finite end, an end beyond ``±2**400``
        (:data:`MAX_RANGE_MAGNITUDE`), ``low >= high``, or a count other than 1 or ``p``.
    """
    source = "`feature_ranges`"
    pairs: list[tuple[float, float]] = []
    where: list[str] = []  # per pair: where it was read (a file's line), for the errors
    typed: list[str] = []  # per pair: the text as written (1e400 reads as inf), for the errors
    if isinstance(spec, os.PathLike) or (isinstance(spec, str) and ":" not in spec):
        # ranges always hold a ':', so text without one names a file
        try:
            path = check_input_file(spec, "feature ranges file")
        except FileNotFoundError as err:
            raise FileNotFoundError(f"{err} (or give the ranges themselves: {_RANGES_FORMS})"
                                    ) from None
        source = f"feature ranges file {path.name!r}"
        for number, raw in enumerate(path.read_bytes().splitlines(), 1):
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8").strip()
            except UnicodeDecodeError:
                raise ValueError(f"{source}, line {number}: not UTF-8 text (a byte could not "
                                 "be decoded); save the file as UTF-8.") from None
            if text and not text.startswith("#"):
                pairs.append(_file_pair(text, f"{source}, line {number}"))
                where.append(f"{source}, line {number}")
                typed.append(text)
    elif isinstance(spec, str):
        for part in (p.strip() for p in spec.split(",")):
            lo_text, sep, hi_text = part.partition(":")
            try:
                if not sep:
                    raise ValueError
                pairs.append((float(lo_text), float(hi_text)))
                typed.append(part)
            except ValueError:
                raise ValueError(
                    f"{source} must be {_RANGES_FORMS}; got {_cut(part)}."
                ) from None
    else:
        try:
            pairs = [(float(lo), float(hi)) for lo, hi in spec]
        except (TypeError, ValueError):
            raise ValueError(
                f"{source} must be a sequence of (low, high) pairs; got {_cut(repr(spec))}."
            ) from None
    if len(pairs) == 1:
        pairs, where, typed = pairs * n_features, where * n_features, typed * n_features
    if len(pairs) != n_features:
        raise ValueError(
            f"{source} gives {len(pairs)} ranges; the pool has {n_features} features "
            "(give one range for all, or one per feature)."
        )
    for j, (lo, hi) in enumerate(pairs):
        at = where[j] if len(where) == len(pairs) else source
        got = _cut(typed[j]) if len(typed) == len(pairs) else f"{lo}:{hi}"
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(
                f"{at}: feature {j} range must be finite (within ±1.8e308) with low < high; "
                f"got {got}."
            )
        if max(abs(lo), abs(hi)) > MAX_RANGE_MAGNITUDE:
            raise ValueError(
                f"{at}: feature {j} range {got} is outside ±2**400 (about "
                f"±{MAX_RANGE_MAGNITUDE:.3g}), beyond what a mechanism's output may reach; "
                "rescale the feature."
            )
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


def load_dataset(
    spec: str | os.PathLike,
    *,
    label_column: int | str | None = None,
    delimiter: str = ",",
    feature_ranges=None,
    columns=None,
    drop_columns=None,
    preprocessing: Preprocessing | None = None,
) -> Dataset:
    """Load a data pool.

    Parameters
    ----------
    spec : str or path-like
        A bundled name (``"iris"``, ``"wine"``, ``"breast_cancer"``, ``"digits"``,
        ``"diabetes"``) or the path of a ``.csv`` (numeric; header row optional), ``.npy``
        (2-D array) or ``.npz`` (arrays ``X`` and optional ``y``) file.
    label_column : int or str or None
        For ``.csv``/``.npy`` files: the column holding the labels (index, negative allowed, or
        header name). Non-numeric CSV labels are encoded as ``0..K-1`` in sorted order, with the
        strings kept as ``target_names``. Not allowed for bundled datasets and ``.npz`` files.
    delimiter : str
        CSV field delimiter (one character, e.g. ``";"`` or ``"\\t"``).
    feature_ranges : str, path, sequence of (low, high) pairs, or None
        Feature ranges the caller declares public (:func:`parse_feature_ranges`); used by
        the mechanisms instead of the pool's and printed in reports
        (``bounds_source="declared"``); one range per *kept* feature.
    columns, drop_columns : sequence of str or int, or None
        Keep only these feature columns (in this order), or leave these out (e.g. a text
        column, which is then never parsed); at most one of the two. Header names or indices:
        a CSV's file columns, a ``.npy``/``.npz``/bundled dataset's feature columns (names
        ``x0, x1, ...`` or the bundled feature names; after the label column is removed).
    preprocessing : Preprocessing or None
        Encode a CSV's text columns, handle its missing cells, standardise features
        (scikit-learn transformers fit on the pool; see
        :mod:`pacpriv.datasets.preprocessing` for what this changes about the threat model).
        ``standardize`` applies to every source; standardised features get the pool's ranges
        (``bounds_source="pool"``) unless ``feature_ranges`` declares ranges of the
        standardised features. ``None``: numeric features only, nothing transformed.

    Returns
    -------
    Dataset

    Raises
    ------
    ValueError
        Unknown bundled name (the message lists them), unsupported extension, empty file,
        non-numeric or non-finite CSV value (with line and column), malformed array, bad
        ``label_column``, ``delimiter`` or ``feature_ranges``, or fewer than
        :data:`MIN_RECORDS` records.
    FileNotFoundError
        If the path (or its folder) does not exist.
    IsADirectoryError, PermissionError
        If the path is a folder, or cannot be read (checked before reading, like every path).
    TypeError
        If ``spec`` is not a str or path, or ``label_column`` is not an int or str.

    Notes
    -----
    File labels that are all integer-valued are read as classes (``y`` int64, ``classes`` set);
    other numeric labels as a regression target (``y`` float64, ``classes=None``).

    Examples
    --------
    >>> from pacpriv.datasets import load_dataset
    >>> iris = load_dataset("iris")
    >>> iris.X.shape, iris.classes, iris.info().bounds_source
    ((150, 4), (0, 1, 2), 'published')
    """
    if isinstance(spec, str) and spec in BUNDLED_DATASETS:
        if label_column is not None:
            raise ValueError(
                f"`label_column` applies to .csv/.npy files only; {spec!r} is a bundled dataset."
            )
        ds = _standardized(_subset_columns(_load_bundled(spec), columns, drop_columns),
                           preprocessing)
        return ds if feature_ranges is None else _declare(ds, feature_ranges)
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"`spec` must be a dataset name or a path; got {type(spec).__name__}.")
    if not os.fspath(spec).strip():  # Path("") is "." (the current folder)
        raise ValueError(f"`spec` must name a dataset or a .csv, .npy or .npz file; got "
                         f"{os.fspath(spec)!r}; bundled datasets are "
                         f"{', '.join(sorted(BUNDLED_DATASETS))}.")
    path = Path(spec)
    suffix = path.suffix.lower()
    if suffix == "" and not path.exists():
        raise ValueError(
            f"unknown dataset {str(spec)!r}; bundled datasets are "
            f"{', '.join(sorted(BUNDLED_DATASETS))}, or give a .csv, .npy or .npz path."
        )
    if path.is_dir():
        check_input_file(path, "dataset file")  # "is a folder", not "unsupported extension"
    if suffix not in (".csv", ".npy", ".npz"):
        raise ValueError(
            f"unsupported dataset file extension {suffix or '(none)'!r} for {str(path)!r}; "
            "use .csv, .npy or .npz."
        )
    check_input_file(path, "dataset file")  # missing, a folder, unreadable: one line
    if path.stat().st_size == 0:
        raise ValueError(f"dataset file {str(path)!r} is empty.")
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ValueError(f"`delimiter` must be one character; got {delimiter!r}.")
    applied, fitted = None, None
    if suffix == ".csv":
        X, y, names, target_names, applied, fitted = read_csv(
            path, label_column=label_column, delimiter=delimiter, columns=columns,
            drop_columns=drop_columns, preprocessing=preprocessing)
    else:
        X, y, names, target_names = read_numpy(path, label_column=label_column)
        keep = select_columns(list(names), columns=columns, drop_columns=drop_columns,
                              where=repr(path.name))
        X, names = X[:, keep], [names[j] for j in keep]
        if preprocessing is not None and preprocessing.standardize:
            X, applied, scaler = fit_standardize(X, names=names, where=repr(str(path)))
            fitted = FittedPreprocessing.of(preprocessing, names, scaler, encoded=False)
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"dataset file {str(path)!r} holds no records or no features.")
    if X.shape[0] < MIN_RECORDS:
        raise ValueError(
            f"dataset file {str(path)!r} holds {X.shape[0]} record; a pool needs at least "
            f"{MIN_RECORDS} records (the secret is which records are in the subset)."
        )
    check_column_scales(X, names, where=repr(str(path)))
    if y is not None and np.asarray(y).dtype.kind == "f":
        check_column_scales(np.asarray(y)[:, None], ["(label)"], where=repr(str(path)))
    ds = _make(
        path.stem, X, y, names, target_names, f"data pool loaded from {path.name}",
        str(path.resolve()), X.min(axis=0), X.max(axis=0), "pool",
    )  # fmt: skip
    if applied or fitted is not None:
        from dataclasses import replace

        ds = replace(ds, preprocessing=applied, transform=fitted)
    return ds if feature_ranges is None else _declare(ds, feature_ranges)


def _standardized(ds: Dataset, preprocessing: Preprocessing | None) -> Dataset:
    """A bundled dataset standardised with its pool's statistics (then with pool ranges)."""
    if preprocessing is None or not preprocessing.standardize:
        return ds
    from dataclasses import replace

    X, applied, scaler = fit_standardize(ds.X, names=ds.feature_names, where=repr(ds.name))
    fitted = FittedPreprocessing.of(preprocessing, ds.feature_names, scaler, encoded=False)
    return replace(ds, X=_freeze(X), feature_low=tuple(float(v) for v in X.min(axis=0)),
                   feature_high=tuple(float(v) for v in X.max(axis=0)), bounds_source="pool",
                   preprocessing=applied, transform=fitted)


def _subset_columns(ds: Dataset, columns, drop_columns) -> Dataset:
    """``ds`` with only the selected feature columns (and their published ranges)."""
    if columns is None and drop_columns is None:
        return ds
    from dataclasses import replace

    keep = select_columns(list(ds.feature_names), columns=columns, drop_columns=drop_columns,
                          where=repr(ds.name))
    return replace(ds, X=_freeze(ds.X[:, keep]),
                   feature_names=tuple(ds.feature_names[j] for j in keep),
                   feature_low=tuple(ds.feature_low[j] for j in keep),
                   feature_high=tuple(ds.feature_high[j] for j in keep))


def _declare(ds: Dataset, feature_ranges) -> Dataset:
    from dataclasses import replace

    low, high = parse_feature_ranges(feature_ranges, ds.n_features)
    problem = clipping_problem(ds.X, low, high, what="the declared feature range(s)",
                               names=ds.feature_names)
    if problem is not None:
        warn_user(problem, ClippingWarning)
    return replace(ds, feature_low=low, feature_high=high, bounds_source="declared")
