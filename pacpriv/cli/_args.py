"""Parser helpers shared by every command group (a leaf: imports no other pacpriv module)."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "iter_commands",
    "HelpFormatter",
    "UsageError",
    "add_pool_statistics",
    "add_report_output",
    "add_show_errors",
    "budget_number",
    "check_exactly_one",
    "checkpoint_reminder",
    "check_positive_finite",
    "check_trials",
    "trials_range_error",
    "check_unit_interval",
    "integer",
    "number",
    "pool_statistics",
    "print_rows",
    "report_formats",
]


class UsageError(Exception):
    """Raised by CLI handlers for bad input; printed as one line, exit status 2."""


#: Longest flag text echoed in an error; longer text is cut with an ellipsis.
_ECHO_CHARS = 40


def _echo(text: str) -> str:
    """The user's flag text (public), quoted and cut to :data:`_ECHO_CHARS` characters."""
    return repr(text if len(text) <= _ECHO_CHARS else text[:_ECHO_CHARS] + "…")


def number(text: str) -> float:
    """argparse ``type=`` for real numbers, with a short message on bad input.

    A finite decimal that overflows float64 (``1e400``, a 401-digit number) or a non-zero one
    that underflows to 0 (``1e-400``) is refused with the text the user typed, never echoed as
    ``inf`` or ``0.0``; ``inf`` and ``nan`` spelled out pass on to the flag's own range check.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {_echo(text)}") from None
    if math.isinf(value) and "inf" not in text.lower():
        raise argparse.ArgumentTypeError(
            f"{_echo(text)} is a number too large for float64 (|x| < 1.8e308)")
    if value == 0.0 and re.search(r"[1-9]", text.lower().partition("e")[0]):
        raise argparse.ArgumentTypeError(
            f"{_echo(text)} underflows to 0 in float64 (|x| >= 5e-324 or exactly 0)")
    return value


_POW = re.compile(r"^\s*2\s*(?:\^|\*\*)\s*(-?\d+)\s*$")


def budget_number(text: str) -> float:
    """argparse ``type=`` for every budget flag (nats): a real number as :func:`number` reads it,
    or a power of two ``2^-16`` / ``2**-16`` (exact in float64)."""
    m = _POW.match(text)
    if m:
        digits = m.group(1).lstrip("-")
        exponent = int(m.group(1)) if len(digits) <= 6 else (-1 if m.group(1)[0] == "-" else 1
                                                              ) * 10**6
        if exponent > 1023:
            raise argparse.ArgumentTypeError(
                f"{_echo(text)} is a number too large for float64 (at most 2^1023)")
        if exponent < -1074:
            raise argparse.ArgumentTypeError(
                f"{_echo(text)} underflows to 0 in float64 (at least 2^-1074)")
        return math.ldexp(1.0, exponent)
    try:
        return number(text)
    except argparse.ArgumentTypeError as err:
        if str(err).startswith("not a number"):
            raise argparse.ArgumentTypeError(
                f"not a number or a power of two like 2^-16: {_echo(text)}") from None
        raise


def integer(text: str) -> int:
    """argparse ``type=`` for counts: ``1000000``, ``1e6`` or ``1_000_000`` (an exact integer)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {_echo(text)}") from None
    if math.isfinite(value) and abs(value) >= 2.0**53:
        raise argparse.ArgumentTypeError(
            f"{_echo(text)} is too large to write in float form; give the integer's digits")
    if not (math.isfinite(value) and value == int(value)):
        raise argparse.ArgumentTypeError(f"not an integer: {_echo(text)}")
    return int(value)



def _value(args: argparse.Namespace, flag: str) -> Any:
    return getattr(args, flag.lstrip("-").replace("-", "_"))


def check_exactly_one(args: argparse.Namespace, first: str, second: str,
                      first_unit: str = "") -> None:
    """Refuse unless exactly one of the two flags is given (not ``None``)."""
    if (_value(args, first) is None) == (_value(args, second) is None):
        raise UsageError(f"give exactly one of {first}{first_unit} and {second}")


def check_positive_finite(args: argparse.Namespace, flag: str, unit: str = "") -> None:
    """Refuse a given flag's value unless it is a finite number > 0 (``None`` passes)."""
    value = _value(args, flag)
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise UsageError(f"{flag} must be a finite number > 0{unit}; got {value}")


def check_unit_interval(args: argparse.Namespace, flag: str) -> None:
    """Refuse a given flag's value unless it lies in the open interval (0, 1) (``None`` passes)."""
    value = _value(args, flag)
    if value is not None and not 0 < value < 1:
        raise UsageError(f"{flag} must be in (0, 1); got {value}")


def add_report_output(parser: argparse.ArgumentParser, *, default_out: str,
                      out_help: str, json_help: str) -> None:
    """The flags of every command that writes a report: ``--out``, ``--format``, ``--json``
    and ``--show-errors`` (one definition for all of them; ``--no-progress`` is a field of
    ``ExecutionOptions``)."""
    parser.add_argument("--out", default=default_out, help=out_help)
    add_force(parser)
    parser.add_argument("--format", dest="formats", default="json,md,html",
                        help="comma-separated report formats among json, md, html")
    parser.add_argument("--json", action="store_true", help=json_help)
    add_show_errors(parser)


def add_force(parser: argparse.ArgumentParser) -> None:
    """``--force``: replace an earlier report in ``--out`` (refused without it)."""
    parser.add_argument("--force", action="store_true",
                        help="replace an earlier report in --out (without it a folder that "
                        "holds a report is refused before any work; a folder in use by "
                        "another run is always refused)")


def add_show_errors(parser: argparse.ArgumentParser) -> None:
    """``--show-errors``: print a failing mechanism's own exception message (withheld by
    default because it may quote record values; ``PACPRIV_SHOW_ERRORS=1`` does the same)."""
    parser.add_argument("--show-errors", action="store_true",
                        help="if user code (a mechanism, an estimator, a model) or a trained "
                        "model raises, print its exception message too (it may quote record "
                        "values; withheld by default; or PACPRIV_SHOW_ERRORS=1)")


#: Help of ``--withhold-pool-statistics`` (every command that writes a PAC report).
WITHHOLD_HELP = ("for a pool that is itself confidential: show nothing derived from the pool, "
                 "not even the release's error bar (the noise std per coordinate reveals the "
                 "pool's spread)")


def add_pool_statistics(parser: argparse.ArgumentParser, *, report_help: str) -> None:
    """``--report-pool-statistics`` / ``--withhold-pool-statistics`` (mutually exclusive)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--report-pool-statistics", action="store_true", help=report_help)
    group.add_argument("--withhold-pool-statistics", action="store_true", help=WITHHOLD_HELP)


def pool_statistics(args: argparse.Namespace) -> bool | None:
    """The reports' ``pool_statistics``: True (--report-pool-statistics), False
    (--withhold-pool-statistics) or None (the default policy)."""
    if getattr(args, "report_pool_statistics", False):
        return True
    return False if getattr(args, "withhold_pool_statistics", False) else None


def checkpoint_reminder(args: argparse.Namespace) -> None:
    """After a run with ``--checkpoint``: say on stderr that the folder holds un-noised data."""
    folder = getattr(args, "checkpoint", None)
    if folder:
        print(f"pacpriv: note: the checkpoint folder {folder!r} holds the un-noised output of "
              "every trial and its subset mask (they can reconstruct records): treat it like "
              f"the raw data and delete it once you are done (rm -r {folder!r})",
              file=sys.stderr)


#: Most ``--trials`` any command accepts: an int64 trial index.
MAX_TRIALS = 2**63 - 1


def trials_range_error(value: int, low: int, high: int = MAX_TRIALS, why: str = "") -> str:
    """The one wording of a ``--trials`` refusal, for every command and rule: ``--trials must
    be an integer in [low, high]{why}; got value`` (a huge value by its number of digits)."""
    got = str(value) if abs(value) < 10**30 else f"an integer of {len(str(abs(value)))} digits"
    return f"--trials must be an integer in [{low}, {high}]{why}; got {got}"


def check_trials(args: argparse.Namespace, low: int = 2, high: int = MAX_TRIALS,
                 why: str = "") -> None:
    """Refuse ``--trials`` outside ``[low, high]`` (one wording: :func:`trials_range_error`)."""
    if not low <= args.trials <= high:
        raise UsageError(trials_range_error(args.trials, low, high, why))


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's defaults formatter, quiet where the default says nothing: no
    ``(default: None)``/``(default: False)``, and nothing added when the help text already
    states its default."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default in (None, False) or action.required:
            return text
        return super()._get_help_string(action)


#: Command-line words that are values, not flags: a minus sign and then a digit, a decimal
#: point, or inf/infinity/nan in any case (argparse's own matcher misses `-inf` and `-1e5`).
NEGATIVE_VALUE = re.compile(r"^-(\.?\d|(inf(inity)?|nan)$)", re.IGNORECASE)


class _Parser(argparse.ArgumentParser):
    """argparse with the one-line error contract: ``pacpriv: error: ...``, exit status 2,
    and :class:`HelpFormatter` (defaults shown) for every command."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        # values such as `-3:3`, `-1e-3`, `-.5`, `-inf` or `-nan` are values, not options, so a
        # flag's own validation answers them (no flag starts with a digit, `.`, `inf` or `nan`)
        self._negative_number_matcher = NEGATIVE_VALUE

    def error(self, message: str):
        self.exit(2, f"pacpriv: error: {message} (see '{self.prog} --help')\n")


def report_formats(text: str) -> tuple[str, ...]:
    """``--format`` value: a comma-separated subset of json, md, html (UsageError otherwise)."""
    formats = tuple(f.strip() for f in text.split(",") if f.strip())
    if not formats or set(formats) - {"json", "md", "html"}:
        raise UsageError(f"--format must list json, md and/or html; got {text!r}")
    return formats


def print_rows(
    rows: list[dict],
    columns: Sequence[tuple[str, str, int, str]],
    *,
    as_json: bool,
    dumps: Callable[[Any], str] | None = None,
) -> int:
    """Print ``rows`` as JSON, or as a table of ``columns`` ``(key, header, width, spec)``.

    ``dumps`` writes the JSON (callers pass ``pacpriv._json.dumps``, strict JSON with
    ``null`` and a reason for non-finite numbers; this module is a leaf and cannot import it);
    the fallback is ``json.dumps(..., allow_nan=False)``, strict as well.
    """
    if as_json:
        print(dumps(rows) if dumps is not None else json.dumps(rows, indent=2, allow_nan=False))
        return 0
    print(" ".join(f"{h:>{w}}" for _, h, w, _ in columns))
    for r in rows:
        print(" ".join(f"{r[k]:>{w}{spec}}" for k, _, w, spec in columns))
    return 0


def iter_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every ``(path, parser)`` of the command tree under ``parser``, itself first: ``path``
    is the tuple of subcommand names (``()`` for the top level), depth first."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from iter_commands(sub, (*path, name))
