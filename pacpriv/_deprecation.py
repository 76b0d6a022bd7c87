"""Deprecated names and import paths kept for one release (a leaf: imports no pacpriv module).

* :func:`deprecated_names` serves old *attribute* names of a module (a module ``__getattr__``).
* :data:`MOVED` lists the module paths that 0.3 moved into sub-packages ("rooms"); importing an
  old path gives the module at its new path (the same object) with a ``DeprecationWarning``
  naming the new path. The finder is installed when :mod:`pacpriv` is imported. It matches only
  the names in :data:`MOVED`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["MOVED", "deprecated_names", "install_moved_finder"]

#: Old module path (0.2) -> new module path (0.3). Removed in 0.4.
MOVED: dict[str, str] = {
    # pacpriv.pac.engine (the engine is a sub-package; its public names stay importable)
    "pacpriv.pac._trial": "pacpriv.pac.engine._trial",
    "pacpriv.pac._parallel": "pacpriv.pac.engine._parallel",
    "pacpriv.pac.checkpoint": "pacpriv.pac.engine._checkpoint",
    "pacpriv.pac.storage": "pacpriv.pac.engine._storage",
    "pacpriv.pac.options": "pacpriv.pac.engine._options",
    "pacpriv.pac._mechanism": "pacpriv.pac.engine._mechanism",
    "pacpriv._adapters": "pacpriv.pac.engine._adapters",
    # pacpriv.pac.spectrum
    "pacpriv.pac.covariance": "pacpriv.pac.spectrum._covariance",
    "pacpriv.pac._spectral": "pacpriv.pac.spectrum._spectral",
    "pacpriv.pac._eigenbasis": "pacpriv.pac.spectrum._eigenbasis",
    "pacpriv.pac._resolution": "pacpriv.pac.spectrum._resolution",
    "pacpriv.pac.moments": "pacpriv.pac.spectrum._moments",
    # pacpriv.pac.noise
    "pacpriv.pac._rules": "pacpriv.pac.noise._rules",
    "pacpriv.pac._plan": "pacpriv.pac.noise._plan",
    "pacpriv.pac.calibration": "pacpriv.pac.noise._calibration",
    "pacpriv.pac.certificate": "pacpriv.pac.noise._certificate",
    "pacpriv.pac.confidence": "pacpriv.pac.noise._confidence",
    "pacpriv.pac.randomized": "pacpriv.pac.noise._randomized",
    # pacpriv.pac.bounds
    "pacpriv.pac.prior": "pacpriv.pac.bounds._prior",
    "pacpriv.pac.posterior": "pacpriv.pac.bounds._posterior",
    "pacpriv.pac.mutual_info": "pacpriv.pac.bounds._mutual_info",
    "pacpriv.ledger": "pacpriv.pac.bounds._ledger",
    # pacpriv.pac.per_record (a sub-package; its public names stay importable)
    "pacpriv.pac._per_record_math": "pacpriv.pac.per_record._math",
    "pacpriv.pac._per_record_sim": "pacpriv.pac.per_record._sim",
    "pacpriv.pac.per_record_attack": "pacpriv.pac.per_record._attack",
    "pacpriv.pac.per_record_calibration": "pacpriv.pac.per_record._calibration",
    "pacpriv.pac.per_record_report": "pacpriv.pac.per_record._report",
    # pacpriv.pac
    "pacpriv.wrapper": "pacpriv.pac.wrapper",
    # pacpriv.audit (a sub-package; its public names stay importable)
    "pacpriv.pac.empirical": "pacpriv.audit._empirical",
    "pacpriv.attacks": "pacpriv.audit._attacks",
    # pacpriv.dpsgd._exact (private grid numerics)
    "pacpriv.dpsgd._pld": "pacpriv.dpsgd._exact.lattice",
    "pacpriv.dpsgd._geo": "pacpriv.dpsgd._exact.geometric",
    "pacpriv.dpsgd._hybrid": "pacpriv.dpsgd._exact.hybrid",
    "pacpriv.dpsgd._mixed": "pacpriv.dpsgd._exact.mixed",
    "pacpriv.dpsgd._convert": "pacpriv.dpsgd._exact.convert",
    "pacpriv.dpsgd._screens": "pacpriv.dpsgd._exact.screens",
}


def deprecated_names(module: str, table: dict[str, tuple[str, Any, str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving ``table`` (old name -> (new name, object, why)).

    Each old name returns its object with a ``DeprecationWarning`` naming the new name; any
    other unknown name raises ``AttributeError`` as usual. ``object`` may be a string
    ``"package.module:attribute"``, imported on first use (so that a deprecated alias never
    makes the old module import the new one at import time).
    """

    def __getattr__(name: str) -> Any:
        if name not in table:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new, obj, why = table[name]
        warnings.warn(
            f"{module}.{name} is deprecated ({why}); use {new}. It will be removed in 0.4.",
            DeprecationWarning,
            stacklevel=2,
        )
        if isinstance(obj, str):
            path, _, attr = obj.partition(":")
            obj = getattr(importlib.import_module(path), attr)
        return obj

    return __getattr__


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new path (the same object, spec untouched)."""

    def __init__(self, new: str) -> None:
        self.new = new
        self._spec: Any = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.new)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec  # the import system set the alias spec: restore the real one


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Meta-path finder for the old paths of :data:`MOVED` only."""

    def find_spec(self, fullname: str, path: Any = None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        warnings.warn(
            f"{fullname} moved to {new} in pacpriv 0.3 (import the public names from its "
            f"package, {new.rsplit('._', 1)[0]}); the old path will be removed in 0.4.",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))


def install_moved_finder() -> None:
    """Append the finder for :data:`MOVED` to ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
