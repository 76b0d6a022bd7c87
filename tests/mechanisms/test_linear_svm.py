"""Tests for mechanisms.linear_svm: layout, fixed class set, fallbacks."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris, load_wine
from sklearn.svm import LinearSVC

from pacpriv.mechanisms import linear_svm_coefficients, make_linear_svm

X_WINE, Y_WINE = load_wine(return_X_y=True)
LOW, HIGH = X_WINE.min(0), X_WINE.max(0)
CENTER, SCALE = (LOW + HIGH) / 2, (HIGH - LOW) / 2
Z_WINE = (X_WINE - CENTER) / SCALE


def _ref(Z, y):
    return LinearSVC(dual="auto", max_iter=2000, random_state=0).fit(Z, y)


def test_decision_function_matches_sklearn():
    """Our coefficients reproduce LinearSVC's one-vs-rest decision function on wine."""
    out = make_linear_svm(classes=[0, 1, 2], center=CENTER, scale=SCALE)((X_WINE, Y_WINE))
    W, b = out[:39].reshape(3, 13), out[39:]
    order = np.lexsort([*(Z_WINE[:, j] for j in range(12, -1, -1)), Y_WINE])
    ref = _ref(Z_WINE[order], Y_WINE[order])
    np.testing.assert_allclose(Z_WINE @ W.T + b, ref.decision_function(Z_WINE), atol=1e-8)
    assert np.mean(np.argmax(Z_WINE @ W.T + b, axis=1) == Y_WINE) > 0.95


def test_two_of_three_classes_give_opposite_rows():
    """With classes 0 and 2 only: row 2 = +(w, c), row 0 = -(w, c), row 1 = 0."""
    idx = Y_WINE != 1
    out = make_linear_svm(classes=[0, 1, 2], center=CENTER, scale=SCALE)((X_WINE[idx], Y_WINE[idx]))
    W, b = out[:39].reshape(3, 13), out[39:]
    np.testing.assert_array_equal(W[1], 0.0)
    np.testing.assert_array_equal(W[0], -W[2])
    assert b[0] == -b[2] and b[1] == 0.0
    assert np.all((Z_WINE[idx] @ W[2] + b[2] > 0) == (Y_WINE[idx] == 2))


def test_binary_shape_and_fallback():
    """Binary: shape (p + 1,); a single-class subset returns zeros."""
    X, y = load_iris(return_X_y=True)
    f = make_linear_svm(classes=[0, 1])
    assert f((X[:100], y[:100])).shape == (5,)
    np.testing.assert_array_equal(f((X[:10], y[:10])), np.zeros(5))
    assert linear_svm_coefficients((X[:0], y[:0])).shape == (5,)


def test_invalid_max_iter():
    """max_iter must be >= 1."""
    with pytest.raises(ValueError, match="`max_iter` must be >= 1"):
        make_linear_svm(classes=[0, 1], max_iter=0)


def test_supervised_error_message():
    """A bare array is refused with a message naming the mechanism."""
    with pytest.raises(ValueError, match="mechanism 'linear_svm' is supervised"):
        linear_svm_coefficients(X_WINE)
