"""How trials run, as one frozen object: :class:`ExecutionOptions`.

The execution arguments (``n_jobs``, ``backend``, ``progress``, ``checkpoint``, ``retries``,
``timeout``, ``batch_size``, ``output_path``) change how the Monte-Carlo trials of Xiao &
Devadas (CRYPTO 2023, Algorithm 1) are run, never their results: the trials are bit-identical for
any of them. :func:`pacpriv.pac.engine.simulate`, :func:`pacpriv.pac.job.run_pac` and
:meth:`pacpriv.pac.wrapper.PacPrivateFunction.calibrate`, :func:`pacpriv.pac.noise.coupling_noise`,
:func:`pacpriv.pac.noise.compare_randomized_noise`, the per-record functions
(:func:`pacpriv.pac.per_record.simulate_differences`,
:func:`pacpriv.pac.per_record.record_exposure`,
:func:`pacpriv.pac.per_record.calibrate_per_record`) and
:func:`pacpriv.compare.compare_pac_dpsgd` accept them as ``options=``.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any, Literal

from pacpriv._validation import check_int, check_n_jobs, check_real

__all__ = ["ExecutionOptions", "merge_execution"]


@dataclass(frozen=True)
class ExecutionOptions:
    """Execution options of the engine (validated on construction).

    Parameters
    ----------
    n_jobs : int or None, default None
        Parallel workers (joblib convention: ``-1`` all cores, ``None`` one).
    backend : str or None, default None
        joblib backend (``"loky"``, ``"threading"``, ``"dask"``, ``"ray"``); None: joblib's.
    progress : bool, default True
        Show a tqdm progress bar.
    checkpoint : str or path-like or None, default None
        Folder of a resumable checkpoint (mode 0700, files 0600). It holds the un-noised
        trial outputs and subset masks: treat a checkpoint like the raw data; delete it after
        the run.
    retries : int, default 0
        Extra attempts per failing trial (same seed), ``>= 0``.
    timeout : float or None, default None
        Seconds one trial may take (``> 0``).
    batch_size : int or "auto", default "auto"
        Trials per task (``>= 1``).
    output_path : str or path-like or None, default None
        ``.npy`` file for disk-backed outputs.

    Raises
    ------
    TypeError, ValueError
        On an argument outside its range (named in the message).

    Examples
    --------
    >>> opts = ExecutionOptions(n_jobs=2, progress=False)
    >>> opts.n_jobs, opts.retries
    (2, 0)
    """

    n_jobs: int | None = None
    backend: str | None = None
    progress: bool = True
    checkpoint: str | os.PathLike | None = None
    retries: int = 0
    timeout: float | None = None
    batch_size: int | Literal["auto"] = "auto"
    output_path: str | os.PathLike | None = None

    def __post_init__(self) -> None:
        check_n_jobs(self.n_jobs)
        if self.backend is not None and not isinstance(self.backend, str):
            raise TypeError(f"`backend` must be a str or None; got {type(self.backend).__name__}.")
        if not isinstance(self.progress, bool):
            raise TypeError(f"`progress` must be a bool; got {type(self.progress).__name__}.")
        check_int(self.retries, "retries", low=0)
        if self.timeout is not None:
            check_real(self.timeout, "timeout", low=0.0, low_inclusive=False)
        if self.batch_size != "auto":
            check_int(self.batch_size, "batch_size", low=1)

    def to_dict(self) -> dict:
        """The options as keyword arguments of :func:`pacpriv.pac.engine.simulate`."""
        return asdict(self)


def merge_execution(options: ExecutionOptions | None, defaults: dict, **given: Any) -> dict:
    """The execution arguments a function runs with: ``options`` or the individual ones.

    ``given`` are the caller's individual execution arguments and ``defaults`` their default
    values in the caller's signature. Without ``options`` the result is ``given``; with it, the
    result is ``options.to_dict()`` and any individual argument changed from its default is a
    ``TypeError`` (one source of truth per call), and so is a name not in ``defaults``.
    """
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise TypeError(
            f"unexpected execution argument(s) {', '.join(unknown)}; the execution arguments "
            f"are {', '.join(defaults)}."
        )
    if options is None:
        return dict(given)
    if not isinstance(options, ExecutionOptions):
        raise TypeError(
            f"`options` must be an ExecutionOptions or None; got {type(options).__name__}."
        )
    clash = sorted(k for k, v in given.items() if v != defaults[k])
    if clash:
        raise TypeError(
            f"pass the execution arguments either in `options` or individually, not both; "
            f"got options and {', '.join(clash)}."
        )
    return options.to_dict()
