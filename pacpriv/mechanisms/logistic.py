"""Logistic-regression coefficients over a fixed public class list.

Output
------
``ndarray`` of shape ``(K_out * p + K_out,)``, float64: the coefficients (row-major,
``K_out`` rows of ``p``) followed by the ``K_out`` intercepts of an L2-regularised
:class:`sklearn.linear_model.LogisticRegression` (lbfgs solver; softmax/multinomial for
``K >= 3``). ``K_out = 1`` for a binary problem (the row is the log-odds of ``classes[1]``
against ``classes[0]``) and ``K_out = K`` otherwise.

Fixed shape
-----------
The class list is public and given at construction (``classes=``); the output never depends on
which labels a subset contains. Features are standardised with public constants
``(X - center) / scale`` (pass a published range's midpoint and half-width, or omit them).
Absent classes and tiny subsets follow the rules of :mod:`mechanisms._linear`: rows of absent
classes are the public placeholder 0; a subset with fewer than two classes (including ``n = 0``
and ``n = 1``) returns all zeros, the limit of the L2-regularised fit as the data vanish.

Canonicalisation
----------------
lbfgs is deterministic; the rows are sorted (label, then features) before fitting so the output
does not depend on record order. ``rng`` is ignored. Convergence warnings are silenced: the
iterate after the fixed, public ``max_iter`` is a deterministic function of the subset.

Per-record differences: why lbfgs has no fast path, and the Newton solver that has one
--------------------------------------------------------------------------------------
The lbfgs release is the iterate where lbfgs stopped (tolerance or ``max_iter``), at an
uncertified distance from the minimiser, so no closed form or rank-one update bounds the
difference of two *releases*: the per-record certificate runs ``1 + n`` fits a trial (in record
blocks on the engine). ``make_logistic(..., solver="newton")`` (two classes) releases instead
the minimiser of the same L2 objective with the intercept penalised too,

    θ(S) = argmin_θ C Σ_{j∈S} ℓ(θ·x̃_j; y_j) + ½ ‖θ‖²,   x̃ = [standardised x, 1],

computed by damped Newton to a gradient norm ``<= tol`` (so within ``C·tol`` of the exact
minimiser: the objective is ``1/C``-strongly convex). Its
:meth:`LogisticNewton.per_record_differences` is O(n) a trial: every flipped problem is solved
on the certified surrogate of :mod:`mechanisms._stable_fast` (the stabilised logistic
regression's, with no clipping) in a ball sized from one Newton step and checked a posteriori,
each flipped minimiser certified within ``flip_tolerance`` (records that miss it are solved
exactly); ``difference_error = 4 C (tol + 1e-12) + flip_tolerance`` bounds the gap to the
difference of two releases, and the certificate adds it to every distance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._common import check_newton_settings, class_indices, split_supervised
from ._linear import LinearModel, standardise
from ._stable_fast import build_problem, surrogate_flips

__all__ = ["LogisticCoefficients", "LogisticNewton", "logistic_coefficients", "make_logistic"]


@dataclass(frozen=True)
class LogisticCoefficients(LinearModel):
    """Logistic-regression coefficients and intercepts (picklable callable).

    Parameters
    ----------
    classes : tuple
        Public class list (>= 2 distinct labels); fixes the output shape.
    C : float
        Inverse L2 regularisation strength (> 0).
    max_iter : int
        lbfgs iteration budget.
    center, scale : tuple of float or None
        Public standardisation constants, scalar or per feature.
    """

    classes: tuple = (0, 1)
    C: float = 1.0
    max_iter: int = 200
    center: tuple[float, ...] | None = None
    scale: tuple[float, ...] | None = None

    mechanism: ClassVar[str] = "logistic"
    binary_scale: ClassVar[float] = 0.5

    def estimator(self) -> Any:
        """An unfitted lbfgs :class:`sklearn.linear_model.LogisticRegression`."""
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(C=float(self.C), max_iter=int(self.max_iter))


#: Round-off allowance on a computed gradient norm (as the stabilised logistic regression's).
_ROUNDING = 1e-12
#: Radius of the surrogate's ball, in multiples of the 99th percentile of the one-Newton-step
#: moves (records beyond it are solved exactly).
_RADIUS_STEPS = 4.0


@dataclass(frozen=True)
class LogisticNewton(LogisticCoefficients):
    """Two-class L2 logistic regression, intercept penalised, solved by Newton (module notes).

    Parameters
    ----------
    classes, C, center, scale
        As :class:`LogisticCoefficients` (exactly two classes; ``max_iter`` is unused).
    tol : float, default 1e-9
        Gradient-norm tolerance of every solution (> 0).
    flip_tolerance : float, default 1e-6
        Certified bound on the error of each flipped minimiser of
        :meth:`per_record_differences` (>= 0, coefficient units; 0: exact solves only).
    """

    tol: float = 1e-9
    flip_tolerance: float = 1e-6

    def __post_init__(self) -> None:
        super().__post_init__()
        check_newton_settings(len(self.classes), self.tol, self.flip_tolerance,
                              fallback="solver='lbfgs' or the stable_logistic mechanism")

    def to_dict(self) -> dict:
        """JSON-serialisable configuration (``solver: "newton"``)."""
        return {**super().to_dict(), "solver": "newton"}

    @property
    def difference_error(self) -> float:
        """Bound on ``‖Δ_computed − Δ_release‖₂``: ``4 C tol' + flip_tolerance``,
        ``tol' = tol + 1e-12`` (module notes)."""
        return 4.0 * float(self.C) * (self.tol + _ROUNDING) + float(self.flip_tolerance)

    def difference_bound(self, pool) -> np.ndarray:
        """Per-record bound on ``‖f(S ∪ {i}) − f(S ∖ {i})‖₂`` over every subset, shape (n,):
        ``C ‖x̃_i‖`` (one record's gradient is at most ``‖x̃_i‖``, the objective is
        ``1/C``-strongly convex: Chaudhuri, Monteleoni & Sarwate, JMLR 2011, Cor. 8) plus
        ``2 C tol'`` for the two computed solutions."""
        X1, _ = self._problem(pool)
        return float(self.C) * (np.linalg.norm(X1, axis=1) + 2.0 * (self.tol + _ROUNDING))

    def _problem(self, subset) -> tuple[np.ndarray, np.ndarray]:
        X, y = split_supervised(subset, mechanism=self.mechanism)
        Z = standardise(X, self.center, self.scale)
        X1 = np.hstack([Z, np.ones((Z.shape[0], 1))])
        t = (class_indices(y, self.classes) == 1).astype(np.float64) if y.size else \
            np.zeros(0)
        return X1, t

    def _solver(self, n_features: int):
        from .stable_logistic import PoolBasis, StableLogistic

        return StableLogistic(self.classes, PoolBasis.identity(n_features), 1.0 / float(self.C),
                              1.0, 1.0, float(self.tol))

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """``[w, b]`` of the subset, shape ``(p + 1,)``; ``rng`` is ignored."""
        X1, t = self._problem(subset)
        w, _ = self._solver(X1.shape[1] - 1)._solve(X1, t, np.ones(t.size), np.ones(t.size))
        return w

    def per_record_differences(self, pool, mask, records=None) -> tuple[np.ndarray, np.ndarray]:
        """``f(S)`` and ``Δᵢ = f(S ∪ {i}) − f(S ∖ {i})`` for the records (default all), O(n).

        Returns ``(base (p + 1,), diffs (len(records), p + 1))``, each difference within
        :attr:`difference_error` of the difference of two releases (module notes).
        """
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):   # machine-independent results
            return self._differences(pool, np.asarray(mask, dtype=bool), records)

    def _differences(self, pool, mask, records):
        X1, t = self._problem(pool)
        recs = np.arange(t.size) if records is None else np.asarray(records, np.int64)
        sl, lam, cap = self._solver(X1.shape[1] - 1), 1.0 / float(self.C), np.ones(t.size)
        weight = mask.astype(np.float64)
        w, h = sl._solve(X1, t, weight, cap)
        if self.flip_tolerance > 0 and recs.size:
            sgn = np.where(mask[recs], -1.0, 1.0)
            xr = X1[recs]
            u = X1[recs] @ w
            s = 0.5 + 0.5 * np.tanh(0.5 * u)
            hx = np.linalg.solve(h, xr.T).T                   # rows H⁻¹ x_i
            curv = sgn * s * (1.0 - s)
            step = (sgn * (s - t[recs]) / (1.0 + curv * np.einsum("ip,ip->i", hx, xr)))
            move = float(np.quantile(np.abs(step) * np.linalg.norm(hx, axis=1), 0.99))
            radius = _RADIUS_STEPS * move + 2.0 * float(self.C) * (self.tol + _ROUNDING)
            sp = build_problem(X1, t, mask, cap, w, lam=lam, normalizer=1.0, radius=radius)
            D, exact = surrogate_flips(sp, X1, t, mask, cap, h, recs, lam=lam, normalizer=1.0,
                                       tol=sl.tol, budget=float(self.flip_tolerance),
                                       max_iter=sl.max_iter)
        else:
            D, exact = np.zeros((recs.size, X1.shape[1])), np.ones(recs.size, dtype=bool)
        for j in np.flatnonzero(exact):                       # solved exactly, one by one
            flipped = weight.copy()
            flipped[recs[j]] = 0.0 if mask[recs[j]] else 1.0
            warm = bool(np.all(np.isfinite(D[j])))
            v, _ = sl._solve(X1, t, flipped, cap, w + D[j] if warm else w)
            D[j] = v - w
        return w, D * np.where(mask[recs], -1.0, 1.0)[:, None]


def make_logistic(
    *,
    classes: Sequence,
    C: float = 1.0,
    max_iter: int = 200,
    center: float | Sequence[float] | None = None,
    scale: float | Sequence[float] | None = None,
    solver: str = "lbfgs",
) -> LogisticCoefficients:
    """Build a logistic-regression mechanism; see :class:`LogisticCoefficients`.

    ``solver="newton"`` (two classes) builds a :class:`LogisticNewton` instead: the intercept is
    penalised too and the per-record differences cost O(n) a trial (module notes).
    """
    if solver == "newton":
        return LogisticNewton(classes=tuple(classes), C=C, max_iter=max_iter, center=center,
                              scale=scale)
    if solver != "lbfgs":
        raise ValueError(f"`solver` must be 'lbfgs' or 'newton'; got {solver!r}.")
    return LogisticCoefficients(
        classes=tuple(classes), C=C, max_iter=max_iter, center=center, scale=scale
    )


def logistic_coefficients(subset, *, rng=None) -> np.ndarray:
    """Default: binary classes ``(0, 1)``, ``C = 1``, no standardisation; shape ``(p + 1,)``."""
    return _DEFAULT(subset)


_DEFAULT = LogisticCoefficients()
