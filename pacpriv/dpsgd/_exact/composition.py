"""One epoch's pair on a logarithmic lattice, and its certified E-fold composition.

Private helper of :mod:`pacpriv.dpsgd.exact`: the S-lattice pair of one epoch
(:mod:`pacpriv.dpsgd._exact.lattice`) is binned by its likelihood ratio onto ``ln T = a·Δ``
(:func:`to_log_lattice`); the E-fold product is an FFT power over a window whose outside mass
is bounded by a Chernoff bound (:func:`compose_tv`), with every round-off bounded and added on
the pessimistic side of each bound.

References
----------
.. [1] Membership-inference accuracy bound for DP-SGD with random allocation (RA-MIA, CWI / VU
   Amsterdam): the exact accuracy ½ + ½·TV(P^⊗E, Q^⊗E).
.. [2] N. J. Higham. Accuracy and Stability of Numerical Algorithms, 2nd ed. SIAM 2002.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import fft as sp_fft
from scipy import special

from pacpriv.dpsgd._exact.lattice import _cell_masses, _Lattice
from pacpriv.dpsgd._exact.roundoff import _U, sum_error_factor, unit_roundoff


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
    #: l1 round-off bound of the binning into labels (:func:`to_log_lattice`), per unit mass
    binning_err: float = 0.0


def to_log_lattice(
    x: _Lattice, *, delta: float, ln_range: float, upper: bool, labels: tuple | None = None
) -> EpochPair:
    """Map the S-lattice pair to labels ``a`` with ln T in cell ``[aΔ, (a+1)Δ)``.

    ``labels=(a_lo, a_hi)`` fixes the label range of the lower chain (outliers are merged into
    the end labels, a garbling).

    Round-off: a label's mass is a sequential sum (``numpy.bincount``) of the masses of the
    nodes it receives, so its relative error is at most ``(count + c)·u`` for ``count`` nodes
    (``c`` for the split products, the normalisation and ``q``); the pair's ``binning_err``
    is the largest such factor times ``u``, an l1 bound per unit mass.
    """
    lr = x.lr()
    p = x.p
    pos = lr > 0
    with np.errstate(divide="ignore"):
        ln_lr = np.log(np.where(pos, lr, 1.0))
    if not upper:  # labels of the lower chain are not likelihood ratios: use q/p itself
        assert x.q is not None  # the lower chain carries its Q-law
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
        # (exact zeros add no round-off: only non-zero terms count)
        nz = pp[mid] != 0
        counts = (np.bincount(a[nz] - a_lo, minlength=n + 1)
                  + np.bincount(a[nz] + 1 - a_lo, minlength=n + 1))
        total = out.sum() + p_zero
        out, p_zero = out / total, p_zero / total
        q = out * np.exp((a_lo + np.arange(n)) * delta)
        q_inf = max(q_inf, 1.0 - float(q.sum()))
        # per label: its sequential sums, 2 products, 3 additions, the normalisation (a
        # pairwise sum of n + 1 terms, a division) and q's product and exponential; and the
        # node values lr (within 4u on a linear lattice, (|ln T| + 3)u on a geometric one: the
        # split's mean moves by that times T per unit mass, covered by the constant terms)
        binning = (float(counts.max()) + 2.0 * sum_error_factor(n + 1) + 24.0) * _U
        return EpochPair(a_lo, delta, out, q, p_zero, q_inf, True, binning)
    q = x.q
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.log(q / p)
    r = np.where(np.isnan(r), 0.0, r)
    a = np.clip(np.floor(np.nan_to_num(r / delta, posinf=a_hi, neginf=a_lo)), a_lo, a_hi)
    a = a.astype(np.int64) - a_lo
    pp = np.bincount(a, weights=p, minlength=n)
    qq = np.bincount(a, weights=q, minlength=n)
    counts = np.bincount(a[(p != 0) | (q != 0)], minlength=n)  # non-zero terms only
    # one common normalisation: the positions q/p (conditional means, see _Lattice.kappa) kept
    tot = pp.sum()
    binning = (float(counts.max()) + 2.0 * sum_error_factor(n) + 8.0) * _U
    return EpochPair(a_lo, delta, pp / tot, qq / tot, 0.0, 0.0, False, binning)


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


#: Largest composition window (lattice points) the exact method allocates: 2**25 points are
#: 256 MiB a float64 copy, and a few copies are alive at once.
MAX_WINDOW_POINTS = 2**25


def check_window(points: int, epochs: int) -> None:
    """Refuse, before allocating, a composition window above ``MAX_WINDOW_POINTS`` points."""
    if points > MAX_WINDOW_POINTS:
        raise ValueError(
            f"the exact method would need {points:.3g} lattice points "
            f"(> {MAX_WINDOW_POINTS:.3g}, {8 * MAX_WINDOW_POINTS // 2**20} MiB a float64 copy) "
            f"at epochs = {epochs}; use the chi-square bound "
            "(membership_inference_accuracy_bound) for this many epochs.")


def _log_underflow(dtype) -> float:
    """A ``t`` with ``exp(t') == 0`` exactly for every ``t' <= t`` in ``dtype``."""
    return float(np.log(np.finfo(dtype).smallest_subnormal)) - 2.0


def _power(w: np.ndarray, a0: int, epochs: int, lo: int, hi: int) -> np.ndarray:
    """E-fold self-convolution of ``w`` restricted to sum labels ``lo..hi`` (circular FFT).

    Raises ``ValueError`` (:func:`check_window`) before allocating an oversized window.
    """
    check_window(max(hi - lo + 1, w.size), epochs)
    n = sp_fft.next_fast_len(max(hi - lo + 1, w.size), real=True)
    spec = sp_fft.rfft(w, n)
    if epochs <= 64:
        powered = spec**epochs
    else:  # |X|^E e^{iEθ}, with |X| = 0 handled explicitly (no log(0), no inf·0)
        mag = np.abs(spec)
        ok = mag > 0
        logmag = np.log(np.where(ok, mag, 1.0))
        # only where |X|^E does not underflow to exactly 0 (elsewhere the product below is
        # 0 too: the same array, bit for bit, without the phases of the dead coefficients)
        ok &= epochs * logmag > _log_underflow(mag.dtype)
        live = np.flatnonzero(ok)
        powered = np.zeros_like(spec)
        phase = np.mod(epochs * np.angle(spec[live]), 2.0 * np.pi)
        powered[live] = np.exp(epochs * logmag[live]) * np.exp(1j * phase)
    full = sp_fft.irfft(powered, n)
    idx = (np.arange(lo, hi + 1) - epochs * a0) % n
    return full[idx]


def power_error_l1(w: np.ndarray, epochs: int, lo: int, hi: int) -> float:
    """Bound on the l1 round-off error of :func:`_power` over the window ``lo..hi``.

    With ``X = Fw`` (``|X_k| ≤ ‖w‖₁ =: μ``; unnormalised DFT of length ``n``, so
    ``‖X‖₂ = √n‖w‖₂``) computed to ``‖X̂ − X‖₂ ≤ κ√n‖w‖₂`` (Higham 2002, Thm 24.2; see
    :func:`fft_conv_error_l2`), the power ``X^E`` (binary powering for ``E ≤ 64``, else
    ``|X|^E e^{iEθ}``) satisfies, coefficient by coefficient,
    ``|X̂^E − X^E| ≤ E·μ_+^{E−1}|X̂ − X|`` (mean value theorem, ``μ_+ = μ + κ√n‖w‖₂``) plus
    the powering's own error ``(E(π + 3) + 2)u·μ^E`` (``E|ln|X|||X|^E ≤ 1/e``). Summing
    squares, the powered spectrum errs by at most ``E μ_+^{E−1} κ√n‖w‖₂ +
    √n(E(π + 3) + 2)uμ^E`` in l2; the inverse transform divides an l2 error by ``√n`` and
    adds ``κμ^E`` (``‖y‖₂ ≤ ‖y‖₁ ≤ μ^E``). The l1 error over ``n_w`` window points is at most
    ``√n_w`` times the resulting l2 error.
    """
    n = sp_fft.next_fast_len(max(hi - lo + 1, w.size), real=True)
    u = unit_roundoff(w.dtype)
    eta = 8.0 * u
    lg = math.log2(max(n, 2))
    kappa = lg * eta / (1.0 - lg * eta)
    mass = max(1.0, float(np.abs(w).sum()))
    d_x = kappa * math.sqrt(n) * float(np.linalg.norm(w))  # l2 error of X̂
    grow = math.exp(min(700.0, (epochs - 1) * math.log(mass + d_x)))
    l2_spec = epochs * grow * d_x + math.sqrt(n) * (epochs * (math.pi + 3.0) + 2.0) * u * grow
    l2_time = l2_spec / math.sqrt(n) + kappa * grow * mass
    return math.sqrt(hi - lo + 1) * l2_time * 1.01


def compose_tv(
    pair: EpochPair, epochs: int, *, direction: str, tau: float
) -> tuple[float, float, float]:
    """TV of the E-fold product of the lattice pair, its window error and round-off bounds.

    Raises ``ValueError`` before allocating when the window needs more than
    ``MAX_WINDOW_POINTS`` lattice points (memory stays bounded for every valid input).
    """
    lo_p, hi_p = _chernoff_window(pair.p, pair.a0, epochs, tau)
    lo_q, hi_q = _chernoff_window(pair.q, pair.a0, epochs, tau)
    lo, hi = min(lo_p, lo_q), max(hi_p, hi_q)
    check_window(hi - lo + 1, epochs)
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
