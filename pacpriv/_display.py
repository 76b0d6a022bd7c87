"""Notebook and terminal display of result objects (imports only the leaf :mod:`pacpriv._numbers`).

Every main result object (``PacResult``, ``NoisePlan``, the DP-SGD bound, exact-accuracy and
calibration results, the comparison) describes itself as one :class:`Summary`: a title and rows
of ``(label, value, kind)``. The same rows render as a compact HTML table in Jupyter
(``_repr_html_``) and as aligned text (``__str__``), so the two never disagree.

Displayed numbers round on the safe side: a ``"risk"`` row (an upper bound on an adversary's
success, or an MI bound) rounds **up** and a ``"lower"`` row rounds **down**, so a bound shown
with fewer digits never looks better than it is.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pacpriv._numbers import format_bound, format_percent

__all__ = ["Displayable", "Summary", "format_value", "shown", "shown_estimate"]

_DIGITS = 6


def format_value(value: Any, kind: str = "plain", digits: int = _DIGITS) -> str:
    """Text of ``value`` for a display row, through the one rounding helper of
    :mod:`pacpriv._numbers` (the same as the reports and the CLI).

    ``kind`` is ``"risk"`` (round up), ``"lower"`` (round down), ``"percent-risk"`` (a
    probability shown in percent, rounded up to two decimals) or ``"plain"``.
    """
    if value is None:
        return "—"
    if isinstance(value, bool) or isinstance(value, int | str):
        return str(value)
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    if kind == "percent-risk":
        return format_percent(x, 2, side="up")
    if kind in ("risk", "lower"):
        return format_bound(x, digits, side="up" if kind == "risk" else "down")
    return format_bound(x, digits, side="nearest")


@dataclass(frozen=True)
class Summary:
    """A titled list of rows ``(label, value, kind)``; see :func:`format_value` for ``kind``."""

    title: str
    rows: Sequence[tuple[str, Any, str]]

    def text_rows(self) -> list[tuple[str, str]]:
        """``(label, formatted value)`` pairs."""
        return [(label, format_value(value, kind)) for label, value, kind in self.rows]

    def to_text(self) -> str:
        """Aligned plain text: the title, then one ``label  value`` line per row."""
        rows = self.text_rows()
        width = max((len(label) for label, _ in rows), default=0)
        return "\n".join([self.title] + [f"  {label.ljust(width)}  {v}" for label, v in rows])

    def to_html(self) -> str:
        """A compact HTML table (escaped), for Jupyter's ``_repr_html_``."""
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(label)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for label, v in self.text_rows()
        )
        return (f"<table class='pacpriv-summary'><caption style='text-align:left'>"
                f"<b>{html.escape(self.title)}</b></caption>{body}</table>")


class Displayable:
    """Mixin: ``__str__`` and ``_repr_html_`` from the object's ``summary()``."""

    def summary(self) -> Summary:  # pragma: no cover - every user overrides it
        raise NotImplementedError

    def __str__(self) -> str:
        return self.summary().to_text()

    def _repr_html_(self) -> str:
        return self.summary().to_html()


def shown(value: Any, *, up: bool | None = None, digits: int = _DIGITS) -> str:
    """A scalar or small array as text; ``up`` rounds bounds up (True) or down (False)."""
    kind = "plain" if up is None else ("risk" if up else "lower")
    arr = np.asarray(value)
    if arr.ndim == 0:
        return format_value(arr.item(), kind, digits)
    flat = arr.ravel()
    items = [format_value(v, kind, digits) for v in flat[:8].tolist()]
    more = f", … ({flat.size} values)" if flat.size > 8 else ""
    return "[" + ", ".join(items) + more + "]"


def shown_estimate(value: float, low: float, high: float, confidence: float, *,
                   digits: int = 4) -> str:
    """A measured value with its two-sided confidence interval, the ends rounded outward.

    Examples
    --------
    >>> shown_estimate(0.61234, 0.58761, 0.63719, 0.95)
    'estimated 0.6123 (95% CI 0.5876–0.6372)'
    """
    return (f"estimated {format_value(value, 'plain', digits)} ({100 * confidence:g}% CI "
            f"{format_value(low, 'lower', digits)}–{format_value(high, 'risk', digits)})")
