"""Exceptions and warnings raised by pacpriv.

Every class subclasses a built-in, so ``except RuntimeError`` or ``except ValueError``
keeps working for callers who do not know pacpriv's hierarchy (the scikit-learn
``sklearn/exceptions.py`` convention).
"""

from __future__ import annotations

import os
import sys

__all__ = [
    "BudgetExceededError",
    "CalibrationError",
    "CheckpointError",
    "ClippingWarning",
    "ConstantOutputWarning",
    "DegenerateOutputWarning",
    "MechanismError",
    "NotReproducibleWarning",
    "PacprivWarning",
    "SparseBatchWarning",
    "StallWarning",
    "TimeLimitError",
    "UndersampledWarning",
    "UninterruptibleWarning",
    "UserCodeError",
    "VacuousBoundWarning",
    "WorkerCapWarning",
    "warn_user",
]


#: Said in place of a mechanism's own exception message, which may quote record values.
WITHHELD_NOTE = (
    "The exception's message is withheld because it may quote record values; the original "
    "exception is chained as __cause__ (the CLI prints it with --show-errors or "
    "PACPRIV_SHOW_ERRORS=1)."
)


class MechanismError(RuntimeError):
    """A mechanism raised, returned a non-finite value or changed its output shape.

    The message names the mechanism, the exception type, the trial and its seed, but never
    the mechanism's own exception message, which may quote record values (a record may not
    reach a log); that message stays on the chained ``__cause__``.

    Parameters
    ----------
    message : str
        Human-readable description (already names the trial and its seed).
    trial_index : int
        Index of the failing trial in ``range(n_trials)``; ``-1`` for the release run on the
        secret subset (``seed`` is then ``{}``: the release's randomness is secret).
    seed : dict
        ``{"entropy": int, "spawn_key": list[int]}`` of the trial's
        :class:`numpy.random.SeedSequence`; ``numpy.random.SeedSequence(**seed)``
        rebuilds it so the failure can be replayed.

    The original exception, if any, is chained as ``__cause__``.
    """

    def __init__(self, message: str, *, trial_index: int, seed: dict) -> None:
        super().__init__(message)
        self.trial_index = trial_index
        self.seed = seed

    def __reduce__(self):  # keep attributes across process boundaries (loky, dask)
        return (_rebuild_mechanism_error, (self.args[0], self.trial_index, self.seed))


def _rebuild_mechanism_error(message: str, trial_index: int, seed: dict) -> MechanismError:
    return MechanismError(message, trial_index=trial_index, seed=seed)


class UserCodeError(RuntimeError):
    """Loading user code named by a ``module:attr`` spec raised (or called ``sys.exit``).

    The message names the spec and the exception type, never the exception's own message
    (module-level code may quote record values); that stays on the chained ``__cause__``.
    """


class CalibrationError(RuntimeError):
    """A root search or calibration could not reach a certified answer."""


class CheckpointError(ValueError):
    """A checkpoint is corrupt or belongs to a different run (mechanism, sampler, seed...)."""


class BudgetExceededError(RuntimeError):
    """A release would take the cumulative mutual-information budget over its cap."""


class TimeLimitError(TimeoutError):
    """A run's ``time_limit`` (:class:`~pacpriv.pac.engine.ExecutionOptions`): refused before
    any trial because the timed probe's estimate exceeds it (nothing was run or charged), or
    stopped at the limit (finished trials kept in the checkpoint, if any; nothing released).

    Attributes
    ----------
    estimate_s : float or None
        The probe's estimate of the run, seconds (None when the run was stopped at the limit).
    n_done : int or None
        Trials finished when the run was stopped (None when it was refused before any trial).
    """

    def __init__(self, message: str, *, estimate_s: float | None = None,
                 n_done: int | None = None) -> None:
        super().__init__(message)
        self.estimate_s, self.n_done = estimate_s, n_done

    def __reduce__(self):
        return (_time_limit_error, (str(self), self.estimate_s, self.n_done))


def _time_limit_error(message: str, estimate_s, n_done) -> TimeLimitError:
    return TimeLimitError(message, estimate_s=estimate_s, n_done=n_done)


class PacprivWarning(UserWarning):
    """Base class of pacpriv's warnings."""


class DegenerateOutputWarning(PacprivWarning, RuntimeWarning):
    """Simulated outputs are (numerically) degenerate, e.g. tiny negative eigenvalues clipped."""


class ConstantOutputWarning(DegenerateOutputWarning):
    """The mechanism's output did not vary across trials (a rarer change was not tested)."""


class VacuousBoundWarning(PacprivWarning):
    """A privacy bound is vacuous (e.g. a membership-inference accuracy bound of 1)."""


class UndersampledWarning(PacprivWarning):
    """Too few trials to explore every output direction.

    With ``n_trials - 1 < d`` the sample covariance has rank below ``d``. Directions outside the
    span of the simulated outputs are charged the whole trace when the sample filled all
    ``n_trials - 1`` directions (costly), else only the numerical resolution, and then the MI
    bound holds only if the true output distribution has no variance there. Use more trials
    than output dimensions, or ``rule="isotropic"`` or ``Algorithm1(...)``.
    """


class NotReproducibleWarning(PacprivWarning):
    """Re-running a trial from its seed gave a different output: the run is not reproducible.

    The usual cause is randomness drawn outside the mechanism's ``rng`` argument (the global
    ``numpy.random`` or ``random`` state, an unseeded library, the clock); the simulation result
    and the report then say "not reproducible". Draw all randomness from ``rng``.
    """


class WorkerCapWarning(PacprivWarning):
    """More workers were asked for than this machine can run; the run uses fewer.

    The message names the cap and its reason (the usable CPUs, or the memory available for
    worker processes); the results are the same for any number of workers.
    """


class ClippingWarning(PacprivWarning):
    """Declared public ranges (feature ranges, a mechanism's clipping bounds or bin edges) move
    most of the pool: every value of a column, or more than half of the values, lies outside
    them. The release stays sound (the ranges are public) but carries little information.

    The message names the column(s) or the ranges only, never a count or a value; it goes to
    the screen (``warnings``), never into a report; the command line lists it with the
    run's other warnings, once (the first message, with a count of the others).
    """

    #: The command line prints the first warning of this kind and counts the others.
    one_kind = True


class SparseBatchWarning(PacprivWarning):
    """DP-SGD with more steps per epoch than record uses: the expected batch ``k·n/t`` is below
    one record, so most steps hold no record and apply pure noise. The privacy bound still
    holds (it depends on σ, t, E and k only); the training carries little signal. The message
    names the settings and the public record count, never a record."""


class UninterruptibleWarning(PacprivWarning):
    """A per-trial ``timeout`` cannot interrupt trials on the chosen workers (threads:
    threading, Dask); said before the trials (the command line prints it at once)."""

    #: The command line prints a warning of this kind when it is issued (only then).
    live = True


class StallWarning(PacprivWarning):
    """No trial has finished for a while (60 s, then at each doubling of the wait): a trial may
    hang. Issued from the engine's watchdog thread while the run goes on; the command line
    prints it at once, and not again in its closing list of warnings."""

    #: The command line prints a warning of this kind when it is issued (only then).
    live = True


#: A stall line's advice in the API's terms (the engine's watchdog): the command line words it
#: with the running command's own limit flag, or advises Ctrl-C alone where it has none.
TIMEOUT_ADVICE = "pass timeout= (seconds) to bound each trial"
#: The same for the timed probe before a per-record run (``time_limit=``).
PROBE_TIME_ADVICE = "pass time_limit= (seconds) to bound it"
#: The way out of a run whose membership masks exceed memory, in the API's terms.
DISK_ADVICE = "a disk-backed run (output_path=..., or memory_map=True with a checkpoint)"
#: Rounding the stored outputs to float32 (half the memory), in the API's terms.
DTYPE_ADVICE = "output_dtype='float32'"

#: How text for the user is worded where it is printed outside ``warnings`` (a thread's
#: fallback under an "error" warning filter): identity in the API; the command line installs
#: its own, which names the running command's flags (:func:`set_user_wording`).
_WORDING: list = []


def set_user_wording(wording) -> None:
    """Install ``wording`` (``str -> str``, or ``None`` for the API's own terms) for
    :func:`in_user_terms`; the command line calls it with the running command's flags."""
    _WORDING[:] = [] if wording is None else [wording]


def in_user_terms(text: str) -> str:
    """``text`` worded for whoever runs pacpriv: API keywords in the API, the running
    command's flags on the command line (issue 35, fix9a item 2)."""
    return _WORDING[0](text) if _WORDING else text


def warn_user(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the first caller outside pacpriv (the user's line), as
    pandas' ``find_stack_level`` does, however many pacpriv frames lie in between."""
    import inspect
    import os
    import warnings

    root = os.path.dirname(os.path.abspath(__file__)) + os.sep
    level, frame = 1, inspect.currentframe()
    try:
        while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(root):
            frame = frame.f_back
            level += 1
    finally:
        del frame
    warnings.warn(message, category, stacklevel=level)


def _interrupted_while_starting(kind, value, tb, _previous=sys.excepthook) -> None:
    """``sys.excepthook`` of the command line while it starts: Ctrl-C as the modules load
    prints one line, not a traceback of the import (issue 35, item 5)."""
    if issubclass(kind, KeyboardInterrupt):
        print("pacpriv: interrupted (while starting; nothing was run)", file=sys.stderr)
        sys.stderr.flush()
        os._exit(130)  # the status of every other interruption (not death by SIGINT)
    _previous(kind, value, tb)


# ``pacpriv`` (console script) or ``python -m pacpriv`` (argv[0] is "-m" while the package is
# located): this module is among the first that ``import pacpriv`` loads
if sys.argv[:1] == ["-m"] or os.path.basename(sys.argv[0] if sys.argv else "") in (
        "pacpriv", "pacpriv.exe"):
    sys.excepthook = _interrupted_while_starting
