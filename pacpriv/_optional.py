"""Optional heavy dependencies, imported on first use with an ImportError naming the fix."""

from __future__ import annotations

from types import ModuleType

__all__ = ["import_torch"]


def import_torch(feature: str) -> ModuleType:
    """Import and return ``torch``, or raise an ImportError naming ``feature`` and the fix.

    The hint installs the local CPU build first, so pip never pulls a multi-GB CUDA build.
    """
    try:
        import torch
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"{feature} needs torch: pip install torch==2.13.0 (CPU build), then "
            "pip install 'pacpriv[torch]'"
        ) from err
    return torch
