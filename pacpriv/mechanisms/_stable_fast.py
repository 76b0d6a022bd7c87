"""Certified flipped problems of the stable logistic regression in O(n) work a trial.

The exact path solves each of the ``n`` flipped problems over all ``n`` records (``n²`` work a
trial). Here each flipped problem is solved on a *surrogate* whose cost does not grow with
``n``, and the gap to the true minimiser is bounded by a proof, record by record.

Surrogate
---------
Let ``w`` be the computed minimiser on ``S`` and ``δ = v − w`` the move of a flipped problem.
Every record ``j`` of ``S`` has the one-dimensional loss derivative ``ψ_j(u)`` (the clipped
residual ``clip(σ(u) − y_j, ±cap_j)``) at ``u_j = w·x̃_j``. A move is at most ``ρ`` (twice the
proven bound ``c/(λN)`` on ``‖w(S ∪ {i}) − w(S ∖ {i})‖``, [1]_ Cor. 8), so ``u`` moves by at
most ``ρ_j = ρ‖x̃_j‖``.

* A record whose interval ``u_j ± ρ_j`` holds a kink of ``ψ_j`` (a clipping point) keeps its
  exact term ``ψ_j(u_j + x̃_j·δ) x̃_j`` (few records: the interval shrinks as ``1/N``).
* Every other record has a smooth ``ψ_j`` on its interval and enters through its Taylor
  polynomial of degree 2 in ``t = x̃_j·δ``: the terms sum to a vector, a ``k × k`` matrix and a
  ``k × k × k`` tensor, computed once a trial.

The surrogate gradient of a flipped problem then costs ``O(k³ + (kinks)·k)`` and its Newton
iterations (Sherman–Morrison preconditioner, as on the exact path) run for all records at once.

Certificate
-----------
On a smooth interval, ``|ψ_j(u_j + t) − P_j(t)| <= M_j |t|³/6`` with ``M_j`` the largest
``|σ'''|`` on it, and ``|σ'''| <= σ'`` (``|1 − 6s(1 − s)| <= 1``), so ``M_j`` is ``σ'`` at the
point of the interval nearest 0 (0 on a clipped, constant stretch). With
``|t|³ <= t² ‖x̃_j‖ ‖δ‖`` the true gradient differs from the surrogate's by at most
``‖δ‖ δᵀQδ``, ``Q = (1/N) Σ_j (M_j/6) ‖x̃_j‖² x̃_j x̃_jᵀ``. The flipped objective is
``μ_i``-strongly convex on the ball of radius ``ρ`` (``μ_i`` the smallest eigenvalue of
``λI + (1/N) Σ_j m_j x̃_j x̃_jᵀ``, ``m_j`` the smallest ``ψ_j'`` on the interval, 0 at a kink,
less the removed record's share by Weyl's inequality, and at least ``λ``), so

    ‖v − w_i*‖ <= (‖ĝ(v)‖ + ‖δ‖ δᵀQδ) / μ_i,

with ``ĝ`` the surrogate gradient. A record whose bound exceeds the budget ``ε`` (or whose
move leaves the ball) is solved exactly, by damped Newton over every record, as before.

Any radius
----------
The argument above needs the true minimiser ``w_i*`` inside the ball ``B(w, ρ)``. With ``ρ``
twice a proven bound on every move that holds a priori; for any other ``ρ`` (e.g. one sized
from a Newton step, :meth:`mechanisms.logistic.LogisticCoefficients.per_record_differences`)
it is checked a posteriori: write ``r = ‖v − w‖`` and ``e = (‖ĝ(v)‖ + ‖δ‖ δᵀQδ)/μ_i`` (so the
true gradient has ``‖∇F_i(v)‖ <= μ_i e``). If ``2e < ρ − r``, every point ``z`` on the sphere of
radius ``R = ρ − r`` around ``v`` (inside ``B(w, ρ)``, where ``F_i`` is ``μ_i``-strongly convex)
has ``F_i(z) >= F_i(v) − μ_i e R + μ_i R²/2 > F_i(v)``, so by convexity ``w_i*`` lies inside
that sphere, hence in ``B(w, ρ)``, and ``‖v − w_i*‖ <= e``. A record that fails the test is
solved exactly. Every
returned difference is therefore within ``ε`` (plus the solver tolerance) of the exact one;
the mechanism declares it in ``difference_error`` and the certificate adds it to every
distance.

References
----------
.. [1] K. Chaudhuri, C. Monteleoni, A. Sarwate. Differentially private empirical risk
   minimization. JMLR 12, 2011, Cor. 8.
.. [2] J. Nocedal, S. Wright. Numerical Optimization, 2nd ed., Springer 2006, Thm 2.1 and
   §3 (Taylor's theorem; Newton's method); R. Horn, C. Johnson, Matrix Analysis, Weyl's
   inequality (Thm 4.3.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SurrogateProblem", "surrogate_flips"]

#: Round-off allowance on a computed gradient norm (as the exact path's).
_ROUNDING = 1e-12
#: Records per block of the vectorised iterations (bounds the (block, kinks) work arrays).
_BLOCK = 1024
#: Rows per block of the tensor sum (bounds its (rows, k²) work array).
_ROWS = 4096


def _sig(u: np.ndarray) -> np.ndarray:
    return 0.5 + 0.5 * np.tanh(0.5 * u)


def _dsig(u: np.ndarray) -> np.ndarray:
    s = _sig(u)
    return s * (1.0 - s)


@dataclass(frozen=True, eq=False)
class SurrogateProblem:
    """The per-trial pieces of one problem's surrogate (module notes); private."""

    g0: np.ndarray          # (k,)  Σ_smooth ψ_j x̃_j / N + λ w
    h1: np.ndarray          # (k, k) Σ_smooth ψ_j' x̃_j x̃_jᵀ / N
    t2: np.ndarray          # (k², k) Σ_smooth ψ_j''/2 (x̃_j ⊗ x̃_j) x̃_jᵀ / N
    q: np.ndarray           # (k, k) remainder matrix Q
    kink_x: np.ndarray      # (m, k) rows of the kink records of S
    kink_u: np.ndarray      # (m,)
    kink_y: np.ndarray      # (m,)
    kink_cap: np.ndarray    # (m,)
    mu0: float              # λ_min of the Hessian lower bound on the ball
    m: np.ndarray           # (n,) smallest ψ' on each record's interval
    u: np.ndarray           # (n,) x̃_j·w
    radius: float           # ρ


def _kinks(u, y, cap):
    """Logit of each record's clipping point (``cap >= 1``: never clipped, so ``−inf`` for
    ``y = 1``, whose clipped side is below the point, and ``+inf`` for ``y = 0``)."""
    c = np.minimum(cap, 1.0)
    with np.errstate(divide="ignore"):
        at = np.log1p(-c) - np.log(c)              # logit(1 − cap) = −logit(cap)
    at = np.where(c < 1.0, at, -np.inf)
    return np.where(y > 0.5, at, -at)               # y = 1: logit(1 − cap); y = 0: logit(cap)


def build_problem(X1, y, mask, cap, w, *, lam: float, normalizer: float,
                  radius: float) -> SurrogateProblem:
    """The surrogate of one problem around the computed minimiser ``w`` on ``S = mask``."""
    N = normalizer
    u = X1 @ w
    xn = np.linalg.norm(X1, axis=1)
    half = xn * radius
    lo, hi = u - half, u + half
    kink = _kinks(u, y, cap)
    in_kink = np.isfinite(kink) & (lo <= kink) & (kink <= hi)
    clipped = np.where(y > 0.5, u < kink, u > kink) & ~in_kink   # constant ψ on the interval
    smooth = ~in_kink & ~clipped
    s = _sig(u)
    d1 = np.where(smooth, s * (1.0 - s), 0.0)
    d2 = np.where(smooth, s * (1.0 - s) * (1.0 - 2.0 * s), 0.0)
    m3 = np.where(smooth, _dsig(np.clip(0.0, lo, hi)), 0.0)
    m_low = np.where(smooth, np.minimum(_dsig(lo), _dsig(hi)), 0.0)
    sm = mask & ~in_kink
    Xs = X1[sm]
    psi = np.clip(s - y, -cap, cap)
    g0 = Xs.T @ psi[sm] / N + lam * w
    h1 = (Xs * (d1[sm] / N)[:, None]).T @ Xs
    k = X1.shape[1]
    c2 = Xs * (0.5 * d2[sm] / N)[:, None]
    t2 = np.zeros((k * k, k))
    for lo in range(0, Xs.shape[0], _ROWS):          # (rows, k²) blocks: bounded memory
        blk = Xs[lo:lo + _ROWS]
        t2 += (blk[:, :, None] * blk[:, None, :]).reshape(-1, k * k).T @ c2[lo:lo + _ROWS]
    q = (Xs * (m3[sm] * xn[sm] ** 2 / (6.0 * N))[:, None]).T @ Xs
    hmin = (X1[mask] * (m_low[mask] / N)[:, None]).T @ X1[mask] + lam * np.eye(k)
    ev = np.linalg.eigvalsh((hmin + hmin.T) / 2.0)
    mu0 = float(ev[0]) - 1e-10 * float(abs(ev[-1]))
    km = mask & in_kink
    return SurrogateProblem(g0, h1, t2, q, X1[km], u[km], y[km], cap[km], max(mu0, lam),
                            m_low, u, float(radius))


def _psi(u, y, cap):
    return np.clip(_sig(u) - y, -cap, cap)


def _gradient(sp: SurrogateProblem, lam, N, D, xr, ur, yr, cr, sgn) -> np.ndarray:
    """Surrogate gradients of the flipped problems at ``w + D`` (rows), shape (B, k)."""
    B, k = D.shape
    G = sp.g0[None, :] + lam * D + D @ sp.h1
    G += (D[:, :, None] * D[:, None, :]).reshape(B, k * k) @ sp.t2
    if sp.kink_u.size:
        P = _psi(sp.kink_u[None, :] + D @ sp.kink_x.T, sp.kink_y[None, :], sp.kink_cap[None, :])
        G += (P @ sp.kink_x) / N
    own = _psi(ur + np.einsum("ip,ip->i", xr, D), yr, cr)
    G += ((sgn / N) * own)[:, None] * xr
    return G


def surrogate_flips(sp: SurrogateProblem, X1, y, mask, cap, h, recs, *, lam: float,
                    normalizer: float, tol: float, budget: float, max_iter: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Moves ``δ_i = v_i − w`` of the flipped problems, and the records left to an exact solve.

    Returns ``(D, exact)``: ``D`` of shape (len(recs), k), each row within ``budget`` of the true
    move (module notes), except the rows flagged in the boolean ``exact`` (to be solved exactly).
    """
    D = np.zeros((recs.size, X1.shape[1]))
    exact = np.zeros(recs.size, dtype=bool)
    h_inv = np.linalg.inv(h)
    for lo in range(0, recs.size, _BLOCK):
        blk = recs[lo:lo + _BLOCK]
        D[lo:lo + blk.size], exact[lo:lo + blk.size] = _block(
            sp, X1[blk], y[blk], cap[blk], mask[blk], sp.u[blk], sp.m[blk], h_inv, lam=lam,
            N=normalizer, tol=tol, budget=budget, max_iter=max_iter)
    return D, exact


def _block(sp: SurrogateProblem, xr, yr, cr, member, ur, mr, h_inv, *, lam, N, tol, budget,
           max_iter):
    """One block of records: Newton on the surrogate, then the certified error of each move."""
    sgn = np.where(member, -1.0, 1.0)                 # +1: add i, −1: remove i
    curv = sgn * np.where(np.abs(_sig(ur) - yr) < cr, _dsig(ur), 0.0) / N
    hx = xr @ h_inv
    coef = curv / (1.0 + curv * np.einsum("ip,ip->i", hx, xr))

    def precondition(g: np.ndarray, rows) -> np.ndarray:   # (H ± h_i)⁻¹ g, Sherman–Morrison
        hg = g @ h_inv
        return hg - (coef[rows] * np.einsum("ip,ip->i", xr[rows], hg))[:, None] * hx[rows]

    D = np.zeros_like(xr)
    todo = np.arange(xr.shape[0])
    gn = np.zeros(xr.shape[0])
    # the certificate charges the whole budget anyway: iterate until half of it is certain
    goal = max(tol, 0.5 * budget * lam)
    for it in range(max_iter + 1):
        G = _gradient(sp, lam, N, D[todo], xr[todo], ur[todo], yr[todo], cr[todo], sgn[todo])
        gn[todo] = np.linalg.norm(G, axis=1)
        keep = gn[todo] > goal
        if not keep.any() or it == max_iter:
            break
        todo, G = todo[keep], G[keep]
        D[todo] -= precondition(G, todo)
    dn = np.linalg.norm(D, axis=1)
    rem = dn * np.einsum("ip,pq,iq->i", D, sp.q, D) * (1.0 + 1e-9)
    mu = np.maximum(lam, sp.mu0 - np.where(member, mr, 0.0) * np.einsum("ip,ip->i", xr, xr) / N)
    err = (gn + _ROUNDING + rem) / mu
    # the true minimiser is certified inside the ball (module notes, "Any radius")
    inside = 2.0 * err < sp.radius - dn
    bad = ~(np.isfinite(err) & (err <= budget) & (dn <= sp.radius) & inside)
    return D, bad
