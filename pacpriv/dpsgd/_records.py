"""Training records for the DP-SGD trainer: arrays / tensors, or a map-style Dataset (torch).

Private helper of :mod:`pacpriv.dpsgd.trainer`. A step's batch is read by index, so the
records are either held as two tensors (``X``, ``y``) or fetched from a map-style
:class:`torch.utils.data.Dataset` (``dataset[i] -> (x, y)``) and stacked with
:func:`torch.utils.data.default_collate`. Error messages name counts and shapes, never
values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pacpriv._optional import import_torch
from pacpriv._validation import check_same_records

torch = import_torch("pacpriv.dpsgd.trainer")

__all__ = ["Records", "as_records"]


def _writable(a):
    # torch.as_tensor warns on read-only arrays (e.g. frozen dataset pools): copy those.
    if isinstance(a, np.ndarray) and not a.flags.writeable:
        return a.copy()
    return a


def _cast(t, first, name: str):
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        raise ValueError(f"`{name}` must be finite; it contains NaN or inf.")
    if t.is_floating_point():
        t = t.to(first.dtype)
    return t.to(first.device)


def as_tensors(model, X, y) -> tuple:
    """``X``, ``y`` as tensors on the model's device (floating ones in its dtype), checked."""
    first = next(iter(model.parameters()))
    X, y = (torch.as_tensor(_writable(a)) for a in (X, y))
    check_same_records(tuple(X.shape), tuple(y.shape))
    return _cast(X, first, "X"), _cast(y, first, "y")


class Records:
    """Records read by index: ``len(records)``, ``records.batch(idx) -> (xb, yb)``."""

    def __init__(self, model, X, y) -> None:
        self._first = next(iter(model.parameters()))
        if isinstance(X, torch.utils.data.Dataset):
            if y is not None:
                raise TypeError("pass the targets inside the Dataset (dataset[i] -> (x, y)) "
                                "and leave `y` at None.")
            if not hasattr(X, "__len__") or not hasattr(X, "__getitem__"):
                raise TypeError("`X` must be a map-style torch Dataset (with __len__ and "
                                "__getitem__); iterable-style datasets cannot be indexed "
                                "by the sampler.")
            self.dataset = X
            self.n = len(X)
            self.X: Any = None
            self.y: Any = None
            if self.n:
                self._empty = self._fetch([0])  # shapes and dtypes of an empty batch
        else:
            if y is None:
                raise TypeError("`y` is required when `X` is an array or tensor (or pass a "
                                "map-style torch Dataset as `X`).")
            self.dataset = None
            self.X, self.y = as_tensors(model, X, y)
            self.n = int(self.X.shape[0])

    def __len__(self) -> int:
        return self.n

    def _fetch(self, idx: list[int]) -> tuple:
        items = [self.dataset[i] for i in idx]  # type: ignore[index]
        if not all(isinstance(it, (tuple, list)) and len(it) == 2 for it in items):
            raise TypeError("each dataset item must be a pair (x, y); got "
                            f"{type(items[0]).__name__}.")
        xb, yb = torch.utils.data.default_collate(items)
        return _cast(torch.as_tensor(xb), self._first, "X"), _cast(
            torch.as_tensor(yb), self._first, "y")

    def batch(self, idx) -> tuple:
        """The records at ``idx`` (an int64 index tensor; may be empty)."""
        if self.dataset is None:
            X, y = self.X, self.y
            assert X is not None and y is not None
            idx = idx.to(X.device)
            return X[idx], y[idx]
        if idx.numel() == 0:
            x0, y0 = self._empty
            return x0[:0], y0[:0]
        return self._fetch(idx.tolist())

    def probe(self, count: int = 2):
        """Inputs of the first ``count`` records (for
        :func:`~pacpriv.dpsgd.validate.probe_model`)."""
        return self.batch(torch.arange(min(count, self.n)))[0]


def as_records(model, X, y) -> Records:
    """:class:`Records` of ``X``/``y`` (validated)."""
    return Records(model, X, y)
