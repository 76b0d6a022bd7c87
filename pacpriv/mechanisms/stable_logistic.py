"""A stabilised logistic regression: the exact minimiser of a clipped, L2-regularised loss.

The black box
-------------
One-vs-rest logistic regression on public features ``x̃ = [T(x), 1]`` (``T`` a fixed affine map,
:class:`PoolBasis`), one problem per class (one problem, class 1 against class 0, for two
classes). Problem ``k`` returns the exact minimiser

    w_k(S) = argmin_w (1/N) Σ_{j∈S} ℓ_c(w·x̃_j; [y_j = k]) + (λ/2) ‖w‖²

with ``N`` a public normaliser (the expected subset size) and ``ℓ_c`` the logistic loss whose
derivative ``σ(u) − y`` is clipped to ``±c/‖x̃_j‖`` (continued linearly beyond): the gradient of
one record is ``clip(σ(u) − y) x̃_j``, of norm at most ``min(c, ‖x̃_j‖)``, i.e. per-example gradient
clipping at ``c``. The loss is convex and ``c``-Lipschitz, the objective ``λ``-strongly convex,
so the minimiser is unique and the output is a deterministic function of the subset. The
output is ``[w_1, …, w_K']`` flattened (``K' (k + 1)`` values).

Why it is stable (what PAC Privacy then prices)
-----------------------------------------------
* **Bounded influence.** Adding or removing one record moves the minimiser by at most
  ``min(c, ‖x̃_i‖)/(λN)`` per problem (Chaudhuri, Monteleoni & Sarwate, JMLR 2011, Cor. 8:
  strong convexity and the gradient bound), for *every* subset: :meth:`StableLogistic.
  difference_bound`. The per-record certificate uses it as a proven range.
* **Few, well-conditioned parameters.** With :meth:`PoolBasis.from_pool` the features are the
  pool's leading principal directions, whitened. In PAC Privacy's threat model the pool is
  known to the adversary, so a basis computed from the pool (never from the secret subset)
  leaks nothing about which records were used.

Exact per-record differences, fast
----------------------------------
:meth:`StableLogistic.per_record_differences` returns ``f(S)`` and, for every record ``i``,
``Δᵢ = f(S ∪ {i}) − f(S ∖ {i})``: the ``n`` flipped problems start from ``w(S)`` with one
Newton step (the Hessian of ``S`` updated by Sherman–Morrison for the flipped record) and
iterate quasi-Newton steps with that matrix until every gradient norm is ``<= tol``; records not
converged after ``max_iter`` steps are solved one by one by damped Newton. Each solution is
within ``tol/λ`` of the exact minimiser per problem (strong convexity), so a computed difference
is within ``difference_error = 4 sqrt(K') tol/λ`` of the difference of two releases computed by
:meth:`StableLogistic.__call__`; the certificate adds this to every distance.

From ``N >= 400`` (or with ``flip_error > 0``) the flipped problems run on the O(n) path of
:mod:`mechanisms._stable_fast` instead: a surrogate whose cost does not grow with ``n`` (exact
terms only for the few records near a clipping point) and a per-record proof that each
solution is within the budget ``ε = flip_error · c/(λN)``; the rare record that misses it is
solved exactly. :attr:`StableLogistic.difference_error` then includes ``sqrt(K') ε``.

References
----------
.. [1] K. Chaudhuri, C. Monteleoni, A. Sarwate. Differentially private empirical risk
   minimization. JMLR 12, 2011, Cor. 8.
.. [2] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, §2.
.. [3] M. Abadi et al. Deep learning with differential privacy. CCS 2016 (per-example clipping).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit, log_expit
from threadpoolctl import threadpool_limits

from ._stable_fast import build_problem, surrogate_flips

__all__ = ["PoolBasis", "StableLogistic", "broken_stick_components", "kaiser_components"]

_MAX_NEWTON = 200
#: Allowance for round-off in a computed gradient norm (added to ``tol`` in the error bounds).
_ROUNDING = 1e-12
#: Models per block of the flipped problems (bounds the (n, block) work arrays).
_BLOCK = 512
#: Default relative budget of the O(n) flipped problems, and the smallest ``N`` that uses them.
_AUTO_FLIP_ERROR = 3e-4
_AUTO_FLIP_FROM = 400.0
#: Largest feature count of the O(n) path (its tensor has ``k³`` entries).
_FAST_MAX_DIM = 48


def kaiser_components(eigenvalues: np.ndarray) -> int:
    """Number of principal directions with eigenvalue ``>=`` the mean (Kaiser's rule), ``>= 1``."""
    ev = np.asarray(eigenvalues, dtype=np.float64)
    return max(1, int(np.sum(ev >= ev.mean())))


def broken_stick_components(eigenvalues: np.ndarray) -> int:
    """Leading directions whose variance share beats the broken-stick expectation, ``>= 1``.

    Component ``j`` (1-based, descending) is kept while its share exceeds
    ``(1/p) Σ_{i=j}^{p} 1/i`` (Frontier 1976; Jackson, Ecology 74(8), 1993: among the most
    reliable stopping rules; more conservative than Kaiser's).
    """
    ev = np.sort(np.asarray(eigenvalues, dtype=np.float64))[::-1]
    p = ev.size
    share = ev / ev.sum()
    expected = np.cumsum((1.0 / np.arange(1, p + 1))[::-1])[::-1] / p
    k = 0
    while k < p and share[k] > expected[k]:
        k += 1
    return max(1, k)


@dataclass(frozen=True, eq=False)
class PoolBasis:
    """The affine feature map ``T(x) = (x − center) @ matrix`` (public in PAC's threat model).

    Attributes
    ----------
    center : ndarray of shape (p,)
    matrix : ndarray of shape (p, k)
    description : str
    """

    center: np.ndarray = field(repr=False)
    matrix: np.ndarray = field(repr=False)
    description: str = "identity"

    @classmethod
    def identity(cls, n_features: int) -> PoolBasis:
        """``T(x) = x``."""
        return cls(np.zeros(n_features), np.eye(n_features), "identity")

    @classmethod
    def from_pool(cls, X, *, components: int | str | None = "kaiser",
                  shrinkage: float = 0.0, whiten: bool = True) -> PoolBasis:
        """Leading principal directions of the pool ``X`` (n, p), whitened by default.

        ``components``: ``"kaiser"`` (eigenvalue ``>=`` mean), ``"broken_stick"``
        (:func:`broken_stick_components`), an int ``k`` in ``[1, p]``, or None (all ``p``:
        plain whitening). The covariance is shrunk as
        ``C + shrinkage · tr(C)/p · I`` before whitening (``shrinkage >= 0``). With
        ``whiten=False`` the directions keep their pool variance (a rotation onto the first
        ``k`` principal axes).
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 2:
            raise ValueError(f"`X` must be a 2-D pool with >= 2 rows; got shape {X.shape}.")
        if not shrinkage >= 0:
            raise ValueError(f"`shrinkage` must be >= 0; got {shrinkage!r}.")
        p = X.shape[1]
        center = X.mean(axis=0)
        cov = np.cov(X, rowvar=False, bias=True).reshape(p, p)
        cov = cov + shrinkage * np.trace(cov) / p * np.eye(p)
        ev, vecs = np.linalg.eigh((cov + cov.T) / 2.0)
        ev, vecs = ev[::-1], vecs[:, ::-1]
        if components is None:
            k = p
        elif components == "kaiser":
            k = kaiser_components(ev)
        elif components == "broken_stick":
            k = broken_stick_components(ev)
        elif isinstance(components, (int, np.integer)) and 1 <= components <= p:
            k = int(components)
        else:
            raise ValueError(f"`components` must be 'kaiser', 'broken_stick', None or an int "
                             f"in [1, {p}]; got {components!r}.")
        keep = ev[:k] > 1e-12 * max(ev[0], 1e-300)
        k = max(1, int(keep.sum()))
        # canonical signs: the largest-magnitude entry of each direction is positive
        v = vecs[:, :k] * np.sign(vecs[np.abs(vecs[:, :k]).argmax(axis=0), np.arange(k)])
        desc = (f"pool's {k} leading principal directions (of {p})"
                f"{', whitened' if whiten else ''}"
                f"{'' if shrinkage == 0 or not whiten else f', shrinkage {shrinkage:g}'}")
        return cls(center, v / np.sqrt(ev[:k]) if whiten else v, desc)

    @property
    def dim(self) -> int:
        """Number of mapped features ``k``."""
        return int(self.matrix.shape[1])

    def __call__(self, X) -> np.ndarray:
        """``T(X)`` of shape (m, k)."""
        return (np.asarray(X, dtype=np.float64) - self.center) @ self.matrix


def _psi(u: np.ndarray, y: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """``clip(σ(u) − y, ±cap)`` (σ via tanh: no overflow, about twice as fast as expit)."""
    r = np.tanh(0.5 * u)
    r *= 0.5
    r += 0.5 - y
    return np.clip(r, -cap, cap, out=r)


def _dpsi(u: np.ndarray, y: np.ndarray, cap: np.ndarray) -> np.ndarray:
    s = expit(u)
    return np.where(np.abs(s - y) < cap, s * (1.0 - s), 0.0)


def _loss(u: np.ndarray, y: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Primitive of :func:`_psi`: logistic loss, continued linearly where the slope is clipped."""
    cap = np.minimum(cap, 1.0 - 1e-15)
    a = np.log1p(-cap) - np.log(cap)          # y = 1 clipped for u < a; y = 0 for u > -a
    pos = y > 0.5
    up = -log_expit(np.maximum(u, a)) + cap * np.maximum(a - u, 0.0)
    un = -log_expit(-np.minimum(u, -a)) + cap * np.maximum(u + a, 0.0)
    return np.where(pos, up, un)


@dataclass(frozen=True, eq=False)
class StableLogistic:
    """Exact clipped, L2-regularised one-vs-rest logistic regression (module notes).

    Parameters
    ----------
    classes : tuple
        Public class list (>= 2 labels).
    basis : PoolBasis
        Public feature map.
    l2 : float
        ``λ > 0``.
    clip : float
        Per-example gradient bound ``c > 0``.
    normalizer : float
        Public ``N > 0`` (the expected subset size ``q·n``).
    tol : float, default 1e-9
        Gradient-norm tolerance of every solution (it enters :attr:`difference_error`).
    max_iter : int, default 30
        Quasi-Newton steps of the flipped problems before the one-by-one fallback.
    flip_error : float or None, default None
        Relative error budget ``ε_rel >= 0`` of the O(n) path of :meth:`per_record_differences`
        (:mod:`mechanisms._stable_fast`): every flipped minimiser is certified within
        ``ε_rel · c/(λN)`` of the exact one (records that miss it are solved exactly), and
        :attr:`difference_error` grows by ``sqrt(K') ε_rel c/(λN)``. 0: the exact path only
        (``n²`` work a trial). None: ``3e-4`` when ``N >= 400``, else 0.
    """

    classes: tuple
    basis: PoolBasis
    l2: float
    clip: float
    normalizer: float
    tol: float = 1e-9
    max_iter: int = 30
    flip_error: float | None = None

    def __post_init__(self) -> None:
        if len(self.classes) < 2:
            raise ValueError(f"`classes` must hold >= 2 labels; got {self.classes!r}.")
        for name in ("l2", "clip", "normalizer", "tol"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
                raise ValueError(f"`{name}` must be a finite number > 0; got {v!r}.")
        fe = self.flip_error
        if fe is not None and not (isinstance(fe, (int, float)) and 0 <= fe <= 1):
            raise ValueError(f"`flip_error` must be None or a number in [0, 1]; got {fe!r}.")

    @classmethod
    def for_pool(cls, X, *, classes: Sequence, sampling_rate: float, l2: float = 0.03,
                 clip: float = 1.0, components: int | str | None = "kaiser",
                 shrinkage: float = 0.0, whiten: bool = True,
                 tol: float = 1e-9) -> StableLogistic:
        """The mechanism for a pool ``X`` (n, p): basis from the pool, ``N = q·n``."""
        X = np.asarray(X, dtype=np.float64)
        basis = PoolBasis.from_pool(X, components=components, shrinkage=shrinkage,
                                    whiten=whiten)
        return cls(tuple(classes), basis, float(l2), float(clip),
                   float(sampling_rate) * X.shape[0], tol)

    # ------------------------------------------------------------------ shapes and features
    @property
    def n_problems(self) -> int:
        """``K' = 1`` for two classes, else ``K``."""
        return 1 if len(self.classes) == 2 else len(self.classes)

    @property
    def dim(self) -> int:
        """Output dimension ``K' (k + 1)``."""
        return self.n_problems * (self.basis.dim + 1)

    @property
    def flip_budget(self) -> float:
        """Absolute budget ``ε = ε_rel · c/(λN)`` of a flipped minimiser on the O(n) path (0:
        exact path)."""
        rel = self.flip_error
        if rel is None:
            rel = _AUTO_FLIP_ERROR if self.normalizer >= _AUTO_FLIP_FROM else 0.0
        return float(rel) * self.clip / (self.l2 * self.normalizer)

    @property
    def difference_error(self) -> float:
        """Bound on ``‖Δ_computed − Δ_release‖₂`` (module notes): ``sqrt(K') (4 tol'/λ + ε)``
        with ``tol' = tol + 1e-12`` (the gradient norms are evaluated in floating point) and
        ``ε`` the :attr:`flip_budget`."""
        return np.sqrt(self.n_problems) * (4.0 * (self.tol + _ROUNDING) / self.l2
                                           + self.flip_budget)

    def features(self, X) -> np.ndarray:
        """``x̃ = [T(x), 1]``, shape (m, k + 1)."""
        Z = self.basis(X)
        return np.hstack([Z, np.ones((Z.shape[0], 1))])

    def _targets(self, y) -> np.ndarray:
        y = np.asarray(y).reshape(-1)
        cls_ = list(self.classes)
        if self.n_problems == 1:
            return (y == cls_[1]).astype(np.float64)[:, None]
        return np.stack([(y == c).astype(np.float64) for c in cls_], axis=1)

    def _caps(self, X1: np.ndarray) -> np.ndarray:
        return self.clip / np.linalg.norm(X1, axis=1)

    def difference_bound(self, pool) -> np.ndarray:
        """Per-record bound on ``‖f(S ∪ {i}) − f(S ∖ {i})‖₂`` over every subset ``S`` (shape (n,)).

        ``sqrt(K') min(c, ‖x̃_i‖)/(λN)`` [1]_ for the exact minimisers, plus
        ``2 sqrt(K') tol/λ`` for the two computed solutions.
        """
        X1 = self.features(pool[0])
        g = np.minimum(self.clip, np.linalg.norm(X1, axis=1))
        r = np.sqrt(self.n_problems)
        return r * g / (self.l2 * self.normalizer) + 2.0 * r * (self.tol + _ROUNDING) / self.l2

    # ------------------------------------------------------------------ solvers
    def _solve(self, X1: np.ndarray, y: np.ndarray, weight: np.ndarray, cap: np.ndarray,
               w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Damped Newton for one problem; returns ``(w, Hessian)``; raises if not converged."""
        lam = self.l2
        w = np.zeros(X1.shape[1]) if w is None else w.copy()

        def objective(v: np.ndarray) -> float:
            return float(weight @ _loss(X1 @ v, y, cap) + 0.5 * lam * v @ v)

        f = objective(w)
        for _ in range(_MAX_NEWTON):
            u = X1 @ w
            g = X1.T @ (_psi(u, y, cap) * weight) + lam * w
            h = (X1 * (_dpsi(u, y, cap) * weight)[:, None]).T @ X1 + lam * np.eye(X1.shape[1])
            if np.linalg.norm(g) <= self.tol:
                return w, h
            step = np.linalg.solve(h, g)
            decrement = float(g @ step)
            if decrement <= 1e-13 * max(1.0, abs(f)):
                # the objective cannot resolve the decrease any more: pure Newton steps
                w = w - step
                f = objective(w)
                continue
            t = 1.0
            while True:
                cand = w - t * step
                fc = objective(cand)
                if fc <= f - 1e-4 * t * decrement or t < 1e-10:
                    break
                t *= 0.5
            w, f = cand, fc
        raise RuntimeError("StableLogistic: Newton did not converge.")

    def _fit(self, X1: np.ndarray, Y: np.ndarray, mask: np.ndarray) -> list:
        weight = mask.astype(np.float64) / self.normalizer
        cap = self._caps(X1)
        return [self._solve(X1, Y[:, k], weight, cap) for k in range(Y.shape[1])]

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """``θ = [w_1, …, w_K']`` of the subset ``(X, y)``; shape ``(dim,)``. ``rng`` is ignored."""
        X, y = subset
        X1 = self.features(np.asarray(X, dtype=np.float64).reshape(-1, self.basis.center.size))
        Y = self._targets(y)
        fits = self._fit(X1, Y, np.ones(X1.shape[0], dtype=bool))
        return np.concatenate([w for w, _ in fits])

    def predict(self, theta, X) -> np.ndarray:
        """Labels ``argmax_k w_k·x̃`` (two classes: ``classes[1]`` iff ``w·x̃ > 0``)."""
        X1 = self.features(X)
        W = np.asarray(theta, dtype=np.float64).reshape(self.n_problems, -1)
        scores = X1 @ W.T
        cls_ = np.asarray(self.classes)
        if self.n_problems == 1:
            return cls_[(scores[:, 0] > 0).astype(int)]
        return cls_[scores.argmax(axis=1)]

    def losses(self, theta, X, y) -> np.ndarray:
        """Per-record one-vs-rest logistic loss ``Σ_k ℓ(w_k·x̃; [y = k])`` (unclipped), (m,)."""
        X1 = self.features(X)
        W = np.asarray(theta, dtype=np.float64).reshape(self.n_problems, -1)
        u = X1 @ W.T
        t = self._targets(y)
        return np.sum(-log_expit(np.where(t > 0.5, u, -u)), axis=1)

    def describe(self) -> str:
        """The black box in words (public settings only)."""
        kind = "binary" if self.n_problems == 1 else f"one-vs-rest over {len(self.classes)}"
        return (f"exact minimiser of the L2-regularised (λ = {self.l2:g}) logistic loss with "
                f"per-example gradients clipped at c = {self.clip:g} ({kind} classes), on the "
                f"{self.basis.description}; loss normalised by the public N = "
                f"{self.normalizer:g}")

    def per_record_differences(self, pool, mask, records=None) -> tuple[np.ndarray, np.ndarray]:
        """``f(S)`` and ``Δᵢ = f(S ∪ {i}) − f(S ∖ {i})`` for the records (default: all).

        Parameters
        ----------
        pool : tuple (X, y)
            The whole pool, ``n`` records.
        mask : ndarray of bool, shape (n,)
            Membership of ``S``.
        records : ndarray of int, optional
            Records to flip (default every record).

        Returns
        -------
        base : ndarray of shape (dim,)
        diffs : ndarray of shape (len(records), dim)
            Within :attr:`difference_error` of the differences of computed releases.
        """
        # one BLAS thread: the work is many small products (threads only contend) and the
        # result must not depend on the machine's thread count
        with threadpool_limits(limits=1, user_api="blas"):
            return self._per_record_differences(pool, mask, records)

    def _per_record_differences(self, pool, mask, records):
        X1 = self.features(pool[0])
        Y = self._targets(pool[1])
        mask = np.asarray(mask, dtype=bool)
        recs = np.arange(X1.shape[0]) if records is None else np.asarray(records, np.int64)
        fits = self._fit(X1, Y, mask)
        base = np.concatenate([w for w, _ in fits])
        cap = self._caps(X1)
        p1 = X1.shape[1]
        diffs = np.empty((recs.size, self.dim))
        budget = self.flip_budget
        for k, (w, h) in enumerate(fits):
            if budget > 0 and p1 <= _FAST_MAX_DIM:
                diffs[:, k * p1:(k + 1) * p1] = self._fast_flips(
                    X1, Y[:, k], mask, cap, w, h, recs, budget)
                continue
            for lo in range(0, recs.size, _BLOCK):
                blk = recs[lo:lo + _BLOCK]
                diffs[lo:lo + blk.size, k * p1:(k + 1) * p1] = self._flips(
                    X1, Y[:, k], mask, cap, w, h, blk)
        return base, diffs

    def _fast_flips(self, X1, y, mask, cap, w, h, recs, budget) -> np.ndarray:
        """Oriented differences of one problem by the certified O(n) path (module notes)."""
        tol_ = (self.tol + _ROUNDING) / self.l2
        radius = 2.0 * (self.clip / (self.l2 * self.normalizer) + tol_)
        sp = build_problem(X1, y, mask, cap, w, lam=self.l2, normalizer=self.normalizer,
                           radius=radius)
        D, exact = surrogate_flips(sp, X1, y, mask, cap, h, recs, lam=self.l2,
                                   normalizer=self.normalizer, tol=self.tol, budget=budget,
                                   max_iter=self.max_iter)
        members = mask.astype(np.float64) / self.normalizer
        for j in np.flatnonzero(exact):               # rare: solve exactly, one by one
            weight = members.copy()
            weight[recs[j]] = 0.0 if mask[recs[j]] else 1.0 / self.normalizer
            warm = np.all(np.isfinite(D[j])) and np.linalg.norm(D[j]) <= radius
            v, _ = self._solve(X1, y, weight, cap, w + D[j] if warm else w)
            D[j] = v - w
        return D * np.where(mask[recs], -1.0, 1.0)[:, None]

    def _flips(self, X1, y, mask, cap, w, h, recs) -> np.ndarray:
        """Oriented differences of one problem for the records ``recs`` (module notes)."""
        N, lam = self.normalizer, self.l2
        sgn = np.where(mask[recs], -1.0, 1.0)          # +1: add i, −1: remove i
        h_inv = np.linalg.inv(h)
        u = X1 @ w
        xr = X1[recs]
        hx = xr @ h_inv                                  # rows H⁻¹ x_i
        curv = sgn * _dpsi(u[recs], y[recs], cap[recs]) / N
        coef = curv / (1.0 + curv * np.einsum("ip,ip->i", hx, xr))

        def precondition(g: np.ndarray) -> np.ndarray:   # (H ± h_i)⁻¹ g, Sherman–Morrison
            hg = g @ h_inv
            return hg - (coef * np.einsum("ip,ip->i", xr, hg))[:, None] * hx

        g0 = (sgn * _psi(u[recs], y[recs], cap[recs]) / N)[:, None] * xr
        W = w[None, :] - precondition(g0)
        members = mask.astype(np.float64) / N
        xm = X1 * members[:, None]
        col = np.arange(recs.size)
        todo = col
        for _ in range(self.max_iter + 1):
            # gradient of the flipped objectives: S's terms plus ± the flipped record's term
            P = _psi(X1 @ W[todo].T, y[:, None], cap[:, None])
            G = P.T @ xm + lam * W[todo]
            r = recs[todo]
            G += ((sgn[todo] / N) * P[r, np.arange(todo.size)])[:, None] * X1[r]
            gn = np.linalg.norm(G, axis=1)
            keep = gn > self.tol
            if not keep.any() or _ == self.max_iter:
                break
            todo, G = todo[keep], G[keep]
            hg = G @ h_inv
            W[todo] -= hg - (coef[todo] * np.einsum("ip,ip->i", xr[todo], hg))[:, None] * hx[todo]
        for j in todo[gn > self.tol] if keep.any() else ():   # rare: solve exactly, one by one
            weight = members.copy()
            weight[recs[j]] = 0.0 if mask[recs[j]] else 1.0 / N
            W[j], _ = self._solve(X1, y, weight, cap, W[j])
        return (W - w[None, :]) * sgn[:, None]
