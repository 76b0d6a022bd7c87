"""Tests for pacpriv.pac.bounds._mutual_info (½ ln det(I + Σ Σ_B⁻¹), [PAC] Thm 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pacpriv.pac.bounds._mutual_info import (
    gaussian_mi_bound,
    gaussian_mi_bound_whitened,
    linearised_mi_bound,
)


def _dense_oracle(cov, noise_cov):
    """½ slogdet(I + Σ Σ_B⁻¹) with explicit d x d matrices (naive reference)."""
    sign, logdet = np.linalg.slogdet(np.eye(len(cov)) + cov @ np.linalg.inv(noise_cov))
    assert sign > 0
    return 0.5 * logdet


def _random_psd(d, rank, seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, rank))
    cov = a @ a.T
    lam, vec = np.linalg.eigh(cov)
    return cov, np.clip(lam[::-1], 0, None), vec[:, ::-1], rng


def test_worked_example():
    """MATH.md §2: λ = (4, 1), s² = (6, 3) gives 0.39925 (linearised: exactly ½)."""
    assert gaussian_mi_bound([4.0, 1.0], [6.0, 3.0]) == pytest.approx(0.39925, abs=5e-6)
    assert linearised_mi_bound([4.0, 1.0], [6.0, 3.0]) == pytest.approx(0.5)


def test_zero_noise_and_zero_signal():
    """s² = 0 with λ > 0 is +inf; λ = 0 contributes 0 even with zero noise."""
    assert gaussian_mi_bound([1.0, 0.0], [0.0, 0.0]) == math.inf
    assert linearised_mi_bound([1.0], [0.0]) == math.inf
    assert gaussian_mi_bound([0.0, 2.0], [0.0, 2.0]) == pytest.approx(0.5 * math.log(2))


def test_multiplicity():
    """A group of m equal directions counts m times."""
    assert gaussian_mi_bound([1.0], [1.0], multiplicity=[3]) == pytest.approx(1.5 * math.log(2))


@settings(max_examples=100, deadline=None)
@given(
    lam=arrays(np.float64, 5, elements=st.floats(0, 1e3)),
    s2=arrays(np.float64, 5, elements=st.floats(1e-3, 1e3)),
)
def test_linearised_dominates(lam, s2):
    """ln(1+x) <= x: the linearised bound is never below the exact one."""
    assert linearised_mi_bound(lam, s2) >= gaussian_mi_bound(lam, s2) * (1 - 1e-12)


@pytest.mark.parametrize(("d", "rank"), [(6, 6), (12, 4)])
def test_whitened_coordinate_matches_dense(d, rank):
    """Coordinate noise: the Sylvester k x k form equals the dense slogdet oracle."""
    cov, lam, vec, rng = _random_psd(d, rank, seed=d)
    e = rng.uniform(0.5, 3.0, size=d)
    got = gaussian_mi_bound_whitened(lam[:rank], vec[:, :rank], noise_variance=e)
    assert got == pytest.approx(_dense_oracle(cov, np.diag(e)), rel=1e-10)


def test_whitened_other_basis_with_residual_matches_dense():
    """Noise in another orthonormal basis plus residual noise matches the dense oracle."""
    d = 10
    cov, lam, vec, rng = _random_psd(d, 6, seed=3)
    w, _ = np.linalg.qr(rng.normal(size=(d, 4)))
    e = rng.uniform(0.5, 2.0, size=4)
    r = 0.7
    noise_cov = w @ np.diag(e) @ w.T + r * (np.eye(d) - w @ w.T)
    got = gaussian_mi_bound_whitened(lam[:6], vec[:, :6], noise_variance=e, noise_basis=w,
                                     residual_variance=r)
    assert got == pytest.approx(_dense_oracle(cov, noise_cov), rel=1e-10)


def test_whitened_shared_basis_equals_diagonal_formula():
    """With W = V the whitened form reduces to ½ Σ log1p(λ/s²)."""
    _, lam, vec, _ = _random_psd(8, 8, seed=4)
    s2 = np.linspace(1.0, 2.0, 8)
    got = gaussian_mi_bound_whitened(lam, vec, noise_variance=s2, noise_basis=vec)
    assert got == pytest.approx(gaussian_mi_bound(lam, s2), rel=1e-12)


def test_whitened_zero_noise_cases():
    """Zero noise on a zero-variance axis is fine; on a signal axis (or complement) it is +inf."""
    vec = np.array([[1.0], [0.0]])
    assert gaussian_mi_bound_whitened([2.0], vec, noise_variance=[1.0, 0.0]) == pytest.approx(
        0.5 * math.log(3))
    assert gaussian_mi_bound_whitened([2.0], vec, noise_variance=[0.0, 1.0]) == math.inf
    w = np.array([[0.0], [1.0]])
    assert gaussian_mi_bound_whitened([2.0], vec, noise_variance=[1.0], noise_basis=w) == math.inf
    assert gaussian_mi_bound_whitened([0.0], vec, noise_variance=[0.0, 0.0]) == 0.0


def test_error_shape_mismatch():
    """Eigenvalues and noise variances must have the same length."""
    with pytest.raises(ValueError, match="must be 1-D of the same length"):
        gaussian_mi_bound([1.0, 2.0], [1.0])


def test_error_negative_noise():
    """Negative noise variances are rejected."""
    with pytest.raises(ValueError, match=r"`noise_variance` must be in \[0.0, inf\)"):
        linearised_mi_bound([1.0], [-1.0])


def test_error_multiplicity_shape():
    """Multiplicities must match the eigenvalues."""
    with pytest.raises(ValueError, match="`multiplicity` must have the shape"):
        gaussian_mi_bound([1.0], [1.0], multiplicity=[1, 2])


def test_error_whitened_shapes():
    """Whitened form: eigenvector, noise-basis and noise-variance shapes are checked."""
    vec = np.eye(3)[:, :2]
    with pytest.raises(ValueError, match=r"`eigenvectors` must have shape \(d, 3\)"):
        gaussian_mi_bound_whitened([1.0, 1.0, 1.0], vec, noise_variance=np.ones(3))
    with pytest.raises(ValueError, match=r"`noise_variance` must have shape \(3,\)"):
        gaussian_mi_bound_whitened([1.0, 1.0], vec, noise_variance=np.ones(2))
    with pytest.raises(ValueError, match=r"`noise_basis` must have shape \(3, m\)"):
        gaussian_mi_bound_whitened([1.0, 1.0], vec, noise_variance=np.ones(2),
                                   noise_basis=np.eye(2))
