"""Number formatting shared by the Markdown and HTML renderers (a leaf)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["TOP_ROWS", "fmt"]

#: Eigenvalues and noise std shown in the tables of the Markdown and HTML renderings.
TOP_ROWS = 10


def fmt(x: Any, digits: int = 6) -> str:
    """``x`` as report text: ``—`` for None, ``digits`` significant digits for floats."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isinf(x) or math.isnan(x):
            return str(x)
        return f"{x:.{digits}g}"
    return str(x)
