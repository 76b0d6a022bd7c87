"""The shape's cross-validation scores every variant at once, bit for bit one at a time."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacpriv.pac.noise._coordinates import Metric
from pacpriv.pac.noise._shape import (
    _grid,
    _unexplored,
    _variant,
    _variant_table,
    fit_shape_scored,
    sqrt_shape,
)


def _shape_and_rest(seed: int, n: int, width: int, extra: int, weighted: bool, zeros: int):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, width)) * np.exp(rng.normal(size=width) * 1.5)
    x[:, :zeros] = 0.0  # rank-deficient columns: explored directions at the floor
    dim = None if extra == 0 else width + extra
    metric = None
    if weighted and dim is None:
        d2 = np.exp(rng.normal(size=width))
        metric = Metric(float(d2.sum()), float(d2.min()), diag=d2)
    shape, lam = sqrt_shape(x, dim, metric)
    resid = float(rng.uniform(0.0, 3.0))
    rest = _unexplored(n, width, dim, lam, resid, metric, shape.weights)
    return shape, rest


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 40), width=st.integers(1, 30),
       extra=st.sampled_from([0, 0, 5, 300]), weighted=st.booleans(),
       zeros=st.integers(0, 3), fixed=st.one_of(st.none(), st.floats(0.0, 1.0)))
def test_variant_table_rows_are_the_variants(seed, n, width, extra, weighted, zeros, fixed):
    """Each row of _variant_table is, bit for bit, the Shape that _variant builds (its a,
    a_c and trace): the cross-validation picks the same variant it picked one at a time."""
    shape, rest = _shape_and_rest(seed, n, width, extra, weighted, zeros)
    grid = _grid("cv" if fixed is None else fixed)
    a, a_c, trace = _variant_table(shape, grid, rest)
    assert a.shape == (grid.shape[0], shape.a.size)
    for i, pair in enumerate(grid):
        one = _variant(shape, pair, rest)
        assert a[i].tobytes() == one.a.tobytes()
        assert (a_c is None) == (one.a_c is None)
        if a_c is not None:
            assert float(a_c[i]) == one.a_c
        assert float(trace[i]) == one.trace


@pytest.mark.parametrize(("n", "width", "dim"), [(96, 100, None), (30, 12, None), (40, 39, 500)])
def test_fit_is_deterministic_and_the_loss_is_the_picked_variants(n, width, dim):
    """The fit's loss is the smallest cross-validated loss over the grid (the picked variant),
    and refitting gives the same shape bit for bit."""
    rng = np.random.default_rng(n + width)
    x = rng.normal(size=(n, width)) * np.linspace(0.1, 3.0, width)
    fit = fit_shape_scored(x, dim=dim)
    again = fit_shape_scored(x, dim=dim)
    assert fit.shape.a.tobytes() == again.shape.a.tobytes() and fit.loss == again.loss
    assert 1.0 <= fit.inflation <= 4.0
    for alpha in np.linspace(0.0, 1.0, 11):  # a fixed α scores its own variant no lower
        assert fit_shape_scored(x, shrinkage=float(alpha), dim=dim).loss >= fit.loss * (1 - 1e-12)
