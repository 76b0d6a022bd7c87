"""The certificate at high dimension (issue 32): the split, the complement's level, and that
the complement's variance is charged (the certified MI bound holds for the true covariance)."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.pac.noise import certify_noise
from pacpriv.pac.noise._shape import (
    Shape,
    _outside,
    default_shape_trials,
    fit_shape,
    shape_cap,
    sqrt_shape,
)


@pytest.mark.parametrize(("m", "d", "want"), [
    (256, 2000, 224), (256, 200, 224), (128, 2000, 96), (64, 2000, 32), (1024, 2000, 896),
    (256, 20, 100), (128, 20, 62), (1024, 20, 265),  # d <= m/4: the split of 0.4.0
])
def test_split_moves_to_the_shape_at_high_d(m, d, want):
    assert default_shape_trials(m, d) == want


def test_shape_cap_is_half_up_to_a_quarter_and_interpolates():
    assert shape_cap(256, 64) == 128.0
    assert shape_cap(256, 192) == 224.0
    assert shape_cap(256, 128) == pytest.approx(128 + 0.5 * 96)
    assert shape_cap(40, 400) == 20.0  # never fewer than half for the shape


def _head_plus_flat(seed, n, d, head, sigma):
    """Rows with ``len(head)`` strong coordinates (variances ``head``) and variance ``σ²`` in
    every other coordinate, rotated at random: the complement's level is known."""
    rng = np.random.default_rng(seed)
    scales = np.full(d, sigma)
    scales[: len(head)] = np.sqrt(head)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return (rng.standard_normal((n, d)) * scales) @ q.T, q, scales**2


def test_held_out_complement_variance_matches_closed_form():
    """The complement's level comes from held-out variance outside a fit's explored
    directions: with 3 strong coordinates and variance σ² in the 297 others, a fit on 43 rows
    explores 42 directions (the 3 strong ones and 39 of noise), so fresh rows carry about
    ``(300 − 42)·σ²`` outside them."""
    x, _, _ = _head_plus_flat(3, 80, 300, [400.0, 200.0, 100.0], 1.0)
    fit, _ = sqrt_shape(x[:43])
    along, resid = _outside(fit, x[43:])
    outside = resid + float(np.sum(along[42:]))
    assert outside == pytest.approx(300 - 42, rel=0.1)


def _loss(shape, cov):
    """Noise power per unit budget of ``κA`` at the exact trace: ``tr(A⁻¹Σ)·tr(A)``."""
    v = shape.vecs
    along = np.einsum("ij,ij->j", v, cov @ v)
    rest = max(float(np.trace(cov) - np.sum(along)), 0.0)
    return (float(np.sum(along / shape.a)) + rest / shape.a_c) * shape.trace


def test_shape_near_the_oracle_when_the_trials_span_the_rank():
    """Poisson sums over 60 records in d = 240 and 80 shape trials: they span all 60
    directions, the complement is empty. The head shrunk within itself with the complement at
    the floor costs <= 1.2x the oracle ``(Σ sqrt λ)²`` (closed form on the known Σ); 0.4.0's
    shape (shrunk towards the mean of all d values, which lifts the empty complement) costs
    >= 1.3x at its best shrinkage."""
    rng = np.random.default_rng(3)
    pool = rng.standard_normal((60, 240)) / np.sqrt(np.arange(1, 241))
    x = (rng.random((80, 60)) < 0.5) @ pool
    cov = 0.25 * pool.T @ pool
    oracle = float(np.sum(np.sqrt(np.clip(np.linalg.eigvalsh(cov), 0, None)))) ** 2
    new = _loss(fit_shape(x)[0], cov) / oracle
    base = sqrt_shape(x)[0]
    old = min(_loss(base.shrunk(float(a)), cov) for a in np.linspace(0, 1, 11)) / oracle
    assert 1.0 <= new <= 1.2
    assert old >= 1.3


def _true_mi(plan, q, var):
    """``½ ln det(I + Σ Σ_B⁻¹)`` for ``Σ = Q diag(var) Qᵀ`` (dense, d × d)."""
    w = np.asarray(plan.basis, dtype=np.float64)
    d = plan.dim
    inv = np.eye(d) / plan.residual_variance + (w * (1.0 / plan.noise_variance
                                                     - 1.0 / plan.residual_variance)) @ w.T
    root = q * np.sqrt(var)
    ev = np.linalg.eigvalsh(root.T @ inv @ root)
    return 0.5 * float(np.sum(np.log1p(np.clip(ev, 0, None)))), (w, inv)


def test_complement_is_charged(monkeypatch):
    """d = 300 > 96 trials, most of the variance outside any 63 directions: the certified plan
    meets the budget for the true covariance (no simulated output clipped), and the
    complement carries most of the linear MI bound. With the complement dropped from the
    summands (its trace not bounded) the same certificate breaks the budget."""
    v = 0.5
    x, q, var = _head_plus_flat(11, 96, 300, [30.0, 20.0, 10.0], 0.25)
    plan = certify_noise(x, mi_budget=v)
    assert plan.certificate.n_shape == 64 and plan.certificate.n_clipped == 0
    mi, (w, inv) = _true_mi(plan, q, var)
    assert plan.mi_bound <= v * (1 + 1e-12)  # the certified bound meets v (round-off)
    assert mi <= v
    # the complement's share of the linear bound ½ tr(Σ_B⁻¹Σ)
    cov = (q * var) @ q.T
    outside = np.eye(300) - w @ w.T
    share = float(np.trace(outside @ cov @ outside)) / plan.residual_variance / float(
        np.trace(inv @ cov))
    assert share > 0.5

    def head_only(self, y):
        coef = y @ self.vecs
        return np.sum(coef**2 / self.a, axis=1)

    monkeypatch.setattr(Shape, "whiten2", head_only)
    broken = certify_noise(x, mi_budget=v)
    assert _true_mi(broken, q, var)[0] > 1.4 * v
