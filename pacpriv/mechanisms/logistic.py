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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._linear import LinearModel

__all__ = ["LogisticCoefficients", "logistic_coefficients", "make_logistic"]


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


def make_logistic(
    *,
    classes: Sequence,
    C: float = 1.0,
    max_iter: int = 200,
    center: float | Sequence[float] | None = None,
    scale: float | Sequence[float] | None = None,
) -> LogisticCoefficients:
    """Build a logistic-regression mechanism; see :class:`LogisticCoefficients`."""
    return LogisticCoefficients(
        classes=tuple(classes), C=C, max_iter=max_iter, center=center, scale=scale
    )


def logistic_coefficients(subset, *, rng=None) -> np.ndarray:
    """Default: binary classes ``(0, 1)``, ``C = 1``, no standardisation; shape ``(p + 1,)``."""
    return _DEFAULT(subset)


_DEFAULT = LogisticCoefficients()
