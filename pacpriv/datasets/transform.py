"""The fit-time preprocessing of a pool, kept to map later rows into the same feature space.

:func:`pacpriv.datasets.load_dataset` with a :class:`~pacpriv.datasets.preprocessing.Preprocessing`
fits scikit-learn transformers on the whole pool (category lists, imputation values, the
scaler's means and standard deviations) and keeps them, fitted, as
:attr:`Dataset.transform <pacpriv.datasets.Dataset>`: a :class:`FittedPreprocessing`. A model
fitted on the pool's features must be given query rows in the *same* feature space: the raw
rows are passed through this object (:meth:`FittedPreprocessing.transform_cells` for CSV
cells, :meth:`FittedPreprocessing.transform_numeric` for numeric rows), never through
transformers refitted on the query rows, whose statistics would be the query file's.

The fitted transformers hold pool statistics (a category or a median is some record's value):
they are never printed; :meth:`FittedPreprocessing.describe` says what is applied in public
words only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pacpriv.datasets.preprocessing import Preprocessing, is_missing

__all__ = ["FittedPreprocessing"]


@dataclass(frozen=True, eq=False)
class FittedPreprocessing:
    """The fitted map from a table's raw feature columns to the pool's features.

    Parameters
    ----------
    spec : Preprocessing
        What was asked for (public).
    names : tuple of str
        The raw feature columns the pool was read from, in order (length ``p_in``).
    text : tuple of bool
        Per raw column: whether it was a text column, encoded by ``spec.categorical``.
    transformer : object or None
        The fitted scikit-learn ``ColumnTransformer`` (columns ``c0..c{p_in-1}`` of a
        DataFrame) when ``encoded``; otherwise a fitted ``StandardScaler`` over all columns,
        or ``None`` (nothing numeric to change).
    encoded : bool
        Whether ``transformer`` is the column transformer of an encoded table.

    Notes
    -----
    Rows are transformed with the *pool's* fitted statistics; a missing cell is imputed only
    when the pool's fit learnt an imputation value, and a category the pool did not hold is
    refused (the encoding has no column for it). No message quotes a cell or a statistic.
    """

    spec: Preprocessing
    names: tuple[str, ...]
    text: tuple[bool, ...]
    transformer: Any
    encoded: bool

    @classmethod
    def of(cls, spec: Preprocessing | None, names, fitted: Any, *,
           encoded: bool) -> FittedPreprocessing:
        """From :func:`~pacpriv.datasets.preprocessing.encode_table`'s ``fitted`` (``encoded``)
        or a fitted ``StandardScaler`` / ``None`` over numeric columns ``names``."""
        spec = spec if spec is not None else Preprocessing(standardize=True)
        if encoded:
            transformer, text = fitted
            return cls(spec, tuple(str(n) for n in names), tuple(text), transformer, True)
        return cls(spec, tuple(str(n) for n in names), (False,) * len(names), fitted, False)

    @classmethod
    def names_only(cls, names) -> FittedPreprocessing:
        """The identity map over the named raw columns ``names`` (a CSV pool read without
        preprocessing): it changes no value, and lets a query file with a header give the
        fit's columns by name."""
        names = tuple(str(n) for n in names)
        return cls(Preprocessing(), names, (False,) * len(names), None, False)

    @property
    def is_identity(self) -> bool:
        """Whether the map changes no value (only the columns' names are known)."""
        return not self.encoded and self.transformer is None and not any(self.text)

    @property
    def n_inputs(self) -> int:
        """Number of raw feature columns a row must have."""
        return len(self.names)

    @property
    def has_text(self) -> bool:
        """Whether some raw column holds text categories (rows must then be CSV cells)."""
        return any(self.text)

    def describe(self) -> str:
        """What is applied to every query row, in public words (no statistic, no category)."""
        parts = []
        n_text = sum(self.text)
        if n_text:
            parts.append(f"{n_text} text column(s) {self.spec.categorical} encoded with the "
                         "pool's categories (an unseen category is refused)")
        if self.encoded and self.spec.missing.startswith("impute"):
            stat = "median" if self.spec.missing == "impute-median" else "most frequent value"
            parts.append(f"missing cells imputed with the pool's {stat}")
        if self.spec.standardize:
            parts.append(f"{self.n_inputs - n_text} numeric column(s) standardized with the "
                         "pool's mean and standard deviation")
        if not parts and self.is_identity:
            return (f"the fit's feature columns ({', '.join(self.names)}), values unchanged: "
                    "a query file with a header may give them by name, in any order, among "
                    "other columns")
        what = "; ".join(parts) or "no change to the features"
        return (f"{what}: the fit's transformers, stored in the state, are applied to every "
                "query row (raw rows in the pool file's columns and units; statistics never "
                "shown)")

    def _categories(self, j: int) -> set[str] | None:
        if not (self.encoded and self.text[j]):
            return None
        return {str(c) for c in self.transformer.named_transformers_[f"c{j}"][-1].categories_[0]}

    def _imputes(self) -> bool:
        return self.encoded and self.spec.missing.startswith("impute")

    def transform_cells(self, cells: list[list[str]], *, where: str,
                        row_ids: list[int]) -> np.ndarray:
        """Map CSV cells (raw rows of the pool file's feature columns) to features.

        Parameters
        ----------
        cells : list of n rows, each a list of ``p_in`` str
        where : str
            The file's name, for messages.
        row_ids : list of n int
            Each row's line number in the file, for messages.

        Returns
        -------
        ndarray of shape (n, p_out), float64

        Raises
        ------
        ValueError
            A row of another width, a missing cell the fit cannot impute, a non-numeric or
            non-finite value in a numeric column, a category the pool did not hold, or a value
            whose transformed feature overflows. The message names the line and column, never
            the cell.
        """
        columns: list[list] = [[] for _ in self.names]
        for i, row in enumerate(cells):
            at = f"{where}, line {row_ids[i]}"
            if len(row) != self.n_inputs:
                raise ValueError(f"{at}: {len(row)} feature columns; the state's fit read "
                                 f"{self.n_inputs} ({', '.join(self.names)})")
            for j, t in enumerate(row):
                columns[j].append(self._cell(t, j, f"{at}, column {j + 1}"))
        return self._apply(columns, len(cells), where)

    def _cell(self, t: str, j: int, at: str):
        if is_missing(t):
            if not self._imputes():
                how = ("the pool had no missing value to learn an imputation from"
                       if self.spec.missing.startswith("impute") else
                       f"the fit's --missing is {self.spec.missing!r}")
                raise ValueError(f"{at}: missing value; a query row must be complete ({how})")
            return np.nan
        if self.text[j]:
            known = self._categories(j)
            if known is not None and t not in known:
                raise ValueError(f"{at}: a category the pool did not hold (not shown); the "
                                 f"state's {self.spec.categorical} encoding has no feature for "
                                 "it")
            return t
        try:
            v = float(t)
        except ValueError:
            raise ValueError(f"{at}: non-numeric value in a column that was numeric at fit; "
                             "features must be finite numbers") from None
        if not math.isfinite(v):
            raise ValueError(f"{at}: non-finite value; features must be finite numbers")
        return v

    def transform_numeric(self, X, *, where: str) -> np.ndarray:
        """Map numeric raw rows of shape ``(n, p_in)`` to features (``(n, p_out)`` float64).

        Raises
        ------
        ValueError
            The state encoded text columns (numeric rows cannot carry categories), a row of
            another width, a non-finite value, or a transformed value that overflows.
        """
        if self.has_text:
            raise ValueError(f"{where}: the state's fit encoded {sum(self.text)} text "
                             f"column(s) ({self.spec.categorical}); give the rows as a .csv "
                             f"file with the pool file's {self.n_inputs} feature columns")
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_inputs:
            raise ValueError(f"{where} must have rows of {self.n_inputs} raw feature values "
                             f"(the pool file's columns: {', '.join(self.names)}); got shape "
                             f"{tuple(X.shape[1:])}")
        bad = ~np.isfinite(X)
        if bad.any():
            raise ValueError(f"{where}: row {int(np.flatnonzero(bad.any(axis=1))[0])} holds a "
                             "non-finite value (NaN or inf)")
        return self._apply([list(X[:, j]) for j in range(self.n_inputs)], X.shape[0], where)

    def _apply(self, columns: list[list], n: int, where: str) -> np.ndarray:
        if self.encoded:
            import pandas as pd

            frame = pd.DataFrame({f"c{j}": pd.Series(col, dtype=object if self.text[j]
                                                     else np.float64)
                                  for j, col in enumerate(columns)})
            out = self.transformer.transform(frame)
        else:
            values = np.asarray(columns, dtype=np.float64).T.reshape(n, self.n_inputs)
            out = values if self.transformer is None else self.transformer.transform(values)
        out = np.asarray(out, dtype=np.float64)
        bad = ~np.isfinite(out)
        if bad.any():
            raise ValueError(f"{where}: row {int(np.flatnonzero(bad.any(axis=1))[0])} has a "
                             "value so far outside the pool's scale that its standardized "
                             "feature is not a finite float64")
        return out
