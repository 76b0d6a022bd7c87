"""Closed-form per-record differences of the mean and the histograms equal two calls."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.mechanisms import make_clipped_mean, make_feature_histogram, make_label_histogram


def _two_calls(mech, pool, mask, i):
    up, down = mask.copy(), mask.copy()
    up[i], down[i] = True, False
    sub = (lambda m: (pool[0][m], pool[1][m])) if isinstance(pool, tuple) else (lambda m: pool[m])
    return mech(sub(up)) - mech(sub(down))


RNG = np.random.default_rng(4)
X = RNG.normal(size=(23, 3)) * 2.0
Y = RNG.integers(0, 3, size=23)
MECHS = [
    (make_clipped_mean(low=-1.0, high=(1.0, 2.0, 0.5)), X),
    (make_feature_histogram(edges=[-2.0, -0.5, 0.0, 1.0, 3.0]), X),
    (make_feature_histogram(edges=[[-1.0, 0.0, 1.0], [-3.0, 3.0]], features=[2, 0]), X),
    (make_label_histogram(classes=[0, 1, 2]), (X, Y)),
]


@pytest.mark.parametrize(("mech", "pool"), MECHS)
@pytest.mark.parametrize("members", [0, 1, 2, 12, 23])
def test_closed_form_equals_two_calls(mech, pool, members):
    """Every record, inside and outside S, including |S ∖ {i}| = 0 (the mean's midpoint)."""
    mask = np.zeros(23, dtype=bool)
    mask[np.random.default_rng(members).choice(23, members, replace=False)] = True
    base, diffs = mech.per_record_differences(pool, mask)
    sub = (pool[0][mask], pool[1][mask]) if isinstance(pool, tuple) else pool[mask]
    np.testing.assert_allclose(base, mech(sub), atol=1e-12)
    assert diffs.shape == (23, base.shape[0])
    for i in range(23):
        np.testing.assert_allclose(diffs[i], _two_calls(mech, pool, mask, i), atol=1e-12)
    some = np.array([5, 0, 22])
    _, part = mech.per_record_differences(pool, mask, some)
    np.testing.assert_array_equal(part, diffs[some])
