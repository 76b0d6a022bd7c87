"""Conversion of a geometric-grid block to the linear S-lattice, keeping each chain's certificate.

Private helper of :mod:`pacpriv.dpsgd._exact.hybrid` and :mod:`pacpriv.dpsgd._exact.mixed`:

* upper chain: every node ``x_k = e^{kg}`` (``S = M·x_k``) is split to the two lattice nodes
  around it keeping its mean, with the weight of the upper node rounded *up* (a mean-
  preserving split followed by a move up: an increasing-convex-order increase); nodes above
  the lattice cap are split to the cap and ``+∞`` (``q_inf``), as in
  :func:`pacpriv.dpsgd._exact.lattice._trim`;
* lower chain: every node is merged into the nearest lattice node (a garbling; the stored pair
  keeps its Q-law, so the labels need not be likelihood ratios).

Round-off: the lattice masses are sums of non-negative terms (``numpy.bincount``, sequential:
relative error at most ``(count + 2)·u`` for ``count`` terms per node); it becomes ``q_inf``
slack (upper, stop-loss transform) or a ``κ`` scale (lower).
"""

from __future__ import annotations

import math

import numpy as np

from pacpriv.dpsgd._exact import geometric as _geo
from pacpriv.dpsgd._exact import lattice as _pld

_U = 2.0**-53


def geo_to_linear(x: _geo.GeoPair, *, h: float, s_cap: float, upper: bool,
                  normalise: bool = True) -> _pld._Lattice:
    """The block pair ``x`` on the S-lattice ``{n0·h, (n0+1)·h, ...}`` capped at ``s_cap``.

    ``n0 = ⌊S_min/h⌋ − 1`` for the smallest node ``S_min`` of ``x``. See the module docstring
    for why each chain stays certified. Returns a :class:`.lattice._Lattice` with
    the same ``m``, ``M``, ``err`` and ``κ`` (raised by the conversion's own round-off).
    ``normalise=False`` (upper chain): ``x`` is part of a block's law (a sub-law, see
    :mod:`pacpriv.dpsgd._exact.mixed`), whose ``q_inf`` is not raised to a unit Q-mass here.
    """
    big_m, m = x.big_m, x.m
    s_nodes = x.lr() * m  # S = M·e^{kg}; relative error <= (|kg| + 4)·u
    n0 = max(math.floor(float(s_nodes[0]) / h) - 1, 0)
    top_node = math.floor(float(s_nodes[-1]) * (1.0 + 1e-12) / h) + 2
    k_cap = max(min(math.floor(s_cap / h), top_node) - n0, 2)
    pos = s_nodes / h - n0
    with np.errstate(invalid="ignore"):
        rel_s = (np.abs((x.k0 + np.arange(x.p.size)) * x.g) + 6.0) * _U
    if upper:
        lo = np.floor(pos)
        beta = pos - lo
        # round the upper weight up by its error bound (value error rel_s·pos, plus 2u)
        beta = np.minimum(beta + rel_s * (pos + n0) + 4.0 * _U * (pos + n0 + 1.0), 1.0)
        lo = lo.astype(np.int64)
        inside = lo < k_cap
        p_in = x.p[inside]
        lo_in = lo[inside]
        b_in = beta[inside]
        # lo < k_cap, so lo + 1 <= k_cap: the lattice has k_cap + 1 nodes
        out = np.bincount(lo_in, weights=(1.0 - b_in) * p_in, minlength=k_cap + 1)
        out += np.bincount(lo_in + 1, weights=b_in * p_in, minlength=k_cap + 1)
        above_p = x.p[~inside]
        above_s = s_nodes[~inside]
        out[k_cap] += float(above_p.sum())
        # Q-mass of the values above the cap moved to +inf: (S − S_cap)/m per unit P-mass,
        # with the node values rounded up by their relative error
        moved = _pld.dot_upper(np.maximum(above_s * (1.0 + rel_s[~inside]) - (n0 + k_cap) * h,
                                          0.0), above_p) / m * (1.0 + 2.0 * _U)
        counts = np.bincount(lo_in, minlength=k_cap + 1)
        n_max = float(max(int(counts.max()) if counts.size else 0, 1)) + float(above_p.size)
        rel = (2.0 * n_max + 8.0) * _U
        lr = (n0 + np.arange(k_cap + 1)) * (h / m)
        extra = rel * float(np.dot(out, 1.0 + lr)) * 1.01 + rel * moved
        q_inf = x.q_inf + moved * (1.0 + rel) + extra
        lat = _pld._Lattice(n0, h, out, None, q_inf, m, x.err, big_m)
        lat.slack = x.slack + extra
        return _pld._normalise(lat) if normalise else lat
    assert x.q is not None  # the lower chain carries its Q-law
    idx = np.clip(np.rint(pos), 0, k_cap).astype(np.int64)
    # (a cast from long double rounds each term once: covered by the "+ 2" below)
    pp = np.bincount(idx, weights=x.p.astype(np.float64), minlength=k_cap + 1)
    qq = np.bincount(idx, weights=x.q.astype(np.float64), minlength=k_cap + 1)
    counts = np.bincount(idx, minlength=k_cap + 1)
    rel = (float(counts.max()) + 2.0) * _U
    lat = _pld._Lattice(n0, h, pp, qq, 0.0, m, x.err, big_m)
    lat.kappa = x.kappa + 4.01 * 2.0 * rel
    return lat
