"""L2-regularised squared-hinge SVM: exact solver and certified O(n) flipped problems.

Objective (liblinear's primal for ``LinearSVC``, bias penalised, ``x̃ = [x, 1]``, ``s = ±1``)::

    F_S(θ) = ½‖θ‖² + C Σ_{j∈S} max(0, 1 − s_j θ·x̃_j)²,

1-strongly convex everywhere. One record's loss derivative in ``u = θ·x̃_j`` is
``ψ_j(u) = −2C s_j max(0, 1 − s_j u)``: piecewise *linear*, with one kink at ``u = s_j``.

Exact solver
------------
Semi-smooth (generalised) Newton with backtracking to a gradient norm ``<= tol``; then
``‖θ − θ*‖ <= tol`` (strong convexity).

Flipped problems in O(n) a trial
--------------------------------
Around the computed minimiser ``w`` on ``S`` take a ball ``B(w, ρ)``. A record whose interval
``u_j ± ρ‖x̃_j‖`` holds no kink has ``ψ_j`` linear (or zero) on it, so its terms of the
gradient at any ``v = w + δ`` in the ball are **exactly** ``ψ_j(u_j) x̃_j + ψ_j' x̃_j x̃_jᵀ δ``,
summed once a trial; the records near a kink keep their exact terms. The gradient of the
flipped problem ``F_i = F_S ± C ℓ_i`` at ``v`` is then computed exactly in ``O(k² + m k)``
(``m`` kink records), and ``‖v − θ_i*‖ <= ‖∇F_i(v)‖`` by strong convexity, for every ``v`` of
the ball: no remainder and no curvature bound are needed. Newton steps (the Hessian of ``S``
updated by Sherman–Morrison for the flipped record) run for all records at once; a record
whose move leaves the ball or whose bound exceeds the budget is solved exactly.

References
----------
.. [1] R.-E. Fan, K.-W. Chang, C.-J. Hsieh, X.-R. Wang, C.-J. Lin. LIBLINEAR: a library for
   large linear classification. JMLR 9, 2008 (the L2-loss SVM primal).
.. [2] J. Nocedal, S. Wright. Numerical Optimization, 2nd ed., Springer 2006 (Newton's
   method); strong convexity: ``‖v − θ*‖ <= ‖∇F(v)‖/μ``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["solve", "surrogate_flips"]

#: Round-off allowance on a computed gradient norm.
ROUNDING = 1e-12
_MAX_NEWTON = 200
#: Records per block of the vectorised iterations (bounds the (block, kinks) work arrays).
_BLOCK = 1024


def _objective(X1, s, weight, C, v) -> float:
    m = np.maximum(0.0, 1.0 - s * (X1 @ v))
    return float(0.5 * v @ v + C * weight @ (m * m))


def _grad_hess(X1, s, weight, C, v):
    m = 1.0 - s * (X1 @ v)
    act = (m > 0) & (weight > 0)
    g = v - 2.0 * C * X1[act].T @ (weight[act] * s[act] * m[act])
    h = np.eye(X1.shape[1]) + 2.0 * C * (X1[act] * weight[act][:, None]).T @ X1[act]
    return g, h


def solve(X1, s, weight, C: float, tol: float, w0=None) -> tuple[np.ndarray, np.ndarray]:
    """Minimiser of ``F`` with record weights ``weight`` (0/1), ``(θ, generalised Hessian)``.

    Raises
    ------
    RuntimeError
        If Newton does not reach ``tol`` in 200 steps.
    """
    w = np.zeros(X1.shape[1]) if w0 is None else np.array(w0, dtype=np.float64)
    f = _objective(X1, s, weight, C, w)
    for _ in range(_MAX_NEWTON):
        g, h = _grad_hess(X1, s, weight, C, w)
        if np.linalg.norm(g) <= tol:
            return w, h
        step = np.linalg.solve(h, g)
        dec = float(g @ step)
        if dec <= 1e-13 * max(1.0, abs(f)):
            # the objective cannot resolve the decrease any more: pure Newton steps
            w = w - step
            f = _objective(X1, s, weight, C, w)
            continue
        t = 1.0
        while True:
            cand = w - t * step
            fc = _objective(X1, s, weight, C, cand)
            if fc <= f - 1e-4 * t * dec or t < 1e-10:
                break
            t *= 0.5
        w, f = cand, fc
    raise RuntimeError("squared-hinge SVM: Newton did not converge.")


def _psi(u, s, C):
    return -2.0 * C * s * np.maximum(0.0, 1.0 - s * u)


def surrogate_flips(X1, s, mask, C: float, w, h, recs, *, radius: float, budget: float,
                    max_iter: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """Moves ``δ_i = v_i − w`` of the flipped problems and the records left to an exact solve.

    ``w`` is the computed minimiser on ``S = mask`` and ``h`` its generalised Hessian. Each row
    of ``D`` not flagged in ``exact`` is within ``budget`` of the true move (module notes).
    """
    u = X1 @ w
    xn = np.linalg.norm(X1, axis=1)
    kink = np.abs(u - s) <= radius * xn
    lin = mask & ~kink
    d1 = np.where(lin & (s * u < 1.0), 2.0 * C, 0.0)
    g0 = w + X1[lin].T @ _psi(u[lin], s[lin], C)
    h1 = np.eye(X1.shape[1]) + (X1[lin] * d1[lin][:, None]).T @ X1[lin]
    km = mask & kink
    kx, ku, ks = X1[km], u[km], s[km]
    h_inv = np.linalg.inv(h)
    D = np.zeros((recs.size, X1.shape[1]))
    exact = np.zeros(recs.size, dtype=bool)
    for lo in range(0, recs.size, _BLOCK):
        r = recs[lo:lo + _BLOCK]
        sgn = np.where(mask[r], -1.0, 1.0)                  # +1: add i, −1: remove i
        xr, ur, sr = X1[r], u[r], s[r]
        curv = sgn * np.where(sr * ur < 1.0, 2.0 * C, 0.0)
        hx = xr @ h_inv
        coef = curv / (1.0 + curv * np.einsum("ip,ip->i", hx, xr))
        Db = np.zeros_like(xr)
        todo = np.arange(r.size)
        gn = np.zeros(r.size)
        for it in range(max_iter + 1):
            Dt = Db[todo]
            G = g0[None, :] + Dt @ h1
            if ku.size:
                G += _psi(ku[None, :] + Dt @ kx.T, ks[None, :], C) @ kx
            G += (sgn[todo] * _psi(ur[todo] + np.einsum("ip,ip->i", xr[todo], Dt), sr[todo],
                                   C))[:, None] * xr[todo]
            gn[todo] = np.linalg.norm(G, axis=1)
            keep = gn[todo] > 0.5 * budget
            if not keep.any() or it == max_iter:
                break
            todo, G = todo[keep], G[keep]
            hg = G @ h_inv
            Db[todo] -= hg - (coef[todo] * np.einsum("ip,ip->i", xr[todo], hg))[:, None] \
                * hx[todo]
        dn = np.linalg.norm(Db, axis=1)
        err = gn + ROUNDING
        D[lo:lo + r.size] = Db
        exact[lo:lo + r.size] = ~(np.isfinite(err) & (err <= budget) & (dn <= radius))
    return D, exact
