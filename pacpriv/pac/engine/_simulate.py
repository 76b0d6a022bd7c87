"""The PAC Monte-Carlo engine: run a black-box mechanism on many random subsets of a pool.

:func:`simulate` draws ``n_trials`` membership masks from a sampler (the data distribution
D of PAC Privacy [1]_), runs ``mechanism(pool[mask])`` for each, checks every output and
returns them as an ``(n_trials, d)`` array, the raw material of the covariance estimate
and the noise calibration (Xiao & Devadas [1]_, Alg. 1 and Thm. 3).

Reproducibility contract
------------------------
Trial ``i`` depends only on the root seed and ``i`` (see :mod:`pacpriv.pac.samplers`):
the same root seed gives bit-identical outputs and masks for any ``n_jobs``, backend
(sequential, loky, threading, Dask), ``batch_size`` or resume point -- **provided the
mechanism draws all its randomness from its ``rng`` argument** (never from the global
``numpy.random`` or ``random`` state, an unseeded library or the clock).

The engine checks this: after the run it re-runs one trial from its seed in this process and
compares bit for bit. A difference emits
:class:`~pacpriv.exceptions.NotReproducibleWarning` and sets
``SimulationResult.reproducible = False``, which the report shows as "not reproducible".
Under joblib's fork-based "multiprocessing" backend, where every worker inherits the same
global state and would repeat the same draws, the global ``numpy.random`` and ``random``
states are reseeded before each trial from the trial's seed (and restored after).

Storage below float64
---------------------
With ``output_dtype`` below float64 (e.g. float32), outputs are stored relative to the
float64 output of trial 0 (``SimulationResult.reference``): row ``i`` holds
``output_i - reference`` computed in float64 and then rounded. The rounding error of a
coordinate is then at most half a unit in the last place of its spread across trials
(``2**-24`` relative for float32), whatever offset the output sits on; stored absolutely,
an output of ``2e9 + x`` with ``x`` in [0, 1] would round every ``x`` away (float32 spacing
at 2e9 is 256). Covariances, the noise calibration and the attacks are translation
invariant and use the stored rows directly; add ``reference`` back for absolute outputs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pacpriv._files import refuse_link_loop
from pacpriv._random import RNGLike, as_seed_sequence, seed_to_dict, trial_seed
from pacpriv._validation import check_finite_array, check_int, check_real
from pacpriv.exceptions import (
    DISK_ADVICE,
    CheckpointError,
)
from pacpriv.pac.engine import _storage as storage
from pacpriv.pac.engine._adapters import EstimatorMechanism
from pacpriv.pac.engine._blocks import block_size_of
from pacpriv.pac.engine._checkpoint import Checkpoint, checked_fingerprint
from pacpriv.pac.engine._limit import checked_within, rerun_within, start_limit
from pacpriv.pac.engine._mechanism import check_mechanism
from pacpriv.pac.engine._options import (
    MAPPED_OUTPUTS,
    MAX_RETRIES,
    ExecutionOptions,
    execution_hints,
    refuses_removed,
    resolve_execution,
)
from pacpriv.pac.engine._parallel import plan_workers, run_pending
from pacpriv.pac.engine._reproducibility import reproducibility, rerun, warn_uninterruptible
from pacpriv.pac.engine._storage import OutputStore, masks_path_for
from pacpriv.pac.engine._trial import TrialTask
from pacpriv.pac.samplers import Sampler, as_sampler

__all__ = ["SimulationResult", "simulate"]

Pool = np.ndarray | tuple[np.ndarray, ...]


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """Outputs of a Monte-Carlo simulation (:func:`simulate`).

    Attributes
    ----------
    outputs : numpy.ndarray of shape (n_trials, dim)
        Mechanism outputs, row ``i`` from trial ``i`` (float64 unless ``output_dtype``);
        a read-only ``numpy.memmap`` when ``output_path`` was given. Below float64 they are
        relative to ``reference`` (``outputs[i] + reference`` is trial ``i``'s output).
    masks : numpy.ndarray of bool, shape (n_trials, n_records)
        Membership mask of each trial (record ``j`` was in trial ``i``'s subset).
    root_seed : dict
        ``seed_to_dict`` of the root ``SeedSequence``; ``SeedSequence(**root_seed)`` rebuilds it.
    sampler : dict
        ``Sampler.to_dict()`` of the sampler used.
    mechanism : str
        Qualified name of the mechanism.
    n_trials, n_records, dim : int
        Number of trials, pool size, output dimension ``d``.
    membership_prior : float or None
        Probability that one record is in a subset (½ for Poisson-½), if known.
    elapsed_s : float
        Wall-clock time of this call, seconds.
    backend : str
        joblib backend that ran the trials ("sequential", "loky", "threading", "dask", ...).
    n_jobs : int
        Number of concurrent workers used.
    resumed_trials : int
        Trials restored from the checkpoint instead of recomputed.
    checkpoint, output_path : str or None
        Checkpoint directory and disk-backed output file, if any.
    reference : numpy.ndarray of shape (dim,), float64, or None
        With ``output_dtype`` below float64: trial 0's float64 output; ``outputs[i] +
        reference`` is trial ``i``'s output. None for float64 storage (outputs absolute).
    reproducible : bool or None
        Whether re-running a trial from its seed gave bit-identical output and mask (see
        the module docstring); None if not checked.
    reproducibility_note : str
        What was re-run and what came out.
    """

    outputs: np.ndarray
    masks: np.ndarray
    root_seed: dict
    sampler: dict
    mechanism: str
    n_trials: int
    n_records: int
    dim: int
    membership_prior: float | None
    elapsed_s: float
    backend: str
    n_jobs: int
    resumed_trials: int = 0
    checkpoint: str | None = None
    output_path: str | None = None
    reference: np.ndarray | None = None
    reproducible: bool | None = None
    reproducibility_note: str = ""

    def trial_seed(self, index: int) -> np.random.SeedSequence:
        """``SeedSequence`` of trial ``index`` (its children 0/1 seed the sampler/mechanism)."""
        index = check_int(index, "index", low=0, high=self.n_trials - 1)
        return trial_seed(np.random.SeedSequence(**self.root_seed), index)

    def to_dict(self) -> dict:
        """JSON-serialisable summary (no raw arrays)."""
        return {
            "mechanism": self.mechanism,
            "sampler": self.sampler,
            "root_seed": self.root_seed,
            "n_trials": self.n_trials,
            "n_records": self.n_records,
            "dim": self.dim,
            "output_dtype": str(self.outputs.dtype),
            "membership_prior": self.membership_prior,
            "elapsed_s": self.elapsed_s,
            "backend": self.backend,
            "n_jobs": self.n_jobs,
            "resumed_trials": self.resumed_trials,
            "checkpoint": self.checkpoint,
            "output_path": self.output_path,
            "outputs_relative_to": None if self.reference is None else "trial 0 (float64)",
            "reproducible": self.reproducible,
            "reproducibility_note": self.reproducibility_note,
        }


def _as_pool_array(value: Any, name: str) -> np.ndarray:
    if value is None or isinstance(value, (str, bytes, dict, set)):
        raise TypeError(
            f"`{name}` must be an array of shape (n_records, ...); got {type(value).__name__}."
        )
    if hasattr(value, "pool") and hasattr(value, "to_dict"):  # a pacpriv Dataset: 0-d too
        raise TypeError(f"`{name}` is a {type(value).__name__}; pass its `.pool` (and "
                        "`dataset=<it>.to_dict()` to run_pac, so the report records its "
                        "name, columns and preprocessing).")
    if hasattr(value, "tocsr") and hasattr(value, "nnz"):  # scipy.sparse: np.asarray -> 0-d
        raise TypeError(f"`{name}` is a scipy sparse matrix ({type(value).__name__}); pass a "
                        "dense array (e.g. X.toarray()), or an array of row indices and load "
                        "the rows inside the mechanism.")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"`{name}` could not be converted to an array: {err}") from err
    if arr.ndim == 0:
        raise ValueError(
            f"`{name}` must have a first axis of records, shape (n_records, ...); got a scalar."
        )
    return arr


def _check_pool(pool: Any) -> tuple[Pool, int]:
    if isinstance(pool, tuple):
        if not pool:
            raise ValueError("`pool` must be an array or a non-empty tuple of arrays; got ().")
        arrays = tuple(_as_pool_array(a, f"pool[{j}]") for j, a in enumerate(pool))
        lengths = [a.shape[0] for a in arrays]
        if len(set(lengths)) > 1:
            raise ValueError(
                f"`pool` arrays must share the first axis (n_records); got lengths {lengths}."
            )
        checked: Pool = arrays
        n_records = lengths[0]
    else:
        checked = _as_pool_array(pool, "pool")
        n_records = checked.shape[0]
    features = checked[0] if isinstance(checked, tuple) else checked
    if features.dtype.kind in "US":  # text: no mechanism's arithmetic takes it (labels may)
        raise TypeError(f"`{'pool[0]' if isinstance(checked, tuple) else 'pool'}` must hold "
                        f"numbers (records as numeric rows); got text (dtype "
                        f"{features.dtype.str}): encode it first, e.g. with "
                        "sklearn.preprocessing.OrdinalEncoder.")
    if n_records < 2:
        raise ValueError(
            f"`pool` must contain at least 2 records (the secret is which records are in the "
            f"subset); got n_records = {n_records}."
        )
    for j, a in enumerate(checked if isinstance(checked, tuple) else (checked,)):
        check_finite_array(a, f"pool[{j}]" if isinstance(checked, tuple) else "pool")
    return checked, n_records


def _check_options(n_trials, retries, timeout, batch_size, output_dtype, progress):
    n_trials = check_int(n_trials, "n_trials", low=1, high=2**63 - 1)  # an int64 index
    retries = check_int(retries, "retries", low=0, high=MAX_RETRIES)
    if timeout is not None:
        timeout = check_real(timeout, "timeout", low=0.0, low_inclusive=False)
    if batch_size != "auto":
        batch_size = check_int(batch_size, "batch_size", low=1)
    dtype = np.dtype(output_dtype)
    if dtype.kind != "f":
        raise ValueError(
            f"`output_dtype` must be a floating dtype (float64, float32); got {dtype}."
        )
    if not isinstance(progress, bool):
        raise TypeError(f"`progress` must be a bool; got {type(progress).__name__}.")
    return n_trials, retries, timeout, batch_size, dtype


def _count_text(n: int) -> str:
    """An integer count as typed when short (up to 40 digits), else ``about 2^k`` (no ``str`` of
    a huge integer, which Python limits to 4,300 digits, and no float overflow)."""
    if n.bit_length() <= 132:
        return str(n)
    return f"about 2^{n.bit_length() - 1}"


def _gib(n_bytes: int) -> str:
    """``n_bytes`` in GiB to one decimal, for integers of any size (no float overflow)."""
    gib = n_bytes >> 30
    if gib.bit_length() < 1000:
        return f"{n_bytes / 2**30:.1f}"
    return f"about 2^{gib.bit_length() - 1}"


def _check_memory(n_trials: int, n_records: int, output_path) -> None:
    """Refuse, before any trial, a run whose membership masks alone cannot fit in memory.

    The masks are ``(n_trials, n_records)`` booleans (the outputs come on top of them); with
    ``output_path`` both live on disk and only the disk bounds them.
    """
    memory = storage.physical_memory()
    need = n_trials * n_records
    if output_path is None and memory is not None and need > memory // 2:
        raise ValueError(
            f"`n_trials` = {_count_text(n_trials)} with {n_records} records needs at least "
            f"{_gib(need)} GiB for the membership masks alone, more than half of this "
            f"machine's {memory / 2**30:.1f} GiB; use fewer trials, or {DISK_ADVICE}."
        )


class _NoBar(contextlib.nullcontext):
    """The progress bar when it is off: counts nothing (and does not import tqdm)."""

    def update(self, n: int = 1) -> None:
        """Nothing to show."""


def _progress_bar(n_trials: int, n_done: int, progress: bool):
    """A tqdm bar over the trials, or a :class:`_NoBar` when ``progress`` is off."""
    if not progress:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=n_trials, initial=n_done, unit="trial", desc="pac")


@refuses_removed(execution_hints())
def simulate(
    mechanism: Callable[..., Any],
    pool: Pool,
    *,
    n_trials: int,
    sampler: Sampler | Callable | str | None = None,
    rng: RNGLike = None,
    execution: ExecutionOptions | None = None,
    output_dtype: Any = None,
    mechanism_name: str | None = None,
) -> SimulationResult:
    """Run ``mechanism`` on ``n_trials`` random subsets of ``pool`` and collect its outputs.

    Parameters
    ----------
    mechanism : callable
        ``f(subset) -> array-like of shape (d,)`` (a scalar counts as ``d = 1``). If its
        signature has an ``rng`` parameter, it receives the trial's
        ``numpy.random.Generator`` (mechanism stream); all its randomness must come from
        ``rng`` (see "Reproducibility contract" in the module docstring). Must be picklable
        for process backends (module-level functions are).
    pool : numpy.ndarray of shape (n_records, ...) or tuple of such arrays
        The data pool; a tuple (e.g. ``(X, y)``) holds aligned arrays sharing the first
        axis. The subset is ``pool[mask]`` (or ``tuple(a[mask] for a in pool)``); it may
        be empty. At least 2 records; float arrays must be finite (checked before any
        trial; object arrays, e.g. lists of texts, are passed through unchecked).
    n_trials : int
        Number of trials, >= 1.
    sampler : Sampler, callable, str or None, default None
        Data distribution (see :func:`pacpriv.pac.samplers.as_sampler`); None = Poisson-½.
    rng : None, int, SeedSequence or Generator, default None
        Root seed; None = fresh OS entropy, or, when resuming a checkpoint, its stored seed.
    execution : ExecutionOptions, optional
        How the trials run (:class:`~pacpriv.pac.engine.ExecutionOptions`: workers, backend,
        progress bar, checkpoint, retries, per-trial timeout, batch size, disk-backed
        outputs); never changes the results. Default: ``ExecutionOptions()`` (one worker
        unless a ``joblib.parallel_config`` is active, a progress bar). Details:

        n_jobs : int or None, default None
            joblib's meaning: None = 1 unless set by ``joblib.parallel_config``; -1 = all cores;
            0 is a ValueError. On a local backend never more workers than the usable CPUs
            and (worker processes) the available memory allow: a larger request is capped
            with a :class:`~pacpriv.exceptions.WorkerCapWarning` naming the cap. Worker
            processes exit when this process dies (also by ``SIGKILL``), is interrupted or
            raises; what a mechanism prints goes to standard error on every backend.
        backend : str or None, default None
            joblib backend ("loky", "threading", "dask", "ray", ...); None = joblib's default
            or the active ``parallel_config``. "dask" needs a ``distributed.Client``; "ray" uses
            the running Ray runtime (``ray.init()``, or ``ray.init(address="ray://head:10001")`` /
            the ``RAY_ADDRESS`` variable for an existing cluster) and, with ``n_jobs=None``, all
            of its CPUs.
        progress : bool, default True
            Show a tqdm progress bar over trials.
        checkpoint : path or None, default None
            Directory where finished trials are saved as they complete (see
            :mod:`~pacpriv.pac.engine._checkpoint`); rerunning with the same arguments resumes.
            It holds the un-noised outputs and subset masks of every trial, from which the
            records can be reconstructed: created with mode 0700 (files 0600); treat a
            checkpoint like the raw data; delete it after the run.
        retries : int, default 0
            Extra attempts for a failing trial, with the same seed; also extra rounds after a
            worker crash.
        timeout : float or None, default None
            Per-trial limit in seconds (per attempt). In the main thread of a POSIX process
            (``n_jobs=1``, loky and multiprocessing workers) the trial is interrupted by
            SIGALRM between Python bytecodes; on thread-based workers (threading, Dask) it
            cannot be interrupted and fails after returning if it ran longer.
        batch_size : int or "auto", default "auto"
            Trials per joblib task; never changes results.
        output_path : path or None, default None
            ``.npy`` file for disk-backed outputs (``numpy.lib.format.open_memmap``); masks go
            to ``<stem>.masks.npy`` beside it. Both are created with mode 0600: like a checkpoint
            they can reconstruct the records, so treat them like the raw data and delete them
            after use.
    output_dtype : floating dtype, optional
        Storage dtype of the outputs (float32 halves memory); default: the execution options'
        ``output_dtype`` (float64 unless set there). Below float64, outputs are
        stored relative to trial 0's float64 output (``result.reference``), so a large
        common offset does not round the variation away; checked finite after the cast.
    mechanism_name : str, optional
        Name shown in errors, warnings and the result (default: the callable's
        ``module.qualname``); for wrappers that run a user's function inside another callable.

    Returns
    -------
    SimulationResult

    Raises
    ------
    TypeError, ValueError
        For invalid arguments (the message names the argument).
    MechanismError
        If a trial raises (``SystemExit`` and a ``KeyboardInterrupt`` that no Ctrl-C caused
        included), returns a non-finite, complex, non-1-D or wrongly sized output, times out,
        or a worker dies; names the trial index and its seed, chained ``from`` the
        mechanism's exception. Finished trials stay in the checkpoint.
    KeyboardInterrupt
        On a real Ctrl-C (SIGINT); the workers are stopped.
    CheckpointError
        If ``checkpoint`` is corrupt or belongs to a different run: its fingerprint differs
        (mechanism code and state, sampler, pool, dtype, seed) or re-running recorded trials
        (the first and one chosen from the seed) does not reproduce them bit for bit.

    Warns
    -----
    NotReproducibleWarning
        If re-running one trial of this call from its seed gives a different output (the
        mechanism draws randomness outside ``rng``); ``result.reproducible`` is then False.

    Notes
    -----
    To run on an existing Dask cluster, connect a client and select joblib's Dask backend::

        from dask.distributed import Client
        from joblib import parallel_config
        client = Client("tcp://scheduler:8786")
        with parallel_config(backend="dask"):
            result = simulate(f, pool, n_trials=10_000, rng=0, checkpoint="ckpt/")

    Workers need pacpriv installed; the mechanism and sampler travel with cloudpickle
    (by reference for importable modules, by value for ``__main__``). Outputs are
    identical to a local run with the same seed, and a checkpoint written under one
    backend resumes under any other.

    References
    ----------
    .. [1] H. Xiao and S. Devadas, "PAC Privacy: Automatic Privacy Measurement and Control
       of Data Processing", CRYPTO 2023, Alg. 1.

    Examples
    --------
    >>> import numpy as np
    >>> from pacpriv.pac.engine._simulate import simulate
    >>> from pacpriv.pac.engine import ExecutionOptions
    >>> res = simulate(lambda s: s.mean(axis=0) if len(s) else np.zeros(2),
    ...                np.arange(20.0).reshape(10, 2), n_trials=4, rng=0,
    ...                execution=ExecutionOptions(progress=False))
    >>> res.outputs.shape, res.masks.shape
    ((4, 2), (4, 10))
    """
    tic = time.perf_counter()
    ex = resolve_execution(execution)
    n_jobs, backend, progress = ex.n_jobs, ex.backend, ex.progress
    checkpoint, retries, timeout = ex.checkpoint, ex.retries, ex.timeout
    batch_size, output_path = ex.batch_size, ex.output_path
    output_dtype = np.dtype(ex.output_dtype) if output_dtype is None else output_dtype
    default_name, pass_rng = check_mechanism(mechanism)
    if mechanism_name is not None and not isinstance(mechanism_name, str):
        raise TypeError(f"`mechanism_name` must be a str or None; got {mechanism_name!r}.")
    mechanism_name = mechanism_name or default_name
    pool, n_records = _check_pool(pool)
    if isinstance(mechanism, EstimatorMechanism):  # e.g. unlabelled data: before any trial
        mechanism.check_pool(pool)
    n_trials, retries, timeout, batch_size, dtype = _check_options(
        n_trials, retries, timeout, batch_size, output_dtype, progress)
    sampler = as_sampler(sampler)
    sampler.check_pool(n_records)  # degenerate samplers fail here, before any trial
    _check_memory(n_trials, n_records, checkpoint if ex.memory_map else output_path)
    # workers capped at the usable CPUs and memory (a WorkerCapWarning names the cap)
    n_jobs, planned_backend, planned_workers = plan_workers(
        n_jobs, backend, worker_memory=ex.worker_memory, stacklevel=3)
    warn_uninterruptible(timeout, planned_backend, planned_workers)
    task = TrialTask(  # its root seed is set once the checkpoint (if any) is open
        mechanism=mechanism, mechanism_name=mechanism_name, pool=pool, n_records=n_records,
        sampler=sampler, root=np.random.SeedSequence(0), pass_rng=pass_rng, retries=retries,
        timeout=timeout, output_dtype=dtype, reseed_global=planned_backend == "multiprocessing",
        parent_pid=os.getpid() if planned_backend in ("loky", "multiprocessing") else None,
        kernel_signal=threading.current_thread() is threading.main_thread(),
        block_size=block_size_of(mechanism, ex.ensemble), n_trials=n_trials)
    rng = None if rng is None else as_seed_sequence(rng)  # once: a Generator advances
    # another run's checkpoint is refused before any probe
    fingerprint = checked_fingerprint(checkpoint, mechanism, pool, sampler, dtype, rng)
    # time_limit: the probe's estimate, before anything is created or run (_limit.py)
    task, deadline = start_limit(task, time_limit=ex.time_limit, checkpoint=checkpoint,
                                 n_trials=n_trials, n_workers=planned_workers)
    store, ckpt, root, output_path = _open_store(ex, fingerprint, rng, n_trials=n_trials,
                                                 n_records=n_records, dtype=dtype)
    resumed = ckpt.load_into(store) if ckpt is not None else 0
    pending = store.missing_ranges()
    if pending:  # sampler errors (e.g. subset_size > n_records) surface here, in the caller
        sampler.trial_mask(n_records, root=root, index=pending[0][0])
    task = dataclasses.replace(task, root=root)
    if dtype != np.float64:
        task = _with_reference(task, store, ckpt)
    verified = [] if ckpt is None or not resumed else checked_within(
        deadline, task, lambda t: ckpt.verify(store, lambda i: rerun(t, store, i)),
        n_done=lambda: store.n_done, n_trials=n_trials, what="verifying the checkpoint")
    pending = store.missing_ranges()
    bar = _progress_bar(n_trials, store.n_done, progress)
    t_run = time.perf_counter()
    with bar:
        backend_name, n_workers = run_pending(
            task, store, ckpt, n_jobs=n_jobs, backend=backend, batch_size=batch_size,
            bar=bar, retries=retries, deadline=deadline)
    run_s, left = time.perf_counter() - t_run, (
        np.inf if deadline is None else deadline.end - time.monotonic())  # time_limit
    reproducible, note = rerun_within(deadline, task, lambda t: reproducibility(
        t, store, pending, verified, run_s=run_s, n_workers=n_workers, left_s=left),
        n_trials=n_trials)
    outputs, masks = store.finalize()
    return SimulationResult(
        outputs=outputs,
        masks=masks,
        root_seed=seed_to_dict(root),
        sampler=sampler.to_dict(),
        mechanism=mechanism_name,
        n_trials=n_trials,
        n_records=n_records,
        dim=int(outputs.shape[1]),
        membership_prior=sampler.membership_prior(n_records),
        elapsed_s=time.perf_counter() - tic,
        backend=backend_name,
        n_jobs=n_workers,
        resumed_trials=resumed,
        checkpoint=None if checkpoint is None else str(checkpoint),
        output_path=None if output_path is None else str(output_path),
        reference=task.reference,
        reproducible=reproducible,
        reproducibility_note=note,
    )


def _refuse_existing_output(output_path) -> None:
    """Never replace a file the user did not hand over: an existing ``output_path`` (or its
    masks file) is refused before any trial runs (data loss otherwise)."""
    if not isinstance(output_path, (str, os.PathLike)):
        return  # OutputStore names the type error
    refuse_link_loop(Path(output_path), "`output_path`")  # not "already exists"
    for path in (Path(output_path), masks_path_for(output_path)):
        if path.is_file() or path.is_symlink():  # a folder: OutputStore's own error names it
            raise FileExistsError(
                f"`output_path` {os.fspath(output_path)!r}: {path.name!r} already exists; "
                "choose a new path, delete it, or pass overwrite_output=True to replace it.")


def _open_store(ex: ExecutionOptions, fingerprint: dict | None, rng: RNGLike, *,
                n_trials: int, n_records: int, dtype) -> tuple:
    """``(store, checkpoint or None, root seed, output path)`` of a run: the checkpoint (if
    any) opened with the run's fingerprint and its stored seed, the outputs in memory, in
    ``output_path`` or memory-mapped in the checkpoint folder."""
    output_path = ex.output_path
    ckpt = None
    if ex.checkpoint is not None:
        ckpt = Checkpoint.open(
            ex.checkpoint,
            fingerprint=fingerprint or {},
            n_records=n_records,
            root=None if rng is None else as_seed_sequence(rng),
        )
        root = ckpt.root
    else:
        root = as_seed_sequence(rng)
    if output_path is not None and not (ex.overwrite_output or (ckpt and ckpt.resumed)):
        _refuse_existing_output(output_path)
    if ex.memory_map:  # the outputs as .npy memory maps in the (now existing) checkpoint folder
        assert ex.checkpoint is not None  # ExecutionOptions refuses memory_map without it
        output_path = os.path.join(os.fspath(ex.checkpoint), MAPPED_OUTPUTS)
    store = OutputStore(n_trials, n_records, dtype=dtype, output_path=output_path)
    return store, ckpt, root, output_path


def _with_reference(task: TrialTask, store: OutputStore, ckpt: Checkpoint | None) -> TrialTask:
    """Run trial 0 here in float64; store it and return the task storing relative outputs."""
    exact = dataclasses.replace(task, output_dtype=np.dtype(np.float64), reference=None)
    reference, mask = rerun(exact, store, 0)
    reference.setflags(write=False)
    if ckpt is not None:
        stored = ckpt.load_reference()
        if stored is None:
            ckpt.save_reference(reference)
        elif stored.shape != reference.shape or stored.tobytes() != reference.tobytes():
            raise CheckpointError(
                f"Checkpoint {str(ckpt.path)!r}: re-running trial 0 from its seed gave a "
                "different float64 output than the reference the checkpoint holds: the "
                "mechanism changed or is not reproducible from its seed (randomness outside "
                "its `rng` argument). Use another checkpoint directory or delete this one."
            )
    task = dataclasses.replace(task, reference=reference)
    if not store.done[0]:
        row = np.zeros((1, reference.shape[0]), dtype=task.output_dtype)
        store.put(0, row, mask[None, :])
        if ckpt is not None:
            ckpt.save(0, row, mask[None, :])
    return task
