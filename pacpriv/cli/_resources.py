"""What the machine can run, and checks of output paths (CLI helpers).

The caps themselves live in the library (:mod:`pacpriv.pac.engine._resources`, which the engine
applies to every run); here they become the CLI's one-line notes.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pacpriv import _files
from pacpriv.cli._args import UsageError
from pacpriv.pac.engine._resources import LOCAL_BACKENDS, usable_cpus, worker_cap

__all__ = ["HOLD_ATTRIBUTE", "available_cpus", "check_fit_time", "check_output_dir",
           "effective_n_jobs", "fit_time_advice", "hold_report_folder", "shutdown_workers"]


def available_cpus() -> int:
    """CPUs this process may run on (affinity mask, cgroup quota): the library's count."""
    return usable_cpus()


def effective_n_jobs(n_jobs: int | None, backend: str | None) -> tuple[int | None, str]:
    """``(n_jobs to use, note)``: ``None`` (sequential) stays ``1``; ``-1`` means all
    available CPUs and ``-k`` all but ``k − 1``; more workers than a local backend can run
    (CPUs, and memory for worker processes) are capped, with a note naming the cap. Remote
    backends (dask, ray) are passed through."""
    if n_jobs is None:
        return 1, _one_job_note(backend, "--n-jobs 1, the default")
    if backend not in LOCAL_BACKENDS:
        return n_jobs, _one_job_note(backend, "--n-jobs 1") if n_jobs == 1 else ""
    cpus = available_cpus()
    wanted = n_jobs if n_jobs > 0 else max(1, cpus + 1 + n_jobs)
    cap, reason = worker_cap(backend, cpus=cpus)
    if cap is not None and wanted > cap:
        return cap, f"--n-jobs {n_jobs} capped at {cap}: {reason}"
    asked = "--n-jobs 1" if n_jobs == 1 else f"--n-jobs {n_jobs}: 1 on this machine"
    return wanted, _one_job_note(backend, asked) if wanted == 1 else ""


def _one_job_note(backend: str | None, asked: str) -> str:
    """What a named parallel backend does with one job (joblib runs one job in this process,
    without the backend; a Dask cluster sizes itself): said, never silent (14th new-user pass)."""
    if backend in (None, "sequential", "dask"):
        return ""
    return (f"--backend {backend} with one job ({asked}) runs every trial in "
            f"this process, one after the other (joblib's rule for one job); the report says "
            f"'sequential'. Give --n-jobs 2 or more (or -1: every CPU) to use {backend}")


def check_output_dir(text: str, flag: str) -> Path:
    """Check that ``text`` is, or can be created as, a writable directory (the library's
    :func:`pacpriv._files.check_output_dir`, naming ``flag``). Creates nothing (the report
    writer does), so a run refused later leaves no empty folder; runs before any work."""
    return _files.check_output_dir(text, flag)


def shutdown_workers() -> None:
    """Stop joblib's reusable loky workers now (after Ctrl-C), so no worker or semaphore is
    left behind for the resource tracker to complain about."""
    try:
        from joblib.externals.loky import reusable_executor

        executor = reusable_executor._executor  # None when no worker was ever started
        if executor is not None:
            executor.shutdown(wait=True, kill_workers=True)
    except Exception:  # best effort on the way out
        pass


#: The attribute of the parsed arguments through which :func:`hold_report_folder` reaches the
#: ``contextlib.ExitStack`` that ``pacpriv.cli.main`` opens around a command.
HOLD_ATTRIBUTE = "_report_folder_stack"


#: Flags whose files are private (never part of a shareable report), with what they hold.
PRIVATE_PATH_FLAGS = (
    ("checkpoint", "--checkpoint", "every trial's un-noised output and subset"),
    ("private_index_list", "--private-index-list", "which records are most exposed"),
    ("state", "--state", "models fitted on the private pool"),
    ("ledger", "--ledger", "the budget's charges and analysts' keys"),
)


def _check_checkpoint_folder(args) -> None:
    """``--checkpoint DIR``: a new or empty folder, or an earlier checkpoint (its manifest).
    A folder holding other files would get the trials' un-noised outputs mixed into it, and
    deleting the checkpoint afterwards (as the docs advise) would delete those files too."""
    from pacpriv.cli._args import UsageError

    value = getattr(args, "checkpoint", None)
    if not value or not isinstance(value, (str, os.PathLike)) or "://" in str(value):
        return
    folder = Path(value).expanduser()
    if not folder.is_dir() or (folder / "manifest.json").is_file():
        return
    if any(True for _ in folder.iterdir()):
        raise UsageError("--checkpoint must be a new or empty folder, or an earlier checkpoint "
                         "(its manifest.json); the folder given holds other files, which the "
                         "checkpoint would mix with every trial's un-noised output")


def check_private_paths(args) -> None:
    """Refuse a private path (:data:`PRIVATE_PATH_FLAGS`) equal to or inside ``--out``, or
    inside an existing report folder (:func:`pacpriv._files.check_not_in_report`).

    The report folder is what a user shares; a checkpoint, a private index list or a fitted
    state inside it would travel with it. Runs before any work (``pacpriv.cli.main``).

    Raises
    ------
    UsageError
        Naming both flags and what the private path holds.
    PermissionError
        The private path lies inside a report folder written earlier.
    """
    out = getattr(args, "out", None)
    if out and isinstance(out, (str, os.PathLike)):  # a loop of links, named (not resolve()'s)
        _files.refuse_link_loop(Path(out), "--out")
    for attr, flag, _ in PRIVATE_PATH_FLAGS:
        value = getattr(args, attr, None)
        if value and isinstance(value, (str, os.PathLike)) and "://" not in str(value):
            _files.refuse_link_loop(Path(value), flag)
    _check_checkpoint_folder(args)
    for attr, flag, _ in PRIVATE_PATH_FLAGS:  # nor inside an earlier command's report folder
        value = getattr(args, attr, None)
        if value and isinstance(value, (str, os.PathLike)) and "://" not in str(value):
            _files.check_not_in_report(value, flag)
    if not out:
        return
    out_path = Path(out).expanduser().resolve()
    for attr, flag, holds in PRIVATE_PATH_FLAGS:
        value = getattr(args, attr, None)
        if not value or not isinstance(value, (str, os.PathLike)) or "://" in str(value):
            continue
        path = Path(value).expanduser().resolve()
        if path == out_path or out_path in path.parents:
            raise UsageError(f"{flag} must lie outside --out: the report folder may be shared, "
                             f"and {flag} holds {holds}; give another folder")


def hold_report_folder(args) -> None:
    """Validation is over: take the command's ``--out`` folder now, before any work.

    A command that writes a report (``--out`` and ``--force``) calls this after it has
    checked every flag and loaded its inputs, so a bad flag never creates or locks a folder.
    The folder is held (an ``fcntl`` lock) until the command returns: another run's folder is
    refused, and an earlier report is replaced only with ``--force`` (the user is told). A
    second call, or a call outside the CLI's ``main``, does nothing.

    Raises
    ------
    BlockingIOError, FileExistsError, NotADirectoryError, PermissionError
        As :func:`pacpriv._files.report_folder`.
    """
    stack = getattr(args, HOLD_ATTRIBUTE, None)
    out = getattr(args, "out", None)
    if stack is None or out is None or getattr(args, "_report_folder_held", False):
        return
    from pacpriv.report.builder import REPORT_FILES

    _, earlier = stack.enter_context(_files.report_folder(out, "--out", force=bool(args.force),
                                                   report_files=REPORT_FILES))
    args._report_folder_held = True
    if earlier:
        print(f"pacpriv: note: --force: this report replaces the earlier one in {out!r} "
              f"({', '.join(earlier)})", file=sys.stderr)


def ledger_location(text: str) -> str:
    """``--ledger`` value: a SQLite file path or ``postgresql://...`` (argparse error else)."""
    from pacpriv.storage import check_location

    try:
        check_location(text, "--ledger")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--ledger: ")) from None
    return text


def check_fit_time(args: argparse.Namespace, one: float, n_jobs: int | None) -> None:
    """Print ``predict fit``'s estimate for all worlds (``one`` s per world, ``n_jobs`` as
    given) and raise :class:`UsageError` above ``--max-minutes`` (issue 35, item 5)."""
    cpus = os.cpu_count() or 1
    workers = cpus if n_jobs is not None and n_jobs < 0 else int(n_jobs or 1)
    workers = max(1, min(workers, cpus, args.n_worlds))
    minutes = one * args.n_worlds / workers / 60.0
    print(f"pacpriv: note: estimate: {args.n_worlds} worlds x {one:.3g} s per world on "
          f"{workers} worker(s): about {minutes:.2g} min", file=sys.stderr)
    if minutes > args.max_minutes:
        raise UsageError(f"--n-worlds {args.n_worlds}: the fit is estimated at about "
                         f"{minutes:.2g} min, above --max-minutes {args.max_minutes:g}; "
                         + fit_time_advice(args, one, workers))


def fit_time_advice(args: argparse.Namespace, one: float, workers: int) -> str:
    """The way out of ``predict fit``'s refusal above ``--max-minutes`` (``one`` s per world
    on ``workers`` workers), advising only what can help: an even ``--n-worlds`` that fits
    (none below 2), more ``--n-jobs`` only while a core is idle, a higher ``--max-minutes``."""
    cpus = os.cpu_count() or 1
    ways = []
    fits = int(args.max_minutes * 60.0 / one * workers) // 2 * 2
    if fits >= 2:
        ways.append(f"--n-worlds {fits} or fewer")
    if workers < min(cpus, args.n_worlds):
        ways.append(f"more --n-jobs (this machine has {cpus} cores)")
    ways.append("a higher --max-minutes")
    return "use " + (", ".join(ways[:-1]) + ", or " if len(ways) > 1 else "") + ways[-1]
