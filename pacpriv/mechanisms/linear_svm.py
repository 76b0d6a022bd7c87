"""Linear SVM coefficients over a fixed public class list.

Output
------
``ndarray`` of shape ``(K_out * p + K_out,)``, float64: coefficients (row-major, ``K_out`` rows
of ``p``) then intercepts of :class:`sklearn.svm.LinearSVC` (squared hinge loss, L2 penalty,
one-vs-rest for ``K >= 3``). ``K_out = 1`` for a binary problem (``classes[1]`` against
``classes[0]``), ``K_out = K`` otherwise.

Fixed shape
-----------
The public class list given at construction fixes the shape. Rows of classes absent from the
subset are the public placeholder 0; with exactly two of ``K >= 3`` classes present, the single
binary separator ``(w, c)`` fills row ``b`` with ``+(w, c)`` and row ``a`` with ``-(w, c)`` (the
one-vs-rest reading of a two-class problem). A subset with fewer than two classes (including
``n = 0`` and ``n = 1``) returns all zeros. Features are standardised with public constants.

Canonicalisation
----------------
liblinear's coordinate-descent order is drawn from ``public_seed`` (fixed, public), and the rows
are sorted (label, then features) before fitting, so the output depends only on the multiset of
records. ``dual="auto"`` picks the primal or dual problem from the public shape ``(n, p)``.
``rng`` is ignored. Convergence warnings are silenced (fixed, public ``max_iter``).

Per-record differences
----------------------
liblinear's release is the iterate where it stopped (tolerance or ``max_iter``), at an
uncertified distance from the minimiser, so the per-record certificate runs ``1 + n`` fits a
trial. ``make_linear_svm(..., solver="newton")`` (two classes) releases the minimiser of the
same primal (``½‖θ‖² + C Σ max(0, 1 − s θ·x̃)²``, bias penalised as liblinear does), solved
to a gradient norm ``<= tol``; its :meth:`LinearSVMNewton.per_record_differences` costs O(n)
a trial (:mod:`mechanisms._svm_fast`: the squared hinge's derivative is piecewise linear, so
the gradient of every flipped problem is exact away from the few records at the margin), each
flipped minimiser certified within ``flip_tolerance``; ``difference_error = 4 (tol + 1e-12) +
flip_tolerance`` is added to every distance by the certificate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from . import _svm_fast
from ._common import check_newton_settings, class_indices, split_supervised
from ._linear import LinearModel, standardise

__all__ = ["LinearSVMCoefficients", "LinearSVMNewton", "linear_svm_coefficients",
           "make_linear_svm"]


@dataclass(frozen=True)
class LinearSVMCoefficients(LinearModel):
    """LinearSVC coefficients and intercepts (picklable callable).

    Parameters
    ----------
    classes : tuple
        Public class list (>= 2 distinct labels); fixes the output shape.
    C : float
        Inverse regularisation strength (> 0).
    max_iter : int
        liblinear iteration budget.
    public_seed : int
        Public seed of liblinear's coordinate order.
    center, scale : tuple of float or None
        Public standardisation constants, scalar or per feature.
    """

    classes: tuple = (0, 1)
    C: float = 1.0
    max_iter: int = 2000
    public_seed: int = 0
    center: tuple[float, ...] | None = None
    scale: tuple[float, ...] | None = None

    mechanism: ClassVar[str] = "linear_svm"
    binary_scale: ClassVar[float] = 1.0

    def estimator(self) -> Any:
        """An unfitted :class:`sklearn.svm.LinearSVC` (liblinear, seeded with ``public_seed``)."""
        from sklearn.svm import LinearSVC

        return LinearSVC(
            C=float(self.C),
            dual="auto",
            max_iter=int(self.max_iter),
            random_state=int(self.public_seed),
        )


#: Radius of the flipped problems' ball, in multiples of the 99th percentile of the
#: one-Newton-step moves (records beyond it are solved exactly).
_RADIUS_STEPS = 4.0


@dataclass(frozen=True)
class LinearSVMNewton(LinearSVMCoefficients):
    """Two-class squared-hinge linear SVM solved exactly by Newton (module notes).

    Parameters
    ----------
    classes, C, center, scale
        As :class:`LinearSVMCoefficients` (exactly two classes; ``max_iter`` and
        ``public_seed`` are unused).
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
                              fallback="solver='liblinear'")

    def to_dict(self) -> dict:
        """JSON-serialisable configuration (``solver: "newton"``)."""
        return {**super().to_dict(), "solver": "newton"}

    @property
    def difference_error(self) -> float:
        """Bound on ``‖Δ_computed − Δ_release‖₂``: ``4 (tol + 1e-12) + flip_tolerance``."""
        return 4.0 * (self.tol + _svm_fast.ROUNDING) + float(self.flip_tolerance)

    def _problem(self, subset) -> tuple[np.ndarray, np.ndarray]:
        X, y = split_supervised(subset, mechanism=self.mechanism)
        Z = standardise(X, self.center, self.scale)
        X1 = np.hstack([Z, np.ones((Z.shape[0], 1))])
        s = np.where(class_indices(y, self.classes) == 1, 1.0, -1.0) if y.size else \
            np.zeros(0)
        return X1, s

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """``[w, b]`` of the subset, shape ``(p + 1,)``; ``rng`` is ignored."""
        X1, s = self._problem(subset)
        w, _ = _svm_fast.solve(X1, s, np.ones(s.size), float(self.C), self.tol)
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
        X1, s = self._problem(pool)
        recs = np.arange(s.size) if records is None else np.asarray(records, np.int64)
        C, weight = float(self.C), mask.astype(np.float64)
        w, h = _svm_fast.solve(X1, s, weight, C, self.tol)
        if self.flip_tolerance > 0 and recs.size:
            xr, ur, sr = X1[recs], X1[recs] @ w, s[recs]
            sgn = np.where(mask[recs], -1.0, 1.0)
            hx = np.linalg.solve(h, xr.T).T
            curv = sgn * np.where(sr * ur < 1.0, 2.0 * C, 0.0)
            grad = 2.0 * C * np.maximum(0.0, 1.0 - sr * ur)          # |ψ_i(u_i)|
            move = grad * np.linalg.norm(hx, axis=1) / np.abs(
                1.0 + curv * np.einsum("ip,ip->i", hx, xr))
            radius = _RADIUS_STEPS * float(np.quantile(move, 0.99)) + 2.0 * self.tol
            D, exact = _svm_fast.surrogate_flips(X1, s, mask, C, w, h, recs, radius=radius,
                                                 budget=float(self.flip_tolerance))
        else:
            D, exact = np.zeros((recs.size, X1.shape[1])), np.ones(recs.size, dtype=bool)
        for j in np.flatnonzero(exact):                       # solved exactly, one by one
            flipped = weight.copy()
            flipped[recs[j]] = 0.0 if mask[recs[j]] else 1.0
            warm = w + D[j] if np.all(np.isfinite(D[j])) else w
            v, _ = _svm_fast.solve(X1, s, flipped, C, self.tol, warm)
            D[j] = v - w
        return w, D * np.where(mask[recs], -1.0, 1.0)[:, None]


def make_linear_svm(
    *,
    classes: Sequence,
    C: float = 1.0,
    max_iter: int = 2000,
    public_seed: int = 0,
    center: float | Sequence[float] | None = None,
    scale: float | Sequence[float] | None = None,
    solver: str = "liblinear",
) -> LinearSVMCoefficients:
    """Build a linear-SVM mechanism; see :class:`LinearSVMCoefficients`.

    ``solver="newton"`` (two classes) builds a :class:`LinearSVMNewton` instead: the exact
    minimiser of the same primal, with O(n) per-record differences (module notes).
    """
    if solver == "newton":
        return LinearSVMNewton(classes=tuple(classes), C=C, max_iter=max_iter,
                               public_seed=public_seed, center=center, scale=scale)
    if solver != "liblinear":
        raise ValueError(f"`solver` must be 'liblinear' or 'newton'; got {solver!r}.")
    return LinearSVMCoefficients(classes=tuple(classes), C=C, max_iter=max_iter,
                                 public_seed=public_seed, center=center, scale=scale)


def linear_svm_coefficients(subset, *, rng=None) -> np.ndarray:
    """Default: binary classes ``(0, 1)``, ``C = 1``, no standardisation; shape ``(p + 1,)``."""
    return _DEFAULT(subset)


_DEFAULT = LinearSVMCoefficients()
