"""The mechanism contract: the one place that says how pacpriv calls ``f``.

A mechanism is a callable ``f(subset) -> array of shape (d,)``, or ``f(subset, *, rng)`` when it
is randomized. Every caller -- the engine's trials, the release in
:func:`pacpriv.pac.job.run_pac`, :func:`pacpriv.pac_private`, the randomized path
(:func:`pacpriv.pac.coupling_noise`) and the checkpoint fingerprint -- uses the functions here,
so a mechanism is simulated and released from the same distribution, as PAC Privacy's
guarantee requires (Xiao & Devadas, CRYPTO 2023, Alg. 1 and Thm 3: the noise is calibrated on
the distribution of ``f(X)`` that the release draws from).

The rule for ``rng`` (:func:`accepts_rng`): ``f`` receives ``rng=`` (a
:class:`numpy.random.Generator`) when ``f(subset, rng=...)`` is a valid call, that is when it has
a parameter named ``rng`` that can be passed by keyword (positional-or-keyword or keyword-only),
or when it takes ``**kwargs``. A positional-only ``rng`` cannot be passed by keyword and is left
to its default.

A mechanism cannot break pacpriv itself (:mod:`pacpriv.pac.engine._isolation`): while it runs,
what it prints goes to standard error, and a ``SystemExit`` (``sys.exit(3)``) or a
``KeyboardInterrupt`` it raises itself becomes :class:`MechanismExit`, which every caller
reports as a :class:`~pacpriv.exceptions.MechanismError` naming the trial; a real Ctrl-C
(SIGINT) still interrupts the run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from pacpriv.pac.engine._isolation import (
    interrupt_marker,
    interrupted_since,
    output_to_stderr,
    swallowed_since,
)
from pacpriv.pac.samplers import callable_fingerprint, display_name

__all__ = [
    "InvalidOutput",
    "MechanismExit",
    "accepts_rng",
    "as_float64",
    "call_mechanism",
    "check_mechanism",
    "check_output",
    "mechanism_fingerprint",
    "subset_pool",
]

_BY_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


class InvalidOutput(ValueError):
    """The mechanism returned an output that fails the output check (:func:`check_output`)."""


class MechanismExit(Exception):
    """The mechanism raised ``SystemExit``, or a ``KeyboardInterrupt`` of its own (no SIGINT
    arrived while it ran). ``what`` says which, in words safe to print ("called
    sys.exit(3)"); the original exception is the ``__cause__``."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def _exit_words(err: SystemExit) -> str:
    code = err.code
    if code is None:
        return "called sys.exit() (exit status 0)"
    if isinstance(code, int) and not isinstance(code, bool):
        return f"called sys.exit({code})"
    # a message passed to sys.exit may quote records: not repeated
    return "called sys.exit() with a message (withheld: it may quote record values)"


def accepts_rng(func: Callable[..., Any]) -> bool:
    """Whether ``func`` is called with ``rng=`` (the one rule; see the module docstring).

    Examples
    --------
    >>> accepts_rng(lambda subset, *, rng=None: 0), accepts_rng(lambda subset, **kw: 0)
    (True, True)
    >>> def positional_only(subset, rng=None, /): ...
    >>> accepts_rng(positional_only), accepts_rng(lambda subset: 0)
    (False, False)
    """
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):  # some builtins have no signature
        return False
    rng = params.get("rng")
    if rng is not None and rng.kind in _BY_KEYWORD:
        return True
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def check_mechanism(mechanism: Any) -> tuple[str, bool]:
    """Return ``(name, accepts_rng)`` of a mechanism, or raise ``TypeError`` if not callable."""
    if not callable(mechanism):
        raise TypeError(
            f"`mechanism` must be callable f(subset) -> (d,); got {type(mechanism).__name__}."
        )
    return display_name(mechanism), accepts_rng(mechanism)


def mechanism_fingerprint(mechanism: Callable[..., Any]) -> dict:
    """Name, source hash and the ``rng`` rule's answer (checkpoints resume only the same call)."""
    return {**callable_fingerprint(mechanism), "accepts_rng": accepts_rng(mechanism)}


def subset_pool(pool: Any, mask: np.ndarray) -> Any:
    """The records of ``pool`` selected by the boolean ``mask`` of shape ``(n_records,)``.

    ``pool`` is an array with records on the first axis, or a tuple of such arrays (e.g.
    ``(X, y)``); a tuple gives a tuple of the same length.
    """
    if isinstance(pool, tuple):
        return tuple(np.asarray(a)[mask] for a in pool)
    return np.asarray(pool)[mask]


def call_mechanism(
    mechanism: Callable[..., Any],
    subset: Any,
    *,
    rng: np.random.Generator | np.random.SeedSequence | int | None,
    takes_rng: bool | None = None,
) -> Any:
    """Call ``mechanism(subset)`` or ``mechanism(subset, rng=Generator)`` by :func:`accepts_rng`.

    ``rng`` is a Generator (passed as is) or a seed for :func:`numpy.random.default_rng`;
    ``takes_rng`` is :func:`accepts_rng`'s answer when the caller has it already. While ``f``
    runs its standard output goes to standard error; ``SystemExit`` and a ``KeyboardInterrupt``
    that no SIGINT caused become :class:`MechanismExit` (see the module docstring). A SIGINT
    that ``f`` caught and returned from (its result cut short) raises ``KeyboardInterrupt``
    after it: the result is discarded.
    """
    if takes_rng is None:
        takes_rng = accepts_rng(mechanism)
    kwargs = {}
    if takes_rng:
        kwargs["rng"] = rng if isinstance(rng, np.random.Generator) else \
            np.random.default_rng(rng)
    with output_to_stderr(), interrupt_marker() as marker:
        try:
            out = mechanism(subset, **kwargs)
        except SystemExit as err:
            raise MechanismExit(_exit_words(err)) from err
        except KeyboardInterrupt as err:
            if interrupted_since(marker):
                raise  # a real Ctrl-C: the run stops
            raise MechanismExit("raised KeyboardInterrupt itself (no interrupt signal "
                                "arrived: not a Ctrl-C)") from err
        if swallowed_since(marker):
            # a Ctrl-C the call caught and returned from (e.g. scikit-learn's MLP: "Training
            # interrupted by user."): its output is cut short, so it is discarded and the run
            # stops as on any Ctrl-C, finished trials kept (twelfth new-user pass, Z1/Z2)
            raise KeyboardInterrupt
    return out


#: Non-zero output values must lie in [2^-400, 2^400] in magnitude: then every non-zero
#: difference of two outputs is at least 2^-452 and every square, variance or sum of squares
#: over up to 2^30 trials stays in float64's normal range. Outside it a varying output could
#: get a variance of exactly 0 (underflow), i.e. no noise.
MIN_OUTPUT_MAGNITUDE = 2.0**-400
MAX_OUTPUT_MAGNITUDE = 2.0**400


def outside_output_range(arr: np.ndarray, low: float = MIN_OUTPUT_MAGNITUDE) -> np.ndarray:
    """Mask of the finite non-zero values below ``low`` or above
    :data:`MAX_OUTPUT_MAGNITUDE` in magnitude (NaN and inf are not flagged here)."""
    mag = np.abs(np.asarray(arr, dtype=np.float64))
    with np.errstate(invalid="ignore"):
        return np.isfinite(mag) & (((mag > 0) & (mag < low)) | (mag > MAX_OUTPUT_MAGNITUDE))


#: Values per chunk of the fast output check (its temporaries stay small and are reused, so a
#: model-sized output costs no fresh full-size arrays: page faults cost more than the check).
_CHECK_CHUNK = 2**16


#: Sign-clearing mask of a float64's bits: for non-negative doubles the order of the bit
#: patterns (as unsigned integers) is the order of the values, with inf and NaN above all.
_ABS_BITS = np.uint64(0x7FFF_FFFF_FFFF_FFFF)
_MAX_BITS = np.float64(MAX_OUTPUT_MAGNITUDE).view(np.uint64)


def _in_range(arr: np.ndarray, low: float) -> bool:
    """Whether every value of the float64 ``arr`` is finite, at most
    :data:`MAX_OUTPUT_MAGNITUDE` in magnitude, and zero or at least ``low`` (a positive normal
    number); False also when a NaN is present.

    Chunk by chunk on the bit patterns, in one reused buffer: ``|x|`` is ``bits & 0x7FF…F``,
    whose unsigned order is that of the magnitudes (NaN and inf above every finite value), so
    ``max <= bits(MAX)`` is the upper check; ``bits − 1`` wraps an exact zero to ``2⁶⁴ − 1``,
    so ``min(bits − 1) >= bits(low) − 1`` says that no value lies in ``(0, low)``.
    """
    flat = arr.reshape(-1)
    bits = flat.view(np.uint64)
    low_bits = np.float64(low).view(np.uint64) - np.uint64(1)
    buf = np.empty(min(_CHECK_CHUNK, flat.size), dtype=np.uint64)
    for start in range(0, flat.size, _CHECK_CHUNK):
        part = bits[start : start + _CHECK_CHUNK]
        mag = buf[: part.size]
        np.bitwise_and(part, _ABS_BITS, out=mag)
        if mag.max() > _MAX_BITS:  # above the maximum, inf or NaN
            return False
        np.subtract(mag, np.uint64(1), out=mag)  # exact zeros wrap to the top
        if mag.min() < low_bits:  # a non-zero magnitude below `low`
            return False
    return True


def _check_magnitude(arr: np.ndarray, dtype) -> bool:
    """Raise ``InvalidOutput`` for non-zero values outside the representable range; return
    whether every value was seen finite on the way (the fast path: largest magnitude within
    range, and nothing below ``low`` but exact zeros)."""
    low = float(np.finfo(np.float32).tiny) if dtype == np.float32 else MIN_OUTPUT_MAGNITUDE
    if _in_range(arr, low):
        return True
    mag = np.abs(arr)
    # (NaN and inf are reported by the finiteness check)
    bad = np.flatnonzero(outside_output_range(arr, low))
    if bad.size:
        j = int(bad[0])
        side = ("a magnitude above" if mag[j] > MAX_OUTPUT_MAGNITUDE
                else "a non-zero magnitude below")
        limit = MAX_OUTPUT_MAGNITUDE if mag[j] > MAX_OUTPUT_MAGNITUDE else low
        where = (" (it is stored as float32 differences from trial 0: use "
                 "`output_dtype`='float64', or rescale)" if dtype == np.float32 else "")
        # (the value itself is not printed: it is a statistic of the subset)
        raise InvalidOutput(
            f"output coordinate {j} has {side} {limit:.3g}{where}: its variance would under- "
            f"or overflow float64 and the noise could be computed as 0. Rescale the "
            f"mechanism's output by a fixed factor (this does not change its privacy) and "
            f"scale the release back.")
    return False


def as_float64(arr: Any) -> np.ndarray:
    """``arr`` as a float64 array, or ``InvalidOutput`` naming pacpriv's own conversion.

    The cast is pacpriv's, not the mechanism's, so any failure of it (an object array holding
    a 401-digit int overflows, a string does not parse, an object's ``__float__`` raises) is
    reported as an output "not castable to float64", never as the mechanism raising.
    """
    try:
        return np.asarray(arr).astype(np.float64, copy=False)
    except OverflowError as err:
        raise InvalidOutput(f"output of dtype {np.asarray(arr).dtype} is not castable to "
                            "float64 (a value beyond float64's range, about 1.8e308)") from err
    except Exception as err:  # arbitrary objects' __float__: the message is not repeated
        raise InvalidOutput(f"output of dtype {np.asarray(arr).dtype} is not castable to "
                            f"float64 ({type(err).__name__})") from err


def check_output(value: Any, dim: int | None, dtype=np.float64) -> np.ndarray:
    """Return ``value`` as a finite ``dtype`` vector of shape ``(d,)`` or raise ``InvalidOutput``.

    The value must be castable to float64 (complex is rejected); it is then cast to
    ``dtype`` and checked for finiteness (so float32 overflow is caught). A 0-d scalar
    becomes shape ``(1,)``; ``dim`` (if known) is the length every trial must share.
    Non-zero values must lie within [:data:`MIN_OUTPUT_MAGNITUDE`,
    :data:`MAX_OUTPUT_MAGNITUDE`] in magnitude (float32 storage: at least float32's smallest
    normal number), so that no varying output gets a zero variance.
    """
    if value is None:
        raise InvalidOutput("it returned None, expected a 1-D array of floats (a missing "
                            "`return`?)")
    try:
        arr = np.asarray(value)
    except Exception as err:  # arbitrary user objects
        # (its message is the mechanism's object's own, which may quote values: not repeated)
        raise InvalidOutput("output could not be converted to an array "
                            f"({type(err).__name__})") from err
    if arr.dtype.kind == "c":
        raise InvalidOutput(f"output must be real; got complex dtype {arr.dtype}")
    arr = as_float64(arr)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidOutput(f"output must be a non-empty 1-D vector (d,); got shape {arr.shape}")
    if dim is not None and arr.shape[0] != dim:
        raise InvalidOutput(f"output has shape {arr.shape} but earlier trials returned ({dim},)")
    finite = _check_magnitude(arr, dtype)  # float64 values checked finite on its fast path
    if dtype != np.float64:
        with np.errstate(over="ignore"):  # overflow becomes inf, caught just below
            arr = arr.astype(dtype)
        finite = False
    if not finite and not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(arr))[:5].tolist()
        raise InvalidOutput(f"output is not finite (NaN or inf at positions {bad})")
    return arr
