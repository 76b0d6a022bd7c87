"""Peak traced memory of one call, shared by the noise tests' no-copy checks (imported as
``from ._memory import traced_peak``)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any


def traced_peak(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """``fn(*args, **kwargs)`` and the peak bytes Python allocated while it ran (tracemalloc:
    numpy's buffers count; a memory map's pages do not)."""
    tracemalloc.start()
    try:
        result = fn(*args, **kwargs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak
