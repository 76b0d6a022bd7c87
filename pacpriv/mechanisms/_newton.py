"""The part shared by the exact Newton solvers of the two-class linear models (no pacpriv import).

``make_logistic(..., solver="newton")`` (:class:`~pacpriv.mechanisms.logistic.LogisticNewton`)
and ``make_linear_svm(..., solver="newton")``
(:class:`~pacpriv.mechanisms.linear_svm.LinearSVMNewton`) release the minimiser of a strongly
convex objective over ``x̃ = [standardised x, 1]`` and compute their per-record differences in
O(n) a trial: one solve of the subset, a certified surrogate for every flipped problem, and an
exact solve for each record the surrogate leaves out. :class:`NewtonModel` holds that plan once,
with the two settings (``tol``, ``flip_tolerance``), their checks and ``to_dict``; a model gives
its targets, its solver and its surrogate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ._common import check_newton_settings, class_indices, split_supervised
from ._linear import LinearModel, standardise

__all__ = ["RADIUS_STEPS", "NewtonModel"]

#: Radius of the flipped problems' ball, in multiples of the 99th percentile of the
#: one-Newton-step moves (records beyond it are solved exactly).
RADIUS_STEPS = 4.0


@dataclass(frozen=True)
class NewtonModel(LinearModel):
    """Settings and per-record plan of a two-class linear model solved exactly by Newton.

    A mixin placed before the model's config in the bases (``class LogisticNewton(NewtonModel,
    LogisticCoefficients)``), so its two fields follow the config's.

    Parameters
    ----------
    tol : float, default 1e-9
        Gradient-norm tolerance of every solution (> 0).
    flip_tolerance : float, default 1e-6
        Certified bound on the error of each flipped minimiser of
        :meth:`per_record_differences` (>= 0, coefficient units; 0: exact solves only).

    Raises
    ------
    ValueError
        For a class list of other than two labels (naming :attr:`newton_fallback`), a ``tol``
        that is not finite and > 0, or a ``flip_tolerance`` that is not finite and >= 0.
    """

    tol: float = 1e-9
    flip_tolerance: float = 1e-6

    #: The solver to use instead for other class counts (named in the error).
    newton_fallback: ClassVar[str]

    def __post_init__(self) -> None:
        super().__post_init__()
        check_newton_settings(len(self.classes), self.tol, self.flip_tolerance,
                              fallback=self.newton_fallback)

    def to_dict(self) -> dict:
        """JSON-serialisable configuration (``solver: "newton"``)."""
        return {**super().to_dict(), "solver": "newton"}

    def _targets(self, positive: np.ndarray) -> np.ndarray:
        """The model's float64 targets of the records, from ``positive`` (label ``classes[1]``)."""
        raise NotImplementedError

    def _fit(self, X1: np.ndarray, target: np.ndarray, weight: np.ndarray,
             warm: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(θ, Hessian)`` of the problem with record weights ``weight``, from ``warm``."""
        raise NotImplementedError

    def _surrogate_flips(self, X1: np.ndarray, target: np.ndarray, mask: np.ndarray,
                         w: np.ndarray, h: np.ndarray,
                         recs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Certified moves of the flipped problems (``flip_tolerance > 0``) and the records
        left to an exact solve."""
        raise NotImplementedError

    def _problem(self, subset) -> tuple[np.ndarray, np.ndarray]:
        X, y = split_supervised(subset, mechanism=self.mechanism)
        Z = standardise(X, self.center, self.scale)
        X1 = np.hstack([Z, np.ones((Z.shape[0], 1))])
        positive = class_indices(y, self.classes) == 1 if y.size else np.zeros(0, dtype=bool)
        return X1, self._targets(positive)

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """``[w, b]`` of the subset, shape ``(p + 1,)``; ``rng`` is ignored."""
        X1, target = self._problem(subset)
        w, _ = self._fit(X1, target, np.ones(target.size))
        return w

    def per_record_differences(self, pool, mask, records=None) -> tuple[np.ndarray, np.ndarray]:
        """``f(S)`` and ``Δᵢ = f(S ∪ {i}) − f(S ∖ {i})`` for the records (default all), O(n).

        Returns ``(base (p + 1,), diffs (len(records), p + 1))``, each difference within
        :attr:`difference_error` of the difference of two releases (the model's module
        notes).
        """
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):   # machine-independent results
            return self._differences(pool, np.asarray(mask, dtype=bool), records)

    def _differences(self, pool, mask, records):
        X1, target = self._problem(pool)
        recs = np.arange(target.size) if records is None else np.asarray(records, np.int64)
        weight = mask.astype(np.float64)
        w, h = self._fit(X1, target, weight)
        if self.flip_tolerance > 0 and recs.size:
            D, exact = self._surrogate_flips(X1, target, mask, w, h, recs)
        else:
            D, exact = np.zeros((recs.size, X1.shape[1])), np.ones(recs.size, dtype=bool)
        for j in np.flatnonzero(exact):                       # solved exactly, one by one
            flipped = weight.copy()
            flipped[recs[j]] = 0.0 if mask[recs[j]] else 1.0
            warm = w + D[j] if np.all(np.isfinite(D[j])) else w
            v, _ = self._fit(X1, target, flipped, warm)
            D[j] = v - w
        return w, D * np.where(mask[recs], -1.0, 1.0)[:, None]
