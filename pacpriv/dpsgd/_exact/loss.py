"""Certified upper bounds on the hockey-stick curve ``δ(ε)`` of a composed privacy-loss law.

Private helper of :mod:`pacpriv.dpsgd.tradeoff`. Notation: ``P`` is the output law without the
record, ``Q`` with it, ``L = ln dQ/dP`` the privacy loss, and for every real ``ε``

    δ(ε) = sup_S Q(S) − e^ε P(S) = E_Q[(1 − e^{ε − L})_+]          (membership direction)
    δ'(ε) = sup_S P(S) − e^ε Q(S) = 1 − e^ε + e^ε δ(−ε)            (the other direction)

(the identity holds for any pair of probability measures: take complements). A test with
false-positive rate α has true-positive rate at most ``e^ε α + δ(ε)`` for every ε (Dong, Roth &
Su 2022, Prop. 2.12), and ``(ε, δ)``-DP for add-or-remove neighbours needs ``max(δ, δ') ≤ δ``.

:class:`AtomLoss` holds the E-fold composed Q-law of the *upper* (dominating) chain of
:mod:`pacpriv.dpsgd.exact` on the lattice ``L = aΔ``, its Q-mass at ``+∞`` and an additive
allowance ``err`` covering the Chernoff window, the FFT and epoch round-off: its ``δ`` is an
upper bound for every ε, since ``δ(ε) = E_P[(T − e^ε)_+] + Q(T = ∞)`` is increasing and convex
in the likelihood ratio ``T`` (the chain's order) and ``E_Q[g]`` moves by at most the l1 error
for ``0 ≤ g ≤ 1``. :class:`GridLoss` wraps a dp-accounting PLD (Poisson) evaluated on a grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

_U = 2.0**-53


@dataclass(frozen=True)
class AtomLoss:
    """Q-law of the privacy loss on atoms ``loss`` (ascending, nats), mass ``q_inf`` at ``+∞``.

    ``err`` is added to every ``δ(ε)``: it bounds the l1 distance between the stored and the
    dominating chain's exact Q-laws, plus the masses outside the window.

    For the other direction, write ``(P^c, Q^c)`` for the chain's pair with ``P^c`` defined
    from the stored ``Q^c`` (``dP^c = e^{−L} dQ^c`` on the atoms, the rest of a unit mass at
    ``L = −∞``). Since ``δ^c ≥ δ`` everywhere, the complement identity gives, for every ε,

        δ'(ε) ≤ (1 − P^c(L > −∞)) + Σ_{L_j < −ε} p_j (1 − e^{ε + L_j}) + e^ε·(Q^c_tot − 1)_+,

    where only the last term, the chain's Q-mass in excess of one, is multiplied by ``e^ε``.
    ``p`` is the composed P-law on the atoms (its own FFT, l1 error ``err_reverse``),
    ``p_zero`` an upper bound on ``1 − P^c(L > −∞)`` and ``excess`` one on the l1 error that
    is amplified (the epoch round-off and ``Q^c_tot − 1``). ``symmetric`` pairs (a Gaussian
    shift) have ``δ' = δ``.
    """

    loss: np.ndarray
    q: np.ndarray
    q_inf: float
    err: float
    method: str
    p: np.ndarray | None = None
    p_zero: float = 1.0
    err_reverse: float = 1.0
    excess: float = 1.0
    symmetric: bool = False
    _sq: np.ndarray = field(init=False, repr=False, compare=False)
    _sp: np.ndarray = field(init=False, repr=False, compare=False)
    _cp: np.ndarray = field(init=False, repr=False, compare=False)
    _cpe: np.ndarray = field(init=False, repr=False, compare=False)
    _rel: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        q = np.maximum(np.asarray(self.q, dtype=np.float64), 0.0)  # FFT noise: covered by err
        object.__setattr__(self, "q", q)
        # P-masses p = q·e^{−L} in the log domain: e^{−L} alone overflows where L is very
        # negative (σ = 0.3, E = 100) and 0·inf would be NaN; a mass is at most 1, and a
        # smaller P-mass only raises δ(ε) = Σ_{L > ε} (q − e^ε p) (the safe side)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            pq = np.where(q > 0, np.minimum(np.exp(np.log(q) - self.loss), 1.0), 0.0)
        # suffix sums (index i: atoms i..n-1), with a trailing 0
        object.__setattr__(self, "_sq", np.concatenate((np.cumsum(q[::-1])[::-1], [0.0])))
        object.__setattr__(self, "_sp", np.concatenate((np.cumsum(pq[::-1])[::-1], [0.0])))
        n = q.size
        # recursive sums of n non-negative terms: relative error <= (n − 1)u (Higham, §4.2)
        object.__setattr__(self, "_rel", (n + 6.0) * _U * 1.01)
        p = np.zeros(n) if self.p is None else np.maximum(np.asarray(self.p, float), 0.0)
        # prefix sums (index i: atoms 0..i-1), with a leading 0
        object.__setattr__(self, "_cp", np.concatenate(([0.0], np.cumsum(p))))
        object.__setattr__(self, "_cpe", np.concatenate(([0.0], np.cumsum(p * np.exp(
            np.minimum(self.loss, 700.0))))))

    def candidates(self) -> np.ndarray:
        """Privacy losses at which ``e^ε α + δ(ε)`` can be minimal (the atoms): the minimum
        over them equals the minimum over all real ε (between atoms it is monotone in e^ε)."""
        return self.loss

    def delta(self, eps) -> np.ndarray:
        """Upper bound on ``δ(ε) = E_Q[(1 − e^{ε − L})_+]`` (membership direction), in [0, 1]."""
        eps = np.asarray(eps, dtype=np.float64)
        idx = np.searchsorted(self.loss, eps, side="right")  # atoms with loss > ε
        sq, sp = self._sq[idx], self._sp[idx]
        with np.errstate(over="ignore", invalid="ignore"):
            esp = np.exp(eps) * sp
            raw = np.maximum(sq - esp, 0.0)
            out = raw + self.q_inf + self.err + self._rel * (sq + esp) + 4 * _U
        return np.minimum(np.where(np.isfinite(out), out, 1.0), 1.0)

    def delta_reverse(self, eps) -> np.ndarray:
        """Upper bound on ``δ'(ε) = sup_S P(S) − e^ε Q(S)`` (see the class notes), in [0, 1]."""
        if self.symmetric:
            return self.delta(eps)
        eps = np.asarray(eps, dtype=np.float64)
        if self.p is None:
            return np.ones_like(eps)
        idx = np.searchsorted(self.loss, -eps, side="left")  # atoms with loss < −ε
        cp, cpe = self._cp[idx], self._cpe[idx]
        with np.errstate(over="ignore", invalid="ignore"):
            ep = np.exp(eps)
            body = np.maximum(cp - ep * cpe, 0.0) + self._rel * (cp + ep * cpe)
            out = self.p_zero + body + self.err_reverse + ep * self.excess + 4 * _U
        out = np.where(np.isfinite(out), out, 1.0)
        return np.clip(out, 0.0, 1.0)


@dataclass(frozen=True)
class GridLoss:
    """``δ(ε)`` of a dp-accounting PLD on a grid of ε (Poisson subsampling).

    dp-accounting's ``get_delta_for_epsilon`` takes the larger of its "remove" and "add"
    curves, so it bounds both directions; :meth:`delta` at a point off the grid uses the
    nearest grid point below (``δ`` is non-increasing in ε).
    """

    eps: np.ndarray
    values: np.ndarray
    method: str

    def candidates(self) -> np.ndarray:
        """The grid."""
        return self.eps

    def delta(self, eps) -> np.ndarray:
        """Upper bound on ``δ(ε)`` (1 below the grid)."""
        eps = np.asarray(eps, dtype=np.float64)
        idx = np.searchsorted(self.eps, eps, side="right") - 1
        out = np.where(idx >= 0, self.values[np.maximum(idx, 0)], 1.0)
        return np.minimum(out, 1.0)

    def delta_reverse(self, eps) -> np.ndarray:
        """Same as :meth:`delta` (the accountant's curve covers both directions)."""
        return self.delta(eps)


def tpr_upper(loss, fpr: np.ndarray, *, block: int = 1 << 22) -> tuple[np.ndarray, np.ndarray]:
    """``min(1, min_ε e^ε α + δ(ε))`` for every α in ``fpr``, and the minimising ε.

    Minimum over ``loss.candidates()`` (exact for :class:`AtomLoss`); each product and sum is
    rounded up by a relative ``4u``.
    """
    cand = loss.candidates()
    cand = cand[(cand > -60.0) & (cand < 60.0)]
    if cand.size == 0:
        cand = np.zeros(1)
    d = loss.delta(cand)
    keep = d < 1.0
    if not np.any(keep):
        return np.ones_like(fpr), np.zeros_like(fpr)
    cand, d = cand[keep], d[keep]
    ex = np.exp(cand)
    out = np.empty_like(fpr)
    arg = np.empty_like(fpr)
    rows = max(1, block // cand.size)
    for start in range(0, fpr.size, rows):
        a = fpr[start:start + rows, None]
        val = ex[None, :] * a + d[None, :]
        j = np.argmin(val, axis=1)
        out[start:start + rows] = val[np.arange(j.size), j]
        arg[start:start + rows] = cand[j]
    out = np.minimum(out * (1.0 + 4 * _U) + 4 * _U * fpr, 1.0)
    return np.maximum(out, fpr), arg


def epsilon_for_delta(loss, delta: float, *, eps_max: float = 60.0,
                      direction: str = "both") -> float:
    """Smallest ε ≥ 0 (to 1e-9 relative, rounded up) with the chosen bound ``≤ delta``.

    ``direction``: ``"both"`` uses ``max(δ(ε), δ'(ε))``, ``"add"`` the membership direction
    ``δ(ε)`` alone, ``"remove"`` the other one ``δ'(ε)`` alone. The true ``δ`` and ``δ'`` are
    non-increasing in ε, so any ε at which a bound holds certifies every larger ε (the running
    minimum of the bound): a grid scan followed by a bisection between the last failing and
    the first passing point is valid even where the upper bounds are not monotone (``δ'``'s
    bound grows with ε through its ``e^ε`` term). The run is ``(ε, delta)``-DP for adding or
    removing one record at the larger of the ``"add"`` and ``"remove"`` values (each direction
    holds from its own ε on), which is never above the ``"both"`` value. Returns ``inf`` if no
    ε ≤ ``eps_max`` passes.
    """
    if direction == "add":
        def bound(e: np.ndarray) -> np.ndarray:
            return loss.delta(e)
    elif direction == "remove":
        def bound(e: np.ndarray) -> np.ndarray:
            return loss.delta_reverse(e)
    elif direction == "both":
        def bound(e: np.ndarray) -> np.ndarray:
            return np.maximum(loss.delta(e), loss.delta_reverse(e))
    else:
        raise ValueError(f"`direction` must be 'add', 'remove' or 'both'; got {direction!r}.")

    def ok(e: np.ndarray) -> np.ndarray:
        return bound(e) <= delta

    grid = np.concatenate(([0.0], np.geomspace(1e-6, eps_max, 4000)))
    good = ok(grid)
    if not np.any(good):
        return math.inf
    j = int(np.argmax(good))
    if j == 0:
        return 0.0
    lo, hi = float(grid[j - 1]), float(grid[j])
    for _ in range(80):
        if hi - lo <= 1e-9 * hi:
            break
        mid = 0.5 * (lo + hi)
        if bool(ok(np.array([mid]))[0]):
            hi = mid
        else:
            lo = mid
    return hi
