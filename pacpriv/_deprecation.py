"""Deprecated names kept for one release (a leaf: imports no other pacpriv module)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["deprecated_names"]


def deprecated_names(module: str, table: dict[str, tuple[str, Any, str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving ``table`` (old name -> (new name, object, why)).

    Each old name returns its object with a ``DeprecationWarning`` naming the new name; any
    other unknown name raises ``AttributeError`` as usual.
    """

    def __getattr__(name: str) -> Any:
        if name not in table:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new, obj, why = table[name]
        warnings.warn(
            f"{module}.{name} is deprecated ({why}); use {module}.{new}. "
            "It will be removed in 0.3.",
            DeprecationWarning,
            stacklevel=2,
        )
        return obj

    return __getattr__
