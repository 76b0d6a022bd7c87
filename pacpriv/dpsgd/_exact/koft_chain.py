"""Certified upper and lower chains for one epoch of k-out-of-t allocation.

Private helper of :mod:`pacpriv.dpsgd.k_of_t`. Under ``P`` one epoch's likelihood ratio is
``T = e_k(W)/C(t, k)``, ``W_j = exp(y_j/σ − 1/(2σ²))`` i.i.d. (``y_j ~ N(0, 1)``), a
mean-one log-normal. Processing the coordinates one at a time, the normalised state

    s_i(j) = e_i(W_1..W_j)/C(j, i),   i = 1..k,   s_0 = 1,

obeys ``s_i(j + 1) = (1 − i/(j+1))·s_i(j) + (i/(j+1))·W_{j+1}·s_{i−1}(j)`` and ``T = s_k(t)``.
The final ``T`` is *affine in the state* ``(s_1..s_k)(j)`` given the later coordinates (and
affine in each ``W_j``), so:

* **upper chain**: a mean-preserving split of a coordinate's law onto the nodes of its cell,
  or of a state vector onto the corners of its cell (tensor product of two-point splits, one
  per axis, each preserving that axis' value), is an increase of ``T`` in the convex order;
  moving the negligible bottom tail of ``W`` up is an increase in the increasing order, and
  the top tail of ``W`` is split to its top node and ``+∞`` (Q-mass at ``+∞``). Every step
  can only increase ``E[(T·R − c)_+]`` for any independent ``R ≥ 0``, so the E-fold TV of
  the chain is an upper bound (the argument of the ``k = 1`` chain,
  :mod:`pacpriv.dpsgd._exact.lattice`);
* **lower chain**: a coordinate is replaced by its conditional mean on its cell, and the
  states of one cell by their conditional mean (``T`` is then the conditional expectation of
  the exact ``T`` given the cells: a garbling), so its E-fold TV is a lower bound.

State cells are ``[e^{aΔ}, e^{(a+1)Δ})`` per axis (``Δ = dln``); the coordinate's nodes are
``exp(−s²/2 + s·z)`` on a sinh-spaced ``z`` grid (dense in the bulk). Both errors are second
order in the cell widths. The work is ``t × (states × n_w × 2^k)``: the chain is run only
while the number of states stays below ``max_atoms`` (else ``None``: the caller keeps its
other bounds).

Pruning (``ChainSettings.prune > 0``, used at ``k ≥ 3`` where almost every cell of the
``k``-dimensional state grid is nearly empty): given a state ``x`` the chain's final ``T`` has
mean ``r_0 + Σ_i r_i x_i`` (:func:`_future_mean`; every later split keeps means). The upper
chain replaces the conditional law of ``T`` given each of its states of least Q-mass by the
two-point law on ``0`` and ``+∞`` with that mean (the largest element of the convex order
with that mean): P-mass to ``T = 0``, Q-mass to ``+∞``. The lower chain merges its states
of least P-mass into their conditional mean (conditioning on less: still a garbling). Each
cuts at most ``prune/(t − 1)`` per step (after the step's split or merge), ``prune`` per
epoch.

Round-off is bounded and put on the pessimistic side: the upper chain adds its stop-loss
slack (mass errors of the coordinate's law, relative errors of the state arithmetic, each
with ``E_P[T] = 1``) to the Q-mass at ``+∞``; the lower chain carries an l1 error of its
masses and a relative error ``κ`` of its likelihood ratios, charged as in
:func:`pacpriv.dpsgd.exact.exact_membership_inference_accuracy`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from pacpriv.dpsgd._exact import composition as _comp
from pacpriv.dpsgd._exact.lattice import cell_masses_bounded
from pacpriv.dpsgd._exact.roundoff import _U

__all__ = ["ChainSettings", "koft_chain_tv"]

_WINDOW_TAU = 1e-15  # as in pacpriv.dpsgd.exact: Chernoff mass outside the FFT window
_DENSE_BOX = 4_000_000  # group by a dense bincount when the index box is at most this big
_CHUNK = 1_000_000  # states split to their corners at a time (upper chain)
_Z_LOW, _Z_TOP, _Z_BULK = 6.0, 6.0, 1.0  # coordinate grid: z in [−6, s + 6], sinh scale 1


@dataclass(frozen=True)
class ChainSettings:
    """Resolution of the chains: coordinate nodes, state cell width (ln units), work cap."""

    n_w: int = 90
    dln: float = 0.07
    max_atoms: int = 16_000_000
    c_epoch: float = 64.0
    #: cell width of the lower-order states ``s_1..s_{k−1}`` in units of ``dln`` (they reach
    #: ``T = s_k(t)`` only through the recursion)
    coarse: float = 1.0
    #: mass budget of one epoch's pruning: the upper chain sends states of smallest Q-mass
    #: (total ≤ prune) to ``T ∈ {0, +∞}``, the lower chain merges states of smallest P-mass
    #: (total ≤ prune) into their mean; 0 keeps every state
    prune: float = 0.0


def _coordinate_law(s: float, n_w: int, upper: bool) -> tuple[np.ndarray, np.ndarray, float,
                                                                  float]:
    """One coordinate ``W``: nodes, masses, Q-excess sent to +∞ (upper) and a mass error.

    Returns ``(x, p, excess, slack)``: ``slack`` bounds ``Σ_i |Δp_i|·(x_i + 1)`` (upper: the
    stop-loss perturbation of the split by the cell-mass round-off) or the l1 error of the
    masses (lower); the lower chain's nodes are conditional means ``q_c/p_c`` whose relative
    error is returned through ``excess`` (no Q-excess there).
    """
    z_hi = s + _Z_TOP
    u = np.linspace(math.asinh(-_Z_LOW / _Z_BULK), math.asinh(z_hi / _Z_BULK), n_w)
    nodes = np.exp(-0.5 * s * s + s * (_Z_BULK * np.sinh(u)))
    edges = np.concatenate(([0.0], nodes, [np.inf]))
    pc, qc, ep, eq = cell_masses_bounded(edges, s)
    if not upper:
        keep = pc > 0
        # relative error of a conditional mean q_c/p_c: ep/p_c + eq/q_c + a division
        rel = ep[keep] / pc[keep] + eq[keep] / np.maximum(qc[keep], 1e-300)
        kappa = float(np.max(rel)) * 1.01 + 4.0 * _U
        return qc[keep] / pc[keep], pc[keep], kappa, float(np.sum(ep)) * 1.01
    p = np.zeros(nodes.size)
    p[0] += pc[0]  # bottom cell [0, x_0) moved up to x_0 (increasing order)
    pcell, qcell = pc[1:-1], qc[1:-1]
    width = nodes[1:] - nodes[:-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = np.where(pcell > 0, (qcell / pcell - nodes[:-1]) / width, 0.0)
    alpha = np.clip(alpha + 1e-12, 0.0, 1.0)  # nudged up: only increases the convex order
    p[:-1] += (1.0 - alpha) * pcell
    p[1:] += alpha * pcell
    p[-1] += pc[-1]
    excess = max(float(qc[-1] - nodes[-1] * pc[-1]), 0.0)
    # |Δ(p m)| ≤ eq and |Δp| ≤ ep per cell; a split moves them to the cell's nodes
    w_hi = np.append(nodes[1:], nodes[-1])
    slack = float(np.sum(eq[1:]) + np.dot(ep[1:], w_hi + 1.0) + ep[0] * (nodes[0] + 1.0))
    slack = slack * 1.01 + 8.0 * n_w * _U
    keep = p > 0
    return nodes[keep], p[keep], excess, slack


def _keys(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Integer cell indices ``(n, d)`` to one int64 key per row (mixed radix)."""
    mn = a.min(axis=0)
    span = a.max(axis=0) - mn + 2
    if float(np.prod(span.astype(np.float64))) > 2.0**62:
        raise OverflowError("cell index box beyond int64")
    key = np.zeros(a.shape[0], np.int64)
    for i in range(a.shape[1]):
        key = key * span[i] + (a[:, i] - mn[i])
    return key, mn, span


def _decode(key: np.ndarray, mn: np.ndarray, span: np.ndarray) -> np.ndarray:
    out = np.empty((key.size, span.size), np.int64)
    for i in reversed(range(span.size)):
        out[:, i] = key % span[i] + mn[i]
        key = key // span[i]
    return out


def _group(key: np.ndarray, weights: list, box: int) -> tuple[np.ndarray, list]:
    """Distinct keys and the per-key sums of each weight array."""
    if box <= _DENSE_BOX:
        nz = np.flatnonzero(np.bincount(key, minlength=box))
        return nz, [np.bincount(key, weights=w, minlength=box)[nz] for w in weights]
    uniq, inv = np.unique(key, return_inverse=True)
    inv = inv.ravel()
    return uniq, [np.bincount(inv, weights=w, minlength=uniq.size) for w in weights]


def _corners(states: np.ndarray, p: np.ndarray, dln: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Split every state onto the ``2^d`` corners of its cell: integer corner labels
    (distinct rows) and their masses (the tensor product of one two-point split per axis,
    each preserving that axis' value)."""
    d = states.shape[1]
    ln = np.log(states)
    a = np.floor(ln / dln).astype(np.int64)
    key, mn, span = _keys(a)
    # position in the cell: (x − lo)/(lo·(e^Δ − 1)) = expm1(ln x − aΔ)/expm1(Δ)
    beta = np.clip(np.expm1(ln - a * dln) / np.expm1(dln), 0.0, 1.0)
    ends = [(1.0 - beta[:, i], beta[:, i].copy()) for i in range(d)]
    weights = [p]  # weights[c]: corner c (bit i: upper end of axis i)
    for i in range(d):
        weights = weights + [w * ends[i][1] for w in weights]
        weights[:len(weights) // 2] = [w * ends[i][0] for w in weights[:len(weights) // 2]]
    ukey, sums = _group(key, weights, int(np.prod(span.astype(np.float64))))
    cells = _decode(ukey, mn, span)
    offsets = [np.array([(c >> i) & 1 for i in range(d)]) for c in range(2**d)]
    return np.concatenate([cells + off for off in offsets]), np.concatenate(sums)


def _regrid(states: np.ndarray, p: np.ndarray, dln: np.ndarray, upper: bool
            ) -> tuple[np.ndarray, np.ndarray]:
    """Upper: split every state to its cell's corners; lower: merge each cell to its mean.

    ``dln`` holds the cell width (ln units) of every axis. The upper split runs in chunks of
    :data:`_CHUNK` states (bounded memory; the corners' masses are then summed again)."""
    d = states.shape[1]
    if not upper:
        a = np.floor(np.log(states) / dln).astype(np.int64)
        key, _, span = _keys(a)
        box = int(np.prod(span.astype(np.float64)))
        _, sums = _group(key, [p] + [p * states[:, i] for i in range(d)], box)
        keep = sums[0] > 0  # cells whose mass underflowed to 0 carry nothing
        return np.stack([w[keep] for w in sums[1:]], axis=1) / sums[0][keep, None], sums[0][keep]
    parts = [_corners(states[i:i + _CHUNK], p[i:i + _CHUNK], dln)
             for i in range(0, p.size, _CHUNK)]
    all_cells = np.concatenate([c for c, _ in parts])
    key2, mn2, span2 = _keys(all_cells)
    ukey2, (pn,) = _group(key2, [np.concatenate([m for _, m in parts])],
                          int(np.prod(span2.astype(float))))
    keep = pn > 0
    return np.exp(_decode(ukey2[keep], mn2, span2) * dln), pn[keep]


def _component(states: np.ndarray, i: int, lo: int, hi: int) -> np.ndarray:
    """``s_i`` of every state (``s_0 = 1``; ``s_i = 0`` where ``i`` exceeds the steps done)."""
    if i == 0:
        return np.ones(states.shape[0])
    return states[:, i - lo] if lo <= i <= hi else np.zeros(states.shape[0])


def _future_mean(j: int, t: int, k: int, m: float) -> np.ndarray:
    """``r`` with ``E[s_k(t) | s(j + 1)] = r_0 + Σ_i r_i s_i(j + 1)`` when the later
    coordinates have mean ``m`` (the recursion is affine in each coordinate)."""
    r = np.zeros(k + 1)
    r[k] = 1.0
    for jj in range(t - 1, j, -1):
        step = np.arange(k + 1) / (jj + 1.0)
        nxt = r * (1.0 - step)
        nxt[:-1] += r[1:] * step[1:] * m
        r = nxt
    return r


def _prune(states: np.ndarray, p: np.ndarray, r: np.ndarray, lo: int, budget: float,
           upper: bool) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Drop (upper) or merge (lower) the states of least mass, up to ``budget`` in all.

    Upper: the states of least Q-mass ``p·E[T | state]`` (``r``: :func:`_future_mean`),
    while their total is at most ``budget``; each goes to ``T ∈ {0, +∞}`` with its mean
    kept (the largest increase in the convex order): returns their Q-mass (for the Q-mass
    at +∞) and P-mass (for an atom at ``T = 0``). Lower: the states of least P-mass (total
    at most ``budget``) are merged into their conditional mean (a garbling); returns zeros.
    """
    if budget <= 0.0 or p.size < 2:
        return states, p, 0.0, 0.0
    if upper:
        d = states.shape[1]
        mass = p * (r[0] + states @ r[lo:lo + d])
    else:
        mass = p
    # threshold by binary exponent (O(n)): the largest power of two below which the masses
    # sum to at most the budget
    expo = np.frexp(mass)[1]
    e0 = int(expo.min())
    cum = np.cumsum(np.bincount(expo - e0, weights=mass))
    n_bins = int(np.searchsorted(cum, budget, side="right"))
    cut_mask = (expo < e0 + n_bins) | (mass <= 0.0)
    if int(cut_mask.sum()) < 2:
        return states, p, 0.0, 0.0
    cut, keep = np.flatnonzero(cut_mask), np.flatnonzero(~cut_mask)
    if upper:
        return states[keep], p[keep], float(mass[cut].sum()), float(p[cut].sum())
    pc = float(p[cut].sum())
    merged = (p[cut] @ states[cut]) / pc
    return (np.vstack([states[keep], merged[None, :]]), np.append(p[keep], pc), 0.0, 0.0)


def epoch_atoms(sigma: float, t: int, k: int, *, upper: bool, settings: ChainSettings,
                work_budget: float = math.inf) -> dict | None:
    """Atoms ``(T, p)`` of one epoch's chain, with its error terms.

    None (before most of the work) when a step would hold more than ``settings.max_atoms``
    candidate atoms or the work done plus the current step's work times the steps left
    exceeds ``work_budget`` (work: candidate atoms × split corners, summed over steps).
    """
    x, px, extra, slack = _coordinate_law(1.0 / sigma, settings.n_w, upper)
    states = np.zeros((1, 0))
    p = np.ones(1)
    lo, hi = 1, 0
    work, sums_err, pruned_q, pruned_p = 0.0, 0.0, 0.0, 0.0
    # E[W] of the chain's coordinate, rounded up (prunes' Q-masses are then upper bounds)
    m_w = max(1.0, float(np.dot(x, px))) * (1.0 + 1e-9)
    for j in range(t):
        nlo, nhi = max(1, k - (t - j - 1)), min(j + 1, k)
        n = states.shape[0]
        d = nhi - nlo + 1
        step = float(n * x.size) * (2**d if upper else d + 1)
        # the work still to come: this step's times the steps left, or (pruned chains, whose
        # states shrink once they are k-dimensional) 17 times this step's while the states
        # still grow (j < k; measured growth ×19–22 a step there) and twice it after
        ahead = step * (min(17 if j < k else 2, t - j) if settings.prune > 0.0 else t - j)
        if step > settings.max_atoms or work + ahead > work_budget:
            return None
        work += step
        # a cell's sums (bincount, sequential) add at most (candidates)·u relative error
        sums_err += 2.0 * float(n * x.size) * (2 ** (nhi - nlo + 1) + 1) * _U

        cols = [(1.0 - i / (j + 1)) * _component(states, i, lo, hi)[:, None]
                + (i / (j + 1)) * _component(states, i - 1, lo, hi)[:, None] * x[None, :]
                for i in range(nlo, nhi + 1)]
        cols = [c.ravel() for c in cols]
        new, pn = np.stack(cols, axis=1), (p[:, None] * px[None, :]).ravel()
        lo, hi = nlo, nhi
        if j == t - 1:
            keep = pn > 0
            states, p = new[keep], pn[keep]
            break
        try:
            widths = np.array([settings.dln * (1.0 if i == k else settings.coarse)
                               for i in range(lo, hi + 1)])
            states, p = _regrid(new, pn, widths, upper)
        except OverflowError:  # states spread over more cells than int64 keys can label
            return None
        states, p, cq, cp = _prune(states, p, _future_mean(j, t, k, m_w), lo,
                                   settings.prune / (t - 1), upper)
        pruned_q, pruned_p = pruned_q + cq, pruned_p + cp
    if not np.all(np.isfinite(states)):  # overflow: no bound from this chain
        return None
    # relative error of a state value: each step ≤ 6 roundings (the update, the split's
    # β and the nodes' exp), plus the coordinate's own (lower: its conditional means) and
    # the cells' sums (lower: the conditional means are ratios of two such sums)
    rel = (t * (8.0 * _U + (extra if not upper else 0.0)) + 2.0 * sums_err) * 1.01
    lr = states[:, -1]
    if pruned_p > 0.0:  # the pruned states' P-mass sits at T = 0
        lr, p = np.append(lr, 0.0), np.append(p, pruned_p)
    out = {"T": lr, "p": p, "relative_error": rel, "atoms": int(p.size), "work": work,
           "pruned_q": pruned_q}
    if upper:
        # Q-mass at +∞: the coordinates' top tails (Σ_j E[∂T/∂W_j] = k), the masses'
        # round-off (t coordinates, slope of the stop-loss ≤ 1 + x; the cells' sums, with
        # E_P[T + 1] = 2), the state arithmetic
        # and the pruned states' Q-mass (with its round-off: a sum of ≤ n products)
        out["q_inf"] = (k * extra + t * slack * 2.0 + 2.0 * sums_err + rel + 1e-15
                        + pruned_q * (1.0 + 2.0 * rel + 1e-9))
    else:
        out["mass_error"] = t * slack + t * (2.0**k + 8.0) * _U * 2.0 + sums_err
    return out


class _Atoms:
    """What :func:`pacpriv.dpsgd._exact.composition.to_log_lattice` reads."""

    def __init__(self, lr: np.ndarray, p: np.ndarray, q_inf: float, upper: bool) -> None:
        self._lr, self.p, self.q_inf = lr, p, q_inf
        self.q = None if upper else p * lr

    def lr(self) -> np.ndarray:
        return self._lr


def koft_chain_tv(sigma: float, t: int, k: int, epochs: int,
                  settings: ChainSettings | None = None, *,
                  work_budget: float = math.inf, ends: tuple[bool, ...] = (True, False)
                  ) -> dict | None:
    """Certified bounds ``tv_lower ≤ TV(P^⊗E, Q^⊗E) ≤ tv_upper`` of k-of-t allocation.

    Returns a dict (``tv_lower``, ``tv_upper``, the resolution, atom counts and work) or
    None when a chain would exceed ``settings.max_atoms`` or ``work_budget`` (both chains
    together; see :func:`epoch_atoms`): the caller keeps its other bounds. Both ends are
    deterministic. ``ends`` lists the chains to run (``True``: upper, ``False``: lower);
    only their keys are returned.
    """
    cfg = settings or ChainSettings()
    out: dict = {"n_w": cfg.n_w, "dln": cfg.dln, "work": 0.0}
    delta, labels = None, None
    for upper in ends:
        at = epoch_atoms(sigma, t, k, upper=upper, settings=cfg,
                         work_budget=work_budget - out["work"])
        if at is None:
            return None
        out["work"] += at["work"]
        lr, p = at["T"], at["p"]
        if delta is None:
            pos = (lr > 0) & (p > 0)
            w = p[pos] / p[pos].sum()
            ln = np.log(lr[pos])
            sd = math.sqrt(max(float(np.dot(w, (ln - np.dot(w, ln)) ** 2)), 1e-300))
            delta = max(sd / cfg.c_epoch, 1e-9)
        atoms = cast(Any, _Atoms(lr, p, at.get("q_inf", 0.0), upper))
        pair = _comp.to_log_lattice(atoms, delta=delta, ln_range=60.0, upper=upper,
                                    labels=labels)
        tv, err, rnd = _comp.compose_tv(pair, epochs, direction="add", tau=_WINDOW_TAU)
        eps = pair.binning_err + at.get("mass_error", 0.0)
        # l1 error eps per epoch: TV of the E-fold products moves by ≤ 2E·eps·(1 + eps)^(E−1)
        prop = 2.0 * epochs * eps * math.exp(min(700.0, (epochs - 1) * math.log1p(eps)))
        if upper:
            labels = (pair.a0, pair.a0 + pair.p.size - 1)
            out["tv_upper"] = min(1.0, tv + err + rnd + prop)
        else:
            # likelihood ratios within a factor (1 ± κ): scaling them by (1 − κ) lowers
            # TV = Σ (q_E − p_E)_+ by at most (1 − (1 − κ)^E)·Σ q_E
            kappa = 2.0 * at["relative_error"]
            sq = float(pair.q.sum()) * (1.0 + 4.0 * pair.q.size * _U)
            scale = -math.expm1(epochs * math.log1p(-kappa)) * sq**epochs
            out["tv_lower"] = max(0.0, tv - err - rnd - prop - scale)
        out["atoms_upper" if upper else "atoms_lower"] = at["atoms"]
    return out
