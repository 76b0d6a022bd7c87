"""Tests for mechanisms.pca: subspace, sign rule, Procrustes alignment, fallbacks."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ortho_group
from sklearn.datasets import load_digits, load_iris
from sklearn.decomposition import PCA

from pacpriv.mechanisms import make_pca, pca_components
from pacpriv.mechanisms.pca import align_components

X_IRIS = load_iris().data


def test_spans_sklearn_principal_subspace():
    """Output rows are orthonormal and span scikit-learn PCA's top-2 subspace."""
    W = pca_components(X_IRIS).reshape(2, 4)
    np.testing.assert_allclose(W @ W.T, np.eye(2), atol=1e-12)
    ref = PCA(n_components=2).fit(X_IRIS).components_
    np.testing.assert_allclose(W.T @ W, ref.T @ ref, atol=1e-10)


def test_sign_rule_largest_coordinate_positive():
    """Without a reference, each component's largest-magnitude coordinate is positive."""
    W = make_pca(n_components=3)(load_digits().data[:200]).reshape(3, 64)
    assert np.all(W[np.arange(3), np.argmax(np.abs(W), axis=1)] > 0)


def test_sign_flips_cancelled():
    """Flipping the sign of any fitted component does not change the aligned output."""
    W = PCA(n_components=2).fit(X_IRIS).components_
    R = W + 0.1
    for flips in ([1, -1], [-1, 1], [-1, -1]):
        Wf = W * np.array(flips)[:, None]
        np.testing.assert_allclose(align_components(Wf), align_components(W))
        np.testing.assert_allclose(
            align_components(Wf, R, alignment="sign"), align_components(W, R, alignment="sign")
        )


def test_procrustes_removes_rotation_within_subspace():
    """Any orthonormal basis of the same subspace aligns to the same output (Procrustes)."""
    W = PCA(n_components=3).fit(X_IRIS).components_
    R = np.eye(3, 4)
    Q = ortho_group.rvs(3, random_state=0)
    np.testing.assert_allclose(align_components(Q @ W, R), align_components(W, R), atol=1e-12)


def test_reference_alignment_in_mechanism():
    """With the reference equal to the fitted basis, the output is that basis."""
    W = pca_components(X_IRIS).reshape(2, 4)
    f = make_pca(n_components=2, reference=-W)
    np.testing.assert_allclose(f(X_IRIS).reshape(2, 4), -W, atol=1e-12)


def test_translation_and_order_invariant():
    """Components ignore a common shift of the records (centring) and their order."""
    shifted = X_IRIS[::-1] + 100.0
    np.testing.assert_allclose(pca_components(shifted), pca_components(X_IRIS), atol=1e-9)


def test_fallback_small_subsets():
    """n < 2 returns the aligned first coordinate axes; n < k completes the basis."""
    np.testing.assert_array_equal(pca_components(X_IRIS[:0]), np.eye(2, 4).ravel())
    np.testing.assert_array_equal(pca_components(X_IRIS[:1]), np.eye(2, 4).ravel())
    W = make_pca(n_components=3)(X_IRIS[:2]).reshape(3, 4)
    np.testing.assert_allclose(W @ W.T, np.eye(3), atol=1e-12)


def test_too_many_components():
    """n_components cannot exceed p."""
    with pytest.raises(ValueError, match="exceeds the number of features p=4"):
        make_pca(n_components=5)(X_IRIS)


def test_reference_shape_checked():
    """The reference basis must be (n_components, p)."""
    with pytest.raises(ValueError, match=r"`reference` must be a finite array of shape"):
        make_pca(n_components=2, reference=np.eye(3, 4))


def test_alignment_name_checked():
    """Only 'procrustes' and 'sign' alignments exist."""
    with pytest.raises(ValueError, match="`alignment` must be 'procrustes' or 'sign'"):
        make_pca(alignment="polar")
