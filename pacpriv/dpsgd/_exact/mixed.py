"""One epoch's top levels on a mixed grid: a linear lattice for the bulk, a geometric tail.

Private helper of :mod:`.hybrid`. For σ around 0.4 and large ``M`` one
coordinate's likelihood ratio ``W`` has ``e^{1/σ²} ≈ 500``: a block of ``m`` coordinates is
concentrated near ``m`` (spread ``sqrt(m)·sd(W)``) but keeps a heavy tail (one large
coordinate). A linear lattice that resolves the bulk cannot hold that tail until the last
levels, and a geometric grid fine enough for the concentrated top blocks costs too much (its
split adds about ``(g²/4)·(m/M)`` to the variance of ``T``). Here a block is the sum of two
sub-laws:

* the **bulk**, on the S-lattice ``S = (n0 + i)·h`` of :mod:`.lattice`, up to a cap
  ``m + K·sqrt(m)·sd(W)``, which stays a few thousand nodes long at any level;
* the **tail**, on the geometric grid ``x = S/M = e^{k g}`` of :mod:`.geometric` (coarse:
  ``g = 1/256``), whose relative resolution suits values far above the bulk.

Doubling ``X ⊕ Y``: the bulk-bulk part is a linear convolution; the part of it above the new
cap moves to the tail; the other three parts (bulk-tail, tail-bulk, tail-tail) are pair sums
on the geometric grid, with the bulk projected onto it. Both operands' laws are sums of
their parts and the pair-sum law is bilinear, so this is the exact law of the sum before the
grid steps. The two parts may overlap in value; the final epoch is the union of their nodes.

Each chain keeps its certificate:

* upper chain: every projection onto a grid is a mean-preserving split to the two nodes
  around the value (with the upper weight rounded up by its error bound), an increase in the
  convex order of the likelihood ratio, applied to one part of a mixture (a mixture of
  convex-order increases is one). Round-off is charged to ``q_inf`` as a stop-loss
  deficit, as in :func:`.lattice._combine`: an absolute error ``Δ_k`` of the mass at ``S_k``
  costs at most ``|Δ_k|·(S_k/m + 1)``, and a relative error ``r`` of a part costs at most
  ``r·Σ p̂_k·(S_k/m + 1)`` (twice that for the geometric pair sums, whose tail split errs
  relative to the mass of the cell). ``q_inf`` of a combined block is the ``m``-weighted mean
  of its operands', plus the new charges; the block's mean likelihood ratio is kept at least 1
  by raising ``q_inf``.
* lower chain: every projection maps a value to the nearest node (a deterministic function
  of the operands' labels, hence a garbling of the coordinates), carrying the Q-law; the l1
  round-off of the bulk convolution propagates as in :func:`.lattice.propagate_error` (the
  bound covers the whole bilinear product), relative round-off becomes the scale ``κ``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pacpriv.dpsgd._exact import geometric as _geo
from pacpriv.dpsgd._exact import lattice as _pld
from pacpriv.dpsgd._exact.convert import geo_to_linear

_U = 2.0**-53
#: points per unit of ln x on the tail's geometric grid
TAIL_C = 256.0
#: bulk cap: ``m + BULK_K·sqrt(m)·sd(W)``
BULK_K = 16.0


@dataclass
class Mixed:
    """Block of ``m`` coordinates: bulk sub-law on an S-lattice plus tail sub-law on e^{kg}.

    ``bulk`` and ``tail`` hold masses only (their own ``q_inf``, ``err``, ``κ`` and
    ``slack`` are zero); the chain's terms are kept here.
    """

    bulk: _pld._Lattice
    tail: _geo.GeoPair
    m: int
    big_m: int
    q_inf: float = 0.0
    err: float = 0.0
    kappa: float = 0.0
    slack: float = 0.0
    noise_l1: float = 0.0


@dataclass
class Nodes:
    """An epoch's law as a list of nodes.

    What :func:`~pacpriv.dpsgd._exact.composition.to_log_lattice` reads.
    """

    values: np.ndarray  # likelihood ratio S/m of each node
    p: np.ndarray
    q: np.ndarray | None
    q_inf: float
    err: float
    kappa: float
    slack: float
    noise_l1: float = 0.0

    def lr(self) -> np.ndarray:
        """The likelihood ratio at each node."""
        return self.values


def _bincount(idx: np.ndarray, w: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(idx, weights=w, minlength=n)[:n]


def to_geo(s_vals: np.ndarray, rel_s: float, p: np.ndarray, q: np.ndarray | None, *,
           g: float, big_m: int, m: int, upper: bool) -> tuple[int, np.ndarray,
                                                                np.ndarray | None, float]:
    """Masses at values ``S`` (relative error ``rel_s``) on the grid ``S = M·e^{kg}``.

    Returns ``(k0, p_geo, q_geo, r)``. Upper chain: mean-preserving split to the two nodes
    around ``S/M`` with the upper weight rounded up by its error bound; ``r`` bounds the
    stop-loss deficit per unit of ``Σ p̂·(S/m + 1)`` (the bincount sums, ``(count + 4)·u``,
    and a value error ``(|kg| + 16)·u + rel_s`` where the clip at 1 could move mass down).
    Lower chain: nearest node; ``r`` is the relative error of the masses (for ``κ``).
    All values must be positive.
    """
    x = s_vals.astype(np.float64) / big_m
    lnx = np.log(x) / g
    pf = p.astype(np.float64)
    if upper:
        k = np.floor(lnx).astype(np.int64)
        xk = np.exp(k * g)
        beta = (x / xk - 1.0) / math.expm1(g)
        kmax = float(np.max(np.abs(k))) if k.size else 0.0
        rel_val = (kmax * g + 16.0) * _U + rel_s
        # |β̂ − β| ≤ rel_val·(x/x_k)/(e^g − 1): round the upper weight up by that
        beta = np.clip(beta + rel_val * (x / xk) / math.expm1(g) * 1.01, 0.0, 1.0)
        # a k one too low (x at or above x_{k+1} by rounding): β clips at 1, a move down by
        # at most rel_val of the value, charged below
        k0 = int(k.min()) if k.size else 0
        n = int(k.max()) - k0 + 2 if k.size else 1
        idx = k - k0
        out = _bincount(idx, (1.0 - beta) * pf, n) + _bincount(idx + 1, beta * pf, n)
        nz = pf != 0
        counts = (np.bincount(idx[nz], minlength=n + 1)[:n]
                  + np.bincount(idx[nz] + 1, minlength=n + 1)[:n])
        r = (float(counts.max()) if counts.size else 0.0) * _U + 8.0 * _U + rel_val
        r += _U if p.dtype != np.float64 else 0.0  # the cast of long-double masses
        return k0, out, None, r
    assert q is not None
    k = np.rint(lnx).astype(np.int64)
    k0 = int(k.min()) if k.size else 0
    n = int(k.max()) - k0 + 1 if k.size else 1
    idx = k - k0
    pp = _bincount(idx, pf, n)
    qq = _bincount(idx, q.astype(np.float64), n)
    nz = (p != 0) | (q != 0)
    counts = np.bincount(idx[nz], minlength=n)
    r = (float(counts.max()) + 2.0) * _U + (_U if p.dtype != np.float64 else 0.0)
    return k0, pp, qq, r


def _s_values(lat: _pld._Lattice) -> np.ndarray:
    return (lat.n0 + np.arange(lat.p.size)) * lat.h


def _aligned(parts: list[tuple[int, np.ndarray | None]], lo: int, hi: int) -> list:
    out: list[np.ndarray | None] = []
    for k0, a in parts:
        if a is None:
            out.append(None)
            continue
        z = np.zeros(hi - lo, dtype=np.float64)
        z[k0 - lo: k0 - lo + a.size] = a
        out.append(z)
    return out


def _full(a: np.ndarray, b: np.ndarray, kern) -> np.ndarray:
    return _geo._pair_sum(a, b, kern, mirror=True)


def _bulk_sum(x: Mixed, y: Mixed, *, upper: bool, same: bool, m: int
              ) -> tuple[_pld._Lattice, _pld._Lattice, _pld._Lattice, float, float, float, float,
                         float]:
    """Bulk ⊕ bulk on the S-lattice: ``(xb, yb, bb, q_inf, slack, kappa_ops, err, noise_l1)``."""
    big_m = x.big_m
    xb, yb = x.bulk, y.bulk
    while xb.h < yb.h:
        xb = _pld._coarsen(xb)
    while yb.h < xb.h:
        yb = _pld._coarsen(yb)
    q_inf = (x.m * x.q_inf + y.m * y.q_inf) / m * (1.0 + 8.0 * _U)
    slack = (x.m * x.slack + y.m * y.slack) / m
    # coarsening of the operands (upper: their q_inf, a stop-loss charge; lower: κ)
    q_inf += (x.m * xb.q_inf + y.m * yb.q_inf) / m
    slack += (x.m * xb.slack + y.m * yb.slack) / m
    kappa_ops = max(xb.kappa, yb.kappa)  # relative error of the coarsened operands' entries
    err = 0.0
    noise_l1 = 0.0
    if upper:
        bp = _pld._conv(xb.p, yb.p) if not same else _pld._conv(xb.p, xb.p)
        e_p = _pld.fft_conv_error_l2(xb.p, yb.p)
        u = _pld.unit_roundoff(bp.dtype)
        n0 = xb.n0 + yb.n0
        lr = (n0 + np.arange(bp.size)) * (xb.h / m)
        charge = e_p * (float(np.linalg.norm(lr)) + math.sqrt(bp.size)) * 1.01
        charge += 4.0 * _pld.sum_error_factor(bp.size) * u
        q_inf += charge
        slack += charge
        grow_x = 1.0 + 1.01 * y.m / big_m
        grow_y = 1.0 + 1.01 * x.m / big_m
        noise = float(np.linalg.norm(1.0 + (n0 + np.arange(bp.size)) * (xb.h / big_m))) * e_p
        noise_l1 = x.noise_l1 * grow_x + y.noise_l1 * grow_y + noise
        bb = _pld._Lattice(n0, xb.h, bp, None, 0.0, m, 0.0, big_m)
    else:
        xb = _pld._with(xb, err=x.err, kappa=0.0)
        yb = xb if same else _pld._with(yb, err=y.err, kappa=0.0)
        bb = _pld._combine(xb, yb)
        err = bb.err
        kappa_ops += bb.kappa
        bb = _pld._with(bb, err=0.0, kappa=0.0, noise=0.0)
    return xb, yb, bb, q_inf, slack, kappa_ops, err, noise_l1


def _cross(bx: tuple, by: tuple, tx: tuple, ty: tuple, kern, *, same: bool, upper: bool,
           xm: int, ym: int, m: int, n: int) -> tuple[np.ndarray, np.ndarray | None]:
    """``(cp, cq)``: the pair sums of the parts with a tail (each part an aligned ``(p, q)``)."""
    (bxp, bxq), (byp, byq), (txp, txq), (typ, tyq) = bx, by, tx, ty
    cq: np.ndarray | None
    has_tail = bool(txp.any() or typ.any())
    if has_tail:
        if same:
            cp = _full(2.0 * bxp + txp, txp, kern)
        else:
            cp = _full(bxp, typ, kern) + _full(txp, byp + typ, kern)
        cq = None
        if not upper:
            if same:
                cq = _full(bxq, txp, kern) + _full(txq, bxp + txp, kern)
            else:
                cq = (xm * (_full(bxq, typ, kern) + _full(txq, byp + typ, kern))
                      + ym * (_full(bxp, tyq, kern) + _full(txp, byq + tyq, kern))) / m
    else:
        cp = np.zeros(n + kern.k_top + 2)
        cq = None if upper else np.zeros(n + kern.k_top + 2)
    return cp, cq


def _overflow(bb: _pld._Lattice, *, cap_s: float, max_points: int, g: float, big_m: int,
              m: int, upper: bool) -> tuple[_pld._Lattice, int, np.ndarray, np.ndarray | None,
                                            float]:
    """``(bb, ko, po, qo, r_over)``: the bulk's values above ``cap_s`` moved to the tail grid."""
    s_b = _s_values(bb)
    over = s_b > cap_s
    # keep the lattice bounded even if the cap estimate missed (values above move to the tail)
    if int(np.count_nonzero(~over)) > max_points:
        over = np.arange(s_b.size) >= int(np.argmax(~over)) + max_points
    ko, po, qo, r_over = (0, np.zeros(1), None if upper else np.zeros(1), 0.0)
    if over.any():
        ko, po, qo, r_over = to_geo(s_b[over], 2.0 * _U, bb.p[over],
                                    None if bb.q is None else bb.q[over], g=g, big_m=big_m,
                                    m=m, upper=upper)
        keep = ~over
        last = int(np.nonzero(keep)[0][-1]) if keep.any() else 0
        bb = _pld._with(bb, p=bb.p[: last + 1].copy(),
                        q=None if bb.q is None else bb.q[: last + 1].copy())
    return bb, ko, po, qo, r_over


def _tail_sum(lo: int, cp: np.ndarray, cq: np.ndarray | None, ko: int, po: np.ndarray,
              qo: np.ndarray | None, *, upper: bool
              ) -> tuple[int, int, np.ndarray, np.ndarray | None]:
    """``(lo2, hi2, tp, tq)``: cross part + overflow on one grid (one addition each)."""
    lo2 = min(lo, ko)
    hi2 = max(lo + cp.size, ko + po.size)
    tp = np.zeros(hi2 - lo2)
    tp[lo - lo2: lo - lo2 + cp.size] += cp
    tp[ko - lo2: ko - lo2 + po.size] += po
    tq = None
    if not upper:
        assert cq is not None and qo is not None
        tq = np.zeros(hi2 - lo2)
        tq[lo - lo2: lo - lo2 + cq.size] += cq
        tq[ko - lo2: ko - lo2 + qo.size] += qo
    return lo2, hi2, tp, tq


def _tail_charge(lo: int, cp: np.ndarray, ko: int, po: np.ndarray, lo2: int, hi2: int, *,
                 g: float, big_m: int, m: int, r_cross: float, r_over: float) -> float:
    """The stop-loss charge of the tail's relative errors (upper)."""
    tail_lr = np.exp((lo2 + np.arange(hi2 - lo2)) * g) * (big_m / m)
    ccp = np.zeros(hi2 - lo2)
    ccp[lo - lo2: lo - lo2 + cp.size] = cp
    cpo = np.zeros(hi2 - lo2)
    cpo[ko - lo2: ko - lo2 + po.size] = po
    w = tail_lr * (1.0 + 1e-12) + 1.0
    return (2.02 * r_cross * _pld.dot_upper(w, ccp)
            + 1.02 * (r_over + 2.0 * _U) * _pld.dot_upper(w, cpo))


def combine(x: Mixed, y: Mixed, *, kern, top: int, cap_s: float, base: float, c: float,
            max_points: int) -> Mixed:
    """Block ``x ⊕ y`` of ``x.m + y.m`` coordinates (see the module docstring).

    ``kern``: the tail grid's pair-sum kernel; ``top``: the tail's largest node (values
    above go to ``+∞`` / are merged); ``cap_s``: the new bulk cap; ``base``, ``c``: the
    bulk lattice step rule of :func:`pacpriv.dpsgd._exact.lattice.double_up`.
    """
    upper = kern.upper
    same = x is y
    m = x.m + y.m
    big_m = x.big_m
    g = kern.g
    # --- bulk ⊕ bulk on the S-lattice
    xb, yb, bb, q_inf, slack, kappa_ops, err, noise_l1 = _bulk_sum(x, y, upper=upper, same=same,
                                                                   m=m)
    # --- the three parts with a tail, on the geometric grid
    # the bulk on the tail's grid (a node at S = 0 is moved up to S = h: an increase, resp. a
    # garbling)
    kx, px, qx, rx = to_geo(np.maximum(_s_values(xb), xb.h), 2.0 * _U, xb.p, xb.q, g=g,
                            big_m=big_m, m=x.m, upper=upper)
    if same:
        ky, py, qy, ry = kx, px, qx, rx
    else:
        ky, py, qy, ry = to_geo(np.maximum(_s_values(yb), yb.h), 2.0 * _U, yb.p, yb.q, g=g,
                                big_m=big_m, m=y.m, upper=upper)
    r_proj = max(rx, ry)
    tx, ty = x.tail, y.tail
    lo = min(kx, ky, tx.k0, ty.k0)
    hi = max(kx + px.size, ky + py.size, tx.k0 + tx.p.size, ty.k0 + ty.p.size)
    (bxp, bxq, byp, byq, txp, txq, typ, tyq) = _aligned(
        [(kx, px), (kx, qx), (ky, py), (ky, qy), (tx.k0, tx.p), (tx.k0, tx.q),
         (ty.k0, ty.p), (ty.k0, ty.q)], lo, hi)
    n = hi - lo
    r_kern = _geo.kernel_roundoff(kern, n, np.float64)
    cp, cq = _cross((bxp, bxq), (byp, byq), (txp, txq), (typ, tyq), kern, same=same,
                    upper=upper, xm=x.m, ym=y.m, m=m, n=n)
    r_cross = r_proj + r_kern + 4.0 * _U
    # --- the bulk: step, overflow above the cap into the tail, bottom trim
    while math.sqrt(m) * base / bb.h > 2 * c:
        bb = _pld._coarsen(bb)
    q_inf += bb.q_inf
    slack += bb.slack
    kappa_ops += bb.kappa
    bb = _pld._with(bb, q_inf=0.0, slack=0.0, kappa=0.0, noise=0.0)
    bb, ko, po, qo, r_over = _overflow(bb, cap_s=cap_s, max_points=max_points, g=g,
                                       big_m=big_m, m=m, upper=upper)
    # tail = cross part + overflow (both non-negative: one more addition)
    lo2, hi2, tp, tq = _tail_sum(lo, cp, cq, ko, po, qo, upper=upper)
    # stop-loss charges of the tail's relative errors (upper), κ (lower)
    if upper:
        charge = _tail_charge(lo, cp, ko, po, lo2, hi2, g=g, big_m=big_m, m=m, r_cross=r_cross,
                              r_over=r_over)
        q_inf += charge
        slack += charge
        kappa_level = 0.0
    else:
        kappa_level = 4.01 * (r_cross + r_over + 3.0 * _U)
    tail = _geo.GeoPair(lo2, g, tp, tq, 0.0, m, big_m, 0.0, 0.0, 0.0)
    # tail values at or below the cap (sums of a tail value and a low one) back to the bulk,
    # whose step resolves them: otherwise they would stay on the coarse grid for good
    bb, tail, dq, dk = _tail_to_bulk(bb, tail, cap_s, upper)
    q_inf += dq
    slack += dq
    kappa_level += dk
    tail = _geo._trim(tail, upper=upper, top=top)
    q_inf += tail.q_inf
    slack += tail.slack
    kappa_level += tail.kappa
    tail = _geo.GeoPair(tail.k0, g, tail.p, tail.q, 0.0, m, big_m, 0.0, 0.0, 0.0)
    # bottom of the bulk (at most _TINY_BOTTOM of P-mass moved up / merged)
    bb = _pld._trim(bb, 0.0, 1e300)
    q_inf += bb.q_inf
    slack += bb.slack
    kappa_level += bb.kappa
    bb = _pld._with(bb, q_inf=0.0, slack=0.0, kappa=0.0, noise=0.0)
    # relative errors compose additively (entries of this level: the operands' coarsening,
    # the bulk convolution, the projections, pair sums, overflow split and trims)
    kappa = max(x.kappa, y.kappa) + kappa_ops + kappa_level
    out = Mixed(bb, tail, m, big_m, q_inf, err, kappa, slack, noise_l1)
    return normalise(out) if upper else out


def _tail_to_bulk(bb: _pld._Lattice, tail: _geo.GeoPair, cap_s: float,
                  upper: bool) -> tuple[_pld._Lattice, _geo.GeoPair, float, float]:
    """Move the tail's nodes with ``S ≤ cap_s`` onto the bulk lattice.

    Returns ``(bulk, tail, q_inf charge, κ charge)``: the split (upper) / nearest node
    (lower) of :func:`pacpriv.dpsgd._exact.convert.geo_to_linear`, and one more addition per
    bulk entry (relative ``u``: charged as ``2u·Σ p(lr + 1)``, resp. ``4.01·2u`` of ``κ``).
    """
    s_nodes = tail.lr() * tail.m
    n_in = int(np.searchsorted(s_nodes, cap_s, side="right"))
    if n_in == 0 or not tail.p[:n_in].any():
        return bb, tail, 0.0, 0.0
    part = _geo.GeoPair(tail.k0, tail.g, tail.p[:n_in],
                        None if tail.q is None else tail.q[:n_in], 0.0, tail.m, tail.big_m,
                        0.0, 0.0, 0.0)
    lat = _sub_law_to_lattice(part, h=bb.h,
                              s_cap=2.0 * float(s_nodes[n_in - 1]) + 4.0 * bb.h, upper=upper)
    lo = min(bb.n0, lat.n0)
    hi = max(bb.n0 + bb.p.size, lat.n0 + lat.p.size)
    p = np.zeros(hi - lo, dtype=bb.p.dtype)
    p[bb.n0 - lo: bb.n0 - lo + bb.p.size] = bb.p
    p[lat.n0 - lo: lat.n0 - lo + lat.p.size] += lat.p
    q = None
    if bb.q is not None:
        assert lat.q is not None
        q = np.zeros(hi - lo, dtype=bb.q.dtype)
        q[bb.n0 - lo: bb.n0 - lo + bb.q.size] = bb.q
        q[lat.n0 - lo: lat.n0 - lo + lat.q.size] += lat.q
    new_bb = _pld._with(bb, n0=lo, p=p, q=q)
    rest = _geo.GeoPair(tail.k0 + n_in, tail.g, tail.p[n_in:].copy(),
                        None if tail.q is None else tail.q[n_in:].copy(), 0.0, tail.m,
                        tail.big_m, 0.0, 0.0, 0.0)
    if rest.p.size == 0:
        rest = _geo.GeoPair(tail.k0 + n_in, tail.g, np.zeros(1),
                            None if tail.q is None else np.zeros(1), 0.0, tail.m, tail.big_m,
                            0.0, 0.0, 0.0)
    if upper:
        add = 2.0 * _pld.unit_roundoff(p.dtype) * 1.01 * float(
            np.dot(p.astype(np.float64), 1.0 + new_bb.lr()))
        return new_bb, rest, lat.q_inf + add, 0.0
    return new_bb, rest, 0.0, lat.kappa + 4.01 * 2.0 * _pld.unit_roundoff(p.dtype)


def normalise(x: Mixed) -> Mixed:
    """Upper chain: raise ``q_inf`` so that the block's Q-mass (mean likelihood ratio) is ≥ 1.

    Both parts are read together as one law normalised by their total mass (a lower bound on
    the mean over an upper bound on the total).
    """
    b, t = x.bulk, x.tail
    tot = (float(b.p.sum()) * (1.0 + (_pld.sum_error_factor(b.p.size) + 1.0) * _U)
           + float(t.p.sum()) * (1.0 + (_pld.sum_error_factor(t.p.size) + 1.0) * _U))
    tot *= 1.0 + 2.0 * _U
    t_lr = np.exp((t.k0 + np.arange(t.p.size)) * t.g) * (x.big_m / x.m)
    t_lr *= 1.0 - (abs(t.k0 * t.g) + abs((t.k0 + t.p.size) * t.g) + 8.0) * _U
    mean = (_pld.dot_lower(b.lr(), b.p) + _pld.dot_lower(np.maximum(t_lr, 0.0), t.p))
    mean = mean / tot * (1.0 - 4.0 * _U)
    x.q_inf = max(x.q_inf, 1.0 - mean)
    return x


def from_geo(x: _geo.GeoPair, *, h: float, cap_s: float, factor: int, upper: bool) -> Mixed:
    """A geometric-grid block as a mixed one: nodes up to ``cap_s`` to the S-lattice of step
    ``h``, those above to the tail grid of step ``factor·x.g``."""
    big_m, m = x.big_m, x.m
    s_nodes = x.lr() * m
    inside = s_nodes <= cap_s
    n_in = int(np.count_nonzero(inside))
    n_in = max(n_in, 1)
    part = _geo.GeoPair(x.k0, x.g, x.p[:n_in], None if x.q is None else x.q[:n_in], 0.0, m,
                        big_m, 0.0, 0.0, 0.0)
    bulk = _sub_law_to_lattice(part, h=h, s_cap=2.0 * float(s_nodes[n_in - 1]) + 4.0 * h,
                               upper=upper)
    q_inf = x.q_inf + bulk.q_inf
    slack = x.slack + bulk.slack
    kappa = x.kappa + bulk.kappa
    bulk = _pld._with(bulk, q_inf=0.0, slack=0.0, kappa=0.0, err=0.0)
    g_t = factor * x.g
    if n_in < x.p.size:
        # tail nodes: S = M·e^{kg} with relative error (|kg| + 4)u
        k_abs = float(np.max(np.abs(x.k0 + np.arange(x.p.size)))) * x.g
        kt, pt, qt, r = to_geo(s_nodes[n_in:], (k_abs + 6.0) * _U, x.p[n_in:],
                               None if x.q is None else x.q[n_in:], g=g_t, big_m=big_m, m=m,
                               upper=upper)
        pt = pt.astype(np.float64)
        qt = None if qt is None else qt.astype(np.float64)
        if upper:
            lr_t = np.exp((kt + np.arange(pt.size)) * g_t) * (big_m / m) * (1.0 + 1e-12)
            charge = 1.02 * (r + 2.0 * _U) * _pld.dot_upper(lr_t + 1.0, pt)
            q_inf += charge
            slack += charge
        else:
            kappa += 4.01 * (r + 3.0 * _U)
    else:
        kt, pt = 0, np.zeros(1)
        qt = None if upper else np.zeros(1)
    tail = _geo.GeoPair(kt, g_t, pt, qt, 0.0, m, big_m, 0.0, 0.0, 0.0)
    out = Mixed(bulk, tail, m, big_m, q_inf, x.err, kappa, slack, 0.0)
    return normalise(out) if upper else out


def _sub_law_to_lattice(part, **kw):
    """A part of a block's law on the S-lattice (no unit-mass normalisation of ``q_inf``)."""
    return geo_to_linear(part, normalise=False, **kw)


def cap_for(m: int, sd_w: float) -> float:
    """The bulk cap (in S) of a block of ``m`` coordinates."""
    return m + BULK_K * math.sqrt(m) * sd_w


def double_up(cur: Mixed, acc: Mixed | None, bits: int, *, kern, top: int, sd_w: float,
              base: float, c: float, max_points: int, tick=None) -> Nodes:
    """``acc ⊕ cur^{⊕ bits}`` by binary doubling; the epoch as a list of nodes."""
    while True:
        if bits & 1:
            if acc is None:
                acc = cur
            else:
                acc = combine(acc, cur, kern=kern, top=top,
                              cap_s=cap_for(acc.m + cur.m, sd_w), base=base, c=c,
                              max_points=max_points)
        bits >>= 1
        if not bits:
            break
        cur = combine(cur, cur, kern=kern, top=top, cap_s=cap_for(2 * cur.m, sd_w),
                      base=base, c=c, max_points=max_points)
        if tick is not None:
            tick()
    assert acc is not None
    b, t = acc.bulk, acc.tail
    values = np.concatenate((b.lr().astype(np.float64),
                             np.exp((t.k0 + np.arange(t.p.size)) * t.g) * (acc.big_m / acc.m)))
    p = np.concatenate((b.p.astype(np.float64), t.p.astype(np.float64)))
    q = None
    q_inf, kappa = acc.q_inf, acc.kappa
    if b.q is not None:
        assert t.q is not None
        q = np.concatenate((b.q.astype(np.float64), t.q.astype(np.float64)))
        if b.p.dtype != np.float64:
            kappa += 8.02 * _U
    elif b.p.dtype != np.float64:
        q_inf += 4.0 * _U
    return Nodes(values, p, q, float(q_inf), acc.err, kappa, acc.slack, acc.noise_l1)
