"""Find ``pacpriv.mechanisms`` in a source checkout (a leaf; imports no other pacpriv module).

The reference mechanisms live in the top-level folder ``mechanisms/`` of the repository and are
installed as ``pacpriv.mechanisms`` (setuptools ``package_dir``), so an installed pacpriv puts
no package called plain ``mechanisms`` into site-packages. When pacpriv runs straight from a
checkout (``PYTHONPATH=.``) there is no ``pacpriv/mechanisms/`` folder; the finder below maps
that one dotted name to the top-level folder; importing this module installs it. It matches no
other name and does nothing in an installed copy.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

__all__ = ["install"]

_NAME = "pacpriv.mechanisms"
_FOLDER = Path(__file__).resolve().parent.parent / "mechanisms"


class _MechanismsFinder(importlib.abc.MetaPathFinder):
    """Meta-path finder for ``pacpriv.mechanisms`` only (source checkouts)."""

    def find_spec(self, fullname, path=None, target=None) -> importlib.machinery.ModuleSpec | None:
        init = _FOLDER / "__init__.py"
        if fullname != _NAME or not init.is_file():
            return None
        return importlib.util.spec_from_file_location(
            fullname, init, submodule_search_locations=[str(_FOLDER)]
        )


def install() -> None:
    """Append the finder to ``sys.meta_path`` unless pacpriv is installed with its mechanisms."""
    if (Path(__file__).resolve().parent / "mechanisms").is_dir():
        return
    if not any(isinstance(f, _MechanismsFinder) for f in sys.meta_path):
        sys.meta_path.append(_MechanismsFinder())


install()
