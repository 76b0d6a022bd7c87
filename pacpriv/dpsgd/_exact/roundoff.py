"""Round-off bounds for the certified lattices (float64, long double, FFT convolutions).

References
----------
.. [1] N. J. Higham. Accuracy and Stability of Numerical Algorithms, 2nd ed. SIAM 2002
   (§3.1, §4.2, Thm 24.2).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import fft as sp_fft

__all__ = ["dot_lower", "dot_upper", "fft_conv_error_l2", "sum_error_factor", "unit_roundoff"]

_U = 2.0**-53  # unit round-off of float64
_LD_U = max(float(np.finfo(np.longdouble).eps) / 2.0, 2.0**-64)  # long double unit round-off


def _dot_ld(v: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """``(Σ v_k w_k, relative error bound)`` for non-negative arrays, summed in long double.

    A BLAS dot product may sum in any order, so its only bound is ``γ_n`` (Higham 2002,
    §3.1): ``n·u``, 1e-11 at ``n = 1e5``, which the E-fold product multiplies. numpy's
    long-double dot is a plain loop: ``(n + 1)·u_ld`` with the exact products of float64
    inputs rounded once, plus ``u`` for the result's rounding to float64.
    """
    v = np.asarray(v, dtype=np.longdouble)
    w = np.asarray(w, dtype=np.longdouble)
    return float(np.dot(v, w)), (v.size + 2.0) * _LD_U + 2.0 * _U


#: absolute error per term near float64's subnormal range (products, the result's rounding)
_TINY = 2.0**-1074


def dot_lower(v: np.ndarray, w: np.ndarray) -> float:
    """A value at most ``Σ v_k w_k`` (non-negative arrays), see :func:`_dot_ld`."""
    val, rel = _dot_ld(v, w)
    return max(val * (1.0 - rel) - (np.size(v) + 2.0) * _TINY, 0.0)


def dot_upper(v: np.ndarray, w: np.ndarray) -> float:
    """A value at least ``Σ v_k w_k`` (non-negative arrays), see :func:`_dot_ld`."""
    val, rel = _dot_ld(v, w)
    return val * (1.0 + rel) + (np.size(v) + 2.0) * _TINY


def sum_error_factor(n: int) -> float:
    """``k`` with ``|fl(Σx) − Σx| ≤ k·u·Σ|x|`` for numpy's pairwise summation of ``n`` terms.

    numpy sums blocks of up to 128 terms with 8 accumulators and combines blocks pairwise
    (Higham 2002, §4.2): at most ``128/8 + 8 + ⌈log₂(n/128)⌉ + 1`` additions per term.
    """
    return 26.0 + max(0.0, math.ceil(math.log2(max(n, 1) / 128.0)))


def fft_conv_error_l2(a: np.ndarray, b: np.ndarray, cache: dict | None = None) -> float:
    """Bound on ``‖ẑ − a*b‖₂`` for the FFT convolution ``ẑ`` (zero-padded to ``N``).

    Higham, *Accuracy and Stability of Numerical Algorithms* (2nd ed., 2002), Thm 24.2: the
    computed FFT satisfies ``‖ŷ − Fx‖₂ ≤ κ‖Fx‖₂`` with ``κ = log₂N·η/(1 − log₂N·η)``,
    ``η = μ + γ₄(√2 + μ) ≤ 8u`` for accurately computed twiddle factors. Two forward
    transforms, the pointwise product and one inverse transform give
    ``‖ẑ − z‖₂ ≤ (3κ + 2u)(‖a‖₂‖b‖₁ + ‖a‖₁‖b‖₂)`` (``‖Fa‖_∞ ≤ ‖a‖₁``, ``‖Fa‖₂ = √N‖a‖₂``).
    ``cache`` (a dict, optional) keeps each operand's norms for the next call with it.
    """
    n = sp_fft.next_fast_len(a.size + b.size - 1, real=True)
    u = unit_roundoff(a.dtype)
    eta = 8.0 * u
    lg = math.log2(max(n, 2))
    kappa = lg * eta / (1.0 - lg * eta)
    cache = {} if cache is None else cache
    na1, na2 = _norms(a, cache)
    nb1, nb2 = _norms(b, cache)
    return (3.0 * kappa + 2.0 * u) * (na2 * nb1 + na1 * nb2)


def _norms(x: np.ndarray, cache: dict) -> tuple[float, float]:
    """``(‖x‖₁, an upper bound on ‖x‖₂)``, computed once per array held in ``cache``."""
    hit = cache.get(id(x))
    if hit is None or hit[0] is not x:
        hit = (x, float(np.abs(x).sum()), norm_upper(x))
        cache[id(x)] = hit
    return hit[1], hit[2]


def norm_upper(a: np.ndarray) -> float:
    """An upper bound on ``‖a‖₂``, computed in float64 (BLAS) also for long-double ``a``.

    Rounding each entry to float64 changes it by a relative ``2⁻⁵³`` (entries below the
    float64 range add at most ``√n·2⁻¹⁰²²``), and the float64 dot product of ``n`` terms errs
    by a relative ``n·u`` (Higham 2002, §3.1): the factor ``1 + (n + 4)·2⁻⁵²`` covers both.
    """
    v = np.asarray(a).astype(np.float64, copy=False).ravel()
    n = v.size
    return math.sqrt(float(np.dot(v, v))) * (1.0 + (n + 4) * 2.0**-52) + math.sqrt(n) * 2.0**-1022


def unit_roundoff(dtype) -> float:
    """``u`` of a float dtype (float64: 2⁻⁵³; x86 long double: 2⁻⁶⁴)."""
    return float(np.finfo(dtype).eps) / 2.0
