"""How trials run, as one frozen object: :class:`ExecutionOptions`.

The execution settings (workers, backend, progress bar, checkpoint, retries, time limit, batch
size, disk-backed or memory-mapped outputs, the vectorised-ensemble path and its device) change
how the Monte-Carlo trials of Xiao & Devadas (CRYPTO 2023, Algorithm 1) are run, never their
results (``output_dtype="float32"`` alone rounds the stored outputs, relative ``2⁻²⁴`` of their
spread):
the trials are bit-identical for any of them. Every function or method that runs trials or fits
models takes them as one argument, ``execution=ExecutionOptions(...)`` (the dp-accounting idea of
an immutable description separate from whoever consumes it).

With ``n_jobs=None`` and ``backend=None`` (the defaults) joblib decides: one worker, or whatever
an enclosing ``joblib.parallel_config(...)`` sets.

The 0.2 loose keywords (``n_jobs=``, ``backend=``, ``progress=``, ``checkpoint=``, ``retries=``,
``timeout=``, ``batch_size=``, ``output_path=``) and ``options=`` were removed in 0.4: each is a
``TypeError`` naming its replacement (:func:`refuses_removed`).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypeVar

from pacpriv._files import as_path
from pacpriv._validation import check_int, check_n_jobs, check_real

__all__ = ["REMOVED_EXECUTION", "ExecutionOptions", "refuses_removed"]

#: Devices of the vectorised-ensemble path.
DEVICES = ("cpu", "cuda")

#: Storage dtypes of the simulated outputs.
OUTPUT_DTYPES = ("float64", "float32")

#: File of the memory-mapped outputs inside the checkpoint folder (``memory_map=True``).
MAPPED_OUTPUTS = "outputs.npy"


#: The most retries of one failing trial (a retry reruns the same seed, so a deterministic
#: failure never passes; the limit keeps a huge value from retrying without end).
MAX_RETRIES = 1000


def _check_cuda() -> None:
    """``device='cuda'`` names a GPU that torch can use (fourteenth new-user pass: it was
    accepted on a CPU-only machine without a word, the work running on the CPU)."""
    try:
        import torch
    except ImportError:
        raise ValueError("`device` 'cuda' runs the vectorised ensemble path on torch, which "
                         "is not installed (pip install 'pacpriv[torch]'); use device='cpu'."
                         ) from None
    if not torch.cuda.is_available():
        raise ValueError("`device` is 'cuda' but CUDA is unavailable (torch.cuda.is_available() "
                         "is False: a CPU build of torch or no visible GPU); use device='cpu'.")


@dataclass(frozen=True, kw_only=True)
class ExecutionOptions:
    """How trials run (validated on construction; never changes a result).

    Parameters
    ----------
    n_jobs : int or None, default None
        Parallel workers (joblib convention: ``-1`` all cores; ``None``: one, or what an
        active ``joblib.parallel_config`` sets). On a local backend (loky, multiprocessing,
        threading) capped at the usable CPUs (affinity mask, cgroup quota) and, for worker
        processes, at what the available memory allows (see ``worker_memory``), with a
        :class:`~pacpriv.exceptions.WorkerCapWarning` naming the cap; cluster backends (Dask,
        Ray) are not capped.
    backend : str or None, default None
        joblib backend (``"loky"``, ``"threading"``, ``"dask"``, ``"ray"``); None: joblib's
        default or the active ``parallel_config``.
    progress : bool, default True
        Show a tqdm progress bar.
    checkpoint : str or path-like or None, default None
        Folder of a resumable checkpoint (mode 0700, files 0600). It holds the un-noised
        trial outputs and subset masks: treat a checkpoint like the raw data; delete it after
        the run.
    retries : int, default 0
        Extra attempts per failing trial (same seed), in ``[0, 1000]``.
    timeout : float or None, default None
        Seconds one trial may take (``> 0``).
    batch_size : int or "auto", default "auto"
        Trials per task (``>= 1``).
    output_path : str or path-like or None, default None
        ``.npy`` file for disk-backed outputs (masks beside it in ``<stem>.masks.npy``). An
        existing file is refused (:class:`FileExistsError`, before any trial runs) unless
        ``overwrite_output=True`` or a resumed ``checkpoint`` of the same run owns it.
    overwrite_output : bool, default False
        Replace an existing ``output_path`` file (and its masks file).
    ensemble : bool, default True
        Let a mechanism that declares a vectorised block form (an ensemble mechanism) evaluate
        blocks of trials at once; ``False`` forces one trial per task (same seeds, same outputs).
    device : {"cpu", "cuda"}, default "cpu"
        Device of the vectorised-ensemble path (torch).
    worker_memory : int or None, default None
        Bytes one worker process needs, for the memory cap on ``n_jobs`` (``>= 1``); None: the
        resident memory of this process (a worker imports the same libraries and receives the
        same pool).
    output_dtype : {"float64", "float32"}, default "float64"
        How the simulated outputs are kept. ``"float32"`` halves their memory; they are then
        stored relative to trial 0's float64 output, so only the spread across trials is
        rounded (relative ``2⁻²⁴``), and every analysis of them (spectrum, certificate: sums,
        Gram matrix, whitening, clip) runs in float64. The one setting here that changes
        results: by that rounding.
    memory_map : bool, default False
        Keep the outputs (and masks) in memory-mapped ``.npy`` files inside the ``checkpoint``
        folder (``outputs.npy``, ``outputs.masks.npy``; owner-only, un-noised data like the
        checkpoint) instead of in memory: the ``n_trials × d`` outputs then need disk, not RAM,
        and the certificate reads them in column blocks. Needs ``checkpoint``; not with
        ``output_path``.
    record_block : int or None, default None
        Records per block of a per-record run of a black-box mechanism (``>= 1``; None: 64):
        a trial's ``1 + k`` evaluations run as ``⌈k/B⌉`` engine units, spread over the workers,
        counted on the progress bar and checkpointed block by block
        (:mod:`pacpriv.pac.per_record._units`); ``timeout`` and ``retries`` then apply to
        each block. Results are bit-identical for every value.
    time_limit : float or None, default None
        Seconds the whole run may take (``> 0``, finite; None: no limit). A call that runs
        several simulations (the per-record calibration: shape and certification trials;
        ``compare_pac_dpsgd`` and ``compare_table``: every phase of every dataset) shares one
        limit among them: each gets what the earlier ones left. Checked
        before any trial against an estimate from a short timed probe (one trial, or one
        block of an ensemble mechanism, on a subset drawn with a public seed, its output
        discarded): a run estimated over the limit is refused with the estimate
        (:class:`~pacpriv.exceptions.TimeLimitError`; nothing is run, stored or released).
        Enforced while it runs, however the trials are batched: every batch carries the
        deadline, starts no trial past it and returns its finished trials, and the run stops
        with a :class:`~pacpriv.exceptions.TimeLimitError` that says how many trials
        finished; with a ``checkpoint`` they are kept there and the same call resumes them
        (bit-identical results). How late the stop can be: a trial running at the limit is
        interrupted there where a trial can be (SIGALRM: ``n_jobs=1`` in the main thread,
        loky and multiprocessing workers; the stop then comes within a fraction of a second,
        plus the start-up of workers not yet running); on thread-based workers (threading,
        Dask) the trials in flight finish first, each within its per-trial ``timeout``, which
        is at most ``time_limit``. The limit counts from the start of the run (the timed
        probe), after the data and the mechanism are loaded, and covers the whole run: the
        probe, the trials, a resume's verification re-runs, the reproducibility re-runs, the
        analysis (a run whose analysis ends past the limit stops there) and ``run_pac``'s one
        release call of the mechanism (interrupted at the limit): a run never finishes past
        it. The probe's estimate counts the probe itself and two calls after the trials (a
        reproducibility re-run and the release). Never changes results.

    Raises
    ------
    TypeError, ValueError
        On an argument outside its range (named in the message).

    Examples
    --------
    >>> opts = ExecutionOptions(n_jobs=2, progress=False)
    >>> opts.n_jobs, opts.retries, opts.ensemble
    (2, 0, True)
    """

    n_jobs: int | None = field(default=None, metadata={
        "flag": "--n-jobs", "help": "parallel workers (default 1: sequential; -1: every CPU "
        "this process may use; more than the usable CPUs is capped on a local backend)"})
    backend: str | None = field(default=None, metadata={
        "flag": "--backend", "choices": ("loky", "threading", "multiprocessing", "sequential",
                                         "dask", "ray"),
        "help": "joblib backend (default: loky processes when --n-jobs > 1)"})
    progress: bool = field(default=True, metadata={"flag": "--no-progress", "negate": True,
                                                   "help": "no progress bar"})
    checkpoint: str | os.PathLike | None = field(default=None, metadata={
        "flag": "--checkpoint", "metavar": "DIR",
        "help": "checkpoint directory (resume after interrupt; created owner-only, mode 0700). "
        "It holds un-noised trial outputs and subset masks: treat a checkpoint like the raw "
        "data; delete it after the run"})
    retries: int = field(default=0, metadata={
        "flag": "--retries",
        "help": "retries of a failing trial (same seed, 0 to 1000; default 0)"})
    timeout: float | None = field(default=None, metadata={
        "flag": "--timeout", "help": "per-trial timeout in seconds (> 0; default: none)"})
    batch_size: int | Literal["auto"] = "auto"
    output_path: str | os.PathLike | None = None
    overwrite_output: bool = False
    ensemble: bool = field(default=True, metadata={
        "flag": "--no-ensemble", "negate": True,
        "help": "one call per trial even for a mechanism with a vectorised block form "
        "(run_block, e.g. pacpriv.ensemble mechanisms); outputs agree to float tolerance, so "
        "both paths can be compared on the same seeds"})
    device: str = field(default="cpu", metadata={
        "flag": "--device", "choices": DEVICES,
        "help": "device of the vectorised ensemble path (torch; default cpu)"})
    worker_memory: int | None = None
    output_dtype: str = field(default="float64", metadata={
        "flag": "--output-dtype", "choices": ("float64", "float32"),
        "help": "how the simulated outputs are kept: float32 halves their memory (stored "
        "relative to trial 0; the certificate's arithmetic stays float64). Default float64"})
    memory_map: bool = field(default=False, metadata={
        "flag": "--memory-map",
        "help": "keep the simulated outputs in memory-mapped files inside --checkpoint DIR "
        "instead of in memory (for n_trials x d beyond RAM); needs --checkpoint"})
    record_block: int | None = field(default=None, metadata={
        "flag": "--record-block", "metavar": "B",
        "help": "records per block of a per-record trial of a black-box mechanism (>= 1; "
        "default 64): the blocks run on separate workers, with progress and checkpoints per "
        "block; results are identical for every B"})
    time_limit: float | None = field(default=None, metadata={
        "flag": "--time-limit", "metavar": "SECONDS",
        "help": "limit in seconds on the whole run (> 0): refused before any trial when a short "
        "timed probe of the mechanism estimates more; stopped at the limit otherwise (finished "
        "trials stay in --checkpoint: rerun the same command to resume). Default: none"})

    def __post_init__(self) -> None:
        check_n_jobs(self.n_jobs)
        if self.backend is not None and not isinstance(self.backend, str):
            raise TypeError(f"`backend` must be a str or None; got {type(self.backend).__name__}.")
        if self.backend is not None and self.backend not in known_backends():
            raise ValueError(f"`backend` must be one of {sorted(known_backends())} (or a backend "
                             f"registered with joblib.register_parallel_backend); got "
                             f"{self.backend!r}.")
        if self.output_dtype not in OUTPUT_DTYPES:
            raise ValueError(f"`output_dtype` must be one of {OUTPUT_DTYPES}; got "
                             f"{self.output_dtype!r}.")
        if not isinstance(self.memory_map, bool):
            raise TypeError(f"`memory_map` must be a bool; got {type(self.memory_map).__name__}.")
        for name in ("checkpoint", "output_path"):  # '' would be the working folder
            value = getattr(self, name)
            if isinstance(value, str) and not value.strip():  # (a blank one: folder "  ")
                as_path(value, f"`{name}`")  # (other values: checked where they are used)
        if self.memory_map and self.checkpoint is None:
            raise ValueError("`memory_map=True` keeps the outputs in the checkpoint folder: give "
                             "`checkpoint` too (got checkpoint=None).")
        if self.memory_map and self.output_path is not None:
            raise ValueError("give either `memory_map=True` (outputs in the checkpoint folder) "
                             "or `output_path`, not both.")
        for name in ("progress", "ensemble", "overwrite_output"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise TypeError(f"`{name}` must be a bool; got {type(value).__name__}.")
        check_int(self.retries, "retries", low=0, high=MAX_RETRIES)
        if self.timeout is not None:
            check_real(self.timeout, "timeout", low=0.0, low_inclusive=False)
        if self.batch_size != "auto":
            check_int(self.batch_size, "batch_size", low=1)
        if self.worker_memory is not None:
            check_int(self.worker_memory, "worker_memory", low=1)
        if self.record_block is not None:
            check_int(self.record_block, "record_block", low=1)
        if self.time_limit is not None:
            _check_time_limit(self.time_limit)
        if self.device not in DEVICES:
            raise ValueError(f"`device` must be one of {DEVICES}; got {self.device!r}.")
        if self.device == "cuda":  # asked for a GPU: one that exists, before any work
            _check_cuda()

    def replace(self, **changes: Any) -> ExecutionOptions:
        """A copy with ``changes`` (validated like a new object)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """The options as a plain dict (field name -> value)."""
        return asdict(self)


def _check_time_limit(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`time_limit` must be a number of seconds in (0, inf) or None; got "
                        f"{type(value).__name__}.")
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond float64: say so, not "inf"
        digits = len(f"{value:x}") * 1.2041 + 1  # only ints overflow: hex digits × log10(16)
        digits = int(digits)
        raise ValueError("`time_limit` must be a number of seconds in (0, inf); got an "
                         f"integer of about {digits} digits, too large for float64 "
                         "(|x| < 1.8e308).") from None
    if not 0 < seconds < math.inf:
        raise ValueError(f"`time_limit` must be a number of seconds in (0, inf); got "
                         f"{seconds:g}.")


def known_backends() -> set[str]:
    """joblib's registered backends (its own, and any registered so far), Dask and Ray."""
    from joblib.parallel import BACKENDS

    return set(BACKENDS) | {"dask", "ray"}


#: The 0.2 loose execution keywords, removed in 0.4 (refused, naming the replacement).
REMOVED_EXECUTION = ("n_jobs", "backend", "progress", "checkpoint", "retries", "timeout",
                     "batch_size", "output_path", "options")

F = TypeVar("F", bound=Callable[..., Any])


def _as_options(options: Any, name: str = "execution") -> ExecutionOptions:
    if not isinstance(options, ExecutionOptions):
        raise TypeError(
            f"`{name}` must be an ExecutionOptions or None; got {type(options).__name__}.")
    return options


def execution_hints() -> dict[str, str]:
    """The replacement of each removed 0.2 execution keyword (for :func:`refuses_removed`)."""
    return {k: ("execution=ExecutionOptions(...)" if k == "options"
                else f"execution=ExecutionOptions({k}=...)") for k in REMOVED_EXECUTION}


def refuses_removed(hints: dict[str, str]) -> Callable[[F], F]:
    """Decorator: a removed 0.2 keyword (a key of ``hints`` that ``func`` does not take) is a
    one-line ``TypeError`` naming its replacement ``hints[name]``, instead of Python's bare
    "unexpected keyword argument"."""

    def decorate(func: F) -> F:
        params = inspect.signature(func).parameters
        removed = {k: v for k, v in hints.items() if k not in params}

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for k in kwargs:
                if k in removed:
                    raise TypeError(f"{func.__name__}() got an unexpected keyword argument "
                                    f"{k!r}; pass {removed[k]} (removed in 0.4).")
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def resolve_execution(execution: ExecutionOptions | None,
                      default: ExecutionOptions | None = None) -> ExecutionOptions:
    """``execution``, or the function's ``default`` options when None (type-checked)."""
    if execution is None:
        return default or ExecutionOptions()
    return _as_options(execution)
