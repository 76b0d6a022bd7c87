"""Contract shared by every reference mechanism: fixed shape, determinism, fallbacks, pickling."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_iris, load_wine

import pacpriv.mechanisms as M

pytestmark = pytest.mark.usefixtures("one_native_thread")

IRIS_X, IRIS_Y = load_iris(return_X_y=True)
LOW, HIGH = IRIS_X.min(axis=0), IRIS_X.max(axis=0)
CENTER, SCALE = (LOW + HIGH) / 2, (HIGH - LOW) / 2
EDGES = [np.linspace(lo, hi, 5) for lo, hi in zip(LOW, HIGH, strict=True)]
QUERIES = np.random.default_rng(0).uniform(LOW, HIGH, size=(6, 4))


def _factories():
    return {
        "mean": (M.make_clipped_mean(low=LOW, high=HIGH), 4, False),
        "median": (M.make_clipped_median(low=LOW, high=HIGH), 4, False),
        "feature_histogram": (M.make_feature_histogram(edges=EDGES), 16, False),
        "label_histogram": (M.make_label_histogram(classes=[0, 1, 2]), 3, True),
        "kmeans": (M.make_kmeans(n_clusters=3), 12, False),
        "kmeans_randomized": (M.make_kmeans(n_clusters=3, randomized=True), 12, False),
        "logistic": (M.make_logistic(classes=[0, 1, 2], center=CENTER, scale=SCALE), 15, True),
        "linear_svm": (
            M.make_linear_svm(classes=[0, 1, 2], center=CENTER, scale=SCALE),
            15,
            True,
        ),
        "pca": (M.make_pca(n_components=2), 8, False),
        "decision_tree": (
            M.make_decision_tree(edges=EDGES, query_points=QUERIES, classes=[0, 1, 2]),
            18,
            True,
        ),
    }


FACTORIES = _factories()
SUBSETS = {
    "full": np.arange(150),
    "empty": np.arange(0),
    "one": np.array([7]),
    "one_class": np.arange(50, 60),
    "two_classes": np.arange(0, 100, 3),
    "random_half": np.flatnonzero(np.random.default_rng(1).random(150) < 0.5),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("subset", sorted(SUBSETS))
def test_fixed_shape_finite_float64(name, subset):
    """Output has the documented fixed shape, is float64 and finite for every subset size."""
    f, d, _ = FACTORIES[name]
    idx = SUBSETS[subset]
    out = f((IRIS_X[idx], IRIS_Y[idx]), rng=np.random.default_rng(0))
    assert out.shape == (d,)
    assert out.dtype == np.float64
    assert np.all(np.isfinite(out))


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_deterministic_and_seeded(name):
    """Two calls on the same subset (and the same rng seed) give identical outputs."""
    f, _, _ = FACTORIES[name]
    idx = SUBSETS["random_half"]
    a = f((IRIS_X[idx], IRIS_Y[idx]), rng=np.random.default_rng(5))
    b = f((IRIS_X[idx], IRIS_Y[idx]), rng=np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_record_order_invariant(name):
    """Shuffling the records of a subset leaves the output unchanged (a function of the set)."""
    f, _, _ = FACTORIES[name]
    idx = SUBSETS["random_half"]
    perm = np.random.default_rng(2).permutation(idx)
    a = f((IRIS_X[idx], IRIS_Y[idx]), rng=np.random.default_rng(3))
    b = f((IRIS_X[perm], IRIS_Y[perm]), rng=np.random.default_rng(3))
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_pickle_round_trip(name):
    """The configured mechanism pickles (joblib/loky) and the copy computes the same output."""
    f, _, _ = FACTORIES[name]
    g = pickle.loads(pickle.dumps(f))
    idx = SUBSETS["random_half"]
    np.testing.assert_array_equal(
        f((IRIS_X[idx], IRIS_Y[idx]), rng=np.random.default_rng(0)),
        g((IRIS_X[idx], IRIS_Y[idx]), rng=np.random.default_rng(0)),
    )
    assert isinstance(g.to_dict(), dict)


@pytest.mark.parametrize("name", sorted(n for n, v in FACTORIES.items() if not v[2]))
def test_unsupervised_accepts_array_or_tuple(name):
    """Unsupervised mechanisms read X from a bare array or from the first item of (X, y)."""
    f, _, _ = FACTORIES[name]
    np.testing.assert_array_equal(f(IRIS_X, rng=0), f((IRIS_X, IRIS_Y), rng=0))


@pytest.mark.parametrize("name", sorted(n for n, v in FACTORIES.items() if v[2]))
def test_supervised_rejects_bare_array(name):
    """Supervised mechanisms raise a clear ValueError when given X without labels."""
    f, _, _ = FACTORIES[name]
    with pytest.raises(ValueError, match="is supervised: the subset must be a tuple"):
        f(IRIS_X)


@pytest.mark.parametrize(
    "func",
    [
        M.clipped_mean,
        M.clipped_median,
        M.feature_histogram,
        M.kmeans_centers,
        M.pca_components,
        M.logistic_coefficients,
        M.linear_svm_coefficients,
    ],
)
def test_default_functions_fixed_shape(func):
    """Module-level default mechanisms give one shape for the full, empty and 1-record subsets."""
    X, y = load_wine(return_X_y=True)
    X = X[:, :3] / X[:, :3].max(axis=0)
    y = (y > 0).astype(int)
    shapes = {func((X[idx], y[idx])).shape for idx in (np.arange(178), np.arange(0), [3])}
    assert len(shapes) == 1


@settings(max_examples=25, deadline=None)
@given(mask=st.lists(st.booleans(), min_size=150, max_size=150), size=st.integers(0, 3))
def test_hypothesis_any_subset_fixed_shape(mask, size):
    """For any membership mask (and tiny subsets of 0-3 records) every output keeps its shape."""
    idx = np.flatnonzero(mask) if size == 3 else np.flatnonzero(mask)[:size]
    for f, d, _ in FACTORIES.values():
        out = f((IRIS_X[idx], IRIS_Y[idx]), rng=0)
        assert out.shape == (d,) and np.all(np.isfinite(out))


@settings(max_examples=50, deadline=None)
@given(
    data=st.lists(st.floats(-1e6, 1e6), min_size=0, max_size=20),
    low=st.floats(-10, 0),
    width=st.floats(0, 10),
)
def test_hypothesis_clipped_statistics_within_bounds(data, low, width):
    """Clipped mean and median always lie in the public range, for any data (n may be 0)."""
    X = np.asarray(data, dtype=float).reshape(-1, 1)
    for make in (M.make_clipped_mean, M.make_clipped_median):
        out = make(low=low, high=low + width)(X)
        assert low - 1e-9 <= out[0] <= low + width + 1e-9
