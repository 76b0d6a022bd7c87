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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._linear import LinearModel

__all__ = ["LinearSVMCoefficients", "linear_svm_coefficients", "make_linear_svm"]


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


def make_linear_svm(
    *,
    classes: Sequence,
    C: float = 1.0,
    max_iter: int = 2000,
    public_seed: int = 0,
    center: float | Sequence[float] | None = None,
    scale: float | Sequence[float] | None = None,
) -> LinearSVMCoefficients:
    """Build a linear-SVM mechanism; see :class:`LinearSVMCoefficients`.

    """
    return LinearSVMCoefficients(classes=tuple(classes), C=C, max_iter=max_iter,
                                 public_seed=public_seed, center=center, scale=scale)


def linear_svm_coefficients(subset, *, rng=None) -> np.ndarray:
    """Default: binary classes ``(0, 1)``, ``C = 1``, no standardisation; shape ``(p + 1,)``."""
    return _DEFAULT(subset)


_DEFAULT = LinearSVMCoefficients()
