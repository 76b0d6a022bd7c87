"""Noise shapes for the per-record calibration, fitted on the shape trials only (private).

``Σ_B = s² Σ_shape``; every shape has ``tr Σ_shape = d`` and is fixed before the
certification trials (so the certificate's trials stay independent of it).

* ``"isotropic"``: ``Σ_shape = I``.
* ``"sqrt"``: ``U diag(sqrt λ) Uᵀ`` of the second moment ``M = E[ΔΔᵀ]`` over records and shape
  trials. It minimises the noise power ``tr Σ_B`` at a fixed linearised exposure
  ``E[Δᵀ Σ_B⁻¹ Δ]`` (Sridhar, Xiao & Devadas, IEEE S&P 2025, Thm 1).
* ``"second_moment"``: ``Σ_shape ∝ (1 − α) M/mean(λ) + α I`` (``α`` = :data:`ISOTROPIC_SHARE`):
  noise along the directions in which one record moves the output. For a linear model near
  its optimum ``M ≈ H⁻¹ G H⁻¹/N²`` (``H`` the Hessian, ``G`` the gradient second moment), so with
  ``G ≈ H`` this is ``Σ_B ∝ H⁻¹``, the shape that minimises the expected loss increase
  ``½ tr(H Σ_B)`` at the same average exposure (Cauchy–Schwarz). The isotropic share keeps
  ``λ_min(Σ_shape) >= α`` so that a declared sensitivity bound remains a useful range.

Directions with ``sqrt λ`` (or ``λ``) below ``1e-6`` of the largest keep that floor, so
``Σ_shape`` stays positive definite.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pacpriv.pac.per_record._math import NoiseGeometry
from pacpriv.registry import Registry

__all__ = ["ISOTROPIC_SHARE", "SHAPES", "fit_shape"]

#: Isotropic share ``α`` of the ``"second_moment"`` shape.
ISOTROPIC_SHARE = 0.2


def _isotropic(lam: np.ndarray) -> np.ndarray:
    """Σ_shape = I: the same noise in every direction."""
    return np.ones_like(lam)


def _sqrt(lam: np.ndarray) -> np.ndarray:
    """U diag(sqrt λ) Uᵀ of the records' second moment: the least noise power at a fixed
    linearised exposure (Sridhar, Xiao & Devadas, IEEE S&P 2025, Thm 1)."""
    root = np.sqrt(lam)
    root = np.maximum(root, 1e-6 * float(root.max()))
    return root * (root.size / root.sum())


def _second_moment(lam: np.ndarray) -> np.ndarray:
    """(1 − α) M/mean(λ) + α I: noise along the directions one record moves the output,
    with an isotropic share α = 0.2."""
    rel = np.maximum(lam, 1e-6 * float(lam.max()))
    return (1.0 - ISOTROPIC_SHARE) * rel / rel.mean() + ISOTROPIC_SHARE


#: Noise shapes accepted by the per-record calibration: name -> the shape's variances along
#: the eigenvectors of the second moment, from its eigenvalues ``λ`` (trace ``d``).
SHAPES: Registry[Callable[[np.ndarray], np.ndarray]] = Registry(
    "noise shape", argument="shape", callable_entries=True)
SHAPES.register("isotropic", _isotropic)
SHAPES.register("sqrt", _sqrt)
SHAPES.register("second_moment", _second_moment)


def _moments(diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    flat = np.asarray(diffs, dtype=np.float64).reshape(-1, diffs.shape[-1])
    second = flat.T @ flat / max(flat.shape[0], 1)
    lam, vecs = np.linalg.eigh((second + second.T) / 2.0)
    return np.clip(lam, 0.0, None), vecs


def fit_shape(shape: str, diffs: np.ndarray | None, dim: int) -> NoiseGeometry:
    """``Σ_shape`` of ``shape`` (a name of :data:`SHAPES`) from the shape trials' differences
    ``diffs`` (..., d).

    ``diffs`` may be None for ``"isotropic"``. A mechanism whose differences are all zero gets
    the isotropic shape.
    """
    variances = SHAPES.get(shape)
    if variances is _isotropic or diffs is None:
        return NoiseGeometry(dim, np.ones(dim))
    lam, vecs = _moments(diffs)
    if float(lam.max(initial=0.0)) == 0.0:
        return NoiseGeometry(dim, np.ones(dim))
    return NoiseGeometry(dim, variances(lam), vecs, 0.0)
