"""Number formatting shared by every renderer (Markdown, HTML, CLI).

Every displayed number goes through :func:`fmt`, which delegates to
:func:`pacpriv._numbers.format_bound`: risk bounds and required noise round upward
(``side="up"``: a reader who applies a shown noise never adds less than was calibrated),
lower ends of intervals downward (``side="down"``), so a shorter number never looks safer
than the full one.
"""

from __future__ import annotations

from typing import Any

from pacpriv import _json
from pacpriv._numbers import format_bound, format_percent

__all__ = ["TOP_ROWS", "cell", "fmt", "format_bound", "format_percent"]

#: Eigenvalues and noise std shown in the tables of the Markdown and HTML renderings.
TOP_ROWS = 10

#: Longest list shown in one table cell.
_LIST_CELL = 12


def fmt(x: Any, digits: int = 6, *, side: str = "nearest", vacuous: bool = False) -> str:
    """``x`` as report text: ``—`` for None, ``digits`` significant digits for floats,
    rounded toward ``side`` (``"up"`` for risk bounds and noise, ``"down"`` for lower ends)."""
    return format_bound(x, digits, side=side, vacuous=vacuous)


def cell(x: Any, digits: int = 6, *, side: str = "nearest", vacuous: bool = False) -> str:
    """One table cell: a number (:func:`fmt`), a list (first values and count) or a dict."""
    if isinstance(x, (list, tuple)):
        shown = ", ".join(fmt(v, digits, side=side) for v in x[:_LIST_CELL])
        more = ", …" if len(x) > _LIST_CELL else ""
        return f"[{shown}{more}] ({len(x)} values)"
    if isinstance(x, dict):
        return _json.dumps(x)
    return fmt(x, digits, side=side, vacuous=vacuous)
