"""Optional heavy dependencies, imported on first use with an ImportError naming the fix."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["import_optional", "import_torch"]


def import_optional(name: str, feature: str, *, extra: str, hint: str | None = None) -> ModuleType:
    """Import and return module ``name``, or raise an ImportError naming ``feature`` and the fix.

    Parameters
    ----------
    name : str
        Dotted module name, e.g. ``"fastapi.responses"``.
    feature : str
        What needs it, the start of the message (``"serving"``).
    extra : str
        pacpriv's extra that installs it; the fix is ``pip install 'pacpriv[<extra>]'``.
    hint : str, optional
        A fix to print instead.

    Raises
    ------
    ImportError
        ``"<feature> needs <top-level package>: <fix>"``, chained to the original error.
    """
    try:
        return importlib.import_module(name)
    except ImportError as err:
        fix = hint if hint is not None else f"pip install 'pacpriv[{extra}]'"
        raise ImportError(f"{feature} needs {name.partition('.')[0]}: {fix}") from err


def import_torch(feature: str) -> ModuleType:
    """Import and return ``torch``, or raise an ImportError naming ``feature`` and the fix.

    The hint installs the local CPU build first, so pip never pulls a multi-GB CUDA build.
    """
    return import_optional("torch", feature, extra="torch", hint=(
        "pip install torch==2.13.0 (CPU build), then pip install 'pacpriv[torch]'"))
