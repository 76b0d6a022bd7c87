"""Boundary checks of the ensemble's data, masks and seeds (before any training starts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from pacpriv._random import RNGLike, as_seed_sequence, trial_seed
from pacpriv._validation import check_int, check_real, check_same_records
from pacpriv.ensemble._torch import torch

__all__ = ["INIT_MODES", "as_data", "as_masks", "as_seeds", "check_init", "check_memory_limit"]

#: ``"seeded"``: each model from its own seed; ``"shared"``: all from the template's values.
INIT_MODES = ("seeded", "shared")


def as_data(X, y, *, dtype: torch.dtype, device: torch.device
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """``X`` as a floating tensor and ``y`` (integer labels stay int64, floats take ``dtype``).

    Raises
    ------
    ValueError
        If either has no record axis, their lengths differ, the pool is empty, or a floating
        value is NaN or infinite (the message names the argument, never a value).
    """
    xs = _tensor(X)
    ys = _tensor(y)
    check_same_records(tuple(xs.shape), tuple(ys.shape))
    if xs.shape[0] == 0:
        raise ValueError("`X` must contain at least one record; got 0.")
    for name, t in (("X", xs), ("y", ys)):
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"`{name}` must be finite; it contains NaN or inf.")
    xs = xs.to(dtype=dtype)
    ys = ys.to(dtype=dtype) if ys.is_floating_point() else ys.to(torch.int64)
    return xs.to(device), ys.to(device)


def _tensor(a) -> torch.Tensor:
    if isinstance(a, torch.Tensor):
        return a.detach()
    arr = np.asarray(a)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number)
                                   or arr.dtype == np.bool_):
        raise TypeError(f"`X` and `y` must be numeric arrays; got dtype {arr.dtype}.")
    return torch.as_tensor(np.array(arr, copy=True))


def as_masks(masks, n_records: int, *, name: str = "masks") -> np.ndarray:
    """A boolean ``(K, n_records)`` array from bool masks or 0/1 numbers.

    Raises
    ------
    ValueError
        If it is not 2-D with ``n_records`` columns and at least one row, or holds a value
        other than 0 and 1.
    """
    arr = np.asarray(masks)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] != n_records:
        raise ValueError(f"`{name}` must have shape (n_models >= 1, n_records={n_records}); "
                         f"got {arr.shape}.")
    if arr.dtype == np.bool_:
        return arr.copy()
    if not np.issubdtype(arr.dtype, np.number) or not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"`{name}` must hold booleans or the numbers 0 and 1 (membership "
                         "weights of 0 or 1 only).")
    return arr == 1


def as_seeds(seeds: Sequence[np.random.SeedSequence] | RNGLike, n_models: int
             ) -> list[np.random.SeedSequence]:
    """One ``SeedSequence`` per model: the given ones, or children ``0..K-1`` of a root.

    Raises
    ------
    TypeError
        If a sequence holds something other than SeedSequences, or the root is invalid.
    ValueError
        If a sequence's length is not ``n_models``.
    """
    if isinstance(seeds, (list, tuple)):
        if len(seeds) != n_models:
            raise ValueError(f"`seeds` must hold one SeedSequence per model ({n_models}); "
                             f"got {len(seeds)}.")
        bad = [type(s).__name__ for s in seeds if not isinstance(s, np.random.SeedSequence)]
        if bad:
            raise TypeError(f"`seeds` must hold numpy SeedSequences; got {bad[0]}.")
        return list(seeds)
    if seeds is None:
        raise TypeError("`seeds` is required: one SeedSequence per model, or a root seed "
                        "(int or SeedSequence) whose children 0..K-1 seed the models.")
    root = as_seed_sequence(cast(RNGLike, seeds), name="seeds")
    return [trial_seed(root, k) for k in range(n_models)]


def check_init(init: str) -> str:
    """``init`` must be one of :data:`INIT_MODES`."""
    if init not in INIT_MODES:
        raise ValueError(f"`init` must be one of {INIT_MODES}; got {init!r}.")
    return init


def check_memory_limit(memory_limit) -> int | None:
    """``None`` or a positive number of bytes (an int, or a float such as ``2e9``).

    Raises
    ------
    TypeError, ValueError
        If it is not a real number ``>= 1``.
    """
    if memory_limit is None:
        return None
    return int(check_real(memory_limit, "memory_limit", low=1.0))


def check_chunk_size(chunk_size) -> int | None:
    """``None`` (chosen from the memory limit) or an integer ``>= 1``."""
    return None if chunk_size is None else check_int(chunk_size, "chunk_size", low=1)
