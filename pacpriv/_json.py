"""Strict JSON: the one helper every pacpriv JSON output goes through.

:func:`json.dumps` writes ``Infinity`` and ``NaN`` by default, which is not JSON (RFC 8259)
and breaks strict parsers (``jq``, JavaScript's ``JSON.parse``, Go, ...). Every JSON file or
line pacpriv emits is produced by :func:`dumps`, which

* converts numpy scalars and arrays to Python numbers and lists,
* replaces each non-finite float by ``null`` and states why beside it: in a dict, the key
  ``"<key>_null_reason"`` (``"+inf"``, ``"-inf"`` or ``"nan"``, with the list positions when
  the value sat in a list), so a reader never meets an unexplained ``null``,
* and serialises with ``allow_nan=False``, so a non-finite value that slipped through raises
  instead of producing invalid JSON.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any

import numpy as np

__all__ = ["diff", "dumps", "field_values", "to_strict"]

_NULL_SUFFIX = "_null_reason"


def _reason(x: float) -> str:
    if math.isnan(x):
        return "nan"
    return "+inf" if x > 0 else "-inf"


def _plain(obj: Any) -> Any:
    """numpy/dataclass/path objects as plain Python containers and numbers."""
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    return obj


def _walk(obj: Any, reasons: list[str], where: str) -> Any:
    obj = _plain(obj)
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        reasons.append(f"{where}{_reason(obj)}" if where else _reason(obj))
        return None
    if isinstance(obj, dict):
        out: dict = {}
        for key, value in obj.items():
            inner: list[str] = []
            out[key] = _walk(value, inner, "")
            if inner:
                reason_key = f"{key}{_NULL_SUFFIX}"
                if reason_key not in obj:
                    out[reason_key] = "not finite: " + ", ".join(inner)
        return out
    if isinstance(obj, (list, tuple)):
        return [_walk(v, reasons, f"{where}[{i}] ") for i, v in enumerate(obj)]
    return obj


def field_values(obj: Any, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """A dataclass instance's fields as ``{name: value}``, in declaration order, minus ``exclude``.

    Unlike :func:`dataclasses.asdict` the values are not copied or recursed into, so a
    ``to_dict`` can replace the nested ones it serialises itself.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class Row:
    ...     name: str
    ...     value: float
    ...     raw: list
    >>> field_values(Row("a", 1.5, [0, 1]), exclude=("raw",))
    {'name': 'a', 'value': 1.5}
    """
    skip = set(exclude)
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name not in skip}


def to_strict(obj: Any) -> Any:
    """``obj`` with numpy types made plain and non-finite floats replaced by ``None``.

    Each replaced value gets a sibling ``"<key>_null_reason"`` in its dict (see the module
    docstring). A non-finite value at the top level or inside a bare list becomes ``None``
    without a reason (there is no key to put it under).
    """
    return _walk(obj, [], "")


def dumps(obj: Any, **kwargs: Any) -> str:
    """Strict-JSON text of ``obj`` (``json.dumps`` keyword arguments pass through).

    Objects json cannot encode fall back to ``str`` (as ``default=str``), after numpy
    types, dataclasses and paths were made plain. ``allow_nan`` is not accepted: the output
    is always strict (non-finite floats become ``null`` with a reason).
    """
    kwargs.setdefault("default", str)
    return json.dumps(to_strict(obj), allow_nan=False, **kwargs)


def diff(old: Any, new: Any, label: str, prefix: str = "") -> list[str]:
    """Dotted paths where two JSON-like values differ, each with both sides:
    ``"a.b (<label>: old, now: new)"``; nested dicts are compared key by key."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out += diff(old.get(key), new.get(key), label, f"{prefix}{key}.")
        return out
    return [] if old == new else [f"{prefix[:-1]} ({label}: {old!r}, now: {new!r})"]
