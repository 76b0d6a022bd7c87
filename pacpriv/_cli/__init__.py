"""CLI subcommand groups; each module defines ``add_parser(subparsers, name)``."""

from __future__ import annotations

import importlib
from types import ModuleType

_MODULES = {
    "pac": "pacpriv._cli.pac",
    "dpsgd": "pacpriv._cli.dpsgd",
    "compare": "pacpriv._cli.compare",
}


def _load() -> dict[str, ModuleType]:
    groups = {}
    for name, mod in _MODULES.items():
        try:
            groups[name] = importlib.import_module(mod)
        except ModuleNotFoundError as exc:  # group not built yet
            if exc.name != mod:
                raise
    return groups


GROUPS = _load()
