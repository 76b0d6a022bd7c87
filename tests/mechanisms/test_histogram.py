"""Tests for mechanisms.histogram."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris

from pacpriv.mechanisms import (
    feature_histogram,
    make_feature_histogram,
    make_label_histogram,
)

X_IRIS, Y_IRIS = load_iris(return_X_y=True)


def test_matches_numpy_histogram_on_iris():
    """In-range data: counts equal numpy.histogram's for every feature (independent oracle)."""
    edges = [np.linspace(lo, hi, 8) for lo, hi in zip(X_IRIS.min(0), X_IRIS.max(0), strict=True)]
    out = make_feature_histogram(edges=edges)(X_IRIS)
    expected = np.concatenate([np.histogram(X_IRIS[:, j], bins=edges[j])[0] for j in range(4)])
    np.testing.assert_array_equal(out, expected)


def test_out_of_range_values_go_to_end_bins():
    """Values below/above the edges are counted in the first/last bin; every record counts once."""
    f = make_feature_histogram(edges=[0.0, 1.0, 2.0])
    np.testing.assert_array_equal(f(np.array([[-5.0], [0.5], [1.0], [2.0], [7.0]])), [2, 3])


def test_default_histogram_shape_and_total():
    """The default uses 10 bins on [-1, 1] per feature; counts per feature sum to n."""
    X = np.random.default_rng(0).uniform(-2, 2, size=(37, 3))
    out = feature_histogram(X)
    assert out.shape == (30,)
    np.testing.assert_array_equal(out.reshape(3, 10).sum(axis=1), [37, 37, 37])


def test_selected_features_only():
    """`features` selects columns, in the given order."""
    f = make_feature_histogram(edges=[[0.0, 5.0, 10.0], [0.0, 1.0]], features=[2, 0])
    X = np.array([[0.5, 0.0, 7.0], [0.2, 0.0, 1.0]])
    np.testing.assert_array_equal(f(X), [1, 1, 2])


def test_label_histogram_iris():
    """Iris has 50 records of each species; an empty subset gives zeros."""
    f = make_label_histogram(classes=[0, 1, 2])
    np.testing.assert_array_equal(f((X_IRIS, Y_IRIS)), [50, 50, 50])
    np.testing.assert_array_equal(f((X_IRIS[:0], Y_IRIS[:0])), [0, 0, 0])


def test_label_histogram_unknown_label():
    """A label outside the public class list is an error, not a silent drop."""
    f = make_label_histogram(classes=[0, 1])
    with pytest.raises(ValueError,
                       match=r"50 of 150 entries \(at index 100, .*\) of the subset.s "
                       r"labels are not in the public class list \[0, 1\] \(values not shown\)"):
        f((X_IRIS, Y_IRIS))


def test_edges_must_increase():
    """Bin edges must be strictly increasing."""
    with pytest.raises(ValueError, match="strictly increasing"):
        make_feature_histogram(edges=[0.0, 0.0, 1.0])


def test_edges_count_must_match_features():
    """One edge list, or one per selected feature."""
    with pytest.raises(ValueError, match="must hold 1 or len"):
        make_feature_histogram(edges=[[0.0, 1.0], [0.0, 1.0]], features=[0, 1, 2])


def test_label_classes_distinct():
    """The public class list must be non-empty and distinct."""
    with pytest.raises(ValueError, match="non-empty and distinct"):
        make_label_histogram(classes=[1, 1])
