"""Validation of score and statistic arrays that never quotes a value.

Scores and statistics are functions of individual records: an error names the argument, the
shape, how many entries are bad and where the first is, never an entry itself.
"""

from __future__ import annotations

import numpy as np

__all__ = ["real_array"]


def real_array(value, name: str) -> np.ndarray:
    """``value`` as a finite float64 array.

    Raises
    ------
    TypeError
        If it is not numeric (bool included), naming only its dtype.
    ValueError
        If an entry is NaN or infinite: the count and the first position, no value.
    """
    arr = np.asarray(value)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"`{name}` must be numeric; got dtype {arr.dtype}.")
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        where = first[0] if len(first) == 1 else first
        raise ValueError(f"`{name}` must be finite; {int(bad.sum())} of {arr.size} entries are "
                         f"NaN or infinite (first at position {where}).")
    return arr
