"""Tests for mechanisms.logistic: layout, fixed class set, fallbacks."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, softmax
from sklearn.datasets import load_breast_cancer, load_iris
from sklearn.linear_model import LogisticRegression

from pacpriv.mechanisms import logistic_coefficients, make_logistic

X_IRIS, Y_IRIS = load_iris(return_X_y=True)
LOW, HIGH = X_IRIS.min(0), X_IRIS.max(0)
CENTER, SCALE = (LOW + HIGH) / 2, (HIGH - LOW) / 2
Z_IRIS = (X_IRIS - CENTER) / SCALE


def _unpack(out, k_out, p):
    return out[: k_out * p].reshape(k_out, p), out[k_out * p :]


def test_multinomial_coefficients_reproduce_predict_proba():
    """Softmax of our coefficients on the standardised data equals scikit-learn's predict_proba."""
    out = make_logistic(classes=[0, 1, 2], center=CENTER, scale=SCALE)((X_IRIS, Y_IRIS))
    W, b = _unpack(out, 3, 4)
    ref = LogisticRegression(max_iter=200).fit(Z_IRIS, Y_IRIS)
    np.testing.assert_allclose(softmax(Z_IRIS @ W.T + b, axis=1), ref.predict_proba(Z_IRIS),
                               atol=1e-10)  # fmt: skip


def test_binary_layout_breast_cancer():
    """Binary problem: (p + 1,) output, log-odds of classes[1] against classes[0]."""
    X, y = load_breast_cancer(return_X_y=True)
    lo, hi = X.min(0), X.max(0)
    f = make_logistic(classes=[0, 1], center=(lo + hi) / 2, scale=(hi - lo) / 2)
    out = f((X, y))
    assert out.shape == (31,)
    Z = (X - (lo + hi) / 2) / ((hi - lo) / 2)
    p1 = expit(Z @ out[:30] + out[30])
    assert np.mean((p1 > 0.5) == y) > 0.9


def test_class_order_follows_public_list():
    """Reversing the public class list flips the sign of the binary model."""
    X, y = X_IRIS[:100], Y_IRIS[:100]
    a = make_logistic(classes=[0, 1], center=CENTER, scale=SCALE)((X, y))
    b = make_logistic(classes=[1, 0], center=CENTER, scale=SCALE)((X, y))
    np.testing.assert_allclose(a, -b, atol=1e-6)


def test_two_of_three_classes_present():
    """Absent class row is the zero placeholder; the present pair reproduces the binary model."""
    idx = Y_IRIS != 1
    out = make_logistic(classes=[0, 1, 2], center=CENTER, scale=SCALE)((X_IRIS[idx], Y_IRIS[idx]))
    W, b = _unpack(out, 3, 4)
    np.testing.assert_array_equal(W[1], 0.0)
    assert b[1] == 0.0
    ref = LogisticRegression(max_iter=200).fit(Z_IRIS[idx], Y_IRIS[idx])
    logits = Z_IRIS[idx] @ W[[0, 2]].T + b[[0, 2]]
    np.testing.assert_allclose(softmax(logits, axis=1), ref.predict_proba(Z_IRIS[idx]),
                               atol=1e-10)  # fmt: skip


def test_single_class_and_empty_give_zeros():
    """Fewer than two classes present (n = 0, n = 1, one class) returns the zero model."""
    f = make_logistic(classes=[0, 1, 2])
    for idx in (np.arange(0), np.array([3]), np.arange(50, 60)):
        np.testing.assert_array_equal(f((X_IRIS[idx], Y_IRIS[idx])), np.zeros(15))


def test_default_is_binary():
    """The default function uses classes (0, 1): shape (p + 1,)."""
    assert logistic_coefficients((X_IRIS[:100], Y_IRIS[:100])).shape == (5,)


def test_unknown_label_rejected():
    """A label outside the public class list raises ValueError."""
    with pytest.raises(ValueError,
                       match=r"50 of 150 entries \(at index 100, .*\) of the subset.s "
                       r"labels are not in the public class list \[0, 1\] \(values not shown\)"):
        make_logistic(classes=[0, 1])((X_IRIS, Y_IRIS))


def test_classes_need_two_labels():
    """The public class list needs at least two distinct labels."""
    with pytest.raises(ValueError, match="at least 2 distinct labels"):
        make_logistic(classes=[0])


def test_scale_must_be_positive():
    """Standardisation scale must be > 0."""
    with pytest.raises(ValueError, match="`scale` must be > 0"):
        make_logistic(classes=[0, 1], scale=[1.0, 0.0])


def test_C_must_be_positive():
    """C must be a finite positive number."""
    with pytest.raises(ValueError, match="`C` must be a finite number > 0"):
        make_logistic(classes=[0, 1], C=0.0)


def test_length_mismatch_between_X_and_y():
    """X and y must have the same number of records."""
    with pytest.raises(ValueError, match="same number of records"):
        make_logistic(classes=[0, 1, 2])((X_IRIS, Y_IRIS[:10]))
