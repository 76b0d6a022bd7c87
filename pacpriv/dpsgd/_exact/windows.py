"""Window sums of a non-negative array by dyadic tables: the long runs of a geometric pair sum.

Private helper of :mod:`pacpriv.dpsgd._exact.geometric`. In a pair sum on the geometric grid
the pairs at distance ``d`` go to offset ``κ_d``, constant on runs of ``d`` that grow like
``c/κ`` (:func:`pacpriv.dpsgd._exact.geometric._kernel`): a direct FIR product costs one
multiply-add per tap, ``c·ln c`` per output in all. A run ``[d_lo, d_hi]`` of length ``L``
needs only two window sums per output, ``M = Σ_d s[i − d]`` and, for the mean-keeping split
of the upper chain, ``E = Σ_d e^{−(d − d_lo)g} s[i − d]`` (the split weight ``β_d`` is affine
in ``e^{−dg}``). Both are read from dyadic tables (``T_p[t]``: the sum of the ``2^p`` entries
from ``t``; ``TE_p`` the same with the weights ``r^{2^p−1−j}``, ``r = e^{−g}``), built once per
operand, ``popcount(L)`` pieces per window.

Round-off (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1, sums and
products of non-negative terms): an entry of ``T_p`` is a tree of ``p`` additions, relative
error at most ``p·u`` (to first order; ``(1 + u)^p − 1``); a window adds at most
``popcount(L) − 1`` pieces: ``(p_max + popcount(L))·u`` in all (:func:`sum_error`). In
``TE_{p+1} = r^{2^p}·TE_p[t] + TE_p[t + 2^p]`` each level adds a product with a power
computed by ``exp`` (within ``2u``), a rounding and an addition: ``4u`` per level, and each
piece's factor ``r^m`` (``exp``, ``2u``) and its product and sum ``2u`` more
(:func:`exp_sum_error`; a factor ``scale`` given in float64 adds ``2u₆₄``). Every bound
is relative to the window's exact value, entry by entry: no subtraction is involved.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

__all__ = ["exp_sum_error", "long_runs", "pieces", "sum_error", "tables", "window_sums"]


def pieces(length: int) -> tuple[tuple[int, int], ...]:
    """``((offset, p), ...)``: the window ``[0, length)`` as dyadic pieces of ``2^p`` entries."""
    out = []
    off = 0
    for p in range(length.bit_length() - 1, -1, -1):
        if length >> p & 1:
            out.append((off, p))
            off += 1 << p
    return tuple(out)


def tables(s: np.ndarray, pad: int, p_max: int, g: float | None
           ) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Dyadic tables of ``s`` after ``pad`` leading zeros: ``(T, TE)``; ``TE`` is None unless
    ``g`` (the grid step, ``r = e^{−g}``) is given.

    ``T[p][t]`` is the sum of the padded entries ``t … t + 2^p − 1`` and ``TE[p][t]`` the same
    with weights ``r^{2^p − 1 − j}`` (1 on the last entry); ``T[p]`` has ``len − 2^p + 1``
    entries.
    """
    t0 = np.concatenate((np.zeros(pad, dtype=s.dtype), s))
    t = [t0]
    te = [t0] if g is not None else None
    for p in range(p_max):
        h = 1 << p
        t.append(t[p][:-h] + t[p][h:])
        if te is not None and g is not None:
            scale = np.exp(-h * np.asarray(g, dtype=s.dtype))
            te.append(scale * te[p][:-h] + te[p][h:])
    return t, te


def window_sums(t: list[np.ndarray], te: list[np.ndarray] | None, pad: int, d_lo: int,
                d_hi: int, n: int, g: float | None, scale: float = 1.0
                ) -> tuple[np.ndarray, np.ndarray | None]:
    """``(M, E)`` for the outputs ``i = d_lo … n − 1`` of the run ``[d_lo, d_hi]``:
    ``M[i − d_lo] = Σ_{d=d_lo}^{d_hi} s[i − d]`` and ``E[i − d_lo] = scale·Σ_d
    e^{−(d − d_lo)g} s[i − d]`` (None without ``te``; ``scale`` multiplies each piece's
    factor, one more rounding of a float64 constant). Needs ``pad ≥ d_hi − d_lo`` and
    ``d_lo < n``."""
    length = d_hi - d_lo + 1
    start = pad - length + 1  # padded index of s[d_lo − d_hi], the window's first entry
    size = n - d_lo
    m = None
    e = None
    for off, p in pieces(length):
        lo = start + off
        piece = t[p][lo : lo + size]
        if m is None:
            m = piece.copy()
        else:
            m += piece
        if te is not None and g is not None:
            # the piece ends ``length − off − 2^p`` entries before the window's last one
            f = scale * float(np.exp(-(length - off - (1 << p)) * g))
            if e is None:
                e = f * te[p][lo : lo + size]
            else:
                e += f * te[p][lo : lo + size]
    assert m is not None
    return m, e


def sum_error(length: int, p_max: int) -> float:
    """Relative error of a window sum :func:`window_sums` ``M``, in units of ``u``."""
    return float(p_max + bin(length).count("1") + 1)


def exp_sum_error(length: int, p_max: int) -> float:
    """Relative error of a window sum :func:`window_sums` ``E``, in units of ``u``."""
    return float(4 * p_max + 4 * bin(length).count("1") + 2)


def long_runs(off_d: np.ndarray, g: float, upper: bool, min_run: int) -> tuple:
    """``(ranges, d_split, p_max, win_units, split_units)`` of the pair-sum kernel: the runs
    of one offset ``off_d[d]`` at least ``min_run`` long, from the far end (``d ≥ d_split``).

    Upper split of a run ``[d_lo, d_hi]`` at offset ``κ``: ``B = Σ β_d s = (a1·E − a2·M)/den``
    with ``a1 = e^{−d_lo g}``, ``a2 = e^κg − 1``, ``den = e^{κg}(e^g − 1)``; ``M − B`` goes to
    offset ``κ``, ``B`` to ``κ + 1``. ``M`` and ``E`` err by ``e_M``, ``e_E`` (relative, see
    :mod:`.windows`), the three constants by ``2u``, ``2u``, ``3u`` (float64), the products,
    the difference, the quotient and the clip to ``[0, M]`` by a few ``u`` more (``a1/den``
    and ``a2/den`` are float64 constants: ``9u₆₄`` and ``6u₆₄``), so
    ``|B̂ − B| ≤ η·(a1 + a2)/den·M`` with ``η = (e_E + 2e_M + 10)·u + 20·u₆₄`` (``E ≤ M``;
    ``B ≤ M ≤ 2(a1 + a2)/den·M``). Offset ``κ`` then gets ``M − B̂`` of its run plus ``B̂``
    of the run at ``κ − 1``, sums of non-negative terms. The error only moves mass between
    the two ends of the cell, ``x_j`` and ``x_j·e^g``, and the mass lies at values ``≥ x_j``:
    the stop-loss transform moves by at most ``η·(a1 + a2)(e^g − 1)/den`` per unit value
    (about ``2η``).
    The offsets of the rows at a run's ends are float64 values of ``log1p(e^{−dg})/g``: a
    row that belongs to the neighbouring cell gets ``β`` just outside ``[0, 1]`` (by at most
    ``~4u·(κ + 1)`` grid steps), the mean still kept: at most ``8u`` more per unit value.
    """
    n_rows = off_d.size
    starts = np.concatenate(([0], np.flatnonzero(np.diff(off_d)) + 1))
    ends = np.append(starts[1:], n_rows) - 1
    keep = 0
    for j in range(starts.size - 1, -1, -1):  # runs grow with d: collect from the far end
        if ends[j] - starts[j] + 1 < min_run or starts[j] < 1:
            break
        keep += 1
    if keep == 0:
        return (), n_rows, 0, 0.0, (0.0, 0.0)
    lo_j = starts.size - keep
    longest = int(max(ends[j] - starts[j] + 1 for j in range(lo_j, starts.size)))
    p_max = max(longest.bit_length() - 1, 0)
    ranges, win, split_u, split_64 = [], 0.0, 0.0, 0.0
    em1 = math.expm1(g)
    for j in range(lo_j, starts.size):
        kap, d_lo, d_hi = int(off_d[starts[j]]), int(starts[j]), int(ends[j])
        length = d_hi - d_lo + 1
        e_m = sum_error(length, p_max)
        win = max(win, e_m)
        a1, a2, den = math.exp(-d_lo * g), math.expm1(kap * g), math.exp(kap * g) * em1
        if upper:
            per_value = (a1 + a2) * em1 / den * 1.01
            split_u = max(split_u, (exp_sum_error(length, p_max) + 2 * e_m + 10) * per_value)
            split_64 = max(split_64, 20.0 * per_value + 8.0)
        ranges.append((kap, d_lo, d_hi, a1, a2, den))
    # offsets step down by one from run to run (|d off/dd| <= 1/2): the pair sum hands each
    # run's split B to the run before it, at offset κ + 1
    assert all(a[0] == b[0] + 1 for a, b in itertools.pairwise(ranges))
    return tuple(ranges), int(starts[lo_j]), p_max, win, (split_u, split_64)
