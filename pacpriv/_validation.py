"""Input validation at the public boundary.

Messages name the argument, the allowed range (with open/closed brackets) and the value
received, following ``sklearn.utils.validation.check_scalar``. ``TypeError`` for the wrong
kind, ``ValueError`` for the wrong value.

Arrays are never echoed: an array may hold records, scores or statistics of them, and an error
message reaches logs and terminals. For an array the message says how many entries are invalid
and where (:func:`describe_invalid`: the count and the first few indices), never a value; only
a scalar argument (a setting such as ``mi_budget=0``) is shown as received.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["check_array_real", "check_class_labels", "check_finite_array", "check_int",
           "check_n_jobs", "check_real", "class_labels_message", "describe_invalid"]

#: Indices of invalid entries listed in a message (the count is always given).
SHOWN_POSITIONS = 5


def describe_invalid(bad: np.ndarray) -> str:
    """``"3 of 10 entries (at index 0, 4, 7)"`` for the boolean mask ``bad``: the count and the
    first :data:`SHOWN_POSITIONS` positions (flat index for 1-D, index tuples otherwise), never
    a value.

    Examples
    --------
    >>> describe_invalid(np.array([False, True, True]))
    '2 of 3 entries (at index 1, 2)'
    >>> describe_invalid(np.array([[True, False], [False, False]]))
    '1 of 4 entries (at index (0, 0))'
    """
    bad = np.asarray(bad, dtype=bool)
    n_bad = int(np.count_nonzero(bad))
    where = np.argwhere(bad)[:SHOWN_POSITIONS]
    shown = [str(int(w[0])) if bad.ndim == 1 else str(tuple(int(i) for i in w)) for w in where]
    more = ", ..." if n_bad > SHOWN_POSITIONS else ""
    noun = "entry" if bad.size == 1 else "entries"
    return f"{n_bad} of {bad.size} {noun} (at index {', '.join(shown)}{more})"


def _got(value, arr: np.ndarray, bad: np.ndarray) -> str:
    """What was received: a scalar argument as is, an array only by count and position."""
    if arr.ndim == 0 and not isinstance(value, np.ndarray):
        return _show(arr.item())
    return f"{describe_invalid(bad)} (values not shown)"


def _show(value) -> str:
    """``repr`` of a value with numpy scalars shown as plain Python numbers."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value)


def _interval(low, high, low_inclusive, high_inclusive) -> str:
    lo = "-inf" if low is None else repr(low)
    hi = "inf" if high is None else repr(high)
    left = "[" if (low is not None and low_inclusive) else "("
    right = "]" if (high is not None and high_inclusive) else ")"
    return f"{left}{lo}, {hi}{right}"


_FLOAT_MAX = float(np.finfo(np.float64).max)


def _int_to_float(value: int, name: str) -> float:
    """``float(value)`` for a Python int; one beyond the float64 range (``10**400``) is a
    ``ValueError`` naming the argument (not Python's bare ``OverflowError``)."""
    try:
        return float(value)
    except OverflowError:
        digits = len(str(abs(int(value))))
        raise ValueError(
            f"`{name}` must be at most {_FLOAT_MAX:.4g} in magnitude (a float64); got an "
            f"integer of {digits} digits.") from None


def check_real(
    value,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    allow_inf: bool = False,
) -> float:
    """Validate a real scalar and return it as ``float``.

    Raises
    ------
    TypeError
        If ``value`` is not a real number (``bool`` is rejected).
    ValueError
        If ``value`` is NaN, infinite (unless ``allow_inf``) or outside the interval.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number; got {type(value).__name__} {value!r}.")
    v = _int_to_float(int(value), name) if isinstance(value, numbers.Integral) else float(value)
    interval = _interval(low, high, low_inclusive, high_inclusive)
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise ValueError(f"`{name}` must be a finite number in {interval}; got {_show(value)}.")
    bad = (low is not None and (v < low or (v == low and not low_inclusive))) or (
        high is not None and (v > high or (v == high and not high_inclusive))
    )
    if bad:
        raise ValueError(f"`{name}` must be in {interval}; got {_show(value)}.")
    return v


def integer_digits(value: int) -> str:
    """The number of decimal digits of ``|value|`` as text, for integers of any size (Python's
    ``str`` refuses integers past 4,300 digits: beyond that, ``"more than 4,000"``)."""
    v = abs(int(value))
    return str(len(str(v))) if v.bit_length() <= 13_000 else "more than 4,000"


def check_int(value, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """Validate an integer scalar (numpy integers accepted, ``bool`` and floats rejected).

    Raises
    ------
    TypeError
        If ``value`` is not an integer.
    ValueError
        If ``value`` is outside ``[low, high]``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an integer; got {type(value).__name__} {value!r}.")
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        got = str(v) if abs(v) < 10**30 else f"an integer of {integer_digits(v)} digits"
        raise ValueError(
            f"`{name}` must be an integer in {_interval(low, high, True, True)}; got {got}."
        )
    return v


def check_array_real(
    value, name: str, *, low: float | None = None, high: float | None = None,
    low_inclusive: bool = True, high_inclusive: bool = True, integer: bool = False,
) -> np.ndarray:
    """Validate a real scalar or array elementwise and return it as a float64 array.

    With ``integer=True`` every element must also be integer-valued (``3`` or ``3.0``, not
    ``3.5``); the result is still float64.

    Raises
    ------
    TypeError
        If ``value`` is not numeric (or not integer-valued when ``integer``).
    ValueError
        If any element is NaN/inf or outside the interval. For an array the message gives the
        count and positions of the invalid entries, never a value (:func:`describe_invalid`).
    """
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
        value = _int_to_float(value, name)  # beyond int64 (numpy would make it an object)
    arr = np.asarray(value)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        kind = "a bool" if arr.dtype == bool else f"dtype {arr.dtype}"
        raise TypeError(f"`{name}` must be numeric; got {kind}"
                        + (f" of shape {arr.shape}." if arr.ndim else "."))
    if arr.dtype.kind == "c":
        raise TypeError(f"`{name}` must be real; got complex dtype {arr.dtype}.")
    arr = arr.astype(np.float64)
    interval = _interval(low, high, low_inclusive, high_inclusive)
    finite = np.isfinite(arr)
    if integer and not np.all(finite & (arr == np.round(arr))):
        bad = ~(finite & (arr == np.round(arr)))
        raise TypeError(f"`{name}` must be integer-valued; got {_got(value, arr, bad)}.")
    if not np.all(finite):
        raise ValueError(f"`{name}` must be finite and in {interval}; got NaN or infinity in "
                         f"{_got(value, arr, ~finite)}." if arr.ndim else
                         f"`{name}` must be finite and in {interval}; got {_show(arr.item())}.")
    bad = np.zeros(arr.shape, dtype=bool)
    if low is not None:
        bad |= (arr < low) | ((arr == low) & (not low_inclusive))
    if high is not None:
        bad |= (arr > high) | ((arr == high) & (not high_inclusive))
    if np.any(bad):
        raise ValueError(f"`{name}` must be in {interval}; got {_got(value, arr, bad)}.")
    return arr


def check_n_jobs(value, name: str = "n_jobs") -> int | None:
    """Validate a joblib worker count: ``None`` or a nonzero integer (``-1``: all cores).

    Raises
    ------
    TypeError
        If ``value`` is neither None nor an integer (``bool`` and floats rejected).
    ValueError
        If ``value`` is 0.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"`{name}` must be None or a nonzero integer; got {type(value).__name__} {value!r}."
        )
    if int(value) == 0:
        raise ValueError(
            f"`{name}` must be a positive number of workers or negative (-1: all cores); got 0."
        )
    return int(value)


def check_finite_array(arr: np.ndarray, name: str, *, block_rows: int = 65_536) -> None:
    """Require every element of a numeric array to be finite (object/str arrays are skipped).

    Reads the first axis in blocks (a memory-mapped array is never loaded whole). The message
    names the argument, how many records (first-axis entries) hold a NaN or infinity and the
    first of them, never a value.

    Raises
    ------
    ValueError
        If a float or complex element is NaN or infinite.
    """
    if arr.dtype.kind not in "fc" or arr.size == 0:
        return  # integers and bools are always finite; other kinds are not numbers
    first, n_bad = None, 0
    for start in range(0, arr.shape[0], block_rows):
        block = np.asarray(arr[start:start + block_rows])
        finite = np.isfinite(block).reshape(block.shape[0], -1).all(axis=1)
        if not finite.all():
            bad = np.flatnonzero(~finite)
            first = start + int(bad[0]) if first is None else first
            n_bad += int(bad.size)
    if first is not None:
        which = (f"record {first} has" if n_bad == 1 else
                 f"{n_bad} of {arr.shape[0]} records have (the first is record {first})")
        raise ValueError(f"`{name}` must hold finite numbers; {which} a NaN or infinite "
                         "value (values not shown).")


def keyword_fields(given: dict, allowed: tuple[str, ...], *, where: str, owner: str) -> dict:
    """Check the ``**fields`` keywords of ``where`` against the field names of ``owner``.

    Functions that take a settings object (``spec=``, ``settings=``) also take its fields as
    keywords; this refuses any other keyword with Python's own wording, and names the closest
    valid field (a typo such as ``noise_multiplyer``).

    Raises
    ------
    TypeError
        If a keyword is not in ``allowed``.

    Examples
    --------
    >>> keyword_fields({"epochs": 3}, ("epochs", "k"), where="f", owner="Spec")
    {'epochs': 3}
    """
    import difflib

    unknown = sorted(set(given) - set(allowed))
    if unknown:
        hints = [f"{k!r} (did you mean {m[0]!r}?)" if (m := difflib.get_close_matches(
            k, allowed, n=1, cutoff=0.7)) else repr(k) for k in unknown]
        raise TypeError(f"{where}() got unexpected keyword argument(s) {', '.join(hints)}; "
                        f"besides its own, it takes the fields of {owner}: "
                        f"{', '.join(allowed)}.")
    return dict(given)


def check_same_records(x_shape: tuple, y_shape: tuple) -> None:
    """``X`` and ``y`` must share a leading record axis (shapes only: no value is shown).

    Raises
    ------
    ValueError
        If either is 0-d or their first dimensions differ.
    """
    if len(x_shape) == 0 or len(y_shape) == 0:
        raise ValueError(f"`X` and `y` must have a leading record axis; got shapes "
                         f"{tuple(x_shape)} and {tuple(y_shape)}.")
    if x_shape[0] != y_shape[0]:
        raise ValueError(f"`X` and `y` must have the same number of records; got "
                         f"{x_shape[0]} and {y_shape[0]}.")


def class_labels_message(where: str, purpose: str, n_classes: int | None, n_records: int) -> str:
    """The one refusal of a label column that is not class labels (every command and API entry
    that trains a classifier says it this way): continuous values (``n_classes`` None) or more
    than 2 classes and more than half as many as records, so that most records would be a
    class of their own and
    every membership attack would trivially succeed. Public counts only, never a label."""
    what = ("continuous values" if n_classes is None else
            f"{n_classes} distinct values in {n_records} records, about one record per class")
    return (f"{where} holds {what}: {purpose} trains a classifier and needs class labels "
            "(integers or text) with at least 2 records per class on average; a measurement or "
            "an identifier column is not a label")


def check_class_labels(y, where: str, purpose: str) -> None:
    """Refuse labels a classifier cannot be trained on, before any work.

    Parameters
    ----------
    y : array-like of shape (n_records,)
        Labels: integers, integer-valued floats, text or booleans.
    where : str
        How the user gave them (``"--label-column salary of 'salary.csv'"``, ``"`y`"``).
    purpose : str
        What trains the classifier (``"pacpriv audit"``, ``"PACPrivateClassifier"``).

    Raises
    ------
    ValueError
        With :func:`class_labels_message` when the labels are real numbers that are not all
        integers (continuous), or when there are more than 2 distinct labels and more than
        half as many as records.
    """
    y = np.asarray(y)
    if y.ndim != 1 or y.size == 0:
        return  # the shape is the caller's check
    if y.dtype.kind == "f" or y.dtype.kind == "c":
        finite = np.isfinite(y)
        if not (finite.all() and np.all(y == np.round(y.real))):
            raise ValueError(class_labels_message(where, purpose, None, int(y.size)))
    n_classes = int(np.unique(y).size)
    if n_classes > 2 and 2 * n_classes > y.size:  # two classes are always a binary problem
        raise ValueError(class_labels_message(where, purpose, n_classes, int(y.size)))


def first_subset_missing_a_class(y, mask_of, n_subsets: int, *,
                                 inclusion: float | None = None) -> tuple[int, int, int] | None:
    """The first of ``n_subsets`` training subsets that lacks a class of the labels ``y``.

    A scikit-learn classifier trained on a subset that lacks a class fails, or learns other
    ``classes_`` than its siblings; the subsets' masks are public and cheap, so this is asked
    before any model is trained.

    Parameters
    ----------
    y : array-like of shape (n_records,)
        Class labels of the pool.
    mask_of : callable ``j -> bool ndarray (n_records,)``
        Subset ``j``'s membership mask (e.g. ``sampler.trial_mask(n, root=root, index=j)``).
    n_subsets : int
        Number of subsets, >= 0.
    inclusion : float in (0, 1) or None
        Each record's inclusion probability when records are included independently (or
        drawn without replacement): where the union bound
        ``n_subsets * sum_c (1 - inclusion) ** n_c`` is below 1e-12, no mask is drawn.

    Returns
    -------
    tuple (j, classes_seen, n_classes) or None
        The first such subset, how many classes it holds and how many ``y`` has; None when
        every subset holds every class (or the union bound rules it out).
    """
    codes = np.unique(np.asarray(y), return_inverse=True)[1].ravel()
    counts = np.bincount(codes)
    if codes.size == 0:
        return None
    if inclusion is not None and 0 < inclusion < 1:
        log_miss = counts * math.log1p(-inclusion)
        if math.log(max(n_subsets, 1)) + float(np.logaddexp.reduce(log_miss)) < math.log(1e-12):
            return None
    for j in range(int(n_subsets)):
        seen = np.bincount(codes[np.asarray(mask_of(j), dtype=bool)], minlength=counts.size)
        if not seen.all():
            return j, int(np.count_nonzero(seen)), int(counts.size)
    return None


def missing_class_message(name: str, count: int, found: tuple[int, int, int], n_records: int,
                          *, unit: str, low: int = 2, step: int = 2,
                          classifier: bool = True) -> str:
    """The one-line refusal of :func:`first_subset_missing_a_class`'s finding ``found`` for
    ``count`` subsets (``name``: ``"--n-worlds"`` or ``"`n_worlds`"``) of ``n_records``
    records: the largest count that works with this seed, or what to change. Without
    ``classifier`` the finding is an empty subset (labels all equal)."""
    j, seen, n_classes = found
    given = f"{name} {count}" if name.startswith("--") else f"{name}={count}"
    works = j - j % step
    fix = (f"with this seed the first {j} {unit}s do, so {name} {works} would work; or use a "
           "pool with more records" + (" of each class" if classifier else "")
           if works >= low else
           f"no {name} >= {low} works with this seed: use a pool with more records"
           + (" of each class" if classifier else ""))
    what = (f"would be trained on {seen} of the {n_classes} classes (each {unit} sees a random "
            f"subset of the records, and every {unit} of a classifier must see every class)"
            if classifier and seen else
            f"would hold no record (each {unit} sees a random subset of the records, and no "
            "estimator can be fitted on none)")
    return (f"{given} is too many {unit}s for {n_records} records: {unit} {j} {what}; {fix} "
            "(a group of k records is missing from a random half with probability 2^-k).")
