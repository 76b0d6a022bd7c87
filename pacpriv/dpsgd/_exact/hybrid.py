"""One epoch's pair with a geometric grid below and a linear lattice on top (large M).

Private helper of :mod:`pacpriv.dpsgd.exact`. When ``M`` is large, one epoch's likelihood
ratio ``T = S/M`` is concentrated (standard deviation ``sqrt((e^{1/σ²} − 1)/M)``, e.g. 7e-4
at σ = 0.5, M = 1e8) while a single coordinate's is heavy-tailed. The geometric grid
(:mod:`.geometric`) handles the heavy tail of small blocks cheaply but its relative
resolution would have to be finer than that spread at the top levels (cost ∝ resolution²);
the linear lattice (:mod:`.lattice`) resolves the spread but cannot start from a
single coordinate (the tail needs ~M·e^{1/σ²}/spread nodes). So the first levels run on the
geometric grid, whose split/rounding error at a level of blocks of ``m`` coordinates is about
``(g²/4)·(m/M)`` in variance of ``T`` (small for small blocks), and the last ``top_levels``
levels on the linear lattice, whose error per level is a fixed fraction ``1/(4c²)`` of the
variance of ``T``.

The conversion (:func:`pacpriv.dpsgd._exact.convert.geo_to_linear`) keeps each chain's certificate:
a mean-preserving split to the lattice nodes with the upper weight rounded up (upper chain),
the nearest node (lower chain, a garbling). Very heavy tails at large M run the top levels on
the mixed grid of :mod:`pacpriv.dpsgd._exact.mixed` instead of the linear lattice.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from pacpriv.dpsgd._exact import geometric as _geo
from pacpriv.dpsgd._exact import lattice as _pld
from pacpriv.dpsgd._exact import mixed as _mixed
from pacpriv.dpsgd._exact.convert import geo_to_linear

_U = 2.0**-53


def _step(m: int, base: float, c: float) -> float:
    """The linear doubling's lattice step for a block of ``m`` coordinates (``base/c·2^k``)."""
    h = base / c
    while math.sqrt(m) * base / h > 2 * c:
        h *= 2.0
    return h


def _q_top(x: _geo.GeoPair, top_q: float) -> int:
    """Index of the largest node kept when the Q-tail above it (at most ``top_q``) is cut."""
    qmass = x.q if x.q is not None else x.lr() * x.p
    tail = np.cumsum(qmass[::-1])[::-1]
    hi = int(np.searchsorted(-tail, -top_q, side="left"))
    return x.k0 + min(max(hi, 1), x.p.size - 1)


#: l1 round-off of one long-double FFT convolution of the lower chain, for planning only
_FFT_L1_PLAN = 1e-15


def switch_level(sigma: float, steps: int, *, c: float, top_q: float, max_points: int,
                 epochs: int = 1, tol: float = 1e-4) -> int:
    """Level ``ℓ`` (blocks of ``2^ℓ`` coordinates) where the epoch moves to the linear lattice.

    The smallest ``ℓ`` whose block fits a lattice of ``max_points`` nodes at the linear
    doubling's step, estimated from the block's range: from ``m − 8·sqrt(m)·sd(W)`` to
    ``m + 8·sqrt(m)·sd(W)`` plus the single-coordinate Q-quantile at ``top_q`` (the heavy
    tail, cut there to ``+∞`` / merged). The lower chain convolves small blocks
    (``64·m ≤ M``) directly (relative round-off) when their lattices are short; an FFT
    convolution's l1 round-off (about ``_FFT_L1_PLAN`` in long double) is multiplied by the
    ``M/m`` blocks and by ``2E``, so longer lattices are allowed only where that product stays
    below ``tol/20``. Returns ``L = ⌊log₂M⌋`` if no level fits. This only chooses where to
    switch; the certificate does not depend on it.
    """
    s = 1.0 / sigma
    sd_w = _pld.coordinate_sd(sigma)
    base = _pld.lattice_base(sigma, steps)
    ln_wq = 0.5 * s * s + s * float(-special.ndtri(max(top_q, 1e-300)))
    w_q = math.exp(min(ln_wq, 700.0))
    levels = steps.bit_length() - 1
    for level in range(levels):
        m = 2**level
        h = _step(m, base, c)
        spread = 8.0 * math.sqrt(m) * sd_w
        n = (w_q + min(spread, m) + spread) / h
        limit = max_points
        fft_cost = (steps / m) * 2.0 * epochs * _FFT_L1_PLAN
        if 64 * m <= steps and fft_cost > 0.05 * tol:
            limit = min(limit, int(math.sqrt(_pld._DIRECT_MAX_WORK)))
        if n <= limit:
            return level
    return levels


def epoch_hybrid(sigma: float, steps: int, epochs: int, *, c: float, max_points: int,
                 upper: bool, tail: float, t_top: float, top_q: float, tick=None,
                 extended: bool = False, tol: float = 1e-4,
                 c_geo_max: float = 4096.0,
                 min_dln: float = _geo.LOWER_MIN_DLN_LARGE_M,
                 mixed: bool = True,
                 mixed_top_q: float | None = None) -> _pld._Lattice | _geo.GeoPair | _mixed.Nodes:
    """One epoch's pair: geometric grid for the first levels, then the linear lattice.

    The switch level ``ℓ`` is chosen by :func:`switch_level`; the geometric grid's top
    resolution ``c_geo`` balances the two discretisation errors (variance of ``T`` added:
    about ``g²·m/(2M)`` for the geometric levels up to blocks of ``m = 2^ℓ`` coordinates,
    ``j·Var(T)/(4c²)`` for the ``j`` linear levels), capped at ``c_geo_max``. ``c`` is
    the linear lattice's resolution (as in :func:`.lattice.epoch_lattice`), ``t_top`` its cap
    (``S ≤ M·t_top``), ``top_q`` the Q-tail cut at every level, ``min_dln`` the lower chain's
    coordinate grouping (see :func:`.geometric.geo_blocks`).

    Where the linear lattice cannot start before the geometric grid would need more than
    ``c_geo_max`` points per unit of ln x (heavy tails and large M, e.g. σ ≈ 0.4,
    M ≥ 1e7) and ``mixed`` is true, the top levels run on the mixed grid of
    :mod:`pacpriv.dpsgd._exact.mixed` instead (see :func:`_epoch_mixed`); ``mixed_top_q`` (if given)
    is the top tail that decides it, so that both chains take the same grid.
    """
    base = _pld.lattice_base(sigma, steps)
    sd_w = _pld.coordinate_sd(sigma)
    s_cap = steps * t_top
    levels = steps.bit_length() - 1
    level = switch_level(sigma, steps, c=c, top_q=top_q, max_points=max_points,
                         epochs=epochs, tol=tol)
    j = max(levels - level, 1)
    c_geo = min(max(c * math.sqrt(2.0 * 2**level / j) / sd_w, _geo.GEO_C_MIN), c_geo_max)
    if mixed and mixed_top_q is not None and mixed_top_q != top_q:
        # the choice of grid follows the upper chain's top tail in both chains
        lv = switch_level(sigma, steps, c=c, top_q=mixed_top_q, max_points=max_points,
                          epochs=epochs, tol=tol)
        want_mixed = (c * math.sqrt(2.0 * 2**lv / max(levels - lv, 1)) / sd_w
                      > min(c_geo_max, MIXED_TRIGGER_C_GEO))
    else:
        want_mixed = c * math.sqrt(2.0 * 2**level / j) / sd_w > min(c_geo_max, MIXED_TRIGGER_C_GEO)
    if mixed and want_mixed and level >= 2:
        return _epoch_mixed(sigma, steps, epochs, c=c, upper=upper, tail=tail, tick=tick,
                            extended=extended, c_geo_max=c_geo_max, min_dln=min_dln,
                            max_points=max_points)
    cur_g, acc_g, bits, k_hi = _geo.geo_blocks(
        sigma, steps, epochs, c=c_geo, upper=upper, tail=tail, levels=level, tick=tick,
        extended=extended and not upper, min_dln=min_dln,
    )
    if bits == 1 and acc_g is None:  # M a power of 2 and no linear level
        bits, acc_g = 0, cur_g
    if bits <= 1 and level == levels:  # stayed on the geometric grid
        if acc_g is not cur_g:
            assert acc_g is not None
            acc_g = _geo.combine(acc_g, cur_g, _geo._kernel(cur_g.g, upper), top=k_hi)
        return _to_float64(acc_g)
    h = _step(cur_g.m, base, c)
    cur_g = _geo._trim(cur_g, upper=upper, top=min(_q_top(cur_g, top_q), k_hi))
    # memory: the lattice is coarsened (a power-of-2 step, still valid) if the estimate missed
    while (float(cur_g.lr()[-1]) * cur_g.m - float(cur_g.lr()[0]) * cur_g.m) / h > 8 * max_points:
        h *= 2.0
    lin = geo_to_linear(cur_g, h=h, s_cap=s_cap, upper=upper)
    lin_acc = None
    if acc_g is not None:
        # acc's blocks are smaller than cur's: cur's step adds at most h²/4 to their variance
        # once, ~m/(4Mc²) of the epoch's
        acc_g = _geo._trim(acc_g, upper=upper, top=min(_q_top(acc_g, top_q), k_hi))
        lin_acc = geo_to_linear(acc_g, h=h, s_cap=s_cap, upper=upper)
    return _pld.double_up(lin, lin_acc, bits, base=base, c=c, top_q=top_q, s_cap=s_cap,
                          tick=tick, extended=extended)


def _to_float64(x: _geo.GeoPair) -> _geo.GeoPair:
    """Round a long-double lower-chain pair to float64 (relative ``u`` per entry: ``κ``)."""
    if x.p.dtype != np.float64:
        assert x.q is not None
        x.p = x.p.astype(np.float64)
        x.q = x.q.astype(np.float64)
        x.kappa += 8.02 * _U
    return x


#: the mixed grid's bulk lattice is this many times finer than the linear lattice
MIXED_BULK_FACTOR = 4.0
#: finest geometric grid below the mixed levels (points per unit of ln x)
MIXED_C_GEO_MAX = 1024.0
#: the mixed grid takes the top levels when the hybrid's geometric grid would need more
#: points per unit of ln x than this
MIXED_TRIGGER_C_GEO = 256.0


def _epoch_mixed(sigma: float, steps: int, epochs: int, *, c: float, upper: bool, tail: float,
                 tick, extended: bool, c_geo_max: float, min_dln: float,
                 max_points: int) -> _mixed.Nodes:
    """One epoch: geometric grid for blocks up to ``2^ℓ`` coordinates, the mixed grid above.

    The bulk lattice is ``MIXED_BULK_FACTOR`` times finer than the linear lattice of
    resolution ``c`` (it stays a few thousand nodes long), so that its error per level,
    ``1/(4c_b²)`` of ``Var T``, is small, and ``ℓ`` is the largest level at which the geometric
    grid's split error (about ``g²·m/(2M)`` of variance over its levels, ``g = 1/c_geo``)
    balances the bulk's over its ``j`` levels with ``c_geo ≤ MIXED_C_GEO_MAX`` (the geometric
    levels cost ``∝ c_geo²``; the mixed ones little).
    """
    base = _pld.lattice_base(sigma, steps)
    sd_w = _pld.coordinate_sd(sigma)
    levels = steps.bit_length() - 1
    c_b = MIXED_BULK_FACTOR * c
    c_geo_max = min(c_geo_max, MIXED_C_GEO_MAX)

    def need(lv: int) -> float:
        return c_b * math.sqrt(2.0 * 2**lv / max(levels - lv, 1)) / sd_w

    level = levels
    while level > 1 and need(level) > c_geo_max:
        level -= 1
    c_geo = min(max(need(level), _geo.GEO_C_MIN), c_geo_max)
    cur_g, acc_g, bits, k_hi = _geo.geo_blocks(
        sigma, steps, epochs, c=c_geo, upper=upper, tail=tail, levels=level, tick=tick,
        extended=extended and not upper, min_dln=min_dln,
    )
    factor = max(1, round(1.0 / (cur_g.g * _mixed.TAIL_C)))
    g_t = factor * cur_g.g
    top = -(-k_hi // factor)
    h = _step(cur_g.m, base, c_b)
    cur = _mixed.from_geo(cur_g, h=h, cap_s=_mixed.cap_for(cur_g.m, sd_w), factor=factor,
                          upper=upper)
    acc = None
    if acc_g is not None:
        acc = _mixed.from_geo(acc_g, h=h, cap_s=_mixed.cap_for(acc_g.m, sd_w), factor=factor,
                              upper=upper)
    if extended:
        for blk in (cur, acc):
            if blk is not None:
                blk.bulk = _pld._with(blk.bulk, p=blk.bulk.p.astype(np.longdouble),
                                      q=None if blk.bulk.q is None
                                      else blk.bulk.q.astype(np.longdouble))
    kern = _geo._kernel(g_t, upper)
    return _mixed.double_up(cur, acc, bits, kern=kern, top=top, sd_w=sd_w, base=base, c=c_b,
                            max_points=max_points, tick=tick)
