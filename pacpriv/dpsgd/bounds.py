"""Closed-form chi-square bound on membership-inference accuracy for random-allocation DP-SGD.

With ``M`` steps per epoch, ``E`` epochs and noise multiplier ``σ``, the one-record dominating
pair of random allocation is ``P = N(0, σ² I_M)`` versus ``Q = (1/M) Σ_i N(e_i, σ² I_M)``
(per epoch, in units of the clipping norm) [1]_ [2]_. Its chi-square divergence is

    1 + χ²(Q‖P) = 1 + (e^{1/σ²} − 1)/M

per epoch and tensorises over epochs. With equal priors the best membership-inference accuracy
is ``½ + ½·TV ≤ ½ + ¼·sqrt(χ²)`` (``TV ≤ ½ sqrt(χ²)``), which gives the bound and its
closed-form inverse. Everything is evaluated in log space (``log1p``/``expm1``/``logaddexp``):
``1/σ²`` overflows ``exp`` for σ below about 0.038 and ``M``, ``E`` may be ``1e9``.

References
----------
.. [1] Membership-inference accuracy bound for DP-SGD with random allocation (CWI / VU
   Amsterdam): closed form from the chi-square divergence (docs/math.rst, Random allocation).
.. [2] L. Chua et al., Balls-and-Bins Sampling for DP-SGD, AISTATS 2025 (dominating pair).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from pacpriv._display import Displayable, Summary
from pacpriv._display import shown as _shown
from pacpriv._validation import check_array_real, check_int, check_real
from pacpriv.dpsgd._huge_counts import (
    is_huge_count,
    log_log1p_chi_square,
    log_space_noise_multiplier,
)
from pacpriv.dpsgd.labels import bound_fields, label_rows

__all__ = [
    "AccuracyBound",
    "closed_form_noise_multiplier",
    "log1p_chi_square",
    "membership_inference_accuracy_bound",
]

_LOG5 = math.log(5.0)  # chi² >= 4  <=>  ½ + ¼ sqrt(chi²) >= 1 (vacuous)


@dataclass(frozen=True)
class AccuracyBound(Displayable):
    """Chi-square bound on membership-inference accuracy (equal priors).

    Attributes
    ----------
    accuracy : float or ndarray
        ``min(1, ½ + ¼·sqrt(χ²_total))``, in ``[½, 1]``; broadcast shape of the inputs.
    log1p_chi_square : float or ndarray
        ``ln(1 + χ²_total) = E·ln(1 + (e^{1/σ²} − 1)/M)`` (nats); finite for every valid input,
        so callers never overflow.
    vacuous : bool or ndarray of bool
        True where the bound is clipped to 1 (``χ²_total ≥ 4``): it says nothing.
    noise_multiplier, steps_per_epoch, epochs : float or ndarray
        The inputs (broadcast).
    k : int
        Steps per record per epoch (k of t; 1: one step per epoch).
    """

    accuracy: float | np.ndarray
    log1p_chi_square: float | np.ndarray
    vacuous: bool | np.ndarray
    noise_multiplier: float | np.ndarray
    steps_per_epoch: float | np.ndarray
    epochs: float | np.ndarray
    k: int = 1

    def summary(self) -> Summary:
        """Rows shown by ``str(bound)`` and in Jupyter (accuracy rounded up)."""
        k_row = [] if self.k == 1 else [("steps per record per epoch k", str(self.k), "plain")]
        return Summary("DP-SGD membership-inference accuracy (chi-square closed-form upper "
                       "bound)", [
            *parameter_rows(self.noise_multiplier, self.steps_per_epoch, self.epochs), *k_row,
            ("accuracy bound", _shown(self.accuracy, up=True), "plain"),
            ("vacuous (clipped to 1)", _shown(self.vacuous), "plain"),
            *label_rows("closed-form", detail="chi-square"),
        ])

    def to_dict(self) -> dict:
        """JSON-serialisable dict (arrays become lists)."""
        out = {k: (v.tolist() if isinstance(v, np.ndarray) else v)
               for k, v in asdict(self).items()}
        for count in ("steps_per_epoch", "epochs"):  # counts print as integers
            v = out.get(count)
            if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
                out[count] = int(v)
        # what the number is and whom it covers (the CLI's JSON fields; issue 35, a1300)
        return {**out, **bound_fields("closed-form", detail="chi-square")}


def parameter_rows(noise_multiplier, steps_per_epoch, epochs) -> list[tuple[str, str, str]]:
    """The :class:`~pacpriv._display.Summary` rows of σ, ``M`` and ``E`` (scalars or arrays)
    with which a DP-SGD result's ``summary()`` opens."""
    return [
        ("noise multiplier σ", _shown(noise_multiplier, up=True), "plain"),  # never below
        ("steps per epoch M", _shown(steps_per_epoch), "plain"),
        ("epochs E", _shown(epochs), "plain"),
    ]


def _inverse_square(sigma: np.ndarray) -> np.ndarray:
    """``1/σ²``; +inf where σ² underflows (σ < ~1e-154), without a divide-by-zero warning."""
    with np.errstate(divide="ignore", over="ignore"):
        return 1.0 / (sigma * sigma)


def _scalar_or_array(x: np.ndarray, scalar: bool):
    return x.item() if scalar else x


_SIGMA_SAFETY = 1.0 + 1e-13  # relative margin of the closed-form σ (see its body)


_EPS = float(np.finfo(np.float64).eps)
_TINY = 5e-324  # the smallest positive double


def _inflation(inv_var):
    """Relative inflation of ``¼·sqrt(χ²)`` that covers its floating-point error.

    ``x = 1/σ²`` carries a relative error of at most ``ε`` (two roundings); ``expm1`` amplifies
    it by its condition number ``x·e^x/(e^x − 1) <= 1 + x``; ``log1p``, the product by ``E``,
    ``expm1`` of a value ``<= ln 5`` (condition ``<= 2``) and ``sqrt`` (halves it) add a few
    ``ε``. ``1 + (16 + 2x)·ε`` covers the total with room; it is large only where ``x`` is, and
    there the bound is vacuous unless ``M`` is astronomically large.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return 1.0 + (16.0 + 2.0 * np.minimum(inv_var, 1e300)) * _EPS


_ABOVE_HALF = math.nextafter(0.5, 1.0)


def _round_up_sum(adv):
    """``min(1, ½ + adv)`` rounded *up* to a float (Dekker's Fast2Sum: ``½ >= adv >= 0``).

    The advantage of a finite σ is always > 0, even where it underflowed to 0 (``1/σ²``
    underflows at σ > ~1e154): the result is then the next double above ½, never ½ itself.
    """
    s = 0.5 + adv
    err = adv - (s - 0.5)  # exact: the part of the sum that rounding dropped
    return np.minimum(1.0, np.maximum(_ABOVE_HALF, np.where(err > 0, np.nextafter(s, 2.0), s)))


def _validate_counts_fast(steps_per_epoch, epochs):
    """Counts as float64 (scalars stay 0-d); plain positive Python ints skip the array checks."""
    out = []
    for value, name in ((steps_per_epoch, "steps_per_epoch"), (epochs, "epochs")):
        if type(value) is int and value >= 1:
            out.append(float(value))
            continue
        arr = np.asarray(value)
        if np.issubdtype(arr.dtype, np.integer) and bool(np.all(arr >= 1)):
            out.append(arr.astype(np.float64))
        else:
            out.append(check_array_real(value, name, low=1, integer=True))
    return out[0], out[1]


def _validate_counts(steps_per_epoch, epochs) -> tuple[np.ndarray, np.ndarray]:
    m = check_array_real(steps_per_epoch, "steps_per_epoch", low=1, integer=True)
    e = check_array_real(epochs, "epochs", low=1, integer=True)
    return m, e


def _log1p_chi_square_per_epoch(inv_var: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``ln(1 + (e^x − 1)/M)`` for ``x = 1/σ²`` without overflow or cancellation."""
    small = inv_var < 700.0
    x_small = np.where(small, inv_var, 0.0)
    direct = np.log1p(np.expm1(x_small) / m)
    # large x: ln((M − 1 + e^x)/M) = logaddexp(ln(M − 1), x) − ln M   (M − 1 may be 0)
    with np.errstate(divide="ignore"):
        log_m1 = np.log(m - 1.0)
    large = np.logaddexp(log_m1, inv_var) - np.log(m)
    return np.where(small, direct, large)


def log1p_chi_square(noise_multiplier, *, steps_per_epoch, epochs,
                     k: int = 1) -> float | np.ndarray:
    """``ln(1 + χ²(Q^⊗E ‖ P^⊗E))`` of the random-allocation dominating pair (nats).

    Parameters
    ----------
    noise_multiplier : float or array_like
        σ > 0.
    steps_per_epoch, epochs : int or array_like of int
        ``M ≥ 1`` and ``E ≥ 1``; broadcast against ``noise_multiplier``.
    k : int, default 1
        Steps per record per epoch (k of t, ``k ≤ steps_per_epoch``): per epoch
        ``1 + χ² = Σ_h P(H = h) e^{h/σ²}``, ``H ~ Hypergeometric(t, k, k)``
        (:func:`pacpriv.dpsgd.k_of_t.k_of_t_log1p_chi_square`, rounded up).

    Returns
    -------
    float or ndarray
        ``E·ln(1 + (e^{1/σ²} − 1)/M)`` for ``k = 1``, finite for all valid inputs.
    """
    sigma = check_array_real(noise_multiplier, "noise_multiplier", low=0, low_inclusive=False)
    if is_huge_count(steps_per_epoch) or is_huge_count(epochs):
        return _huge_count_bound(sigma, steps_per_epoch, epochs, k).log1p_chi_square
    m, e = _validate_counts(steps_per_epoch, epochs)
    if check_int(k, "k", low=1) != 1:
        return _k_of_t_elementwise(sigma, m, e, k)[1]
    scalar = sigma.ndim == m.ndim == e.ndim == 0
    out = np.maximum(e * _log1p_chi_square_per_epoch(_inverse_square(sigma), m), _TINY)
    return _scalar_or_array(np.asarray(out, dtype=np.float64), scalar)


def membership_inference_accuracy_bound(
    noise_multiplier, *, steps_per_epoch, epochs, k: int = 1
) -> AccuracyBound:
    """Closed-form bound on membership-inference accuracy for random-allocation DP-SGD.

    ``accuracy ≤ ½ + ¼·sqrt((1 + (e^{1/σ²} − 1)/M)^E − 1)``, clipped to 1 [1]_.

    Parameters
    ----------
    noise_multiplier : float or array_like
        Noise multiplier σ > 0 (noise std / clipping norm).
    steps_per_epoch : int or array_like of int
        Steps per epoch ``M ≥ 1`` (each record is used once per epoch at a uniformly random
        step).
    epochs : int or array_like of int
        Number of epochs ``E ≥ 1``. All three broadcast together.
    k : int, default 1
        Steps per record per epoch (k of t, ``1 ≤ k ≤ steps_per_epoch``); for ``k > 1`` the
        per-epoch chi-square is ``Σ_h P(H = h) e^{h/σ²} − 1``, ``H ~ Hypergeometric(t, k, k)``
        (docs/math.rst, "k out of t"; evaluated element by element).

    Returns
    -------
    AccuracyBound
        ``accuracy`` (clipped to 1; ``vacuous`` marks clipping) and ``log1p_chi_square``.
        Scalars in, Python floats out; arrays in, arrays out.

    Raises
    ------
    TypeError
        If an argument is not numeric, or a count is not integer-valued.
    ValueError
        If σ ≤ 0, a count < 1, or any value is NaN/inf.

    Notes
    -----
    The bound is an upper bound for every attack, worst case over datasets, one record added
    or removed, membership and non-membership equally likely a priori. It is monotone:
    decreasing in σ and M, increasing in E.

    References
    ----------
    .. [1] Membership-inference accuracy bound for DP-SGD with random allocation (CWI / VU
       Amsterdam), docs/math.rst, Random allocation.

    Examples
    --------
    >>> b = membership_inference_accuracy_bound(2.0, steps_per_epoch=1, epochs=1)
    >>> round(b.accuracy, 6)
    0.633235
    """
    sigma = check_array_real(noise_multiplier, "noise_multiplier", low=0, low_inclusive=False)
    if is_huge_count(steps_per_epoch) or is_huge_count(epochs):
        return _huge_count_bound(sigma, steps_per_epoch, epochs, k)
    m, e = _validate_counts(steps_per_epoch, epochs)
    k = check_int(k, "k", low=1)  # a numpy integer is kept as a Python int
    if k != 1:
        acc, l1p, vac = _k_of_t_elementwise(sigma, m, e, k)
        sigma, m, e = np.broadcast_arrays(sigma, m, e)
        scalar = sigma.ndim == 0
        return AccuracyBound(
            accuracy=acc, log1p_chi_square=l1p, vacuous=vac,
            noise_multiplier=_scalar_or_array(np.asarray(sigma, dtype=np.float64), scalar),
            steps_per_epoch=_scalar_or_array(np.asarray(m, dtype=np.float64), scalar),
            epochs=_scalar_or_array(np.asarray(e, dtype=np.float64), scalar), k=k,
        )
    sigma, m, e = np.broadcast_arrays(sigma, m, e)
    scalar = sigma.ndim == 0
    inv_var = _inverse_square(sigma)
    # > 0 for every finite σ: where it underflows, the smallest positive double (the safe side)
    log1p_chi2 = np.maximum(e * _log1p_chi_square_per_epoch(inv_var, m), _TINY)
    vacuous = log1p_chi2 >= _LOG5
    chi2 = np.expm1(np.minimum(log1p_chi2, _LOG5))
    accuracy = np.where(vacuous, 1.0, _round_up_sum(0.25 * np.sqrt(chi2) * _inflation(inv_var)))
    return AccuracyBound(
        accuracy=_scalar_or_array(np.asarray(accuracy, dtype=np.float64), scalar),
        log1p_chi_square=_scalar_or_array(np.asarray(log1p_chi2, dtype=np.float64), scalar),
        vacuous=_scalar_or_array(np.asarray(vacuous), scalar),
        noise_multiplier=_scalar_or_array(np.asarray(sigma, dtype=np.float64), scalar),
        steps_per_epoch=_scalar_or_array(np.asarray(m, dtype=np.float64), scalar),
        epochs=_scalar_or_array(np.asarray(e, dtype=np.float64), scalar),
    )


def _huge_count_bound(sigma: np.ndarray, steps_per_epoch, epochs, k) -> AccuracyBound:
    """The bound at a count above ``2**1000`` (a Python int, e.g. ``10**400``), in log space
    (:mod:`pacpriv.dpsgd._huge_counts`); scalars only, ``k = 1`` only."""
    for value, name in ((steps_per_epoch, "steps_per_epoch"), (epochs, "epochs")):
        if not is_huge_count(value):
            check_int(value, name, low=1)
    if check_int(k, "k", low=1) != 1:
        raise ValueError(f"`k` must be 1 when a count exceeds 2**1000 (k of t is evaluated "
                         f"term by term); got k={k}.")
    if sigma.ndim:
        raise ValueError("`noise_multiplier` must be a scalar when a count exceeds 2**1000 "
                         f"(counts beyond float64 are taken one at a time); got shape "
                         f"{sigma.shape}.")
    lll = log_log1p_chi_square(float(sigma), int(steps_per_epoch), int(epochs))
    # > 0 always: where e^lll underflows, the smallest positive double (the safe side)
    log1p_chi2 = max(math.exp(lll), 5e-324) if lll < 709.0 else math.inf
    vacuous = log1p_chi2 >= _LOG5
    inflate = 1.0 + 64.0 * _EPS
    accuracy = 1.0 if vacuous else float(_round_up_sum(
        0.25 * math.sqrt(math.expm1(log1p_chi2)) * inflate))
    if accuracy == 0.5:  # χ² underflowed but is > 0: the next double up, never ½ itself
        accuracy = math.nextafter(0.5, 1.0)
    return AccuracyBound(accuracy=accuracy, log1p_chi_square=log1p_chi2, vacuous=vacuous,
                         noise_multiplier=float(sigma),
                         steps_per_epoch=_as_float_or_inf(steps_per_epoch),
                         epochs=_as_float_or_inf(epochs))


def _huge_count_sigma(target_accuracy, steps_per_epoch, epochs, k) -> float:
    """:func:`closed_form_noise_multiplier` at a count above ``2**1000``, in log space."""
    a = check_real(target_accuracy, "target_accuracy", low=0.5, high=1.0, low_inclusive=False,
                   high_inclusive=False)
    for value, name in ((steps_per_epoch, "steps_per_epoch"), (epochs, "epochs")):
        if not is_huge_count(value):
            check_int(value, name, low=1)
    if check_int(k, "k", low=1) != 1:
        raise ValueError(f"`k` must be 1 when a count exceeds 2**1000; got k={k}.")
    return log_space_noise_multiplier(a, int(steps_per_epoch), int(epochs))


def _as_float_or_inf(count) -> float:
    try:
        return float(count)
    except OverflowError:
        return math.inf


def _k_of_t_elementwise(sigma, m, e, k):
    """``(accuracy, ln(1 + χ²_total), vacuous)`` of the k-of-t bound, element by element."""
    from pacpriv.dpsgd._hypergeom import k_of_t_accuracy

    sigma, m, e = np.broadcast_arrays(sigma, m, e)
    out = [np.empty(sigma.shape), np.empty(sigma.shape), np.empty(sigma.shape, dtype=bool)]
    for idx in np.ndindex(sigma.shape):
        row = k_of_t_accuracy(float(sigma[idx]), steps_per_epoch=int(m[idx]),
                              epochs=int(e[idx]), k=k)
        for arr, v in zip(out, row, strict=True):
            arr[idx] = v
    if sigma.ndim == 0:
        return float(out[0]), float(out[1]), bool(out[2])
    return out[0], out[1], out[2]


def closed_form_noise_multiplier(target_accuracy, *, steps_per_epoch, epochs, k: int = 1):
    """Smallest σ for which the chi-square bound equals ``target_accuracy`` (closed form).

    ``σ = 1 / sqrt(ln(1 + M·((1 + 16(a − ½)²)^{1/E} − 1)))`` [1]_, evaluated as
    ``1/sqrt(log1p(M·expm1(log1p(16(a−½)²)/E)))``.

    Parameters
    ----------
    target_accuracy : float or array_like
        Target accuracy ``a`` in the open interval (½, 1).
    steps_per_epoch, epochs : int or array_like of int
        ``M ≥ 1``, ``E ≥ 1``; broadcast together with ``target_accuracy``.
    k : int, default 1
        Steps per record per epoch (k of t). For ``k > 1`` there is no closed form: the k-of-t
        chi-square bound is inverted by a monotone root find
        (:func:`pacpriv.dpsgd.k_of_t.k_of_t_noise_multiplier`), element by element.

    Returns
    -------
    float or ndarray
        σ > 0; the bound at this σ equals the target (to rounding), so any larger σ meets it.

    Raises
    ------
    TypeError, ValueError
        On non-numeric input, a target outside (½, 1) or counts < 1.

    References
    ----------
    .. [1] Membership-inference accuracy bound for DP-SGD with random allocation
       (docs/math.rst, Random allocation).
    """
    if is_huge_count(steps_per_epoch) or is_huge_count(epochs):
        return _huge_count_sigma(target_accuracy, steps_per_epoch, epochs, k)
    if (
        type(target_accuracy) is float
        and type(steps_per_epoch) is int
        and type(epochs) is int
        and 0.5 < target_accuracy < 1.0
        and steps_per_epoch >= 1
        and epochs >= 1
        and k == 1
    ):  # fast path for plain Python scalars (validated by the conditions above)
        adv = target_accuracy - 0.5
        xf = math.log1p(steps_per_epoch * math.expm1(math.log1p(16.0 * adv * adv) / epochs))
        return (_SIGMA_SAFETY + 4.0 * _EPS * xf) / math.sqrt(xf)
    a = np.asarray(target_accuracy)
    # min/max: two passes without temporaries (NaN fails both comparisons)
    if a.dtype != np.float64 or a.size == 0 or not (a.min() > 0.5 and a.max() < 1.0):
        a = check_array_real(  # slow path: the precise error message (or a dtype conversion)
            target_accuracy, "target_accuracy", low=0.5, high=1.0, low_inclusive=False,
            high_inclusive=False,
        )
    m, e = _validate_counts_fast(steps_per_epoch, epochs)
    scalar = a.ndim == 0 and np.ndim(m) == 0 and np.ndim(e) == 0
    if check_int(k, "k", low=1) != 1:
        from pacpriv.dpsgd._hypergeom import k_of_t_noise_multiplier

        ab, mb, eb = np.broadcast_arrays(a, m, e)
        res = np.empty(ab.shape)
        for idx in np.ndindex(ab.shape):
            res[idx] = k_of_t_noise_multiplier(float(ab[idx]), steps_per_epoch=int(mb[idx]),
                                               epochs=int(eb[idx]), k=k)
        return float(res) if scalar else res
    # Round-off can leave the bound at this σ a few ulps above the target (seen: 3e-15), and
    # the forward bound inflates ¼·sqrt(χ²) by (16 + 2/σ²)ε and rounds up. Since
    # d ln(a − ½)/d ln σ <= −1 (χ² falls at least like σ⁻²), a relative margin
    # 1e-13 + 4ε/σ² on σ lowers a − ½ by more than all of that: the bound at this σ is at
    # most the target, and σ stays well inside the 1e-12 reference match.
    x = a - 0.5  # a fresh buffer for the in-place steps below
    if not isinstance(x, np.ndarray):
        x = np.array(x)
    x *= x
    x *= 16.0
    np.log1p(x, out=x)
    x = x / e if np.ndim(e) else np.divide(x, e, out=x)
    np.expm1(x, out=x)
    x = x * m if np.ndim(m) else np.multiply(x, m, out=x)
    np.log1p(x, out=x)
    margin = x * (4.0 * _EPS)  # x = 1/σ² here
    margin += _SIGMA_SAFETY
    np.sqrt(x, out=x)
    sigma = np.divide(margin, x, out=x)
    if scalar:
        return float(sigma)
    return sigma
