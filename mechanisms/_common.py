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

import functools
import warnings
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

__all__ = [
    "as_bounds",
    "public_seed_alias",
    "renamed_seed_field",
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


_T = TypeVar("_T")


def _warn_seed_renamed(where: str, old: str) -> None:
    warnings.warn(
        f"{where}: `{old}` is deprecated; use `public_seed` (the fixed, public seed of the "
        "mechanism, distinct from the per-trial `rng`). It will be removed in 0.3.",
        DeprecationWarning,
        stacklevel=3,
    )


def public_seed_alias(public_seed: int, old_value: int | None, *, old: str, where: str) -> int:
    """The public seed of a factory that still accepts the deprecated keyword ``old``.

    Returns ``old_value`` (with a ``DeprecationWarning``) when it was given, else
    ``public_seed``; ``TypeError`` when both were given with different values.
    """
    if old_value is None:
        return public_seed
    if public_seed != 0 and public_seed != old_value:
        raise TypeError(f"{where}: give `public_seed` or `{old}`, not both.")
    _warn_seed_renamed(where, old)
    return old_value


def renamed_seed_field(old: str) -> Callable[[type[_T]], type[_T]]:
    """Class decorator: the dataclass field ``public_seed`` still answers to ``old``.

    ``Cls(old=...)`` and ``obj.old`` work for one release with a ``DeprecationWarning``.
    """

    def decorate(cls: type[_T]) -> type[_T]:
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            if old in kwargs:
                if "public_seed" in kwargs:
                    raise TypeError(f"{cls.__name__}: give `public_seed` or `{old}`, not both.")
                _warn_seed_renamed(cls.__name__, old)
                kwargs["public_seed"] = kwargs.pop(old)
            init(self, *args, **kwargs)

        def getter(self: Any) -> int:
            _warn_seed_renamed(cls.__name__, old)
            return self.public_seed

        cls.__init__ = __init__  # type: ignore[method-assign,misc]
        setattr(cls, old, property(getter, doc="Deprecated alias of ``public_seed``."))
        return cls

    return decorate


def describe_invalid(bad: np.ndarray, shown: int = 5) -> str:
    """``"3 of 10 entries (at index 0, 4, 7)"`` for the boolean mask ``bad``: the count and the
    first ``shown`` flat positions, never a value (errors hold public facts only)."""
    bad = np.asarray(bad, dtype=bool).reshape(-1)
    n_bad = int(np.count_nonzero(bad))
    where = [str(int(i)) for i in np.flatnonzero(bad)[:shown]]
    more = ", ..." if n_bad > shown else ""
    noun = "entry" if bad.size == 1 else "entries"
    return f"{n_bad} of {bad.size} {noun} (at index {', '.join(where)}{more})"
