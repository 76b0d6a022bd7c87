"""Numbers on screen: the one place that rounds a displayed value (a leaf).

A privacy bound shown with fewer digits must never look lower than it is, so every renderer
(CLI, Markdown, HTML tables, figure labels) formats bounds with :func:`format_bound`, which
rounds *toward the safe side*: upward for risk (accuracy, posterior success, MI), downward for
protection (noise). Rounding uses ``decimal.Decimal``, so the text never reads lower (higher)
than the float; it starts from the shortest decimal text that reads back as the same float
(``repr``), so ``0.1`` stays ``0.1``. No digit is dropped before the directed rounding: a risk
bound of ``0.6000000000000001`` shows as ``60.01%`` (it *is* above 60%); calibrations that target
a value return one whose float is at most the target, so their bounds show the target itself.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal, localcontext
from typing import Any

__all__ = ["SIDES", "format_bound", "format_fixed", "format_percent", "round_bound"]

#: ``side`` values: ``"up"`` (risk bounds and required noise: shown >= value), ``"down"``
#: (lower ends of intervals: shown <= value), ``"nearest"`` (neither).
SIDES = ("up", "down", "nearest")

_ROUNDING = {"up": ROUND_CEILING, "down": ROUND_FLOOR, "nearest": ROUND_HALF_EVEN}


def _check_side(side: str) -> str:
    if side not in _ROUNDING:
        raise ValueError(f"`side` must be one of {', '.join(SIDES)}; got {side!r}.")
    return _ROUNDING[side]


def _read(x: float) -> Decimal:
    """``x`` as a Decimal: the shortest text that reads back as the same float (``repr``)."""
    return Decimal(repr(float(x)))


#: Integers from this size on are shown in scientific notation (counts stay exact below it).
_BIG_INT = 10**15


def round_bound(x: float, digits: int = 6, *, side: str = "up") -> Decimal:
    """``x`` rounded to ``digits`` significant digits toward ``side``, as an exact Decimal."""
    return _round_decimal(_read(x), digits, side)


def _round_decimal(d: Decimal, digits: int, side: str) -> Decimal:
    rounding = _check_side(side)
    if d == 0:
        return d
    quantum = Decimal(1).scaleb(d.adjusted() - digits + 1)
    with localcontext() as ctx:
        ctx.prec = max(ctx.prec, digits + 2)
        return d.quantize(quantum, rounding=rounding)


def format_bound(
    x: Any, digits: int = 6, *, side: str = "up", vacuous: bool = False
) -> str:
    """Text of a bound with ``digits`` significant digits, rounded toward ``side``.

    Parameters
    ----------
    x : float, int, None or other
        ``None`` gives ``"—"``; ints below 1e15, bools, non-finite floats and non-numbers are
        shown as is (larger ints are rounded like floats, in scientific notation).
    digits : int, default 6
        Significant digits (>= 1).
    side : {"up", "down", "nearest"}, default "up"
        ``"up"``: the text is >= ``x`` (risk bounds, required noise); ``"down"``: <= ``x``
        (lower ends of intervals).
    vacuous : bool, default False
        Append ``" (vacuous)"`` (a bound that says nothing, e.g. accuracy 1).

    Returns
    -------
    str

    Examples
    --------
    >>> format_bound(0.5999981, 4), format_bound(0.5999981, 4, side="down")
    ('0.6', '0.5999')
    >>> format_bound(1.0, vacuous=True)
    '1 (vacuous)'
    """
    mark = " (vacuous)" if vacuous else ""
    if x is None:
        return "—"
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) >= _BIG_INT:
        r = _round_decimal(Decimal(x), digits, side)  # exact: no float conversion
    elif isinstance(x, bool) or isinstance(x, int) or not isinstance(x, float):
        if hasattr(x, "dtype") and getattr(x, "ndim", 1) == 0:  # numpy scalar: no np.float64()
            return format_bound(x.item(), digits, side=side,  # type: ignore[union-attr]
                                vacuous=vacuous)
        return f"{x}{mark}"
    elif not math.isfinite(x):
        return f"{x}{mark}"
    else:
        r = round_bound(x, digits, side=side)
    exp = r.adjusted() if r != 0 else 0
    if -5 <= exp < digits:
        text = format(r, "f")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
    else:
        text = format(r.normalize(), "E").replace("E", "e")
        mant, _, e = text.partition("e")
        text = f"{mant}e{int(e):+03d}"
    return ("0" if text in ("-0", "") else text) + mark


def format_fixed(x: Any, decimals: int, *, side: str = "up") -> str:
    """``x`` with exactly ``decimals`` decimals, rounded toward ``side`` (tables of bounds).

    >>> format_fixed(0.12345671, 7), format_fixed(0.12345679, 7, side="down")
    ('0.1234568', '0.1234567')
    """
    if x is None:
        return "—"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return _fixed(_read(x), decimals, side)


def _fixed(d: Decimal, decimals: int, side: str) -> str:
    """The exact decimal ``d`` quantized to ``decimals`` decimals toward ``side``."""
    return str(d.quantize(Decimal(1).scaleb(-decimals), rounding=_check_side(side)))


def format_percent(
    x: Any, decimals: int = 2, *, side: str = "up", vacuous: bool = False
) -> str:
    """``x`` (a fraction) as a percentage with ``decimals`` decimals, rounded toward ``side``.

    >>> format_percent(0.887251), format_percent(0.5)
    ('88.73%', '50.00%')
    """
    if x is None:
        return "—"
    text = _fixed(_read(x).scaleb(2), decimals, side) + "%"  # exact, unlike * 100
    return text + (" (vacuous)" if vacuous else "")
