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

from ._linear import LinearModel
from ._newton import RADIUS_STEPS, NewtonModel
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


@dataclass(frozen=True)
class LogisticNewton(NewtonModel, LogisticCoefficients):
    """Two-class L2 logistic regression, intercept penalised, solved by Newton (module notes).

    Parameters
    ----------
    classes, C, center, scale
        As :class:`LogisticCoefficients` (exactly two classes; ``max_iter`` is unused).
    tol, flip_tolerance
        The Newton settings of :class:`~pacpriv.mechanisms._newton.NewtonModel` (defaults
        ``1e-9`` and ``1e-6``).
    """

    newton_fallback: ClassVar[str] = "solver='lbfgs' or the stable_logistic mechanism"

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

    def _targets(self, positive: np.ndarray) -> np.ndarray:
        return positive.astype(np.float64)

    def _solver(self, n_features: int):
        from .stable_logistic import PoolBasis, StableLogistic

        return StableLogistic(self.classes, PoolBasis.identity(n_features), 1.0 / float(self.C),
                              1.0, 1.0, float(self.tol))

    def _fit(self, X1, target, weight, warm=None) -> tuple[np.ndarray, np.ndarray]:
        return self._solver(X1.shape[1] - 1)._solve(X1, target, weight, np.ones(target.size),
                                                    warm)

    def _surrogate_flips(self, X1, target, mask, w, h, recs) -> tuple[np.ndarray, np.ndarray]:
        t, sl = target, self._solver(X1.shape[1] - 1)
        lam, cap = 1.0 / float(self.C), np.ones(target.size)
        sgn = np.where(mask[recs], -1.0, 1.0)
        xr = X1[recs]
        u = X1[recs] @ w
        s = 0.5 + 0.5 * np.tanh(0.5 * u)
        hx = np.linalg.solve(h, xr.T).T                   # rows H⁻¹ x_i
        curv = sgn * s * (1.0 - s)
        step = (sgn * (s - t[recs]) / (1.0 + curv * np.einsum("ip,ip->i", hx, xr)))
        move = float(np.quantile(np.abs(step) * np.linalg.norm(hx, axis=1), 0.99))
        radius = RADIUS_STEPS * move + 2.0 * float(self.C) * (self.tol + _ROUNDING)
        sp = build_problem(X1, t, mask, cap, w, lam=lam, normalizer=1.0, radius=radius)
        return surrogate_flips(sp, X1, t, mask, cap, h, recs, lam=lam, normalizer=1.0,
                               tol=sl.tol, budget=float(self.flip_tolerance),
                               max_iter=sl.max_iter)


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
