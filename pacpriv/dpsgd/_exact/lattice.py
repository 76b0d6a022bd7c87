"""Certified numerics for the total variation of the random-allocation dominating pair.

Private helper of :mod:`pacpriv.dpsgd.exact`. Notation: one epoch's likelihood ratio under P
is ``T = (1/M) Σ_i W_i`` with ``W_i = exp(y_i/σ − 1/(2σ²))`` i.i.d., ``y_i ~ N(0, 1)``
(a mean-one log-normal); ``TV(P^⊗E, Q^⊗E) = E_P[(Π_e T_e − 1)_+]``.

Two chains of *lattice pairs* are built, each a pair of measures ``(p, q)`` on an integer
lattice:

* **upper** (dominating): every step is an increasing-convex-order increase of the P-law of
  the likelihood ratio (mean-preserving splits of an atom to the two ends of its cell, a split
  to "+∞" for the top tail, a move *up* of the negligible bottom tail). ``x ↦ E[(x·R − 1)_+]``
  is increasing and convex and the order is kept by independent sums and products, so every
  such step can only increase the final TV (Blackwell dominance).
* **lower** (dominated): every step is a garbling (data processing): the coordinate's
  outcome is quantised to a cell, partial sums are grouped by the sum of cell labels, cells
  are merged, the epoch's outcome is binned by its own likelihood ratio; data processing can
  only decrease TV, and the final TV of a garbled pair is computed exactly.

Both errors are second order in the cell widths (a mean-preserving spread or a conditional
mean within a cell), so coarse lattices give tight intervals. The E-fold composition is an
FFT power over a window whose outside mass is bounded by a Chernoff bound and added on the
pessimistic side of each bound.

Round-off is bounded, not assumed: the upper chain converts it into Q-mass at ``+∞``
(``q_inf``, a stop-loss slack; see :func:`_combine`), the lower chain into a scale ``κ`` of
its likelihood ratios (relative errors; see :attr:`_Lattice.kappa`) or, for FFT
convolutions of the later levels, an l1 error (:func:`propagate_error`). Neither the slack
nor ``κ`` is multiplied by the number of steps M, which an l1 error would be.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import fft as sp_fft
from scipy import signal, special

from pacpriv.dpsgd._exact.roundoff import (  # noqa: F401  (re-exported for the grid modules)
    _LD_U,
    _TINY,
    _U,
    dot_lower,
    dot_upper,
    fft_conv_error_l2,
    sum_error_factor,
    unit_roundoff,
)

_MAX_POINTS = 2**21  # cap of the coordinate lattice (wider interval beyond, still valid)
_MAX_LEN = 2**22  # cap of every block lattice: coarsened beyond (valid in both chains)
_TINY_BOTTOM = 1e-17  # bottom-tail mass moved up (upper) / merged (lower) at every level


@dataclass
class _Lattice:
    """Pair on the S-lattice ``S = (n0 + i)·h`` for a block of ``m`` coordinates."""

    n0: int
    h: float
    p: np.ndarray
    q: np.ndarray | None  # lower chain only; upper chain has q = (S/m)·p
    q_inf: float  # upper chain: Q-mass with likelihood ratio +inf
    m: int
    err: float = 0.0  # round-off bound, see propagate_error
    big_m: int = 1  # M (steps per epoch)
    noise: float = 0.0  # round-off bound of the last convolution (epoch units), see _trim
    #: lower chain: the stored pair, read as the law of the conditional means ``S = m·q/p``,
    #: satisfies ``(1 − kappa)·S ≤_icx`` the exact block sum (relative round-off, see
    #: :func:`_coordinate`); it composes as ``max`` over blocks plus each step's own part
    kappa: float = 0.0
    #: upper chain: total round-off slack added to ``q_inf`` (reported only)
    slack: float = 0.0
    #: upper chain: l1 size of the FFT noise carried through the doubling (the old
    #: propagate_error measure). Not part of the bound (the slack is); it predicts how much
    #: noise-induced looseness float64 adds, and selects long double (see exact.py)
    noise_l1: float = 0.0

    def lr(self) -> np.ndarray:
        """The block's likelihood ratio ``S/m`` at each node."""
        return (self.n0 + np.arange(self.p.size)) * (self.h / self.m)


def _cell_masses(edges: np.ndarray, s: float) -> tuple[np.ndarray, np.ndarray]:
    """P- and Q-mass of W in ``[edges[k], edges[k+1])``; ln W ~ N(∓s²/2, s²) under P/Q."""
    pc, qc, _, _ = cell_masses_bounded(edges, s)
    return pc, qc


#: ndtr relative error model ``(C0 + C2·z²)·u`` (2x the largest error measured vs mpmath)
_NDTR_C0, _NDTR_C2 = 16.0, 4.0
_NDTR_FLOOR = 1e-300


def cell_masses_bounded(
    edges: np.ndarray, s: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cell masses of W under P and Q with per-cell absolute error bounds.

    Returns ``(pc, qc, abs_p, abs_q)``. The partition is the one defined by the *computed*
    P-side edges ``ẑ = fl((fl(ln w) + s²/2)/s)`` (exact floats), so ``pc`` errs only by the
    ``ndtr`` evaluations: a tail value ``Φ(−|z|)`` is taken to have relative accuracy
    ``(16 + 4z²)u`` (the rounding of the argument ``|z|/√2`` of ``erfc`` alone moves
    ``ln erfc`` by ``≈ z²u``; scipy states no bound, so this one is twice the largest error
    measured against mpmath at 40 digits for ``|z| ≤ 37.5``, see the tests), plus an
    absolute ``1e-300`` near the subnormal range, and a difference ``A − B`` of two such
    values to ``(ε_A A + ε_B B)/(A − B) + u``. The Q-masses of the same cells need the edges
    ``ẑ − s``; the computed Q-side edges differ from them by at most
    ``δ = u(4(|ln w| + s²/2)/s + 2(|z_P| + |z_Q|) + s)`` (two roundings of each ``z``, of
    ``s²``), a sliver of Q-mass at most ``1.01·δ·φ(ẑ_Q)`` per edge.
    """
    u = _U
    with np.errstate(divide="ignore", invalid="ignore"):
        logw = np.log(edges)
    mu_p, mu_q = -0.5 * s * s, 0.5 * s * s
    z_p = (logw - mu_p) / s
    z_q = (logw - mu_q) / s
    fin = np.isfinite(logw)
    with np.errstate(invalid="ignore"):
        delta = np.where(
            fin, u * (4.0 * (np.abs(logw) + 0.5 * s * s) / s + 2.0 * (np.abs(z_p) + np.abs(z_q))
                      + s) * 1.01, 0.0)
    out = []
    for z in (z_p, z_q):
        lo, hi = z[:-1], z[1:]
        left = lo < 0
        a = np.where(left, special.ndtr(hi), special.ndtr(-lo))
        b = np.where(left, special.ndtr(lo), special.ndtr(-hi))
        za = np.where(left, hi, lo)
        zb = np.where(left, lo, hi)
        with np.errstate(invalid="ignore"):
            ea = np.where(np.isfinite(za), _NDTR_C0 + _NDTR_C2 * za * za, _NDTR_C0)
            eb = np.where(np.isfinite(zb), _NDTR_C0 + _NDTR_C2 * zb * zb, _NDTR_C0)
        mass = np.maximum(a - b, 0.0)
        # + an absolute floor for values near the subnormal range (|z| > 37.5)
        err = (ea * a + eb * b) * u + u * mass + _NDTR_FLOOR
        out.append((mass, err))
    (pc, abs_p), (qc, abs_q) = out
    phi = np.where(np.isfinite(z_q), np.exp(-0.5 * np.where(np.isfinite(z_q), z_q, 0.0) ** 2),
                   0.0) / math.sqrt(2.0 * math.pi)
    sliver = 1.01 * delta * phi
    abs_q = abs_q + sliver[:-1] + sliver[1:]
    return pc, qc, abs_p, abs_q


def _coordinate(s: float, h: float, j0: int, k: int, upper: bool, big_m: int,
                min_dln: float = 0.0) -> _Lattice:
    """Discretise one coordinate's dichotomy on ``{j0·h, ..., k·h}`` (+ both tails).

    The bottom cell ``[0, j0·h)`` (P-mass below ~1e-18) is moved up to ``j0·h`` (upper chain)
    or merged into the first cell (lower chain); the top cell ``[k·h, ∞)`` is split to
    ``k·h`` and ``+∞`` (upper) or kept as one cell (lower).

    Round-off (see :func:`cell_masses_bounded` for the per-cell error bounds) is not carried
    as an l1 error through the M-fold product (that would multiply it by M):

    * upper chain: the stored P-law, read as normalised, is an increasing-convex-order
      increase of the exact split *provided* ``q_inf`` is raised by the bound ``slack`` on
      ``Σ_k |Δ(p_k m_k)| + |Δp_k|(w_{k+1} + 1)`` (stop-loss transform perturbation, ``m_k``
      the cell mean); it is added to ``q_inf``;
    * lower chain: narrow cells (z-width below ``_LOWER_MIN_DZ``, and ln W-width below
      ``min_dln``) are merged into groups
      labelled by their lowest node (a garbling), so that group masses have small *relative*
      errors ``r``; the stored pair, read as the law of the conditional means ``q_k/p_k``, is
      then convex-order below ``(1 − κ)^{-1}`` times the exact one with
      ``κ = 4.01·max_k(r_p + r_q)`` (see :attr:`_Lattice.kappa`); groups whose relative error
      is large (far tails, see :func:`kappa_split`) go to the l1 error ``err`` instead.
    """
    u = _U
    idx = np.arange(j0, k + 1, dtype=np.float64)
    if upper:
        edges = np.concatenate(([0.0], idx * h, [np.inf]))
        pc, qc, ep, eq = cell_masses_bounded(edges, s)
        pc[1] += pc[0]
        qc[1] += qc[0]
        ep[1] += ep[0] + u * pc[1]
        eq[1] += eq[0] + u * qc[1]
        tot = pc.sum()
        pc, qc, ep, eq = pc[1:] / tot, qc[1:] / qc.sum(), ep[1:] / tot, eq[1:] / qc.sum()
        w_hi = np.append(idx[1:] * h, k * h)
        # stop-loss perturbation of the split (means q/p and masses p), normalisations
        slack = float(np.sum(eq) + np.dot(ep, w_hi + 1.0)) * 1.01
        slack += 8.0 * (sum_error_factor(pc.size) + 2.0) * u * 2.0
        p = np.zeros(k - j0 + 1)
        pcell, qcell = pc[:-1], qc[:-1]
        with np.errstate(invalid="ignore", divide="ignore"):
            alpha = np.where(pcell > 0, qcell / pcell / h - idx[:-1], 0.0)
        alpha = np.clip(alpha + 1e-12, 0.0, 1.0)  # nudge up: only increases the convex order
        p[:-1] += (1.0 - alpha) * pcell
        p[1:] += alpha * pcell
        p[-1] += pc[-1]
        p /= p.sum()
        q_inf = max(qc[-1] - k * h * pc[-1], 1.0 - dot_lower(idx * h, p), 0.0) + 1e-16
        out = _Lattice(j0, h, p, None, q_inf + slack, 1, 0.0, big_m)
        out.slack = slack
        return out
    # lower chain: group narrow cells (a garbling), each group labelled by its lowest node
    w_lo = idx[:-1] * h
    with np.errstate(divide="ignore"):
        key = np.floor(np.log(w_lo) / max(s * _LOWER_MIN_DZ, min_dln))
    key[~np.isfinite(key)] = -1e300
    starts = np.concatenate(([0], np.nonzero(np.diff(key) != 0)[0] + 1))
    edges = np.concatenate(([0.0], w_lo[starts[1:]] if starts.size > 1 else [], [k * h, np.inf]))
    pg, qg, ep, eq = cell_masses_bounded(np.asarray(edges, dtype=np.float64), s)
    # groups: starts (cells j0 + starts), then the top cell [k h, inf)
    sp, sq = pg.sum(), qg.sum()
    pg, qg, ep, eq = pg / sp, qg / sq, ep / sp, eq / sq
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where((pg > 0) & (qg > 0), ep / pg + eq / qg, np.inf)
    ok = rel <= kappa_split(rel, ep + eq, big_m)
    kappa = 4.01 * (float(rel[ok].max()) if ok.any() else 0.0)
    # the separate normalisations move every position q/p by Σp̂/Σq̂ (exactly 1 for exact
    # masses): at most the summed errors plus the rounding of the sums
    kappa += 4.01 * (float(ep.sum() + eq.sum()) + 2.0 * (sum_error_factor(pg.size) + 2.0) * u)
    err = float(np.sum(ep[~ok]) + np.sum(eq[~ok]))
    pc = np.zeros(k - j0 + 1)
    qc = np.zeros(k - j0 + 1)
    pc[starts] = pg[:-1]
    qc[starts] = qg[:-1]
    pc[-1] = pg[-1]
    qc[-1] = qg[-1]
    out = _Lattice(j0, h, pc, qc, 0.0, 1, err, big_m)
    out.kappa = kappa
    return out


def kappa_split(rel: np.ndarray, abs_err: np.ndarray, big_m: int) -> float:
    """Largest relative error sent to κ; cells above it go to the l1 error (lower chain).

    A relative error ``r`` in κ costs about ``4.01·r`` per epoch; an l1 error ``a`` of the
    coordinate costs about ``2·M·a`` (it is multiplied by the M-fold product). The split
    minimises the sum over the cells' ``(rel, abs_err)``.
    """
    fin = np.isfinite(rel)
    if not fin.any():
        return 0.0
    order = np.argsort(rel[fin])
    r = rel[fin][order]
    a = abs_err[fin][order]
    # cost if cells 0..k go to κ: 4.01 r_k + 2M·(sum of a beyond k, plus the non-finite ones)
    beyond = np.concatenate((np.cumsum(a[::-1])[::-1][1:], [0.0])) + float(abs_err[~fin].sum())
    cost = 4.01 * r + 2.0 * big_m * beyond
    return float(r[int(np.argmin(cost))])


#: Lower chain: coordinate cells narrower than this in z are merged (relative accuracy).
_LOWER_MIN_DZ = 2e-3


def _conv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(signal.fftconvolve(a, b), 0.0)


def _convs(pairs: list[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
    """``[_conv(x, y) for x, y in pairs]`` with every distinct operand transformed once.

    The same arithmetic as :func:`scipy.signal.fftconvolve` (a real FFT of length
    ``next_fast_len(len x + len y − 1)``, the pointwise product and the inverse), so the
    round-off bound :func:`fft_conv_error_l2` of each convolution holds unchanged; an operand
    shared by several convolutions of one length (a self-convolution, the P-law of a block
    convolved with both Q-laws) is transformed once instead of once per use.
    """
    spectra: dict = {}

    def spectrum(x: np.ndarray, n: int) -> np.ndarray:
        key = (id(x), n)
        if key not in spectra:
            spectra[key] = (x, sp_fft.rfft(x, n))  # keep x alive: its id stays unique
        return spectra[key][1]

    out = []
    for x, y in pairs:
        size = x.size + y.size - 1
        n = sp_fft.next_fast_len(size, real=True)
        z = sp_fft.irfft(spectrum(x, n) * spectrum(y, n), n)[:size]
        out.append(np.maximum(z, 0.0))
    return out


def _with(x: _Lattice, **kw) -> _Lattice:
    """Copy of ``x`` with some fields replaced (kappa, slack and err carried along)."""
    out = _Lattice(x.n0, x.h, x.p, x.q, x.q_inf, x.m, x.err, x.big_m, x.noise, x.kappa, x.slack,
                   x.noise_l1)
    for k, v in kw.items():
        setattr(out, k, v)
    return out


def _normalise(x: _Lattice) -> _Lattice:
    """Upper chain: raise ``q_inf`` so that the Q-mass is at least 1.

    (Mean of the likelihood ratio >= 1 keeps the increasing-convex order.) The masses are not
    rescaled: the stored P-law is *read* as normalised (``p/Σp``) by every later step, which
    costs nothing (see :func:`_combine`).
    """
    if x.q is not None:
        return x
    # a lower bound on the mean (a higher q_inf is always valid)
    total = float(x.p.sum()) * (1.0 + (sum_error_factor(x.p.size) + 1.0) * _U)
    mean = dot_lower(x.lr(), x.p) / total * (1.0 - 2.0 * _U)
    return _with(x, q_inf=max(x.q_inf, 1.0 - mean))


def propagate_error(a, b, comp: float) -> float:
    """Lower chain (linear lattice): l1 round-off bound of the block ``a ⊕ b``.

    The error of a block is measured as ``Σ_k |Δp_k| (1 + S_k/M)`` (the larger of that and the
    l1 error of its Q-law): this bounds its contribution to the P-law and to the
    Q-law ``T·p`` of the whole epoch, since the epoch's ``T = (S_block + S_rest)/M`` and
    ``E[S_rest]/M ≤ (M − m)/M·(1 + ε)``. Convolving with the other block multiplies an error
    by at most ``1 + 1.01·m_other/M``.
    """
    grow_a = 1.0 + 1.01 * b.m / b.big_m
    grow_b = 1.0 + 1.01 * a.m / a.big_m
    return a.err * grow_a + b.err * grow_b + 2.0 * a.err * b.err + comp


def _combine(a: _Lattice, b: _Lattice, direct: bool = True) -> _Lattice:
    """Block of ``a.m + b.m`` coordinates: S adds; Q = mix of (Q_a ⊗ P_b, P_a ⊗ Q_b).

    Round-off of the FFT convolution (``Δ``, with ``‖Δ‖₂ ≤ e`` from
    :func:`fft_conv_error_l2`):

    * upper chain: with the stored laws read as normalised, the computed ``X̂ = p̂/Σp̂``
      differs from the exact ``X = conv(X_a, X_b)`` by ``(Δ − X·ΣΔ)/Σp̂``, so its stop-loss
      transform ``E[(S − t)_+]`` is at least that of ``X`` minus
      ``(Σ_k |Δ_k| S_k + m·‖Δ‖₁)/Σp̂`` (``E_X[S] ≤ m``). Raising ``q_inf`` by that amount
      over ``m`` (``≤ e·(‖S/m‖₂ + √n)/Σp̂``, Cauchy–Schwarz) keeps the block an
      increasing-convex-order upper bound of the exact one, *without* any error carried to
      later levels (``q_inf`` of a combined block is the ``m``-weighted mean of those of its
      parts: exactly one coordinate of the epoch is shifted under Q);
    * lower chain: the l1 error is carried (:func:`propagate_error`).

    ``direct=False``: no direct convolution of small blocks (see :func:`epoch_lattice`).
    """
    m = a.m + b.m
    if direct and a.p.size * b.p.size <= _DIRECT_MAX_WORK and 64 * m <= a.big_m:
        return _combine_direct(a, b)
    if a.q is None:
        (p,) = _convs([(a.p, b.p)])
    elif a is b:
        p, q_aa = _convs([(a.p, a.p), (a.q, a.p)])
    else:
        assert b.q is not None  # both operands of a lower chain carry their Q-law
        p, q_ab, q_ba = _convs([(a.p, b.p), (a.q, b.p), (a.p, b.q)])
    norms: dict = {}  # each operand's norms once (see fft_conv_error_l2)
    e_p = fft_conv_error_l2(a.p, b.p, norms)
    u = unit_roundoff(p.dtype)
    q = None
    n0 = a.n0 + b.n0
    if a.q is not None:
        if a is b:
            q = q_aa
            e_q = fft_conv_error_l2(a.q, a.p, norms)
        else:
            assert b.q is not None
            q = (a.m * q_ab + b.m * q_ba) / m
            e_q = max(fft_conv_error_l2(a.q, b.p, norms), fft_conv_error_l2(a.p, b.q, norms))
        # l1 <= sqrt(n) l2 for the p- and q-errors
        comp = math.sqrt(p.size) * max(e_p, e_q)
        err = propagate_error(a, b, comp + 4.0 * sum_error_factor(p.size) * u)
        out = _Lattice(n0, a.h, p, q, 0.0, m, err, a.big_m, comp, max(a.kappa, b.kappa))
        return out
    lr = (n0 + np.arange(p.size)) * (a.h / m)
    total = float(p.sum())
    slack = e_p * (float(np.linalg.norm(lr)) + math.sqrt(p.size))
    slack = (slack + 4.0 * sum_error_factor(p.size) * u) * 1.01 / max(total, 0.5)
    q_inf = (a.m * a.q_inf + b.m * b.q_inf) / m * (1.0 + 8.0 * _U)
    out = _normalise(_Lattice(n0, a.h, p, None, q_inf, m, 0.0, a.big_m))
    out.q_inf += slack
    out.slack = (a.m * a.slack + b.m * b.slack) / m + slack
    # FFT noise floor of this convolution in epoch units (S/M), used by _trim
    out.noise = float(np.linalg.norm(1.0 + (n0 + np.arange(p.size)) * (a.h / a.big_m))) * e_p
    grow_a = 1.0 + 1.01 * b.m / b.big_m
    grow_b = 1.0 + 1.01 * a.m / a.big_m
    out.noise_l1 = a.noise_l1 * grow_a + b.noise_l1 * grow_b + out.noise
    return out


#: Direct (non-FFT) convolution when ``len(a)·len(b)`` is at most this and the block is
#: small (``64·m ≤ M``), where an l1 error (lower chain) or an FFT noise floor (upper chain)
#: would be multiplied by ``M/m``.
_DIRECT_MAX_WORK = 1.5e8
#: ... in long double (no BLAS: ~2.4 ns per multiply-add) up to this work, else in float64
_DIRECT_LD_MAX_WORK = 2e7


def _combine_direct(a: _Lattice, b: _Lattice) -> _Lattice:
    """:func:`_combine` by direct convolution (small blocks, where FFT noise would be amplified).

    Every output is a sum of at most ``k = min(len a, len b)`` products of non-negative
    numbers, so it has relative error at most ``γ_{k+1} = (k + 1)u/(1 − (k + 1)u)`` (any
    summation order; Higham 2002, §3.1). Long-double chains convolve in long double while the
    work is at most ``_DIRECT_LD_MAX_WORK`` (about 17x slower than float64), otherwise in
    float64 (``+u`` for the cast back). Relative errors need no l1 term, which the doubling
    would multiply by ``M/m``:

    * lower chain: ``+3u`` for the Q-mixture; a relative error of the masses and of the
      conditional means ``q/p``, accounted for in the scale ``κ`` (``4.01`` times it, see
      :func:`_coordinate`);
    * upper chain: the stored law read as normalised has every mass within a factor
      ``(1 ± γ)`` of the exact convolution's, so its stop-loss transform ``E[(S − t)_+]`` is at
      least ``(1 − γ)/(1 + γ)`` times the exact one, i.e. at most ``2γ/(1 + γ)·E[S]`` below it
      (``E[S] ≤ 1.01·m``); ``q_inf`` is raised by that over ``m`` (plus the sums' round-off),
      as in :func:`_combine`. There is no FFT noise floor, so :func:`_trim` cuts the top tail
      at ``top_q`` only (an FFT's floor, multiplied by ``M/m`` at the first levels, sent up
      to ~1e-9 of Q-mass per epoch to ``+∞`` in long double).
    """
    m = a.m + b.m
    dt = a.p.dtype
    long_ok = dt == np.float64 or a.p.size * b.p.size <= _DIRECT_LD_MAX_WORK
    work = dt if long_ok else np.float64
    u = unit_roundoff(work)
    ap, bp = a.p.astype(work, copy=False), b.p.astype(work, copy=False)
    p = np.convolve(ap, bp)
    k = min(ap.size, bp.size) + 1
    gamma = k * u / (1.0 - k * u)
    cast = _U if work != dt else 0.0
    n0 = a.n0 + b.n0
    if a.q is None:
        rel = gamma + cast
        q_inf = (a.m * a.q_inf + b.m * b.q_inf) / m * (1.0 + 8.0 * _U)
        out = _normalise(_Lattice(n0, a.h, p.astype(dt, copy=False), None, q_inf, m, 0.0,
                                  a.big_m))
        slack = (2.0 * rel / (1.0 - rel) * 1.01 + 4.0 * sum_error_factor(p.size) * u) * 1.01
        out.q_inf += slack
        out.slack = (a.m * a.slack + b.m * b.slack) / m + slack
        grow_a = 1.0 + 1.01 * b.m / b.big_m
        grow_b = 1.0 + 1.01 * a.m / a.big_m
        out.noise_l1 = a.noise_l1 * grow_a + b.noise_l1 * grow_b
        return out
    assert a.q is not None and b.q is not None  # lower chain only: both carry their Q-law
    aq, bq = a.q.astype(work, copy=False), b.q.astype(work, copy=False)
    if a is b:
        q = np.convolve(aq, ap)
    else:
        q = (a.m * np.convolve(aq, bp) + b.m * np.convolve(ap, bq)) / m
    rel = gamma + 3.0 * u + cast
    err = propagate_error(a, b, 0.0)
    kappa = max(a.kappa, b.kappa) + 4.01 * rel
    return _Lattice(n0, a.h, p.astype(dt, copy=False), q.astype(dt, copy=False), 0.0, m, err,
                    a.big_m, 0.0, kappa)


def _coarsen(x: _Lattice) -> _Lattice:
    """Double the lattice step: split odd atoms half/half (upper) or merge pairs (lower).

    Each entry is a sum of at most three non-negative terms (relative round-off ``2u``):
    upper, ``q_inf`` is raised by ``4u`` (stop-loss, normalised law); lower, ``κ`` by
    ``4.01·2·2u``.
    """
    p, q, n0 = x.p, x.q, x.n0
    u = unit_roundoff(p.dtype)
    if n0 % 2:
        p = np.concatenate(([0.0], p))
        q = None if q is None else np.concatenate(([0.0], q))
        n0 -= 1
    if p.size % 2 == 0:
        p = np.append(p, 0.0)
        q = None if q is None else np.append(q, 0.0)
    if q is None:
        even = p[0::2].copy()
        odd = p[1::2]
        even[:-1] += 0.5 * odd
        even[1:] += 0.5 * odd
        return _with(x, n0=n0 // 2, h=2 * x.h, p=even, q_inf=x.q_inf + 4.0 * u,
                     slack=x.slack + 4.0 * u, noise=0.0)
    pp = p[0::2].copy()
    pp[:-1] += p[1::2]
    qq = q[0::2].copy()
    qq[:-1] += q[1::2]
    return _with(x, n0=n0 // 2, h=2 * x.h, p=pp, q=qq, kappa=x.kappa + 16.04 * u, noise=0.0)


def _trim(x: _Lattice, top_q: float, s_cap: float) -> _Lattice:
    """Drop negligible tails on the safe side of each chain.

    The top tail is cut where its Q-mass is below ``top_q`` plus the FFT noise floor of the
    last convolution (``x.noise``, converted to block units): below that the values are
    indistinguishable from round-off, whose Q-weight grows with ``S``. Upper chain: the bottom
    tail moves up, the top tail is split to the last node and ``+∞`` (``q_inf``); lower chain:
    both are merged into the end nodes (a garbling). The end-node sums have relative
    round-off ``sum_error_factor·u``: upper, ``q_inf`` is raised by that times the moved
    masses (weighted by the likelihood ratio); lower, ``κ`` by ``4.01`` times it.
    """
    p, q = x.p, x.q
    u = unit_roundoff(p.dtype)
    top_q = top_q + x.noise * x.big_m / x.m
    cum = np.cumsum(p)
    lo = int(np.searchsorted(cum, _TINY_BOTTOM, side="right"))
    lr = x.lr()
    qmass = q if q is not None else lr * p
    tail = np.cumsum(qmass[::-1])[::-1]
    hi = int(np.searchsorted(-tail, -top_q, side="left"))  # first index with tail <= top_q
    hi = min(max(hi, lo), p.size - 1)
    hi_cap = math.floor(s_cap / x.h) - x.n0
    if hi_cap > lo:
        hi = min(hi, hi_cap)
    if lo == 0 and hi == p.size - 1:
        return x
    newp = p[lo : hi + 1].copy()
    newp[0] += p[:lo].sum()
    newp[-1] += p[hi + 1 :].sum()
    rel = (sum_error_factor(p.size) + 2.0) * u
    if q is None:
        moved = float(np.sum((lr[hi + 1 :] - lr[hi]) * p[hi + 1 :]))
        extra = rel * (float(p[:lo].sum()) * (1.0 + float(lr[lo])) + moved
                       + float(p[hi + 1 :].sum()) * (1.0 + float(lr[hi])))
        return _with(x, n0=x.n0 + lo, p=newp, q_inf=x.q_inf + moved * (1.0 + rel) + extra,
                     slack=x.slack + extra, noise=0.0)
    newq = q[lo : hi + 1].copy()
    newq[0] += q[:lo].sum()
    newq[-1] += q[hi + 1 :].sum()
    return _with(x, n0=x.n0 + lo, p=newp, q=newq, kappa=x.kappa + 4.01 * 2.0 * rel,
                 noise=0.0)


def _cap(x: _Lattice) -> _Lattice:
    """Coarsen until the lattice has at most ``_MAX_LEN`` points (bounded memory)."""
    while x.p.size > _MAX_LEN:
        x = _coarsen(x)
    return x


def coordinate_sd(sigma: float) -> float:
    """``sd(W) = sqrt(e^{1/σ²} − 1)``, one coordinate's likelihood ratio (``inf`` on overflow)."""
    s2 = 1.0 / (sigma * sigma)
    return math.sqrt(math.expm1(s2)) if s2 < 700 else math.inf


def lattice_base(sigma: float, steps: int) -> float:
    """``base = 2·sqrt(M)·min(sd(T), 1)``: the linear lattice's step is ``base/c`` (coordinates).

    ``sd(T) = sd(W)/sqrt(M)`` is the resolution of ``T = S/M`` needed near ``T ≈ 1``.
    """
    return 2.0 * min(coordinate_sd(sigma), math.sqrt(steps))


def epoch_lattice(
    sigma: float, steps: int, *, c: float, upper: bool, tail: float, t_top: float,
    top_q: float | None = None, tick=None, extended: bool = False, min_dln: float = 0.0,
    direct: bool = True,
):
    """One epoch's pair on the S-lattice (likelihood ratio ``S/M``), by binary doubling.

    ``tail``: Q-tail of one coordinate beyond the coordinate lattice; ``top_q``: Q-mass of
    each block's top tail moved to ``+∞`` (upper) / merged (lower) at every level (default
    ``tail``); it also removes the FFT noise floor, whose Q-weight grows with ``S``.
    ``extended``: FFT convolutions in long double (about 2000x smaller round-off on x86,
    about 9x slower), for large ``M·E`` where the float64 round-off bound is too wide.
    ``min_dln``: lower chain, coordinate cells narrower than this in ln W are grouped (see
    :func:`_coordinate`; larger groups have smaller relative round-off ``κ``, which E-fold
    products multiply by E, and cost ~1e-5 of one coordinate's variance at 0.01).
    ``direct``: small blocks are convolved directly (:func:`_combine_direct`), whose
    round-off is not multiplied by ``M/m``; False for one epoch (E = 1), where the FFT's,
    counted once, stays far below any tolerance (measured at (0.55, 1e4, 1): the interval
    unchanged to 1e-9, half the time; the float64 cost check still applies).
    """
    s = 1.0 / sigma
    base = lattice_base(sigma, steps)
    h = base / c
    # coordinate cap: Q-tail of W beyond it <= tail, and no need beyond M·t_top
    ln_cap = 0.5 * s * s + s * float(-special.ndtri(tail))
    ln_cap = min(ln_cap, math.log(steps * t_top) + 1.0, math.log(_MAX_POINTS * h))
    ln_floor = -0.5 * s * s - 9.0 * s  # P(W < floor) < 1e-18
    k = max(math.ceil(math.exp(ln_cap) / h), 4)
    j0 = min(math.floor(math.exp(ln_floor) / h), k - 4)
    cur = _coordinate(s, h, j0, k, upper, steps, min_dln)
    return double_up(cur, None, steps, base=base, c=c, top_q=tail if top_q is None else top_q,
                     s_cap=steps * t_top, tick=tick, extended=extended, direct=direct)


def double_up(cur: _Lattice, acc: _Lattice | None, bits: int, *, base: float, c: float,
              top_q: float, s_cap: float, tick=None, extended: bool = False,
              direct: bool = True) -> _Lattice:
    """Binary doubling on the S-lattice: ``acc ⊕ cur^{⊕ bits}`` (``acc`` may be None).

    ``cur`` is a block of ``m`` coordinates and ``acc`` the blocks of the lower bits already
    summed; ``base/c`` sets the resolution (the lattice is coarsened while
    ``sqrt(m)·base/h > 2c``), ``top_q`` and ``s_cap`` the trimming (see :func:`_trim`).
    """
    if extended:
        cur = _with(cur, p=cur.p.astype(np.longdouble),
                    q=None if cur.q is None else cur.q.astype(np.longdouble))
        if acc is not None:
            acc = _with(acc, p=acc.p.astype(np.longdouble),
                        q=None if acc.q is None else acc.q.astype(np.longdouble))
    while True:
        if bits & 1:
            if acc is None:
                acc = cur
            else:
                while acc.h < cur.h:
                    acc = _coarsen(acc)
                while cur.h < acc.h:
                    cur = _coarsen(cur)
                acc = _cap(_trim(_combine(acc, cur, direct), top_q, s_cap))
        bits >>= 1
        if not bits:
            break
        cur = _combine(cur, cur, direct)
        while math.sqrt(cur.m) * base / cur.h > 2 * c:
            cur = _coarsen(cur)
        cur = _cap(_trim(cur, top_q, s_cap))
        if tick is not None:
            tick()
    assert acc is not None  # bits >= 1 (or acc given)
    if extended:  # the final rounding to float64 (relative u per entry)
        acc.p = acc.p.astype(np.float64)
        acc.q = None if acc.q is None else acc.q.astype(np.float64)
        acc.q_inf = float(acc.q_inf) + (4.0 * _U if acc.q is None else 0.0)
        acc.kappa += 8.02 * _U
    return acc
