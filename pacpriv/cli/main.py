"""The ``pacpriv`` command line: a thin argparse layer over the library.

Subcommands live in :mod:`pacpriv.cli.pac`, :mod:`pacpriv.cli.dpsgd` and
:mod:`pacpriv.cli.compare` (one module per group, each with ``add_parser(subparsers, name)``,
listed in the static table :data:`GROUPS`); shared parser helpers are in the leaf
:mod:`pacpriv.cli._args`; every handler calls a keyword-only library function and
prints a human table (or ``--json``). Bad input -- a ``ValueError``, ``TypeError``,
``FileNotFoundError``, ``ImportError`` or ``KeyError`` raised while the arguments are
resolved or validated -- prints one line ``pacpriv: error: ...`` to stderr and exits with
status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence

from pacpriv import __version__
from pacpriv.cli import compare as _compare_group
from pacpriv.cli import dpsgd as _dpsgd_group
from pacpriv.cli import pac as _pac_group
from pacpriv.cli._args import UsageError, _Parser, number
from pacpriv.exceptions import CalibrationError, MechanismError

__all__ = ["GROUPS", "UsageError", "build_parser", "main", "number"]

#: The command groups, in ``--help`` order: name -> module with ``add_parser(subparsers, name)``.
GROUPS = {"pac": _pac_group, "dpsgd": _dpsgd_group, "compare": _compare_group}


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every subcommand group registered."""
    parser = _Parser(
        prog="pacpriv",
        description=(
            "Measure and control membership leakage: PAC Privacy for black-box functions "
            "and DP-SGD with random allocation."
        ),
    )
    parser.add_argument("--version", action="version", version=f"pacpriv {__version__}")
    sub = parser.add_subparsers(dest="group", metavar="{" + ",".join(GROUPS) + "}")
    sub.required = True
    for name, module in GROUPS.items():
        module.add_parser(sub, name)
    return parser


def _one_line(exc: BaseException) -> str:
    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    text = " ".join(str(msg).split())
    cause = exc.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" (caused by {type(cause).__name__}: {' '.join(str(cause).split())})"
    return text


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"pacpriv: warning: {message}", file=sys.stderr if file is None else file)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status.

    0 ok; 1 the mechanism or a computation failed (one line naming the trial and seed);
    2 bad input; 130 interrupted.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        return int(args.handler(args) or 0)
    except (UsageError, ValueError, TypeError, FileNotFoundError, KeyError, ImportError) as exc:
        print(f"pacpriv: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except (MechanismError, CalibrationError) as exc:
        print(f"pacpriv: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pacpriv: interrupted (finished trials are kept in the checkpoint)", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = previous


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
