"""Parser helpers shared by every command group (a leaf: imports no other pacpriv module)."""

from __future__ import annotations

import argparse

__all__ = ["UsageError", "number"]


class UsageError(Exception):
    """Raised by CLI handlers for bad input; printed as one line, exit status 2."""


def number(text: str) -> float:
    """argparse ``type=`` for real numbers, with a short message on bad input."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


class _Parser(argparse.ArgumentParser):
    """argparse with the one-line error contract: ``pacpriv: error: ...``, exit status 2."""

    def error(self, message: str):
        self.exit(2, f"pacpriv: error: {message} (see '{self.prog} --help')\n")
