"""The certificate on coordinates of the rows' span (d > n_trials) equals the dense route.

:mod:`pacpriv.pac.noise._reduced`: the Gram matrix and thin factors replace the ``n × d`` SVDs;
the certified numbers must be the same up to round-off, the released noise covariance the same
matrix, and the memory a bounded multiple of the outputs.
"""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.pac.noise import _certificate, _gram_lift, certify_noise

from ._memory import traced_peak

SCALARS = ("mi_bound", "linearised_mi_bound", "residual_std", "clip_radius")
CERT = ("upper_bound", "plugin_trace", "kappa", "kappa_plugin", "mean_summand",
        "summand_bound", "shrinkage", "n_shape", "coordinate_exponent")


def _outputs(m, d, seed, offset=3.0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, d)) / np.sqrt(np.arange(1, d + 1)) + offset


def _noise_cov(plan, d):
    v = np.asarray(plan.basis, dtype=np.float64)
    std = np.asarray(plan.noise_std)
    cov = (v * std**2) @ v.T + plan.residual_std**2 * (np.eye(d) - v @ v.T)
    s = plan.coordinate_scale  # Σ_B = S Σ_y S when the shape rescaled the coordinates
    return cov if s is None else cov * np.outer(s, s)


def _dense(monkeypatch, x, **kw):
    with monkeypatch.context() as mp:
        mp.setattr(_certificate, "_use_reduced", lambda m, d: False)
        return certify_noise(x, **kw)


@pytest.mark.parametrize(("m", "d", "kw"), [
    (40, 50, {}),
    (64, 300, {"method": "empirical-bernstein"}),
    (64, 300, {"output_bound": 60.0}),
    (48, 200, {"shrinkage": 0.3, "scaling": "trace"}),
    (64, 120, {"method": "student-t"}),
    (96, 400, {"confidence": 0.99}),
])
def test_reduced_route_equals_dense(monkeypatch, m, d, kw):
    """Same certified numbers (relative 1e-9), same Σ_B and clip centre as the d-dimensional
    route (the old algorithm), on outputs far from the origin with decaying scales."""
    x = _outputs(m, d, seed=m + d)
    new = certify_noise(x, mi_budget=0.5, **kw)
    old = _dense(monkeypatch, x, mi_budget=0.5, **kw)
    eps = new.certificate.roundoff  # the Gram route's charged round-off (0 on the direct one)
    assert 0.0 <= eps <= _gram_lift.MAX_SLACK
    for name in SCALARS:
        a, b = getattr(old, name), getattr(new, name)
        if a is None:
            assert b is None
        else:
            assert b == pytest.approx(a, rel=1e-9 + eps, abs=1e-12), name
    for name in CERT:
        a, b = getattr(old.certificate, name), getattr(new.certificate, name)
        if a is None:
            assert b is None
        else:
            assert b == pytest.approx(a, rel=1e-9 + eps, abs=1e-12), name
    # the charge only ever adds noise
    assert new.certificate.upper_bound >= old.certificate.upper_bound * (1 - 1e-9)
    assert abs(new.certificate.n_clipped - old.certificate.n_clipped) <= 1  # a row on ρ
    np.testing.assert_allclose(_noise_cov(new, d), _noise_cov(old, d), rtol=0,
                               atol=(1e-9 + eps) * float(np.max(np.abs(_noise_cov(old, d)))))
    if old.clip_center is not None:
        np.testing.assert_allclose(new.clip_center, old.clip_center, rtol=1e-12)
    v = np.asarray(new.basis)
    np.testing.assert_allclose(v.T @ v, np.eye(v.shape[1]), atol=max(1e-12, eps))


def test_reduced_route_handles_low_rank_and_constant_outputs(monkeypatch):
    rng = np.random.default_rng(5)
    low = rng.standard_normal((64, 3)) @ rng.standard_normal((3, 500)) + 1.0  # rank 3 < n_shape
    new = certify_noise(low, mi_budget=0.5)
    old = _dense(monkeypatch, low, mi_budget=0.5)
    assert new.certificate.upper_bound == pytest.approx(old.certificate.upper_bound, rel=1e-7)
    assert new.mi_bound == pytest.approx(old.mi_bound, rel=1e-9)
    const = np.ones((32, 400))
    plan = certify_noise(const, mi_budget=0.5)
    assert plan.certificate.constant and plan.certificate.certified
    assert plan.clip_radius == 0.0 and plan.mi_bound == 0.0


def test_reduced_route_reads_float32_and_memmap_without_a_float64_copy(tmp_path, monkeypatch):
    """float32 outputs and a memory map give the float64 result of the unscaled shape (float32
    data, float64 arithmetic; float64 outputs may also try rescaled coordinates, which needs a
    float64 copy, so float32 and mapped ones keep the unscaled shape), and the certificate's
    own allocations stay below the float64 outputs' size."""
    m, d = 64, 20_000
    x = _outputs(m, d, seed=1).astype(np.float32)
    with monkeypatch.context() as mp:
        mp.setattr(_certificate, "candidate_exponents", lambda var, rows: (0.0,))
        ref = certify_noise(x.astype(np.float64), mi_budget=0.5)
    path = tmp_path / "out.npy"
    np.save(path, x)
    mapped = np.load(path, mmap_mode="r")
    plan, peak = traced_peak(certify_noise, mapped, mi_budget=0.5)
    assert plan.coordinate_scale is None
    assert plan.mi_bound == pytest.approx(ref.mi_bound, rel=1e-9)
    assert plan.certificate.upper_bound == pytest.approx(ref.certificate.upper_bound, rel=1e-9)
    # the basis (d x k, k <= n_shape = 32) is half the float64 outputs; blocks are 16 MiB
    assert peak < m * d * 8 * 0.5 + 3 * 16 * 2**20


def test_reduced_route_refuses_non_finite_outputs():
    x = _outputs(16, 100, seed=2)
    x[3, 50] = np.nan
    with pytest.raises(ValueError, match="finite"):
        certify_noise(x, mi_budget=0.5)


def test_reduced_route_without_cholesky_falls_back_to_householder(monkeypatch):
    """An ill-conditioned lift (no Cholesky factor) takes the Householder QR and a projection
    pass: the same plan."""
    from pacpriv.pac.noise import _reduced

    x = _outputs(64, 300, seed=9)
    fast = certify_noise(x, mi_budget=0.5)

    def refuse(*args, **kwargs):
        raise _reduced.linalg.LinAlgError("not positive definite")

    monkeypatch.setattr(_reduced.linalg, "cholesky", refuse)
    slow = certify_noise(x, mi_budget=0.5)
    eps = fast.certificate.roundoff  # fast: the Gram route; slow: Householder and the data
    assert slow.certificate.roundoff == 0.0 and isinstance(slow.basis, np.ndarray)
    assert slow.mi_bound == pytest.approx(fast.mi_bound, rel=1e-9 + eps)
    assert slow.certificate.upper_bound == pytest.approx(fast.certificate.upper_bound,
                                                         rel=1e-9 + eps)
    np.testing.assert_allclose(_noise_cov(slow, 300), _noise_cov(fast, 300), atol=1e-9 + eps)
