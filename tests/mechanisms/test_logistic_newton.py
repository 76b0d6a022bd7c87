"""logistic with solver="newton": exact penalised minimiser and certified O(n) differences."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.mechanisms import LogisticNewton, make_logistic
from pacpriv.mechanisms import logistic as logistic_module


def _pool(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * np.array([1.0, 2.0, 0.5]) + 0.3
    y = np.where(X[:, 0] - 0.5 * X[:, 1] + rng.normal(size=n) > 0, 7, 3)
    return X, y


def test_release_is_sklearns_minimiser_with_the_intercept_penalised():
    """Independent: sklearn's lbfgs on [x, 1] without its own intercept minimises the same
    objective C Σ ℓ + ½‖θ‖² (tight tolerance)."""
    from sklearn.linear_model import LogisticRegression

    X, y = _pool(120)
    mech = make_logistic(classes=(3, 7), C=0.7, solver="newton", center=0.3, scale=2.0)
    theta = mech((X, y))
    Z1 = np.hstack([(X - 0.3) / 2.0, np.ones((120, 1))])
    ref = LogisticRegression(C=0.7, fit_intercept=False, tol=1e-12, max_iter=10_000)
    ref.fit(Z1, (y == 7).astype(int))
    np.testing.assert_allclose(theta, ref.coef_[0], atol=1e-6)
    assert theta.shape == (4,)
    np.testing.assert_array_equal(mech((X[:0], y[:0])), np.zeros(4))


def _exact_differences(mech, pool, mask, records):
    X, y = pool
    base = mech((X[mask], y[mask]))
    out = []
    for i in records:
        flip = mask.copy()
        flip[i] = not mask[i]
        other = mech((X[flip], y[flip]))
        out.append(base - other if mask[i] else other - base)
    return base, np.array(out)


@pytest.mark.parametrize("n", [60, 2500])
def test_differences_within_the_declared_error_of_exact_flipped_solves(n, monkeypatch):
    """At n = 60 the surrogate rarely certifies (exact fallback); at 2500 it certifies most
    records. Either way every difference is within difference_error of the exact
    leave-one-in/out solve, so the certified distance ‖Δ̂‖ + error bounds the true one."""
    calls = []
    real = logistic_module.surrogate_flips

    def spy(*args, **kwargs):
        D, exact = real(*args, **kwargs)
        calls.append((exact.size, int(exact.sum())))
        return D, exact

    monkeypatch.setattr(logistic_module, "surrogate_flips", spy)
    pool = _pool(n, seed=n)
    mech = make_logistic(classes=(3, 7), C=1.5, solver="newton")
    mask = np.random.default_rng(1).random(n) < 0.5
    records = np.unique(np.linspace(0, n - 1, 25).astype(int))
    base, diffs = mech.per_record_differences(pool, mask, records)
    ref_base, ref = _exact_differences(mech, pool, mask, records)
    np.testing.assert_allclose(base, ref_base, atol=1e-12)
    gap = np.linalg.norm(diffs - ref, axis=1)
    assert np.all(gap <= mech.difference_error)
    true = np.linalg.norm(ref, axis=1)
    assert np.all(np.linalg.norm(diffs, axis=1) + mech.difference_error >= true)
    assert np.all(true <= mech.difference_bound(pool)[records])
    assert calls and calls[0][0] == records.size
    if n == 2500:
        assert calls[0][1] < records.size // 2  # the surrogate certified most records


def test_engine_uses_the_fast_path_only_for_newton():
    from pacpriv.pac.per_record._sim import PairSpec

    pool = _pool(30)
    recs = np.arange(30)
    newton = make_logistic(classes=(3, 7), solver="newton")
    assert PairSpec.build(newton, pool, recs, 30).fast
    assert not PairSpec.build(make_logistic(classes=(3, 7)), pool, recs, 30).fast
    assert newton.to_dict()["solver"] == "newton"


@pytest.mark.parametrize("kwargs, match", [
    ({"classes": (0, 1, 2), "solver": "newton"}, "two classes"),
    ({"classes": (0, 1), "solver": "cg"}, "solver"),
])
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_logistic(**kwargs)


@pytest.mark.parametrize("field, value", [("tol", 0.0), ("flip_tolerance", -1.0),
                                          ("tol", float("nan"))])
def test_bad_tolerances_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        LogisticNewton(classes=(0, 1), **{field: value})
