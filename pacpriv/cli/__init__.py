"""The ``pacpriv`` command line: a thin argparse layer over the library.

:func:`main` and :func:`build_parser` live in :mod:`pacpriv.cli.main`; each command group is
one module (:mod:`pacpriv.cli.pac`, :mod:`pacpriv.cli.dpsgd`, :mod:`pacpriv.cli.compare`),
listed in :data:`pacpriv.cli.main.GROUPS`. No library module imports this package.
"""

from pacpriv.cli._args import UsageError, number
from pacpriv.cli.main import build_parser, main

__all__ = ["UsageError", "build_parser", "main", "number"]
