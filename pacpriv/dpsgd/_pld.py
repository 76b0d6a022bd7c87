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
pessimistic side of each bound; FFT round-off is covered by a stated slack.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import fft as sp_fft
from scipy import signal, special

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

    def lr(self) -> np.ndarray:
        """The block's likelihood ratio ``S/m`` at each node."""
        return (self.n0 + np.arange(self.p.size)) * (self.h / self.m)


def _cell_masses(edges: np.ndarray, s: float) -> tuple[np.ndarray, np.ndarray]:
    """P- and Q-mass of W in ``[edges[k], edges[k+1])``; ln W ~ N(∓s²/2, s²) under P/Q."""
    with np.errstate(divide="ignore"):
        logw = np.log(edges)
    out = []
    for mu in (-0.5 * s * s, 0.5 * s * s):
        z = (logw - mu) / s
        lo, hi = z[:-1], z[1:]
        left = special.ndtr(hi) - special.ndtr(lo)
        right = special.ndtr(-lo) - special.ndtr(-hi)
        out.append(np.maximum(np.where(lo < 0, left, right), 0.0))
    return out[0], out[1]


def _coordinate(s: float, h: float, j0: int, k: int, upper: bool, big_m: int) -> _Lattice:
    """Discretise one coordinate's dichotomy on ``{j0·h, ..., k·h}`` (+ both tails).

    The bottom cell ``[0, j0·h)`` (P-mass below ~1e-18) is moved up to ``j0·h`` (upper chain)
    or merged into the first cell (lower chain); the top cell ``[k·h, ∞)`` is split to
    ``k·h`` and ``+∞`` (upper) or kept as one cell (lower).
    """
    idx = np.arange(j0, k + 1, dtype=np.float64)
    edges = np.concatenate(([0.0], idx * h, [np.inf]))
    pc, qc = _cell_masses(edges, s)
    pc[1] += pc[0]
    qc[1] += qc[0]
    pc, qc = pc[1:] / pc.sum(), qc[1:] / qc.sum()  # exact unit masses (M-fold powers)
    # ndtr differences over a cell [w, w + h) (z-width ~ h/(w s)): relative error
    # <= (2 + 2 w s/h) u; summed against the P- and Q-masses of the cells
    qw = float(np.dot(qc[:-1], idx[:-1] * h)) + qc[-1] * float(edges[-2])
    err = (8.0 + 2.0 * sum_error_factor(pc.size) + 4.0 * s * (1.0 + qw) / h) * _U
    if not upper:
        return _Lattice(j0, h, pc, qc, 0.0, 1, err, big_m)
    p = np.zeros(k - j0 + 1)
    pcell, qcell = pc[:-1], qc[:-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = np.where(pcell > 0, qcell / pcell / h - idx[:-1], 0.0)
    alpha = np.clip(alpha + 1e-12, 0.0, 1.0)  # nudge up: only increases the convex order
    p[:-1] += (1.0 - alpha) * pcell
    p[1:] += alpha * pcell
    p[-1] += pc[-1]
    p /= p.sum()
    q_inf = max(qc[-1] - k * h * pc[-1], 1.0 - float(np.dot(idx * h, p)), 0.0) + 1e-16
    return _Lattice(j0, h, p, None, q_inf, 1, err, big_m)


_U = 2.0**-53  # unit round-off of float64


def sum_error_factor(n: int) -> float:
    """``k`` with ``|fl(Σx) − Σx| ≤ k·u·Σ|x|`` for numpy's pairwise summation of ``n`` terms.

    numpy sums blocks of up to 128 terms with 8 accumulators and combines blocks pairwise
    (Higham 2002, §4.2): at most ``128/8 + 8 + ⌈log₂(n/128)⌉ + 1`` additions per term.
    """
    return 26.0 + max(0.0, math.ceil(math.log2(max(n, 1) / 128.0)))


def fft_conv_error_l2(a: np.ndarray, b: np.ndarray) -> float:
    """Bound on ``‖ẑ − a*b‖₂`` for the FFT convolution ``ẑ`` (zero-padded to ``N``).

    Higham, *Accuracy and Stability of Numerical Algorithms* (2nd ed., 2002), Thm 24.2: the
    computed FFT satisfies ``‖ŷ − Fx‖₂ ≤ κ‖Fx‖₂`` with ``κ = log₂N·η/(1 − log₂N·η)``,
    ``η = μ + γ₄(√2 + μ) ≤ 8u`` for accurately computed twiddle factors. Two forward
    transforms, the pointwise product and one inverse transform give
    ``‖ẑ − z‖₂ ≤ (3κ + 2u)(‖a‖₂‖b‖₁ + ‖a‖₁‖b‖₂)`` (``‖Fa‖_∞ ≤ ‖a‖₁``, ``‖Fa‖₂ = √N‖a‖₂``).
    """
    n = sp_fft.next_fast_len(a.size + b.size - 1, real=True)
    u = unit_roundoff(a.dtype)
    eta = 8.0 * u
    lg = math.log2(max(n, 2))
    kappa = lg * eta / (1.0 - lg * eta)
    na1, nb1 = float(np.abs(a).sum()), float(np.abs(b).sum())
    na2, nb2 = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return (3.0 * kappa + 2.0 * u) * (na2 * nb1 + na1 * nb2)


def unit_roundoff(dtype) -> float:
    """``u`` of a float dtype (float64: 2⁻⁵³; x86 long double: 2⁻⁶⁴)."""
    return float(np.finfo(dtype).eps) / 2.0


def _conv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(signal.fftconvolve(a, b), 0.0)


def _normalise(x: _Lattice) -> _Lattice:
    """Upper chain: raise ``q_inf`` so that the Q-mass is at least 1.

    (Mean of the likelihood ratio >= 1 keeps the increasing-convex order.) The masses are not
    rescaled: their round-off drift is part of the tracked error ``err``; rescaling would
    double it at every level.
    """
    q_inf = x.q_inf
    if x.q is None:
        q_inf = max(q_inf, 1.0 - float(np.dot(x.lr(), x.p)))
    return _Lattice(x.n0, x.h, x.p, x.q, q_inf, x.m, x.err, x.big_m)


def propagate_error(a, b, comp: float) -> float:
    """Round-off bound of the block ``a ⊕ b`` from those of ``a`` and ``b``.

    The error of a block is measured as ``Σ_k |Δp_k| (1 + S_k/M)`` (lower chain: the larger of
    that and the l1 error of its Q-law): this bounds its contribution to the P-law and to the
    Q-law ``T·p`` of the whole epoch, since the epoch's ``T = (S_block + S_rest)/M`` and
    ``E[S_rest]/M ≤ (M − m)/M·(1 + ε)``. Convolving with the other block multiplies an error
    by at most ``1 + 1.01·m_other/M``.
    """
    grow_a = 1.0 + 1.01 * b.m / b.big_m
    grow_b = 1.0 + 1.01 * a.m / a.big_m
    return a.err * grow_a + b.err * grow_b + 2.0 * a.err * b.err + comp


def _combine(a: _Lattice, b: _Lattice) -> _Lattice:
    """Block of ``a.m + b.m`` coordinates: S adds; Q = mix of (Q_a ⊗ P_b, P_a ⊗ Q_b)."""
    m = a.m + b.m
    p = _conv(a.p, b.p)
    e_p = fft_conv_error_l2(a.p, b.p)
    q = None
    n0 = a.n0 + b.n0
    if a.q is not None:
        if a is b:
            q = _conv(a.q, a.p)
            e_q = fft_conv_error_l2(a.q, a.p)
        else:
            q = (a.m * _conv(a.q, b.p) + b.m * _conv(a.p, b.q)) / m
            e_q = max(fft_conv_error_l2(a.q, b.p), fft_conv_error_l2(a.p, b.q))
        # l1 <= sqrt(n) l2 for the p- and q-errors
        comp = math.sqrt(p.size) * max(e_p, e_q)
    else:
        # Q-law error weighted by the epoch's T = S/M (see propagate_error): weighted
        # l1 <= ||1 + S/M||_2 · l2 error (Cauchy-Schwarz)
        s_over_m = (n0 + np.arange(p.size)) * (a.h / a.big_m)
        comp = float(np.linalg.norm(1.0 + s_over_m)) * e_p
    err = propagate_error(a, b, comp + 4.0 * sum_error_factor(p.size) * _U)
    q_inf = (a.m * a.q_inf * b.p.sum() + b.m * b.q_inf * a.p.sum()) / m
    out = _normalise(_Lattice(n0, a.h, p, q, q_inf, m, err, a.big_m))
    out.noise = comp
    return out


def _coarsen(x: _Lattice) -> _Lattice:
    """Double the lattice step: split odd atoms half/half (upper) or merge pairs (lower)."""
    p, q, n0 = x.p, x.q, x.n0
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
        return _Lattice(n0 // 2, 2 * x.h, even, None, x.q_inf, x.m, x.err, x.big_m)
    pp = p[0::2].copy()
    pp[:-1] += p[1::2]
    qq = q[0::2].copy()
    qq[:-1] += q[1::2]
    return _Lattice(n0 // 2, 2 * x.h, pp, qq, x.q_inf, x.m, x.err, x.big_m)


def _trim(x: _Lattice, top_q: float, s_cap: float) -> _Lattice:
    """Drop negligible tails on the safe side of each chain.

    The top tail is cut where its Q-mass is below ``top_q`` plus the FFT noise floor of the
    last convolution (``x.noise``, converted to block units): below that the values are
    indistinguishable from round-off, whose Q-weight grows with ``S``.
    """
    p, q = x.p, x.q
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
    q_inf = x.q_inf
    newq = None
    if q is None:
        q_inf += float(np.sum((lr[hi + 1 :] - lr[hi]) * p[hi + 1 :]))
    else:
        newq = q[lo : hi + 1].copy()
        newq[0] += q[:lo].sum()
        newq[-1] += q[hi + 1 :].sum()
    return _Lattice(x.n0 + lo, x.h, newp, newq, q_inf, x.m, x.err, x.big_m)


def _cap(x: _Lattice) -> _Lattice:
    """Coarsen until the lattice has at most ``_MAX_LEN`` points (bounded memory)."""
    while x.p.size > _MAX_LEN:
        x = _coarsen(x)
    return x


def epoch_lattice(
    sigma: float, steps: int, *, c: float, upper: bool, tail: float, t_top: float,
    top_q: float | None = None, tick=None, extended: bool = False,
):
    """One epoch's pair on the S-lattice (likelihood ratio ``S/M``), by binary doubling.

    ``tail``: Q-tail of one coordinate beyond the coordinate lattice; ``top_q``: Q-mass of
    each block's top tail moved to ``+∞`` (upper) / merged (lower) at every level (default
    ``tail``); it also removes the FFT noise floor, whose Q-weight grows with ``S``.
    ``extended``: FFT convolutions in long double (about 2000x smaller round-off on x86,
    about 9x slower), for large ``M·E`` where the float64 round-off bound is too wide.
    """
    s = 1.0 / sigma
    sd_w = math.sqrt(math.expm1(s * s)) if s * s < 700 else math.inf
    # resolution of T = S/M needed near T ~ 1: min(sd_T, 1); base = 2·sqrt(M)·that
    base = 2.0 * min(sd_w, math.sqrt(steps))
    h = base / c
    # coordinate cap: Q-tail of W beyond it <= tail, and no need beyond M·t_top
    ln_cap = 0.5 * s * s + s * float(-special.ndtri(tail))
    ln_cap = min(ln_cap, math.log(steps * t_top) + 1.0, math.log(_MAX_POINTS * h))
    ln_floor = -0.5 * s * s - 9.0 * s  # P(W < floor) < 1e-18
    k = max(math.ceil(math.exp(ln_cap) / h), 4)
    j0 = min(math.floor(math.exp(ln_floor) / h), k - 4)
    cur = _coordinate(s, h, j0, k, upper, steps)
    if extended:
        cur.p = cur.p.astype(np.longdouble)
        cur.q = None if cur.q is None else cur.q.astype(np.longdouble)
    acc = None
    bits = steps
    top_q = tail if top_q is None else top_q
    while True:
        if bits & 1:
            if acc is None:
                acc = cur
            else:
                while acc.h < cur.h:
                    acc = _coarsen(acc)
                while cur.h < acc.h:
                    cur = _coarsen(cur)
                acc = _cap(_trim(_combine(acc, cur), top_q, steps * t_top))
        bits >>= 1
        if not bits:
            break
        cur = _combine(cur, cur)
        while math.sqrt(cur.m) * base / cur.h > 2 * c:
            cur = _coarsen(cur)
        cur = _cap(_trim(cur, top_q, steps * t_top))
        if tick is not None:
            tick()
    if extended:
        acc.p = acc.p.astype(np.float64)
        acc.q = None if acc.q is None else acc.q.astype(np.float64)
        acc.q_inf = float(acc.q_inf)
        acc.err += 2.0 * _U  # the final rounding to float64 (relative u per entry)
    return acc


@dataclass
class EpochPair:
    """One epoch's pair on the log-lattice ``ln T = a·Δ``, labels ``a0 .. a0+len-1``."""

    a0: int
    delta: float
    p: np.ndarray
    q: np.ndarray
    p_zero: float  # P-mass with likelihood ratio 0 (upper chain)
    q_inf: float  # Q-mass with likelihood ratio +inf (upper chain)
    upper: bool


def to_log_lattice(
    x: _Lattice, *, delta: float, ln_range: float, upper: bool, labels: tuple | None = None
) -> EpochPair:
    """Map the S-lattice pair to labels ``a`` with ln T in cell ``[aΔ, (a+1)Δ)``.

    ``labels=(a_lo, a_hi)`` fixes the label range of the lower chain (outliers are merged into
    the end labels, a garbling).
    """
    lr = x.lr()
    p = x.p
    pos = lr > 0
    with np.errstate(divide="ignore"):
        ln_lr = np.log(np.where(pos, lr, 1.0))
    if not upper:  # labels of the lower chain are not likelihood ratios: use q/p itself
        ok = (x.p > 0) & (x.q > 0)
        ln_lr = np.log(x.q[ok] / x.p[ok]) if ok.any() else np.zeros(1)
        pos = np.ones(ln_lr.size, dtype=bool)
    lo_ln = max(float(ln_lr[pos].min()) if pos.any() else 0.0, -ln_range)
    hi_ln = min(float(ln_lr.max()), ln_range)
    a_lo = math.floor(lo_ln / delta)
    a_hi = max(math.ceil(hi_ln / delta), a_lo + 1)
    if labels is not None and not upper:
        a_lo, a_hi = labels
    n = a_hi - a_lo + 1
    if upper:
        p_zero = float(p[~pos].sum())
        q_inf = x.q_inf
        t_lo, t_hi = math.exp(a_lo * delta), math.exp(a_hi * delta)
        lrp, pp = lr[pos], p[pos]
        below = lrp < t_lo
        above = lrp > t_hi
        mid = ~(below | above)
        # below: split to 0 and t_lo (mean preserving)
        frac = lrp[below] / t_lo
        p_zero += float(np.sum((1.0 - frac) * pp[below]))
        out = np.zeros(n)
        out[0] += float(np.sum(frac * pp[below]))
        # above: split to t_hi and +inf
        out[-1] += float(pp[above].sum())
        q_inf += float(np.sum((lrp[above] - t_hi) * pp[above]))
        a = np.floor(np.log(lrp[mid]) / delta).astype(np.int64)
        a = np.clip(a, a_lo, a_hi - 1)
        t_a = np.exp(a * delta)
        beta = np.clip((lrp[mid] - t_a) / (t_a * math.expm1(delta)), 0.0, 1.0)
        out += np.bincount(a - a_lo, weights=(1.0 - beta) * pp[mid], minlength=n)
        out += np.bincount(a + 1 - a_lo, weights=beta * pp[mid], minlength=n)
        total = out.sum() + p_zero
        out, p_zero = out / total, p_zero / total
        q = out * np.exp((a_lo + np.arange(n)) * delta)
        q_inf = max(q_inf, 1.0 - float(q.sum()))
        return EpochPair(a_lo, delta, out, q, p_zero, q_inf, True)
    q = x.q
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.log(q / p)
    r = np.where(np.isnan(r), 0.0, r)
    a = np.clip(np.floor(np.nan_to_num(r / delta, posinf=a_hi, neginf=a_lo)), a_lo, a_hi)
    a = a.astype(np.int64) - a_lo
    pp = np.bincount(a, weights=p, minlength=n)
    qq = np.bincount(a, weights=q, minlength=n)
    return EpochPair(a_lo, delta, pp / pp.sum(), qq / qq.sum(), 0.0, 0.0, False)


def _chernoff_window(w: np.ndarray, a0: int, epochs: int, tau: float) -> tuple[int, int]:
    """Labels ``[lo, hi]`` of the E-fold sum outside which mass is ``<= tau`` (each side)."""
    pos = w > 0
    lab = (a0 + np.arange(w.size))[pos].astype(np.float64)
    logw = np.log(w[pos])
    total = max(float(w[pos].sum()), 1e-300)
    mean = float(np.sum(w[pos] * lab)) / total
    sd = math.sqrt(max(float(np.sum(w[pos] * (lab - mean) ** 2)) / total, 1e-12))
    log_tau = math.log(tau)
    lams = np.geomspace(1e-3, 30.0, 48) * math.sqrt(2 * abs(log_tau)) / (sd * math.sqrt(epochs))
    bounds = []
    for sign in (1.0, -1.0):
        kl = special.logsumexp(logw[None, :] + (sign * lams)[:, None] * lab[None, :], axis=1)
        bounds.append(float(np.min((epochs * kl - log_tau) / lams)))
    hi = math.ceil(bounds[0])
    lo = math.floor(-bounds[1])
    lo = max(lo, epochs * a0)
    hi = min(hi, epochs * (a0 + w.size - 1))
    return lo, hi


def _power(w: np.ndarray, a0: int, epochs: int, lo: int, hi: int) -> np.ndarray:
    """E-fold self-convolution of ``w`` restricted to sum labels ``lo..hi`` (circular FFT)."""
    n = sp_fft.next_fast_len(max(hi - lo + 1, w.size), real=True)
    spec = sp_fft.rfft(w, n)
    if epochs <= 64:
        powered = spec**epochs
    else:  # |X|^E e^{iEθ}, with |X| = 0 handled explicitly (no log(0), no inf·0)
        mag = np.abs(spec)
        ok = mag > 0
        logmag = np.log(np.where(ok, mag, 1.0))
        phase = np.mod(epochs * np.angle(spec), 2.0 * np.pi)
        powered = np.where(ok, np.exp(epochs * logmag) * np.exp(1j * phase), 0.0)
    full = sp_fft.irfft(powered, n)
    idx = (np.arange(lo, hi + 1) - epochs * a0) % n
    return full[idx]


def power_error_l1(w: np.ndarray, epochs: int, lo: int, hi: int) -> float:
    """Bound on the l1 round-off error of :func:`_power` over the window ``lo..hi``.

    With ``X = Fw`` (``|X_k| ≤ ‖w‖₁ ≤ 1``) computed to ``‖X̂ − X‖₂ ≤ κ√n‖w‖₂`` (Higham 2002,
    Thm 24.2; see :func:`fft_conv_error_l2`), the power ``X^E`` (binary powering for
    ``E ≤ 64``, else ``|X|^E e^{iEθ}``) has per-coefficient error at most
    ``E·κ√n‖w‖₂ + (E(π + 3) + 2)u`` (``E|ln|X|||X|^E ≤ 1/e``). The inverse transform adds
    ``κ``; the l1 error over ``n_w`` window points is at most ``√n_w`` times the l2 error.
    """
    n = sp_fft.next_fast_len(max(hi - lo + 1, w.size), real=True)
    eta = 8.0 * _U
    lg = math.log2(max(n, 2))
    kappa = lg * eta / (1.0 - lg * eta)
    mass = max(1.0, float(np.abs(w).sum()))
    d_x = kappa * math.sqrt(n) * float(np.linalg.norm(w))
    d_y = epochs * d_x * mass ** (epochs - 1) + (epochs * (math.pi + 3.0) + 2.0) * _U
    return math.sqrt(hi - lo + 1) * (d_y + kappa * mass**epochs)


def compose_tv(
    pair: EpochPair, epochs: int, *, direction: str, tau: float
) -> tuple[float, float, float]:
    """TV of the E-fold product of the lattice pair, its window error and round-off bounds."""
    lo_p, hi_p = _chernoff_window(pair.p, pair.a0, epochs, tau)
    lo_q, hi_q = _chernoff_window(pair.q, pair.a0, epochs, tau)
    lo, hi = min(lo_p, lo_q), max(hi_p, hi_q)
    labels = np.arange(lo, hi + 1) * pair.delta
    err = 6 * tau
    sp, sq = float(pair.p.sum()), float(pair.q.sum())
    if pair.upper:
        if direction == "add":
            qe = _power(pair.q, pair.a0, epochs, lo, hi)
            rnd = power_error_l1(pair.q, epochs, lo, hi)
            tv = float(np.sum(qe * -np.expm1(-np.maximum(labels, 0.0))))
            tv += (sq + pair.q_inf) ** epochs - sq**epochs
        else:
            pe = _power(pair.p, pair.a0, epochs, lo, hi)
            rnd = power_error_l1(pair.p, epochs, lo, hi)
            tv = float(np.sum(pe * -np.expm1(np.minimum(labels, 0.0))))
            tv += (sp + pair.p_zero) ** epochs - sp**epochs
            tv += (sq + pair.q_inf) ** epochs - (sp + pair.p_zero) ** epochs
        # sums of labels.size terms and the closed-form powers: relative (n + 4E) u
        rnd += (labels.size + 4.0 * epochs + 8.0) * _U * 2.0
        return tv, err, rnd
    pe = _power(pair.p, pair.a0, epochs, lo, hi)
    qe = _power(pair.q, pair.a0, epochs, lo, hi)
    rnd = power_error_l1(pair.p, epochs, lo, hi) + power_error_l1(pair.q, epochs, lo, hi)
    if direction == "add":
        tv = float(np.sum(np.maximum(qe - pe, 0.0)))
    else:
        tv = float(np.sum(np.maximum(pe - qe, 0.0))) + (sq**epochs - sp**epochs)
    rnd += (labels.size + 4.0 * epochs + 8.0) * _U * 2.0
    return tv, err, rnd


def single_step_pair(sigma: float, *, delta: float, upper: bool) -> EpochPair:
    """``M = 1``: ln T ~ N(∓1/(2σ²), 1/σ²) under P/Q, discretised directly on the log-lattice."""
    s = 1.0 / sigma
    half = 9.0 * s + 0.5 * s * s
    a_lo, a_hi = math.floor(-half / delta), math.ceil(half / delta)
    a_lo, a_hi = max(a_lo, -int(60 / delta)), min(a_hi, int(60 / delta))
    labels = np.arange(a_lo, a_hi + 1)
    edges = np.concatenate(([0.0], np.exp(labels * delta), [np.inf]))
    pc, qc = _cell_masses(edges, s)  # cells: [0,t_lo), [t_a, t_a+1) ..., [t_hi, inf)
    n = labels.size
    if not upper:
        pp, qq = pc[1:].copy(), qc[1:].copy()
        pp[0] += pc[0]
        qq[0] += qc[0]
        return EpochPair(a_lo, delta, pp / pp.sum(), qq / qq.sum(), 0.0, 0.0, False)
    t = edges[1:-1]
    out = np.zeros(n)
    # bottom cell [0, t_lo): split to 0 and t_lo (mean preserving)
    frac = min(qc[0] / t[0], pc[0]) if pc[0] > 0 else 0.0
    out[0] += frac
    p_zero = pc[0] - frac
    pcell, qcell = pc[1:-1], qc[1:-1]
    width = t[1:] - t[:-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = np.where(pcell > 0, (qcell / pcell - t[:-1]) / width, 0.0)
    alpha = np.clip(alpha + 1e-12, 0.0, 1.0)
    out[:-1] += (1.0 - alpha) * pcell
    out[1:] += alpha * pcell
    out[-1] += pc[-1]
    q_inf = max(qc[-1] - t[-1] * pc[-1], 0.0) + 1e-16
    total = out.sum() + p_zero
    out, p_zero = out / total, p_zero / total
    q = out * t
    q_inf = max(q_inf, 1.0 - float(q.sum()))
    return EpochPair(a_lo, delta, out, q, p_zero, q_inf, True)
