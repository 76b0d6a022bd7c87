"""The ``pacpriv`` command line: a thin argparse layer over the library.

Subcommands live in :mod:`pacpriv.cli.pac`, :mod:`pacpriv.cli.dpsgd` and
:mod:`pacpriv.cli.compare` (one module per group, each with ``add_parser(subparsers, name)``,
listed in the static table :data:`GROUPS`); shared parser helpers are in the leaf
:mod:`pacpriv.cli._args`; every handler calls a keyword-only library function and
prints a human table (or ``--json``). Bad input -- a ``ValueError``, ``TypeError``,
``FileNotFoundError``, ``ImportError`` or ``KeyError`` raised while the arguments are
resolved or validated, or an ``OSError`` (a missing file, a file where a folder is expected,
no permission, a port in use) -- prints one line ``pacpriv: error: ...`` to stderr and exits
with status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import warnings
from collections.abc import Sequence

from pacpriv._version import __version__
from pacpriv.cli import audit as _audit_group
from pacpriv.cli import compare as _compare_group
from pacpriv.cli import dpsgd as _dpsgd_group
from pacpriv.cli import pac as _pac_group
from pacpriv.cli import predict as _predict_group
from pacpriv.cli._args import UsageError, _Parser, number
from pacpriv.cli._resources import HOLD_ATTRIBUTE, check_private_paths, shutdown_workers
from pacpriv.exceptions import (
    DISK_ADVICE,
    DTYPE_ADVICE,
    PROBE_TIME_ADVICE,
    TIMEOUT_ADVICE,
    BudgetExceededError,
    CalibrationError,
    CheckpointError,
    MechanismError,
    UserCodeError,
    set_user_wording,
)

__all__ = ["GROUPS", "UsageError", "build_parser", "main", "number"]

#: The command groups, in ``--help`` order: name -> module with ``add_parser(subparsers, name)``.
GROUPS = {"pac": _pac_group, "dpsgd": _dpsgd_group, "compare": _compare_group,
          "predict": _predict_group, "serve": _predict_group, "audit": _audit_group}


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
        if name == "serve":  # one command, not a group
            module.add_serve_parser(sub, name)
        else:
            module.add_parser(sub, name)
    return parser


_NUMPY_SCALAR = re.compile(r"np\.(?:float|int|bool_?)\d*\(([^()]*)\)")


#: Environment variable that, set to 1, prints a mechanism's own exception message.
SHOW_ERRORS_ENV = "PACPRIV_SHOW_ERRORS"


def _one_line(exc: BaseException, *, show_cause: bool = True) -> str:
    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    text = _NUMPY_SCALAR.sub(r"\1", " ".join(str(msg).split()))  # no np.float64(...)
    cause = exc.__cause__
    if show_cause and cause is not None and str(cause) and str(cause) not in text:
        text += f" (caused by {type(cause).__name__}: {' '.join(str(cause).split())})"
    return text


def _show_errors(args) -> bool:
    """--show-errors or PACPRIV_SHOW_ERRORS=1: print a mechanism's own exception message."""
    env = os.environ.get(SHOW_ERRORS_ENV, "").strip().lower()
    return bool(getattr(args, "show_errors", False)) or env in {"1", "true", "yes", "on"}


def _mechanism_line(exc: MechanismError | UserCodeError, args) -> str:
    """One line for a failed mechanism; its own message (it may quote records) only on request."""
    return _one_line(exc, show_cause=_show_errors(args))


_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _print_warnings(caught: list) -> None:
    """Print each kind of warning once: messages that differ only in their numbers are one
    kind, shown with the first message and a count (every message of a ``one_kind`` category,
    e.g. the declared ranges and the mechanism's bounds clipping the same pool, is one kind)."""
    kinds: dict[tuple, list[str]] = {}
    for w in caught:
        text = " ".join(str(w.message).split())
        key = "" if getattr(w.category, "one_kind", False) else _NUMBER.sub("#", text)
        kinds.setdefault((w.category, key), []).append(text)
    for texts in kinds.values():
        more = f" (and {len(texts) - 1} more like it)" if len(texts) > 1 else ""
        print(f"pacpriv: warning: {texts[0]}{more}", file=sys.stderr)


#: Advice of the library's time-limit notes in API terms, and how each limit flag words it
#: (the first flag the running command has wins; none: the clause goes, Ctrl-C remains).
_LIMIT_ADVICE = {
    # only a per-trial limit stops a trial that hangs (--time-limit and --max-minutes bound
    # the probe and the estimate, not the trials)
    TIMEOUT_ADVICE: (("--timeout", "pass --timeout SECONDS to bound each trial"),),
    PROBE_TIME_ADVICE: (("--time-limit", "pass --time-limit SECONDS to bound it"),
                        ("--max-minutes", "pass --max-minutes to bound it"),
                        ("--timeout", "pass --timeout SECONDS to bound it")),
    DISK_ADVICE: (("--memory-map", "a disk-backed run (--checkpoint DIR --memory-map)"),),
    DTYPE_ADVICE: (("--output-dtype", "--output-dtype float32"),),
}


def _cli_advice(text: str, flags: set[str]) -> str:
    """``text`` with its time-limit advice in the running command's flags: a command without
    any limit flag is advised Ctrl-C alone (sixth new-user pass, m18)."""
    for api, worded in _LIMIT_ADVICE.items():
        if api not in text:
            continue
        usable = [cli for flag, cli in worded if flag in flags]
        if usable:
            text = text.replace(api, usable[0])
            continue
        # no such flag: the clause goes (to the end of its sentence after "or")
        text = re.sub(rf",? or(?:, [^,]*,)? {re.escape(api)}[^.;]*",
                      "", text.replace(f"{api}, or press", "press"))
        text = (text.replace(f", {api}", "").replace(f" {api},", "")
                .replace(api, "press Ctrl-C to stop"))
    return _as_flags(text, flags)


def _collect_warnings(flags: set[str] | None = None) -> list:
    """Inside ``warnings.catch_warnings()``: record every warning for the closing list
    (:func:`_print_warnings`); a warning whose category is ``live`` (the engine's
    :class:`~pacpriv.exceptions.StallWarning`, from its watchdog thread) is printed at once,
    while the run goes on, and only then: it says what was happening at that moment, so the
    closing list (after an error, too) does not repeat it (ninth new-user pass, #48). Advice in
    API terms names the running command's ``flags`` (:func:`_cli_advice`)."""
    caught: list = []
    known = set() if flags is None else flags

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        message = _cli_advice(str(message), known)
        if getattr(category, "live", False):
            print(f"pacpriv: warning: {' '.join(str(message).split())}", file=sys.stderr,
                  flush=True)
            return
        caught.append(warnings.WarningMessage(message, category, filename, lineno, file, line))

    warnings.showwarning = show
    set_user_wording(lambda text: _cli_advice(text, known))  # e.g. a thread's fallback line
    return caught


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status.

    0 ok; 1 the mechanism or a computation failed (one line naming the trial and seed);
    2 bad input; 130 interrupted.
    """
    global _COMMAND_LINE
    _COMMAND_LINE = argv is None  # the process is ours: its SIGINT handling may change
    try:
        code = _main(argv)
    except KeyboardInterrupt:  # between the phases (e.g. while the warnings print): one line
        _stop_listening()
        shutdown_workers()
        print("pacpriv: interrupted; workers stopped", file=sys.stderr)
        code = 130
    _stop_listening()  # the command line exits now: a late Ctrl-C cannot break the clean-up
    set_user_wording(None)  # a caller in Python gets the API's terms again
    return code


#: Whether :func:`main` runs as the command line (``argv`` None), not called from Python.
_COMMAND_LINE = False


def _stop_listening() -> None:
    """The command line has stopped or finished: ignore further Ctrl-C, so that shutting the
    workers down and Python's exit handlers (loky's) run to the end without a traceback.
    Nothing changes when :func:`main` is called from Python with ``argv``."""
    if not _COMMAND_LINE:
        return
    import signal

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # pragma: no cover - not the main thread
        pass


def _main(argv: Sequence[str] | None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(_join_leading_minus(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:  # Ctrl-C while starting: one line, nothing was run
        _stop_listening()
        print("pacpriv: interrupted (while starting; nothing was run)", file=sys.stderr)
        return 130
    flags = _flags_of(_invoked(parser, args))
    with warnings.catch_warnings():
        caught = _collect_warnings(flags)
        code: int | None = None
        try:
            code = _dispatch(args, flags)
            return code
        finally:
            if code != 130:  # interrupted: its one line is all (the run produced nothing)
                _print_warnings(caught)


#: Flags whose value may start with '-' (``--feature-ranges -inf:inf``): argparse would read
#: the value as an option, so it is joined to its flag (``--feature-ranges=-inf:inf``).
_MINUS_VALUED = ("--feature-ranges",)


def _join_leading_minus(argv: Sequence[str]) -> list[str]:
    out: list[str] = []
    it = iter(argv)
    for token in it:
        if token in _MINUS_VALUED:
            nxt = next(it, None)
            if nxt is not None and nxt.startswith("-") and not nxt.startswith("--"):
                out.append(f"{token}={nxt}")
                continue
            out.append(token)
            if nxt is not None:
                out.append(nxt)
            continue
        out.append(token)
    return out


def _invoked(parser: argparse.ArgumentParser, args) -> argparse.ArgumentParser:
    """The (sub)parser of the command the user ran: its flags name the arguments in errors."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest, None)
            if chosen in action.choices:
                return _invoked(action.choices[chosen], args)
    return parser


#: Keywords of the Python API functions (not spec fields: a spec field's flag is in its
#: metadata) whose flag is not the name with dashes, used only when the command has that flag:
#: errors from ``run_pac(rng=, n_trials=)``, ``compare_accountants(timeout=)``,
#: ``compare_pac_dpsgd(n_repeats=)`` and ``write_report(out_dir=)`` name the flag the user typed.
FLAG_ALIASES = {"rng": "--seed", "timeout": "--comparator-timeout", "n_trials": "--trials",
                "n_repeats": "--repeats", "out_dir": "--out", "release_rng": "--release-seed"}


def _flags_of(parser: argparse.ArgumentParser) -> set[str]:
    flags: set[str] = set()
    for action in parser._actions:
        flags.update(s for s in action.option_strings if s.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags |= _flags_of(sub)
    return flags


def _as_flags(text: str, flags: set[str]) -> str:
    """Name the flag the user typed: `steps_per_epoch` -> --steps-per-epoch."""
    def repl(m: re.Match) -> str:
        flag = "--" + m.group(1).replace("_", "-")
        if flag in flags:
            return flag
        alias = FLAG_ALIASES.get(m.group(1))
        return alias if alias in flags else m.group(0)

    def keyword(m: re.Match) -> str:  # an API keyword argument: `name`='value' or name=value
        flag = repl(m)
        if not flag.startswith("--"):
            return m.group(0)
        value = m.group(2)
        return flag if value in ("", "...") else f"{flag} {value.strip(chr(39))}"

    text = re.sub(r"(?<![\w`./-])`?([a-z][a-z0-9_]*)`?=('[^' ]*'|[^\s,;)]*)", keyword, text)
    text = re.sub(r"`([a-z][a-z0-9_]*)`", repl, text)
    # a message that names both terms ("--x / x=") names the flag once on the command line
    return re.sub(r"(--[a-z][a-z0-9-]*)(?: / | or |, )\1(?![\w-])", r"\1", text)


def _run_handler(args) -> int:
    """Run the command; one that writes a report (``--out`` and ``--force``) takes its folder
    when its arguments are validated (:func:`~pacpriv.cli._args.hold_report_folder`, called by
    the handler before any work) and holds it until it returns: a bad flag never creates or
    locks a folder, another run's folder is refused, an earlier report is replaced only with
    ``--force`` (issue 35, item 4). A private path inside ``--out`` is refused first."""
    check_private_paths(args)
    if getattr(args, "out", None) is None or not hasattr(args, "force"):
        return int(args.handler(args) or 0)
    with contextlib.ExitStack() as stack:
        setattr(args, HOLD_ATTRIBUTE, stack)
        return int(args.handler(args) or 0)


def _dispatch(args, flags: set[str]) -> int:
    try:
        return _run_handler(args)
    except CheckpointError as exc:  # the API's advice names `rng`; a CLI user has --seed
        from pacpriv.pac.engine._checkpoint import SEED_ADVICE

        text = _one_line(exc)
        if "--seed" in flags:  # never advise omitting a flag the user did not give
            text = text.replace(SEED_ADVICE, (
                "omit --seed to reuse the checkpoint's seed" if getattr(args, "seed", None)
                is not None else "--seed was not given: pass the checkpoint's seed entropy "
                "as --seed to resume it"))
        print(f"pacpriv: error: {_cli_advice(text, flags)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `pacpriv ... | head`: the reader left, nothing to say
        sys.stdout = open(os.devnull, "w")  # no flush error at exit
        return 0
    except (UsageError, ValueError, TypeError, KeyError, ImportError, OSError) as exc:
        # OSError: a path that is missing, a file where a folder is expected (or the reverse),
        # no permission, a port in use (FileNotFoundError is one)
        print(f"pacpriv: error: {_cli_advice(_one_line(exc), flags)}", file=sys.stderr)
        return 2
    except (MechanismError, UserCodeError) as exc:
        line = _cli_advice(_mechanism_line(exc, args), flags)
        print(f"pacpriv: error: {line}", file=sys.stderr)
        return 1
    except (CalibrationError, BudgetExceededError) as exc:
        print(f"pacpriv: error: {_cli_advice(_one_line(exc), flags)}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # pathlib's resolve() on a loop of symbolic links (before 3.13,
        # which raises OSError ELOOP): any path flag, at any depth (eighth new-user pass)
        if not str(exc).startswith("Symlink loop"):
            raise
        print(f"pacpriv: error: a path given is a loop of symbolic links ({exc}); point it at "
              "a real folder or file", file=sys.stderr)
        return 2
    except Warning as exc:  # -W error / PYTHONWARNINGS=error made a warning an exception
        print(f"pacpriv: error: {_cli_advice(_one_line(exc), flags)} ({type(exc).__name__}, "
              "raised as an error by the Python warning filter -W / PYTHONWARNINGS)",
              file=sys.stderr)
        return 1
    except MemoryError:  # numpy's _ArrayMemoryError too: one clear line, no traceback
        print("pacpriv: error: out of memory (the outputs of all trials are held in memory, "
              "and the certified rule's analysis needs several times their size): use fewer "
              "--trials, a smaller output, or a plug-in --rule (variance-only runs in O(d) "
              "memory)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        _stop_listening()  # a second Ctrl-C must not interrupt the shutdown
        shutdown_workers()
        # name --checkpoint only to a command that has it
        ck = getattr(args, "checkpoint", None)
        kept = ("" if "--checkpoint" not in flags
                else " (pass --checkpoint DIR to keep finished trials next time)" if not ck
                else " (finished trials are kept in --checkpoint, un-noised: delete it once "
                "done)" if _holds_files(ck)
                else " (no trial had finished: --checkpoint holds nothing yet)")
        print(f"pacpriv: interrupted; workers stopped{kept}", file=sys.stderr)
        return 130


def _holds_files(folder) -> bool:
    """Whether the checkpoint ``folder`` may hold finished work: anything beyond a manifest
    that lists no chunk (an unreadable manifest counts as work: never claim it is empty)."""
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except OSError:
        return False
    for entry in entries:
        if entry.name != "manifest.json":
            return True
        try:
            with open(entry.path, encoding="utf-8") as fh:
                if json.load(fh).get("chunks"):
                    return True
        except (OSError, ValueError, AttributeError):
            return True
    return False


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
