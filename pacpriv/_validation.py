"""Input validation at the public boundary.

Messages name the argument, the allowed range (with open/closed brackets) and the value
received, following ``sklearn.utils.validation.check_scalar``. ``TypeError`` for the wrong
kind, ``ValueError`` for the wrong value.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["check_array_real", "check_finite_array", "check_int", "check_n_jobs", "check_real"]


def _show(value) -> str:
    """``repr`` of a value with numpy scalars shown as plain Python numbers."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value)


def _interval(low, high, low_inclusive, high_inclusive) -> str:
    lo = "-inf" if low is None else repr(low)
    hi = "inf" if high is None else repr(high)
    left = "[" if (low is not None and low_inclusive) else "("
    right = "]" if (high is not None and high_inclusive) else ")"
    return f"{left}{lo}, {hi}{right}"


def check_real(
    value,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    allow_inf: bool = False,
) -> float:
    """Validate a real scalar and return it as ``float``.

    Raises
    ------
    TypeError
        If ``value`` is not a real number (``bool`` is rejected).
    ValueError
        If ``value`` is NaN, infinite (unless ``allow_inf``) or outside the interval.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number; got {type(value).__name__} {value!r}.")
    v = float(value)
    interval = _interval(low, high, low_inclusive, high_inclusive)
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise ValueError(f"`{name}` must be a finite number in {interval}; got {_show(value)}.")
    bad = (low is not None and (v < low or (v == low and not low_inclusive))) or (
        high is not None and (v > high or (v == high and not high_inclusive))
    )
    if bad:
        raise ValueError(f"`{name}` must be in {interval}; got {_show(value)}.")
    return v


def check_int(value, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """Validate an integer scalar (numpy integers accepted, ``bool`` and floats rejected).

    Raises
    ------
    TypeError
        If ``value`` is not an integer.
    ValueError
        If ``value`` is outside ``[low, high]``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an integer; got {type(value).__name__} {value!r}.")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError(
            f"`{name}` must be an integer in {_interval(low, high, True, True)}; got {v}."
        )
    return v


def check_array_real(
    value, name: str, *, low: float | None = None, high: float | None = None,
    low_inclusive: bool = True, high_inclusive: bool = True, integer: bool = False,
) -> np.ndarray:
    """Validate a real scalar or array elementwise and return it as a float64 array.

    With ``integer=True`` every element must also be integer-valued (``3`` or ``3.0``, not
    ``3.5``); the result is still float64.

    Raises
    ------
    TypeError
        If ``value`` is not numeric (or not integer-valued when ``integer``).
    ValueError
        If any element is NaN/inf or outside the interval.
    """
    arr = np.asarray(value)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"`{name}` must be numeric; got {arr.dtype} {value!r}.")
    arr = arr.astype(np.float64)
    if integer and not np.all(np.isfinite(arr) & (arr == np.round(arr))):
        raise TypeError(f"`{name}` must be integer-valued; got {value!r}.")
    interval = _interval(low, high, low_inclusive, high_inclusive)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` must be finite and in {interval}; got {value!r}.")
    bad = np.zeros(arr.shape, dtype=bool)
    if low is not None:
        bad |= (arr < low) | ((arr == low) & (not low_inclusive))
    if high is not None:
        bad |= (arr > high) | ((arr == high) & (not high_inclusive))
    if np.any(bad):
        first = arr[bad].flat[0]
        raise ValueError(f"`{name}` must be in {interval}; got {_show(first)}.")
    return arr


def check_n_jobs(value, name: str = "n_jobs") -> int | None:
    """Validate a joblib worker count: ``None`` or a nonzero integer (``-1``: all cores).

    Raises
    ------
    TypeError
        If ``value`` is neither None nor an integer (``bool`` and floats rejected).
    ValueError
        If ``value`` is 0.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"`{name}` must be None or a nonzero integer; got {type(value).__name__} {value!r}."
        )
    if int(value) == 0:
        raise ValueError(
            f"`{name}` must be a positive number of workers or negative (-1: all cores); got 0."
        )
    return int(value)


def check_finite_array(arr: np.ndarray, name: str, *, block_rows: int = 65_536) -> None:
    """Require every element of a numeric array to be finite (object/str arrays are skipped).

    Reads the first axis in blocks (a memory-mapped array is never loaded whole). The message
    names the argument and the first offending index along the first axis, never a value.

    Raises
    ------
    ValueError
        If a float or complex element is NaN or infinite.
    """
    if arr.dtype.kind not in "fc" or arr.size == 0:
        return  # integers and bools are always finite; other kinds are not numbers
    for start in range(0, arr.shape[0], block_rows):
        block = np.asarray(arr[start:start + block_rows])
        finite = np.isfinite(block).reshape(block.shape[0], -1).all(axis=1)
        if not finite.all():
            index = start + int(np.flatnonzero(~finite)[0])
            raise ValueError(
                f"`{name}` must hold finite numbers; record {index} has a NaN or infinite "
                "value (values not shown)."
            )
