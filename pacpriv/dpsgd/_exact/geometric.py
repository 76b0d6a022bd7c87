"""One epoch's likelihood-ratio law on a geometric grid (heavy-tailed regime, small σ).

Private helper of :mod:`pacpriv.dpsgd.exact`, the geometric-grid counterpart of
:func:`pacpriv.dpsgd._exact.lattice.epoch_lattice`. For small σ the coordinate likelihood ratio
``W = exp(y/σ − 1/(2σ²))`` is log-normal with a log-standard deviation ``1/σ`` of several
units, so a linear lattice that resolves ``T = S/M`` near 1 cannot also reach its relevant
tail (``T`` up to ``e^{40}``). Here the block sums ``x = S_m/M`` live on the geometric grid
``x_k = e^{k g}`` (``g = 1/c``), as in the "exp-space" geometric grids of Feldman & Shenfeld
(arXiv:2602.17284, 2026).

Sum of two grid values: for ``k_i ≥ k_j`` with ``d = k_i − k_j``,
``x_i + x_j = x_i (1 + e^{−dg})`` lies in the cell ``[x_{i+κ_d}, x_{i+κ_d+1})`` with
``κ_d = ⌊log(1 + e^{−dg})/g⌋`` and relative position
``β_d = (1 + e^{−dg} − e^{κ_d g}) / (e^{(κ_d+1) g} − e^{κ_d g})``, both independent of ``i``.
Hence the pair-sum law is, for ``d ≤ D`` (``κ_d ≥ 1``), a matrix product of a sliding window
of one operand with a fixed ``(D+1) × (κ_0+2)`` weight matrix, and, for ``d > D`` (``κ_d = 0``,
``β_d = e^{−dg}/(e^g − 1)`` exactly geometric), a cumulative sum and a first-order recursive
filter. All terms are non-negative, so every output has a *relative* round-off error, bounded
by :func:`kernel_roundoff` (about ``1.1c·u`` with ``u = 2⁻⁵³``: the longest FIR dot product;
the additions over columns and the tail split run in long double), which is what the
round-off bound of the chain uses.

* **upper** chain: the sum is split to the two ends of its cell keeping its mean
  (``β_d``): an increase in the convex order of the likelihood ratio; the bottom tail is moved
  *up* and values above the top node are split to the top node and ``+∞``.
* **lower** chain: the sum is assigned to the nearest node (a deterministic garbling), the
  Q-law is carried along; tails are merged into the end nodes.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import signal, special

from pacpriv.dpsgd._exact import windows as _win
from pacpriv.dpsgd._exact.lattice import (
    cell_masses_bounded,
    dot_lower,
    dot_upper,
    kappa_split,
    propagate_error,
    sum_error_factor,
)

_U = 2.0**-53
_LD_U = max(float(np.finfo(np.longdouble).eps) / 2.0, 2.0**-64)  # long double unit round-off
_TINY_BOTTOM = 1e-18
#: columns of a pair sum added in the arrays' precision before one long-double addition
_CHUNK = 16
#: lower chain, large M: coordinate cells narrower than this in ln W are merged (relative
#: accuracy of their masses; quantising one coordinate costs ~1e-5 of its variance, ~1e-5/M of
#: the epoch's)
LOWER_MIN_DLN_LARGE_M = 0.01


@dataclass
class GeoPair:
    """Block of ``m`` coordinates: P-law (and Q-law, lower chain) of ``x = S/M`` on ``e^{kg}``."""

    k0: int
    g: float
    p: np.ndarray
    q: np.ndarray | None
    q_inf: float  # upper chain: block-Q mass with likelihood ratio +inf
    m: int
    big_m: int
    err: float  # l1 round-off bound (lower chain, far-tail cells only), see propagate_error
    kappa: float = 0.0  # lower chain: relative round-off as a scale, see _pld._Lattice.kappa
    slack: float = 0.0  # upper chain: round-off slack included in q_inf (reported only)

    def lr(self) -> np.ndarray:
        """The block's likelihood ratio ``S/m`` at each node."""
        return np.exp((self.k0 + np.arange(self.p.size)) * self.g) * (self.big_m / self.m)


@dataclass(frozen=True)
class _Kernel:
    g: float
    upper: bool
    d_max: int  # D: for d > D every pair sum goes to offsets 0 (and 1: upper split)
    k_top: int  # largest offset for d <= D
    tail_first: float  # β_{D+1} (upper)
    #: (k, d_lo, taps): non-zero run of column k of the (D+1) x (k_top+2) offset-weight
    #: matrix of a pair sum at distance d, taps in reverse order (row d_lo last)
    columns: tuple
    columns_nz: tuple  # the same without the row d = 0
    #: longest column run (terms of one FIR dot product)
    taps_max: int = 0
    #: additions into one output of :func:`_pair_sum` (both operand orders, tails included)
    adds: int = 0
    #: long runs ``(κ, d_lo, d_hi, a1, a2, den)`` of equal offset ``κ`` for ``d ≥ d_split``,
    #: summed as windows (:mod:`.windows`); upper: ``β_d = (a1·e^{−(d−d_lo)g} − a2)/den``
    ranges: tuple = ()
    d_split: int = 0
    #: dyadic table levels (``2^p_max`` ≥ the longest run's half)
    p_max: int = 0
    #: relative error of a run's window sum ``M``, in units of the arrays' ``u``
    win_units: float = 0.0
    #: upper: stop-loss perturbation per unit value of the runs' mean-keeping splits, as
    #: ``(arrays' u units, float64 u units)``
    split_units: tuple = (0.0, 0.0)
    #: ``((offset, weight), ...)`` of the pairs at distance 0 (``x ⊕ x``, see _pair_sum)
    row0: tuple = ()


def _kernel(g: float, upper: bool) -> _Kernel:
    """Offsets/weights of ``x_i + x_j`` for ``d = k_i − k_j ≤ D`` (split or nearest node);
    built once per ``(g, upper)`` (the refinement ladder and the calibration reuse grids)."""
    return _kernel_cached(float(g), bool(upper), _MIN_RUN)


#: shortest run of one offset summed as a window (shorter runs: FIR columns, cheaper there)
_MIN_RUN = 6
#: ... on grids of at least this many points per unit of ln x
_WINDOW_MIN_C = 32.0


@functools.lru_cache(maxsize=64)
def _kernel_cached(g: float, upper: bool, min_run: int) -> _Kernel:
    r = math.exp(g)
    if upper:  # D: last d with κ_d >= 1, i.e. 1 + e^{-dg} >= e^g
        def big(d):
            return 1.0 + math.exp(-d * g) >= r
    else:  # D: last d whose nearest offset is >= 1, i.e. log1p(e^{-dg}) >= g/2
        def big(d):
            return math.log1p(math.exp(-d * g)) >= 0.5 * g
    d_max = 0
    while big(d_max + 1):
        d_max += 1
    d = np.arange(d_max + 1, dtype=np.float64)
    val = np.log1p(np.exp(-d * g)) / g  # fractional offset of the sum, in grid steps
    kap = np.floor(val).astype(np.int64)
    k_top = int(kap.max())
    rows = np.arange(d_max + 1)
    # sparse: at most two non-zeros per row d (a dense (D+1) x (k_top+2) matrix would need
    # ~c²·ln c·ln 2 entries: 1.2 GB at c = 5000)
    if upper:
        lo_edge = np.exp(kap * g)
        beta = np.clip((1.0 + np.exp(-d * g) - lo_edge) / (lo_edge * math.expm1(g)), 0.0, 1.0)
        r_all = np.concatenate((rows, rows))
        c_all = np.concatenate((kap, kap + 1))
        v_all = np.concatenate((1.0 - beta, beta))
    else:
        r_all, c_all, v_all = rows, np.rint(val).astype(np.int64), np.ones(rows.size)
    tail_first = math.exp(-(d_max + 1) * g) / math.expm1(g)

    def runs(skip_zero_row: bool) -> tuple:
        keep = v_all != 0
        if skip_zero_row:
            keep &= r_all != 0
        r, cc, v = r_all[keep], c_all[keep], v_all[keep]
        order = np.lexsort((r, cc))
        r, cc, v = r[order], cc[order], v[order]
        out = []
        bounds = np.flatnonzero(np.diff(cc)) + 1
        for rr, col, vv in zip(np.split(r, bounds), np.split(cc, bounds), np.split(v, bounds),
                               strict=True):
            if rr.size == 0:
                continue
            taps = np.zeros(int(rr[-1] - rr[0]) + 1)
            np.add.at(taps, rr - rr[0], vv)
            # reversed: y = correlate(small, taps[::-1]) is the convolution with taps
            out.append((int(col[0]), int(rr[0]), np.ascontiguousarray(taps[::-1])))
        return tuple(out)

    # runs of one offset with at least _MIN_RUN rows (the far pairs, d >= d_split): window
    # sums; the rows below d_split: FIR columns
    off_d = kap if upper else np.rint(val).astype(np.int64)
    if g * _WINDOW_MIN_C > 1.0:  # coarse grids: short runs, the FIR columns are cheaper
        min_run = d_max + 2
    ranges, d_split, p_max, win, split = _win.long_runs(off_d, g, upper, min_run)
    row0 = tuple((int(cc), float(v)) for rr, cc, v in zip(r_all, c_all, v_all, strict=True)
                 if rr == 0 and v != 0)
    short = r_all < d_split
    r_all, c_all, v_all = r_all[short], c_all[short], v_all[short]
    cols, cols_nz = runs(False), runs(True)
    taps_max = max((t.size for _, _, t in cols), default=1)
    # one output gets one addition per column, two per run (upper: both ends of a cell) and
    # two per tail split, in each operand order
    adds = len(cols) + len(cols_nz) + 4 * len(ranges) + 4
    return _Kernel(g, upper, d_max, k_top, tail_first, cols, cols_nz, taps_max, adds,
                   ranges, d_split, p_max, win, split, row0)


def kernel_roundoff(kern: _Kernel, n: int, dtype) -> float:
    """Round-off bound ``r`` of :func:`_pair_sum` (operands of length n), relative to mass.

    Lower chain: every output within ``r`` of its exact value (relative). Upper chain: the
    same for the arithmetic, except that the tail split ``cum − geo`` and the float64 split
    weights err relative to the mass of the cell they split (the output and its neighbours),
    so ``r`` bounds the stop-loss perturbation per unit value, which is how :func:`combine`
    charges it.

    Model (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §3.1): a dot
    product of ``L`` non-negative terms, in any summation order, has relative error at most
    ``γ_L``; each further operation on non-negative values adds one unit round-off
    (``numpy.convolve`` is such a direct sum for every output). An output
    is a sum of products ``big·y`` with ``y`` a FIR dot product of at most ``taps_max`` terms
    (``taps_max + 1`` roundings in the arrays' precision), summed in groups of at most
    ``_CHUNK`` columns in the arrays' precision, the groups then in long double (at most
    ``adds`` additions), plus the final rounding of the output. The tail split
    (``d > D``) is computed in long double: the prefix sum of ``n`` terms, and the first-order
    recursion of ratio ``r = e^{−g}``, whose absolute error is at most ``2u·max_t (t+1)r^t ≤
    (2/g)·u`` times the prefix sum (the mass that is split), see :func:`_pair_sum`.
    """
    u_arr = _LD_U if dtype == np.longdouble else _U
    # FIR dot product (taps_max terms, taps_max roundings with the products) or a long run's
    # window sum (win_units, see :mod:`.windows`), the product with ``big``, up to _CHUNK
    # additions in the arrays' precision, the final rounding
    # the float64 split weights (1 − β_d, β_d) err by up to ~5u/g in absolute terms (a division
    # by e^g − 1 ≈ g), but only move mass between the two ends of one cell: the stop-loss
    # deficit per unit value is below 4u (2.4u measured against mpmath for c = 128…4096); the
    # long runs' splits likewise (split_units, see :func:`.windows.long_runs`)
    weights = 0.0
    if kern.upper:
        weights = 4.0 * _U + kern.split_units[0] * u_arr + kern.split_units[1] * _U
    return ((max(kern.taps_max, kern.win_units) + _CHUNK + 8) * u_arr + weights
            + (kern.adds + n + 2.0 / kern.g + 16) * _LD_U)


def _add_tail(out: np.ndarray, big: np.ndarray, small: np.ndarray, kern: _Kernel) -> None:
    """Pairs at distances ``d > D`` of :func:`_pair_sum` into ``out`` (long double): offset 0
    (lower), or the mean-keeping split to offsets 0 and 1 (upper)."""
    n = big.size
    d_max = kern.d_max
    # in long double: prefix sums (relative error <= n·u_ld) and the recursion
    small_ld = small.astype(np.longdouble)
    big_ld = big.astype(np.longdouble)
    zeros = np.zeros(d_max + 1, dtype=np.longdouble)
    cum = np.concatenate((zeros, np.cumsum(small_ld)[: n - d_max - 1]))
    if kern.upper:
        # ratio and first weight in long double (a float64 e^{−g} would put a
        # relative error t·u on the t-th power)
        g_ld = np.longdouble(kern.g)
        one_ld = np.ones(1, dtype=np.longdouble)
        den = np.array([1.0, -np.exp(-g_ld)], dtype=np.longdouble)
        rec = signal.lfilter(one_ld, den, small_ld)
        geo = np.concatenate((zeros, rec[: n - d_max - 1]))
        geo *= np.exp(-(d_max + 1) * g_ld) / np.expm1(g_ld)
        out[:n] += big_ld * np.maximum(cum - geo, 0.0)
        out[1 : n + 1] += big_ld * geo
    else:
        out[:n] += big_ld * cum


def _pair_sum(a: np.ndarray, b: np.ndarray, kern: _Kernel, mirror: bool) -> np.ndarray:
    """Law of ``x_i + x_j`` (``i`` from ``a``, ``j`` from ``b``, same index range).

    Pairs with ``k_i ≥ k_j`` always; with ``mirror`` also those with ``k_j > k_i``. Returns an
    array of length ``len(a) + k_top + 2`` on the same offset.
    """
    n = a.size
    d_max = kern.d_max
    # accumulated in long double: the additions over columns cost u_ld each, see
    # :func:`kernel_roundoff`; groups of _CHUNK columns are first summed in the arrays'
    # precision (at most _CHUNK additions per output), which keeps the long-double additions
    # (slow) few
    out = np.zeros(n + kern.k_top + 2, dtype=np.longdouble)
    part = np.zeros(out.size, dtype=a.dtype)

    def one(big: np.ndarray, small: np.ndarray, skip_zero: bool) -> None:
        # column k of the weight matrix is non-zero on a contiguous range of d: one direct
        # (FIR) convolution per offset k, y_k[i] = Σ_d w[d, k] small[i − d]
        used = 0

        def flush() -> None:
            nonlocal used
            used += 1
            if used == _CHUNK:
                out[:] += part
                part[:] = 0.0
                used = 0

        for k, d_lo, taps in (kern.columns_nz if skip_zero else kern.columns):
            if d_lo >= n:
                continue
            y = np.correlate(small, taps, "full")[: n - d_lo]  # taps stored reversed
            y *= big[d_lo:]
            part[k + d_lo : k + n] += y
            flush()
        # the long runs (d >= d_split): window sums from dyadic tables, see windows.long_runs;
        # by offset κ ascending (upper: the split B of the run at κ − 1 joins offset κ)
        live = [r for r in kern.ranges if r[1] < n]
        carry = None
        if live:
            pad = 1 << (kern.p_max + 1)  # > the longest run
            g_up = kern.g if kern.upper else None
            tab, tab_e = _win.tables(small, pad, kern.p_max, g_up)
            for k, d_lo, d_hi, a1, a2, den in reversed(live):
                m_sum, e_sum = _win.window_sums(tab, tab_e, pad, d_lo, d_hi, n, g_up,
                                                a1 / den)
                if e_sum is not None:  # B = (a1·E − a2·M)/den, clipped to [0, M]
                    e_sum -= (a2 / den) * m_sum
                    np.maximum(e_sum, 0.0, out=e_sum)
                    np.minimum(e_sum, m_sum, out=e_sum)
                    m_sum -= e_sum
                    if carry is not None:
                        m_sum[carry[0] - d_lo :] += carry[1]
                    carry = (d_lo, e_sum)
                m_sum *= big[d_lo:]
                part[k + d_lo : k + n] += m_sum
                flush()
            if carry is not None:  # the split of the run at the largest offset
                k, d_lo = live[0][0] + 1, carry[0]
                part[k + d_lo : k + n] += big[d_lo:] * carry[1]
                flush()
        if used:
            out[:] += part
            part[:] = 0.0
        if n > d_max + 1:  # d > D: offset 0 (lower), or split to offsets 0 and 1 (upper)
            _add_tail(out, big, small, kern)

    if mirror and a is b:
        # x ⊕ x: the two operand orders give the same pairs off the diagonal, so the law is
        # 2·(pairs at d ≥ 1) + (d = 0): doubling is exact, and each output gets fewer
        # operations than through both orders (kernel_roundoff still bounds it)
        one(a, a, True)
        out *= 2
        for k, w in kern.row0:
            out[k : k + n] += w * (a * a)
        return out.astype(a.dtype)
    one(a, b, False)
    if mirror:
        one(b, a, True)
    return out.astype(a.dtype)


def _align(a: GeoPair, b: GeoPair):
    lo = min(a.k0, b.k0)
    hi = max(a.k0 + a.p.size, b.k0 + b.p.size)

    def pad(x, k0):
        if x is None:
            return None
        out = np.zeros(hi - lo, dtype=x.dtype)
        out[k0 - lo : k0 - lo + x.size] = x
        return out

    return lo, pad(a.p, a.k0), pad(a.q, a.k0), pad(b.p, b.k0), pad(b.q, b.k0)


def _conv(x: np.ndarray, y: np.ndarray, kern: _Kernel) -> np.ndarray:
    return _pair_sum(x, y, kern, mirror=True)


def combine(a: GeoPair, b: GeoPair, kern: _Kernel, *, top: int) -> GeoPair:
    """Block of ``a.m + b.m`` coordinates (``top``: index of the largest node kept).

    The pair sums have round-off at most ``r =`` :func:`kernel_roundoff` relative to the
    mass (FIR dot products, additions in long double, a contracting first-order recursion
    and prefix sums in long double; the clipped difference cum − geo is bounded relative to
    cum). Read as normalised laws, this costs (no error is carried to later levels, see
    :func:`pacpriv.dpsgd._exact.lattice._combine`): upper chain, ``q_inf`` is raised
    by ``3.01·r`` (stop-loss transform, mean likelihood ratio ≤ 1: ``2r`` for the entries
    and the normalisation, and up to ``r`` more for the split ``cum − geo`` to offsets 0/1,
    whose absolute error is relative to ``cum``, the mass of both offsets); lower chain (no
    subtraction), the scale ``κ`` by ``4.01·(r + 3u)`` (masses and conditional means ``q/p``,
    each within ``r``).
    """
    m = a.m + b.m
    upper = kern.upper
    same = a is b
    lo, ap, aq, bp, bq = _align(a, b)
    n = ap.size
    p = _conv(ap, ap if same else bp, kern)  # the same array: the x ⊕ x path of _pair_sum
    q = None
    if not upper:
        if same:  # (Q_a ⊗ P_a + P_a ⊗ Q_a)/2 has the law of the sum of Q_a ⊗ P_a
            q = _conv(aq, ap, kern)
        else:
            q = (a.m * _conv(aq, bp, kern) + b.m * _conv(ap, bq, kern)) / m
    # arithmetic in the arrays' precision (long double: lower chain of large-E evaluations)
    rel = kernel_roundoff(kern, n, ap.dtype)
    err = propagate_error(a, b, 0.0)
    if upper:
        q_inf = (a.m * a.q_inf + b.m * b.q_inf) / m * (1.0 + 8.0 * _U) + 3.01 * rel
        out = GeoPair(lo, a.g, p, q, q_inf, m, a.big_m, err, 0.0,
                      (a.m * a.slack + b.m * b.slack) / m + 3.01 * rel)
    else:
        out = GeoPair(lo, a.g, p, q, 0.0, m, a.big_m, err,
                      max(a.kappa, b.kappa) + 4.01 * (rel + 3.0 * _U))
    return _trim(out, upper=upper, top=top)


def _trim(x: GeoPair, *, upper: bool, top: int) -> GeoPair:
    """Bottom tail (P-mass ≤ 1e-18) up / merged; nodes above ``top`` to top/+∞ or merged.

    The end-node sums have relative round-off ``rel`` (pairwise summation): upper, ``q_inf``
    is raised by ``rel`` times the moved masses (likelihood-ratio weighted); lower, ``κ`` by
    ``4.01·2·rel``.
    """
    p, q = x.p, x.q
    k = x.k0 + np.arange(p.size)
    cum = np.cumsum(p)
    lo = int(np.searchsorted(cum, _TINY_BOTTOM, side="right"))
    nz = np.nonzero(p > 0)[0]
    hi = int(nz[-1]) if nz.size else p.size - 1
    hi = min(hi, top - x.k0)
    lo = min(lo, hi)
    if lo == 0 and hi == p.size - 1:
        return x
    rel = (sum_error_factor(p.size) + 2.0) * _U
    newp = p[lo : hi + 1].copy()
    newp[0] += p[:lo].sum()
    above = p[hi + 1 :]
    newp[-1] += above.sum()
    q_inf, kappa, slack = x.q_inf, x.kappa, x.slack
    newq = None
    if q is None:
        scale = x.big_m / x.m
        moved = 0.0
        if above.size:
            # e^{k g} − e^{k_hi g} without cancellation: e^{k_hi g}·expm1((k − k_hi) g), each
            # factor within (|k_hi g| + 4)u (the rounding of the exponent k_hi·g)
            lr = math.exp(k[hi] * x.g) * np.expm1((k[hi + 1 :] - k[hi]) * x.g)
            moved = dot_upper(lr, above) * scale * (1.0 + (abs(k[hi] * x.g) + 8.0) * _U)
        extra = rel * (moved + float(p[:lo].sum()) * (1.0 + math.exp(k[lo] * x.g) * scale)
                       + float(above.sum()) * (1.0 + math.exp(k[hi] * x.g) * scale))
        q_inf += moved * (1.0 + rel) + extra
        slack += extra
    else:
        newq = q[lo : hi + 1].copy()
        newq[0] += q[:lo].sum()
        newq[-1] += q[hi + 1 :].sum()
        kappa += 4.01 * 2.0 * rel
    return GeoPair(x.k0 + lo, x.g, newp, newq, q_inf, x.m, x.big_m, x.err, kappa, slack)


def _coordinate(s: float, steps: int, g: float, k_lo: int, k_hi: int, upper: bool,
                min_dln: float = 0.0) -> GeoPair:
    """One coordinate: ``W/M`` on nodes ``k_lo..k_hi`` (bottom tail up/merged, top split/merged).

    Round-off of the cell masses (per-cell bounds from
    :func:`pacpriv.dpsgd._exact.lattice.cell_masses_bounded`) as in
    :func:`pacpriv.dpsgd._exact.lattice._coordinate`: upper, a stop-loss slack added to ``q_inf``;
    lower, a relative scale ``κ`` (cells with large relative errors, far tails, go to the l1
    error ``err``, see :func:`pacpriv.dpsgd._exact.lattice.kappa_split`).
    """
    u = _U
    k = np.arange(k_lo, k_hi + 1)
    nodes = np.exp(k * g) * steps  # W-space
    if not upper:
        # cells narrower than ``min_dln`` in ln W are merged into groups labelled by their
        # lowest node (a garbling), so that the group masses have small relative errors
        if min_dln > 0:
            key = np.floor(np.log(nodes[:-1]) / min_dln)
            starts = np.concatenate(([0], np.nonzero(np.diff(key) != 0)[0] + 1))
        else:
            starts = np.arange(nodes.size - 1)
        edges = np.concatenate(([0.0], nodes[starts[1:]], [nodes[-1], np.inf]))
        pg, qg, ep, eq = cell_masses_bounded(edges, s)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where((pg > 0) & (qg > 0), ep / pg + eq / qg, np.inf)
        ok = rel <= kappa_split(rel, ep + eq, steps)
        kappa = 4.01 * (float(rel[ok].max()) if ok.any() else 0.0)
        err = float(np.sum(ep[~ok]) + np.sum(eq[~ok]))
        pc = np.zeros(k.size)
        qc = np.zeros(k.size)
        pc[starts] = pg[:-1]
        qc[starts] = qg[:-1]
        pc[-1] = pg[-1]
        qc[-1] = qg[-1]
        return GeoPair(k_lo, g, pc, qc, 0.0, 1, steps, err, kappa)
    edges = np.concatenate(([0.0], nodes, [np.inf]))
    pc, qc, ep, eq = cell_masses_bounded(edges, s)
    pc[1] += pc[0]
    qc[1] += qc[0]
    ep[1] += ep[0] + u * pc[1]
    eq[1] += eq[0] + u * qc[1]
    pc, qc, ep, eq = pc[1:], qc[1:], ep[1:], eq[1:]
    w_hi = np.append(nodes[1:], nodes[-1])
    # cell-mass errors (stop-loss perturbation), and the entries of p below (two products and
    # a sum each: 3u relative, Σ p_k (w_k + 1) ≤ 2 + ε)
    slack = float(np.sum(eq) + np.dot(ep, w_hi + 1.0)) * 1.01 + 64.0 * u
    p = np.zeros(k.size)
    pcell, qcell = pc[:-1], qc[:-1]
    lo_w = nodes[:-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = np.where(pcell > 0, (qcell / pcell - lo_w) / (lo_w * math.expm1(g)), 0.0)
    alpha = np.clip(alpha + 1e-12, 0.0, 1.0)  # nudge up: only increases the convex order
    p[:-1] += (1.0 - alpha) * pcell
    p[1:] += alpha * pcell
    p[-1] += pc[-1]
    mean = dot_lower(nodes, p)  # a higher q_inf is always valid
    q_inf = max(qc[-1] - nodes[-1] * pc[-1], 1.0 - mean, 0.0) + 1e-16 + slack
    return GeoPair(k_lo, g, p, None, q_inf, 1, steps, 0.0, 0.0, slack)


def geo_grid(
    sigma: float, steps: int, epochs: int, c: float, tail: float
) -> tuple[int, int, float]:
    """Grid step ``g`` and node range for ``x = S/M``.

    Bottom: a coordinate ``W < e^{−36}`` is moved up (upper) / merged (lower), so ``T`` moves
    by at most ``e^{−36}``. Top: ``T ≤ e^{B}`` with the coordinate's Q-tail beyond ``M e^B``
    at most ``tail/E``.
    """
    s = 1.0 / sigma
    g = 1.0 / c
    z = float(-special.ndtri(min(0.5, tail / epochs)))
    ln_top = min(max(0.5 * s * s + s * z - math.log(steps), 3.0), 60.0)
    ln_bot = -36.0 - math.log(steps)
    return math.floor(ln_bot / g), math.ceil(ln_top / g), g


#: coarsest grid resolution of the lower levels (points per unit of ln x)
GEO_C_MIN = 128.0
#: the grid is refined (step halved) once every this many levels towards the top
GEO_REFINE_EVERY = 3


def refine(x: GeoPair | None, factor: int) -> GeoPair | None:
    """The same pair on the grid of step ``g/factor`` (``factor`` a positive integer).

    Node ``k`` of step ``g`` is node ``k·factor`` of step ``g/factor``: the law is embedded
    unchanged (no arithmetic, no round-off), only the empty nodes in between are added.
    """
    if x is None or factor == 1:
        return x

    def embed(a: np.ndarray | None) -> np.ndarray | None:
        if a is None:
            return None
        out = np.zeros((a.size - 1) * factor + 1, dtype=a.dtype)
        out[::factor] = a
        return out

    p = embed(x.p)
    assert p is not None
    return GeoPair(x.k0 * factor, x.g / factor, p, embed(x.q), x.q_inf, x.m, x.big_m, x.err,
                   x.kappa, x.slack)


def refinement_schedule(levels: int, c: float) -> tuple[float, int]:
    """``(c0, J)``: the coordinates start at resolution ``c0 = c/2^J``, refined ``J`` times.

    The split (upper) / rounding (lower) at a level of blocks of ``m`` coordinates adds
    about ``g²x²/4`` to the variance of each block value ``x ≈ m/M``, ``(g²/4)·(m/M)`` over the
    epoch: the top levels dominate, each level below contributes half as much at equal ``g``.
    So only the top levels (of the ``levels`` doublings) need the fine step ``1/c``; going
    down, the step doubles every ``GEO_REFINE_EVERY`` levels (their contributions still shrink
    geometrically, by ``2^{-1/3}`` per level) down to about ``GEO_C_MIN`` points per unit. The
    cost of a level grows like the square of its resolution, so the epoch costs about as much
    as its top levels at ``c``.
    """
    if c <= GEO_C_MIN:
        return c, 0
    j = min(math.floor(math.log2(c / GEO_C_MIN) + 1e-9), (max(levels, 1) - 1) // GEO_REFINE_EVERY)
    return c / 2**j, j


def geo_blocks(sigma: float, steps: int, epochs: int, *, c: float, upper: bool, tail: float,
               levels: int, tick=None, extended: bool = False,
               min_dln: float = 0.0) -> tuple[GeoPair, GeoPair | None, int, int]:
    """The first ``levels`` doublings on the geometric grid: ``(cur, acc, bits, top)``.

    ``cur`` is a block of ``2^levels`` coordinates, ``acc`` the sum of the blocks of the lower
    bits of ``steps`` (None if they are all zero) and ``bits = steps >> levels``, so that the
    epoch is ``acc ⊕ cur^{⊕ bits}`` (``extended``: arrays in long double; ``min_dln``: see
    :func:`_coordinate`); ``top`` is the index of the largest node kept. ``c`` is the
    resolution (points per unit of ln x) of the last levels; lower levels use coarser steps
    (see :func:`refinement_schedule`), refined by exact embedding (:func:`refine`) on the way
    up.
    """
    c0, n_refine = refinement_schedule(levels, c)
    k_lo, k_hi, g = geo_grid(sigma, steps, epochs, c0, tail)
    kern = _kernel(g, upper)
    cur = _trim(_coordinate(1.0 / sigma, steps, g, k_lo, k_hi, upper, min_dln), upper=upper,
                top=k_hi)
    if extended:
        # sums in long double (lower chain of large-E evaluations: its relative round-off
        # becomes a scale κ that costs E·κ); the float64 masses are cast exactly
        cur.p = cur.p.astype(np.longdouble)
        cur.q = None if cur.q is None else cur.q.astype(np.longdouble)
    acc = None
    bits = steps
    done = 0  # refinements applied so far
    for level in range(levels):
        if bits & 1:
            acc = cur if acc is None else combine(acc, cur, kern, top=k_hi)
        bits >>= 1
        # this doubling makes level ``level + 1``, the ``from_top``-th from the last
        from_top = levels - level
        want = n_refine - min(n_refine, (from_top - 1) // GEO_REFINE_EVERY)
        if want > done:
            factor = 2 ** (want - done)
            refined_cur = refine(cur, factor)
            assert refined_cur is not None
            cur, acc = refined_cur, refine(acc, factor)
            k_hi *= factor
            g /= factor
            kern = _kernel(g, upper)
            done = want
        cur = combine(cur, cur, kern, top=k_hi)
        if tick is not None:
            tick()
    return cur, acc, bits, k_hi


def epoch_geo(sigma: float, steps: int, epochs: int, *, c: float, upper: bool, tail: float,
              tick=None) -> GeoPair:
    """One epoch's pair for ``T = S/M`` by binary doubling on the geometric grid."""
    levels = steps.bit_length() - 1
    cur, acc, bits, top = geo_blocks(sigma, steps, epochs, c=c, upper=upper, tail=tail,
                                     levels=levels, tick=tick)
    assert bits == 1
    return cur if acc is None else combine(acc, cur, _kernel(cur.g, upper), top=top)
