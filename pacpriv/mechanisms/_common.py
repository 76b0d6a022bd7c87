"""Private helpers shared by the reference mechanisms (no pacpriv import).

Subset handling
---------------
A *subset* is either a 2-D array ``X`` of shape ``(n, p)`` or a tuple ``(X, y)``. A 1-D ``X``
is read as one feature, shape ``(n, 1)``. Unsupervised mechanisms use ``X`` (``subset[0]``
for a tuple); supervised ones need the tuple.

Canonicalisation
----------------
A mechanism of a *set* of records must not depend on the order in which the records arrive.
:func:`canonical_order` sorts the rows lexicographically (by the label first when present, then
by the features), so every mechanism that fits an iterative or randomised estimator sees its
input in one order that depends only on the multiset of records.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np

__all__ = [
    "as_bounds",
    "canonical_order",
    "class_indices",
    "quiet_convergence",
    "split_supervised",
    "split_unsupervised",
]


def _as_X(X) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X.reshape(-1, 1)
    if X.ndim != 2:
        raise ValueError(f"subset features must be a 2-D array (n, p); got shape {X.shape}.")
    return X


def split_unsupervised(subset) -> np.ndarray:
    """Return the feature matrix ``X`` (float64, shape ``(n, p)``) of ``subset``."""
    if isinstance(subset, tuple):
        if len(subset) == 0:
            raise ValueError("subset tuple must be (X,) or (X, y); got an empty tuple.")
        subset = subset[0]
    return _as_X(subset)


def split_supervised(subset, *, mechanism: str) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(X, y)`` of a supervised ``subset``; ``ValueError`` when there is no ``y``."""
    if not (isinstance(subset, tuple) and len(subset) == 2):
        raise ValueError(
            f"mechanism {mechanism!r} is supervised: the subset must be a tuple (X, y); "
            f"got {type(subset).__name__}. Load a dataset with labels."
        )
    X = _as_X(subset[0])
    y = np.asarray(subset[1]).reshape(-1)
    if y.shape[0] != X.shape[0]:
        raise ValueError(
            f"subset X and y must have the same number of records; got {X.shape[0]} and "
            f"{y.shape[0]}."
        )
    return X, y


def canonical_order(X: np.ndarray, y: np.ndarray | None = None):
    """Sort the records lexicographically (label first, then feature 0, 1, ...).

    Returns ``X`` (and ``y``) reordered; the result depends only on the multiset of records.
    """
    keys = [X[:, j] for j in range(X.shape[1] - 1, -1, -1)]
    if y is not None:
        keys.append(y)
    if X.shape[0] <= 1 or not keys:
        return X if y is None else (X, y)
    order = np.lexsort(keys)
    return X[order] if y is None else (X[order], y[order])


def as_bounds(low, high, *, n_features: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Validate public clipping bounds: scalars or length-``p`` sequences with ``low <= high``."""
    lo = np.atleast_1d(np.asarray(low, dtype=np.float64))
    hi = np.atleast_1d(np.asarray(high, dtype=np.float64))
    if lo.ndim != 1 or hi.ndim != 1:
        raise ValueError("`low` and `high` must be scalars or 1-D sequences.")
    if lo.shape != hi.shape and lo.size != 1 and hi.size != 1:
        raise ValueError(
            f"`low` and `high` must have the same length; got {lo.size} and {hi.size}."
        )
    lo, hi = np.broadcast_arrays(lo, hi)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise ValueError("`low` and `high` must be finite.")
    if np.any(lo > hi):
        raise ValueError(f"`low` must be <= `high` elementwise; got low={lo}, high={hi}.")
    if n_features is not None and lo.size not in (1, n_features):
        raise ValueError(
            f"bounds have length {lo.size} but the subset has {n_features} features."
        )
    return lo.copy(), hi.copy()


def class_indices(y: np.ndarray, classes: Sequence) -> np.ndarray:
    """Map labels to positions in the public class list; ``ValueError`` on an unknown label."""
    classes_arr = np.asarray(classes)
    order = np.argsort(classes_arr, kind="stable")
    pos = np.searchsorted(classes_arr[order], y)
    pos = np.clip(pos, 0, len(classes_arr) - 1)
    idx = order[pos]
    bad = classes_arr[idx] != y
    if np.any(bad):
        # the label itself is a record's value: counted and located, not shown
        raise ValueError(
            f"{describe_invalid(bad)} of the subset's labels are not in the public class list "
            f"{classes_arr.tolist()} (values not shown)."
        )
    return idx


@contextmanager
def quiet_convergence():
    """Silence scikit-learn's ``ConvergenceWarning``: the output after the fixed, public
    iteration budget is as much a deterministic function of the subset as a converged one."""
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def describe_invalid(bad: np.ndarray, shown: int = 5) -> str:
    """``"3 of 10 entries (at index 0, 4, 7)"`` for the boolean mask ``bad``: the count and the
    first ``shown`` flat positions, never a value (errors hold public facts only)."""
    bad = np.asarray(bad, dtype=bool).reshape(-1)
    n_bad = int(np.count_nonzero(bad))
    where = [str(int(i)) for i in np.flatnonzero(bad)[:shown]]
    more = ", ..." if n_bad > shown else ""
    noun = "entry" if bad.size == 1 else "entries"
    return f"{n_bad} of {bad.size} {noun} (at index {', '.join(where)}{more})"


def check_newton_settings(n_classes: int, tol: float, flip_tolerance: float, *,
                          fallback: str) -> None:
    """The checks shared by the exact Newton solvers (``solver="newton"``): two classes, a
    finite ``tol > 0`` and a finite ``flip_tolerance >= 0``; ValueError naming ``fallback``
    (the solver to use instead) for other class counts."""
    if n_classes != 2:
        raise ValueError(f"solver='newton' fits two classes; got {n_classes} (use {fallback}).")
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"`tol` must be a finite number > 0; got {tol!r}.")
    if not (np.isfinite(flip_tolerance) and flip_tolerance >= 0):
        raise ValueError(f"`flip_tolerance` must be finite and >= 0; got {flip_tolerance!r}.")
