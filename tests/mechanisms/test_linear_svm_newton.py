"""linear_svm with solver="newton": exact squared-hinge minimiser, certified O(n) differences."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.mechanisms import LinearSVMNewton, _svm_fast, make_linear_svm


def _pool(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * np.array([1.0, 2.0, 0.5]) - 0.2
    y = np.where(X[:, 0] - 0.5 * X[:, 1] + rng.normal(size=n) > 0, "b", "a")
    return X, y


def test_release_is_liblinears_minimiser():
    """Independent: liblinear's primal solver at a tight tolerance minimises the same
    objective (its bias is penalised too)."""
    from sklearn.svm import LinearSVC

    X, y = _pool(150)
    mech = make_linear_svm(classes=("a", "b"), C=0.3, solver="newton", scale=1.5)
    theta = mech((X, y))
    ref = LinearSVC(C=0.3, dual=False, tol=1e-12, max_iter=100_000).fit(X / 1.5, y)
    np.testing.assert_allclose(theta, np.r_[ref.coef_[0], ref.intercept_], atol=1e-6)
    np.testing.assert_array_equal(mech((X[:0], y[:0])), np.zeros(4))


@pytest.mark.parametrize("n", [40, 1500])
def test_differences_within_the_declared_error_of_exact_flipped_solves(n, monkeypatch):
    """Every difference is within difference_error of the exact leave-one-in/out solve (so the
    certified distance ‖Δ̂‖ + error bounds the true one); at 1500 the O(n) path certifies most
    records itself."""
    calls = []
    real = _svm_fast.surrogate_flips

    def spy(*args, **kwargs):
        D, exact = real(*args, **kwargs)
        calls.append((exact.size, int(exact.sum())))
        return D, exact

    monkeypatch.setattr(_svm_fast, "surrogate_flips", spy)
    X, y = _pool(n, seed=n)
    mech = make_linear_svm(classes=("a", "b"), C=2.0, solver="newton")
    mask = np.random.default_rng(3).random(n) < 0.5
    records = np.unique(np.linspace(0, n - 1, 25).astype(int))
    base, diffs = mech.per_record_differences((X, y), mask, records)
    np.testing.assert_allclose(base, mech((X[mask], y[mask])), atol=1e-12)
    ref = []
    for i in records:
        flip = mask.copy()
        flip[i] = not mask[i]
        other = mech((X[flip], y[flip]))
        ref.append(base - other if mask[i] else other - base)
    gap = np.linalg.norm(diffs - np.array(ref), axis=1)
    assert np.all(gap <= mech.difference_error)
    assert np.all(np.linalg.norm(diffs, axis=1) + mech.difference_error
                  >= np.linalg.norm(ref, axis=1))
    assert calls and calls[0][0] == records.size
    if n == 1500:
        assert calls[0][1] < records.size // 2


def test_only_newton_has_the_fast_path_and_settings_are_checked():
    from pacpriv.pac.per_record._sim import PairSpec

    pool = _pool(20)
    recs = np.arange(20)
    assert PairSpec.build(make_linear_svm(classes=("a", "b"), solver="newton"), pool, recs,
                          20).fast
    assert not PairSpec.build(make_linear_svm(classes=("a", "b")), pool, recs, 20).fast
    with pytest.raises(ValueError, match="two classes"):
        make_linear_svm(classes=(0, 1, 2), solver="newton")
    with pytest.raises(ValueError, match="solver"):
        make_linear_svm(classes=(0, 1), solver="dual")
    with pytest.raises(ValueError, match="flip_tolerance"):
        LinearSVMNewton(classes=(0, 1), flip_tolerance=-1.0)
