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
from ._linear import LinearModel
from ._newton import RADIUS_STEPS, NewtonModel

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


@dataclass(frozen=True)
class LinearSVMNewton(NewtonModel, LinearSVMCoefficients):
    """Two-class squared-hinge linear SVM solved exactly by Newton (module notes).

    Parameters
    ----------
    classes, C, center, scale
        As :class:`LinearSVMCoefficients` (exactly two classes; ``max_iter`` and
        ``public_seed`` are unused).
    tol, flip_tolerance
        The Newton settings of :class:`~pacpriv.mechanisms._newton.NewtonModel` (defaults
        ``1e-9`` and ``1e-6``).
    """

    newton_fallback: ClassVar[str] = "solver='liblinear'"

    @property
    def difference_error(self) -> float:
        """Bound on ``‖Δ_computed − Δ_release‖₂``: ``4 (tol + 1e-12) + flip_tolerance``."""
        return 4.0 * (self.tol + _svm_fast.ROUNDING) + float(self.flip_tolerance)

    def _targets(self, positive: np.ndarray) -> np.ndarray:
        return np.where(positive, 1.0, -1.0)

    def _fit(self, X1, target, weight, warm=None) -> tuple[np.ndarray, np.ndarray]:
        return _svm_fast.solve(X1, target, weight, float(self.C), self.tol, warm)

    def _surrogate_flips(self, X1, target, mask, w, h, recs) -> tuple[np.ndarray, np.ndarray]:
        C = float(self.C)
        xr, ur, sr = X1[recs], X1[recs] @ w, target[recs]
        sgn = np.where(mask[recs], -1.0, 1.0)
        hx = np.linalg.solve(h, xr.T).T
        curv = sgn * np.where(sr * ur < 1.0, 2.0 * C, 0.0)
        grad = 2.0 * C * np.maximum(0.0, 1.0 - sr * ur)          # |ψ_i(u_i)|
        move = grad * np.linalg.norm(hx, axis=1) / np.abs(
            1.0 + curv * np.einsum("ip,ip->i", hx, xr))
        radius = RADIUS_STEPS * float(np.quantile(move, 0.99)) + 2.0 * self.tol
        return _svm_fast.surrogate_flips(X1, target, mask, C, w, h, recs, radius=radius,
                                         budget=float(self.flip_tolerance))


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
