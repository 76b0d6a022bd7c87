"""Tests for mechanisms.mean and mechanisms.median (clipped statistics)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris

from pacpriv.mechanisms import (
    clipped_mean,
    clipped_median,
    make_clipped_mean,
    make_clipped_median,
)

X_IRIS = load_iris().data


def test_mean_hand_example():
    """Clipping to [-1, 1] then averaging: (-1 + 0.5 + 1) / 3 = 1/6."""
    assert clipped_mean(np.array([[-3.0], [0.5], [2.0]])) == pytest.approx([1 / 6])


def test_mean_with_published_bounds_is_plain_mean():
    """With iris's published ranges nothing is clipped: the output is the ordinary mean."""
    f = make_clipped_mean(low=X_IRIS.min(axis=0), high=X_IRIS.max(axis=0))
    np.testing.assert_allclose(f(X_IRIS), X_IRIS.mean(axis=0), rtol=1e-14)


def test_mean_per_feature_bounds():
    """Per-feature bounds clip each column separately."""
    f = make_clipped_mean(low=[0.0, 10.0], high=[1.0, 20.0])
    X = np.array([[2.0, 0.0], [0.0, 30.0]])
    np.testing.assert_allclose(f(X), [0.5, 15.0])


def test_mean_empty_subset_returns_midpoint():
    """An empty subset returns the midpoint of the public range, with the data's width."""
    f = make_clipped_mean(low=[0.0, -4.0], high=[1.0, 0.0])
    np.testing.assert_array_equal(f(np.zeros((0, 2))), [0.5, -2.0])
    np.testing.assert_array_equal(clipped_mean(np.zeros((0, 3))), [0.0, 0.0, 0.0])


def test_median_hand_example():
    """Median after clipping; an even count averages the two middle values."""
    X = np.array([[-5.0], [0.2], [0.4], [9.0]])
    assert clipped_median(X) == pytest.approx([0.3])
    f = make_clipped_median(low=0.0, high=0.3)
    assert f(X) == pytest.approx([0.25])


def test_median_empty_and_single():
    """Empty subset -> midpoint; one record -> that record, clipped."""
    f = make_clipped_median(low=[0.0, 0.0], high=[2.0, 4.0])
    np.testing.assert_array_equal(f(np.zeros((0, 2))), [1.0, 2.0])
    np.testing.assert_array_equal(f(np.array([[3.0, 1.0]])), [2.0, 1.0])


def test_bounds_low_above_high_rejected():
    """low > high is refused at construction."""
    with pytest.raises(ValueError, match="`low` must be <= `high`"):
        make_clipped_mean(low=1.0, high=0.0)


def test_bounds_not_finite_rejected():
    """Infinite bounds are refused (clipping must bound each record's influence)."""
    with pytest.raises(ValueError, match="must be finite"):
        make_clipped_median(low=-np.inf, high=0.0)


def test_bounds_length_mismatch_with_data():
    """Per-feature bounds must match the subset's number of features."""
    f = make_clipped_mean(low=[0.0, 0.0], high=[1.0, 1.0])
    with pytest.raises(ValueError, match="bounds have length 2 but the subset has 4 features"):
        f(X_IRIS)


def test_bounds_length_mismatch_between_low_and_high():
    """low and high of different lengths are refused."""
    with pytest.raises(ValueError, match="must have the same length"):
        make_clipped_mean(low=[0.0, 0.0], high=[1.0, 1.0, 1.0])


def test_three_dimensional_input_rejected():
    """Features must be 2-D (n, p)."""
    with pytest.raises(ValueError, match="must be a 2-D array"):
        clipped_mean(np.zeros((2, 2, 2)))
