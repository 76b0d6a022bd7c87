"""The free post-processing of answers (simplex projection) and the cached bounds."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pacpriv.pac.bounds._posterior import posterior_success_rate
from pacpriv.prediction import project_to_simplex
from pacpriv.prediction._reporting import BoundCache

ROWS = arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 7)),
              elements=st.floats(-50, 50, allow_nan=False))


def _by_bisection(y: np.ndarray) -> np.ndarray:
    """Independent projection: the threshold τ with Σ max(y − τ, 0) = 1, by bisection."""
    lo, hi = y.min() - 1.0, y.max()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.maximum(y - mid, 0).sum() > 1 else (lo, mid)
    return np.maximum(y - 0.5 * (lo + hi), 0.0)


@settings(max_examples=200, deadline=None)
@given(ROWS)
def test_projection_lands_on_the_simplex_and_matches_bisection(Y):
    P = project_to_simplex(Y)
    assert np.all(P >= 0) and np.allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    for y, p in zip(Y, P, strict=True):
        np.testing.assert_allclose(p, _by_bisection(y), rtol=0, atol=1e-9)
        assert y.argmax() == p.argmax() or p[y.argmax()] == p.max()  # order kept


@settings(max_examples=100, deadline=None)
@given(ROWS, st.integers(0, 2**32 - 1))
def test_projection_is_the_nearest_point(Y, seed):
    P = project_to_simplex(Y)
    Q = np.random.default_rng(seed).dirichlet(np.ones(Y.shape[1]), size=(50, Y.shape[0]))
    nearest = np.linalg.norm(P - Y, axis=1)
    assert np.all(np.linalg.norm(Q - Y, axis=2) >= nearest - 1e-9)


def test_points_of_the_simplex_are_unchanged_and_the_issue_example_is_fixed():
    P = np.random.default_rng(0).dirichlet(np.ones(3), size=20)
    np.testing.assert_allclose(project_to_simplex(P), P, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(project_to_simplex([[4.99, -3.99]]), [[1.0, 0.0]])
    np.testing.assert_allclose(project_to_simplex([[0.8, 0.6, -0.4]]), [[0.6, 0.4, 0.0]])


def test_cached_bounds_equal_the_scalar_bound():
    b = 2.0**-10
    cache = BoundCache(b, 0.5, max_queries=1000)
    for n in (0, 1, 2, 255, 256, 257, 999, 1000, 3, 700):
        assert cache(n) == posterior_success_rate(n * b, prior=0.5), n
    assert BoundCache(b, 1.0, 10)(3) == 1.0
    odd = BoundCache(0.013, 0.625, max_queries=40)
    assert [odd(n) for n in range(41)] == [posterior_success_rate(n * 0.013, prior=0.625)
                                           for n in range(41)]
