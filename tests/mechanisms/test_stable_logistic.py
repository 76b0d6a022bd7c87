"""The stabilised logistic regression: exact minimiser, fast per-record differences, bounds."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.datasets import load_wine

from pacpriv.mechanisms.stable_logistic import (
    PoolBasis,
    StableLogistic,
    broken_stick_components,
    kaiser_components,
)

WX, WY = load_wine(return_X_y=True)
WX = (WX - WX.min(axis=0)) / (WX.max(axis=0) - WX.min(axis=0)) * 2 - 1


def _mech(n_classes: int = 3, **kw) -> tuple[StableLogistic, np.ndarray, np.ndarray]:
    keep = WY < n_classes
    X, y = WX[keep][::2], WY[keep][::2]
    return StableLogistic.for_pool(X, classes=tuple(range(n_classes)), sampling_rate=0.5,
                                   **kw), X, y


def test_unclipped_solution_matches_scipy():
    """With a clip that never binds the output minimises the L2-regularised logistic loss;
    an independent L-BFGS solve of that objective agrees to 1e-7."""
    m, X, y = _mech(2, clip=1e6, l2=0.05)
    theta = m((X, y))
    X1 = np.hstack([m.basis(X), np.ones((X.shape[0], 1))])
    t = (y == 1).astype(float)

    def obj(w):
        u = X1 @ w
        return np.sum(np.logaddexp(0, u) - t * u) / m.normalizer + 0.5 * m.l2 * w @ w

    ref = minimize(obj, np.zeros(X1.shape[1]), method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000}).x
    np.testing.assert_allclose(theta, ref, atol=1e-6)


def test_clipped_solution_is_a_stationary_point():
    """First-order condition, computed here independently: Σ clip(σ(u) − y, ±c/‖x̃‖) x̃/N + λw = 0
    per class (strong convexity: the unique minimiser)."""
    m, X, y = _mech(3, clip=0.3)
    theta = m((X, y)).reshape(3, -1)
    X1 = np.hstack([m.basis(X), np.ones((X.shape[0], 1))])
    cap = 0.3 / np.linalg.norm(X1, axis=1)
    assert np.any(np.abs(expit(X1 @ theta[0]) - (y == 0)) > cap)  # some slopes are clipped
    for k in range(3):
        r = np.clip(expit(X1 @ theta[k]) - (y == k), -cap, cap)
        g = X1.T @ r / m.normalizer + m.l2 * theta[k]
        assert np.linalg.norm(g) <= 1e-9


@pytest.mark.parametrize("n_classes", [2, 3])
def test_fast_differences_equal_the_generic_path(n_classes):
    """per_record_differences == f(S ∪ {i}) − f(S ∖ {i}) by two calls, for every record."""
    m, X, y = _mech(n_classes)
    mask = np.random.default_rng(1).random(y.size) < 0.5
    base, diffs = m.per_record_differences((X, y), mask)
    np.testing.assert_allclose(base, m((X[mask], y[mask])), atol=1e-12)
    for i in range(y.size):
        up, down = mask.copy(), mask.copy()
        up[i], down[i] = True, False
        ref = m((X[up], y[up])) - m((X[down], y[down]))
        assert np.linalg.norm(diffs[i] - ref) <= m.difference_error
    sub = np.array([3, 0, 7])
    _, some = m.per_record_differences((X, y), mask, sub)
    np.testing.assert_allclose(some, diffs[sub], atol=m.difference_error)


def test_difference_bound_holds_on_random_subsets():
    """‖Δᵢ‖ <= min(c, ‖x̃ᵢ‖) sqrt(K')/(λN) (+ tolerance) for every record and subset."""
    m, X, y = _mech(3, l2=0.1)
    bound = m.difference_bound((X, y))
    rng = np.random.default_rng(7)
    worst = 0.0
    for _ in range(5):
        mask = rng.random(y.size) < rng.uniform(0.1, 0.9)
        _, diffs = m.per_record_differences((X, y), mask)
        ratio = np.linalg.norm(diffs, axis=1) / bound
        worst = max(worst, float(ratio.max()))
    assert 0.05 < worst <= 1.0


def test_tiny_subsets_and_pickle():
    m, X, y = _mech(3)
    assert np.array_equal(m((X[:0], y[:0])), np.zeros(m.dim))
    one = m((X[:1], y[:1]))
    assert one.shape == (m.dim,) and np.all(np.isfinite(one))
    same = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(same((X, y)), m((X, y)))
    assert set(np.unique(m.predict(m((X, y)), X))) <= {0, 1, 2}


def test_pool_basis():
    """Whitened: the mapped pool has identity covariance; Kaiser's count; canonical signs."""
    b = PoolBasis.from_pool(WX, components=None)
    Z = b(WX)
    np.testing.assert_allclose(np.cov(Z, rowvar=False, bias=True), np.eye(13), atol=1e-9)
    ev = np.linalg.eigvalsh(np.cov(WX, rowvar=False, bias=True))
    assert kaiser_components(ev) == int(np.sum(ev >= ev.mean()))
    k = PoolBasis.from_pool(WX)
    assert k.dim == kaiser_components(ev)
    cols = k.matrix / np.linalg.norm(k.matrix, axis=0)
    assert np.all(cols[np.abs(cols).argmax(axis=0), np.arange(k.dim)] > 0)
    with pytest.raises(ValueError, match="components"):
        PoolBasis.from_pool(WX, components=99)
    with pytest.raises(ValueError, match="l2"):
        StableLogistic((0, 1), k, 0.0, 1.0, 10.0)


def test_broken_stick_rule():
    """Shares 0.5, 0.3, 0.1, 0.1 against the broken stick (1/4)(25/12, 13/12, 7/12, 3/12):
    0.5 > 0.52? no -> 1 kept (the floor); a dominant pair is kept."""
    assert broken_stick_components(np.array([0.5, 0.3, 0.1, 0.1])) == 1
    assert broken_stick_components(np.array([0.6, 0.3, 0.05, 0.05])) == 2
    ev = np.linalg.eigvalsh(np.cov(WX, rowvar=False, bias=True))
    assert PoolBasis.from_pool(WX, components="broken_stick").dim == 2 <= kaiser_components(ev)


@pytest.mark.parametrize(("n_classes", "flip_error", "kw"), [
    (2, 1e-3, {}), (3, 1e-3, {}), (3, 1e-2, {}), (3, 1e-9, {}),
    # sibling inputs: slopes never clipped (c > ‖x̃‖ for some records), heavy clipping, all
    # directions, a stronger regulariser
    (3, 1e-3, {"clip": 2.0}), (2, 1e-3, {"clip": 8.0, "components": None}),
    (3, 1e-3, {"clip": 0.2}), (2, 3e-4, {"l2": 0.3, "components": 4})])
def test_certified_o_n_path_is_within_its_declared_error(n_classes, flip_error, kw):
    """The surrogate path (and its exact fallback at a tiny budget) returns every record's
    difference within ``difference_error`` of two exact releases, for members and others."""
    m, X, y = _mech(n_classes, **{"l2": 0.05, **kw})
    fast = dataclasses.replace(m, flip_error=flip_error)
    exact = dataclasses.replace(m, flip_error=0.0)
    assert fast.difference_error > exact.difference_error  # the budget is declared
    assert fast.difference_error - exact.difference_error == pytest.approx(
        np.sqrt(m.n_problems) * flip_error * m.clip / (m.l2 * m.normalizer))
    rng = np.random.default_rng(3)
    for q in (0.3, 0.7):
        mask = rng.random(y.size) < q
        base, diffs = fast.per_record_differences((X, y), mask)
        base0, diffs0 = exact.per_record_differences((X, y), mask)
        np.testing.assert_allclose(base, base0, atol=1e-12)
        err = np.linalg.norm(diffs - diffs0, axis=1)
        assert err.max() <= fast.difference_error
        for i in rng.choice(y.size, 6, replace=False):
            up, down = mask.copy(), mask.copy()
            up[i], down[i] = True, False
            ref = m((X[up], y[up])) - m((X[down], y[down]))
            assert np.linalg.norm(diffs[i] - ref) <= fast.difference_error


def test_flip_error_default_and_validation():
    """None: the O(n) path from N = 400 on (budget 3e-4 of c/(λN)), exact below."""
    m, _, _ = _mech(3)
    small = dataclasses.replace(m, normalizer=399.0)
    large = dataclasses.replace(m, normalizer=400.0)
    assert small.flip_budget == 0.0
    assert large.flip_budget == pytest.approx(3e-4 * m.clip / (m.l2 * 400.0))
    for bad in (-1e-3, 2.0, float("nan"), "x"):
        with pytest.raises(ValueError, match="flip_error"):
            dataclasses.replace(m, flip_error=bad)


def test_certified_o_n_path_on_empty_single_and_full_subsets():
    """Edge subsets (S empty, one member, every record) stay within the declared error."""
    m, X, y = _mech(3, l2=0.05)
    fast = dataclasses.replace(m, flip_error=1e-3)
    exact = dataclasses.replace(m, flip_error=0.0)
    for mask in (np.zeros(y.size, bool), np.eye(1, y.size, 3, dtype=bool)[0],
                 np.ones(y.size, bool)):
        _, a = fast.per_record_differences((X, y), mask)
        _, b = exact.per_record_differences((X, y), mask)
        assert np.linalg.norm(a - b, axis=1).max() <= fast.difference_error


def test_o_n_path_trials_are_identical_for_any_workers():
    """The per-record trials of the O(n) path are bit-identical sequentially and on two
    threads (one BLAS thread inside, deterministic arithmetic)."""
    from pacpriv.pac.engine import ExecutionOptions
    from pacpriv.pac.per_record._calibration import simulate_calibration_trials
    from pacpriv.pac.samplers import PoissonSampler

    m, X, y = _mech(3, l2=0.05)
    fast = dataclasses.replace(m, flip_error=1e-3)
    runs = [simulate_calibration_trials(
        fast, (X, y), n_trials=8, sampler=PoissonSampler(0.5), records=np.arange(y.size),
        rng=4, execution=opts) for opts in (
            ExecutionOptions(progress=False),
            ExecutionOptions(progress=False, n_jobs=2, backend="threading"))]
    np.testing.assert_array_equal(runs[0].certify.distances, runs[1].certify.distances)
    np.testing.assert_array_equal(runs[0].shape_trials.differences,
                                  runs[1].shape_trials.differences)
