"""Stabilisers: subsample-and-aggregate, λ chosen inside, aligned rows, clipped noise-free GD."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sklearn.datasets import load_wine

from pacpriv.mechanisms.stabilise import (
    AlignedRows,
    ClippedGradientDescent,
    SubsampleAggregate,
    TunedStableLogistic,
    record_shards,
)
from pacpriv.mechanisms.stable_logistic import StableLogistic

WX, WY = load_wine(return_X_y=True)
WX = (WX - WX.min(axis=0)) / (WX.max(axis=0) - WX.min(axis=0)) * 2 - 1
X, Y = WX[::2], WY[::2]
BASE = StableLogistic.for_pool(X, classes=(0, 1, 2), sampling_rate=0.5)


def test_shards_are_a_public_function_of_each_record():
    s = record_shards(X, 4)
    assert set(np.unique(s)) <= {0, 1, 2, 3} and len(np.unique(s)) == 4
    np.testing.assert_array_equal(record_shards(X[::-1], 4), s[::-1])  # order-free
    assert not np.array_equal(record_shards(X, 4, salt=1), s)


def test_subsample_aggregate_fast_path_and_range():
    """Δᵢ is 1/K of the difference of its shard's model; the fast path equals two calls;
    the declared range holds."""
    agg = SubsampleAggregate(replace(BASE, normalizer=BASE.normalizer / 3), 3)
    mask = np.random.default_rng(0).random(Y.size) < 0.5
    base, diffs = agg.per_record_differences((X, Y), mask)
    np.testing.assert_allclose(base, agg((X[mask], Y[mask])), atol=1e-12)
    shard = record_shards(X, 3)
    for i in (0, 5, 40):
        up, down = mask.copy(), mask.copy()
        up[i], down[i] = True, False
        ref = agg((X[up], Y[up])) - agg((X[down], Y[down]))
        assert np.linalg.norm(diffs[i] - ref) <= agg.difference_error + 1e-12
        idx = shard == shard[i]
        inner = agg.base((X[up & idx], Y[up & idx])) - agg.base((X[down & idx], Y[down & idx]))
        np.testing.assert_allclose(3 * ref, inner, atol=1e-7)
    assert np.all(np.linalg.norm(diffs, axis=1) <= agg.difference_bound((X, Y)))


def test_tuned_lambda_is_the_cross_validated_choice():
    """choose() is the λ with the fewest 3-fold errors (ties: the largest), recomputed here."""
    tuned = TunedStableLogistic(BASE, grid=(0.003, 0.03, 0.3))
    fold = record_shards(X, 3, salt=0x5EED)
    errors = {}
    for lam in (0.3, 0.03, 0.003):
        m = replace(BASE, l2=lam, normalizer=BASE.normalizer * 2 / 3)
        errors[lam] = sum(int(np.sum(m.predict(m((X[fold != k], Y[fold != k])), X[fold == k])
                                     != Y[fold == k])) for k in range(3))
    best = min(errors, key=lambda lam: (errors[lam], -lam))
    assert tuned.choose(X, Y) == best
    np.testing.assert_array_equal(tuned((X, Y)), replace(BASE, l2=best)((X, Y)))


def test_aligned_rows_remove_permutation_and_sign():
    ref = np.array([[1.0, 0.0, 0.2], [0.0, 1.0, -0.1]])

    def flipped(subset):  # the rows come back swapped and with one sign flipped
        return np.array([[-0.1, 0.9, 0.0], [-0.95, 0.05, -0.2]]).ravel()

    out = AlignedRows(flipped, ref)(None).reshape(2, 3)
    np.testing.assert_allclose(out, [[0.95, -0.05, 0.2], [-0.1, 0.9, 0.0]])


def test_clipped_gd_one_step_is_the_clipped_gradient():
    """One record, one step from 0: W = −η min(1, C/‖g‖) g / N, g = (p − e_y) ⊗ x̃, p uniform."""
    x, c = np.array([[3.0, -4.0]]), 0.5
    gd = ClippedGradientDescent(n_features=2, n_classes=3, clip=c, l2=0.1, steps=1,
                                learning_rate=0.7, normalizer=2.0)
    theta = gd((x, np.array([1])))
    x1 = np.array([3.0, -4.0, 1.0])
    r = np.full(3, 1 / 3) - np.eye(3)[1]
    g = np.outer(r, x1)
    expected = -0.7 * min(1.0, c / np.linalg.norm(g)) * g / 2.0
    np.testing.assert_allclose(theta, expected.ravel(), atol=1e-12)
    assert gd.dim == 9 and gd.predict(theta, x).shape == (1,)
    with pytest.raises(ValueError, match="n_shards"):
        SubsampleAggregate(BASE, 0)
