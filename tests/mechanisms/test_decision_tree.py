"""Tests for mechanisms.decision_tree: grid-restricted splits, fixed query points, fallbacks."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris

from pacpriv.mechanisms import make_decision_tree
from pacpriv.mechanisms.decision_tree import quantise

X_IRIS, Y_IRIS = load_iris(return_X_y=True)
EDGES = [np.linspace(lo, hi, 6) for lo, hi in zip(X_IRIS.min(0), X_IRIS.max(0), strict=True)]


def test_separable_data_predicted_exactly():
    """Classes split at a public edge (x0 = 0) are predicted with probability 1 on the queries."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(200, 2))
    y = (X[:, 0] > 0).astype(int)
    queries = np.array([[-0.7, 0.3], [0.6, -0.9], [0.1, 0.0]])
    f = make_decision_tree(edges=[-1.0, -0.5, 0.0, 0.5, 1.0], query_points=queries, classes=[0, 1])
    np.testing.assert_array_equal(f((X, y)), [1, 0, 0, 1, 0, 1])


def test_probabilities_sum_to_one_and_iris_accuracy():
    """Each query's probabilities sum to 1; querying the pool itself recovers most labels."""
    f = make_decision_tree(edges=EDGES, query_points=X_IRIS, classes=[0, 1, 2])
    P = f((X_IRIS, Y_IRIS)).reshape(150, 3)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert np.mean(np.argmax(P, axis=1) == Y_IRIS) > 0.9


def test_predictions_constant_within_grid_cell():
    """Two queries in the same grid cell get the same prediction (splits lie on the grid)."""
    a = np.array([EDGES[j][2] + 0.01 for j in range(4)])
    b = np.array([EDGES[j][3] - 0.01 for j in range(4)])
    assert np.array_equal(quantise(a[None], EDGES), quantise(b[None], EDGES))
    f = make_decision_tree(edges=EDGES, query_points=np.vstack([a, b]), classes=[0, 1, 2])
    P = f((X_IRIS, Y_IRIS)).reshape(2, 3)
    np.testing.assert_array_equal(P[0], P[1])


def test_empty_is_uniform_single_class_is_certain():
    """n = 0 returns 1/K everywhere; one class present is predicted with probability 1."""
    f = make_decision_tree(edges=EDGES, query_points=X_IRIS[:4], classes=[0, 1, 2])
    np.testing.assert_allclose(f((X_IRIS[:0], Y_IRIS[:0])), np.full(12, 1 / 3))
    np.testing.assert_array_equal(f((X_IRIS[60:61], Y_IRIS[60:61])).reshape(4, 3)[:, 1], 1.0)


def test_query_points_feature_count_checked():
    """Subset and query points must have the same number of features."""
    f = make_decision_tree(edges=[0.0, 1.0], query_points=np.zeros((2, 3)), classes=[0, 1])
    with pytest.raises(ValueError, match="the subset has p=4 features; query points have 3"):
        f((X_IRIS, Y_IRIS))


def test_query_points_must_be_2d():
    """Query points must be a non-empty 2-D array."""
    with pytest.raises(ValueError, match="`query_points` must be a finite 2-D array"):
        make_decision_tree(edges=[0.0, 1.0], query_points=np.zeros(3), classes=[0, 1])


def test_max_depth_checked():
    """max_depth must be a positive integer."""
    with pytest.raises(ValueError, match="`max_depth` must be an integer >= 1"):
        make_decision_tree(edges=[0.0, 1.0], query_points=np.zeros((1, 1)), classes=[0, 1],
                           max_depth=0)  # fmt: skip
