"""The certificate's lift from the Gram matrix (:mod:`pacpriv.pac.noise._gram_lift`).

The Gram route computes the rows' coordinates along the released basis as ``K B`` instead of
projecting the outputs, and charges a round-off factor ``1 + ε``. These tests compare it with
the direct route (the basis formed and the outputs projected, from the data) on the same
reduced rows and shape: the whitened forms of the two must agree within ``ε`` (the bound is at
least the measured difference), the bases and the noise covariances likewise, and outputs
where the bound does not close must take the direct route.
"""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.pac.noise import _certificate, _gram_lift, _reduced, certify_noise
from pacpriv.pac.noise._shape import default_shape_trials, fit_shape


def _outputs(m, d, seed, decay=0.5, offset=3.0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, d)) / np.arange(1, d + 1) ** decay + offset


def _both_routes(x, monkeypatch):
    """``realign`` of the same reduced rows and shape by the Gram route and the direct one."""
    m, d = x.shape
    red = _reduced.reduce_rows(x)
    n_shape = min(default_shape_trials(m, d), m - 4)
    shape = fit_shape(red.coords[:n_shape], shrinkage="cv", dim=d)[0]
    fast = _reduced.realign(red, shape)
    with monkeypatch.context() as mp:
        mp.setattr(_reduced, "MAX_SLACK", -1.0)  # the bound never closes: the direct route
        slow = _reduced.realign(red, shape)
    return fast, slow


def _whitened_form(rows, shape):
    """``M = P' W P'ᵀ`` restricted to ``1⊥`` (the certificate's quadratic form on differences)."""
    k = shape.a.size
    w = np.concatenate([1.0 / shape.a, np.full(rows.shape[1] - k, 1.0 / shape.a_c)])
    comp = _gram_lift._basis_of_ones_complement(rows.shape[0])
    return comp.T @ ((rows * w) @ rows.T) @ comp


@pytest.mark.parametrize(("m", "d", "decay", "offset"), [
    (40, 60, 0.5, 3.0),
    (64, 500, 0.5, 1e3),   # a large common offset
    (64, 500, 0.0, 0.0),   # a flat spectrum
    (96, 2000, 0.75, 3.0),  # scales decaying like j^-0.75
    (128, 5000, 0.25, 10.0),
])
def test_gram_route_matches_the_direct_route_within_its_bound(monkeypatch, m, d, decay, offset):
    x = _outputs(m, d, seed=m * d, decay=decay, offset=offset)
    (v_f, rows_f, shape_f, eps), (v_s, rows_s, shape_s, eps_s) = _both_routes(x, monkeypatch)
    assert isinstance(v_f, _reduced.LazyEigenbasis) and isinstance(v_s, np.ndarray)
    assert eps_s == 0.0 and 0.0 < eps <= _gram_lift.MAX_SLACK
    np.testing.assert_array_equal(shape_f.a, shape_s.a)
    # the whitened forms: every eigenvalue of M_direct relative to M_gram within 1 ± ε
    from scipy import linalg

    rel = linalg.eigvalsh(_whitened_form(rows_s, shape_s), _whitened_form(rows_f, shape_f))
    assert rel.max() <= 1.0 + eps and rel.min() >= 1.0 - eps
    # the released bases: the same directions, orthonormal within the bound
    v = np.asarray(v_f)
    assert np.linalg.norm(v.T @ v - np.eye(v.shape[1]), 2) <= eps
    assert np.linalg.norm(v - v_s, 2) <= eps
    # the lazy basis applies itself as the formed matrix does
    z = np.random.default_rng(1).standard_normal(v.shape[1])
    y = np.random.default_rng(2).standard_normal(d)
    np.testing.assert_allclose(v_f.matvec(z), v @ z, rtol=0, atol=1e-10 * np.abs(v @ z).max())
    np.testing.assert_allclose(v_f.rmatvec(y), v.T @ y, rtol=0, atol=1e-10 * np.abs(v.T @ y).max())


def test_the_bound_is_not_vacuous_and_grows_with_the_condition():
    """ε is far below the measured-agreement tolerance of the certified numbers on a flat
    spectrum, and larger on a steeply decaying one (the Gram route squares the condition)."""

    flat = certify_noise(_outputs(128, 4000, seed=3, decay=0.0), mi_budget=0.5)
    steep = certify_noise(_outputs(128, 4000, seed=3, decay=0.75), mi_budget=0.5)
    assert flat.certificate.roundoff < 1e-7
    assert steep.certificate.roundoff > flat.certificate.roundoff
    assert isinstance(flat.basis, _reduced.LazyEigenbasis)
    assert _certificate.Certificate.__dataclass_fields__["roundoff"].default == 0.0


def test_rank_deficient_or_ill_conditioned_outputs_take_the_direct_route(monkeypatch):
    """Where the bound does not close (outputs of rank 3 < n_trials − 1: the whitened form has
    no positive lower eigenvalue on the differences), the lift reads the data: ε = 0, a formed
    basis, and the plan equals the direct route's."""
    rng = np.random.default_rng(5)
    low = rng.standard_normal((64, 3)) @ rng.standard_normal((3, 500)) + 1.0
    plan = certify_noise(low, mi_budget=0.5)
    assert plan.certificate.roundoff == 0.0 and isinstance(plan.basis, np.ndarray)
    # scales decaying like 1/j over 2,000 coordinates: ε ≈ 2e-4 > MAX_SLACK on the outputs' own
    # coordinates (the rescaled shape, which would flatten them, is switched off here)
    monkeypatch.setattr(_certificate, "candidate_exponents", lambda var, rows: (0.0,))
    steep = certify_noise(_outputs(96, 2000, seed=96 * 2000, decay=1.0), mi_budget=0.5)
    assert steep.certificate.roundoff == 0.0 and isinstance(steep.basis, np.ndarray)
    red = _reduced.reduce_rows(low)
    b_c = _gram_lift.gram_lift(red.gram, red.lift[:, :2])
    assert b_c is not None
    b, c = b_c
    rows = _reduced._rows_along(red.gram, c)
    assert _gram_lift.lift_slack(red.gram, red.error, b, c, rows, np.array([1.0, 0.5]),
                                 0.1) == np.inf


def test_the_charge_scales_every_summand(monkeypatch):
    """The Gram route's plan equals the direct route's with every summand, range and trace
    multiplied by 1 + ε: forcing ε to 1e-3 raises the upper bound and the plug-in trace by
    exactly that factor."""
    x = _outputs(64, 400, seed=11)
    base = certify_noise(x, mi_budget=0.5)
    eps0 = base.certificate.roundoff
    monkeypatch.setattr(_reduced, "lift_slack", lambda *a, **k: 1e-3)
    monkeypatch.setattr(_reduced, "MAX_SLACK", 1.0)
    charged = certify_noise(x, mi_budget=0.5)
    assert charged.certificate.roundoff == pytest.approx(1e-3, rel=1e-12)
    ratio = (1 + 1e-3) / (1 + eps0)
    assert charged.certificate.plugin_trace == pytest.approx(
        base.certificate.plugin_trace * ratio, rel=1e-12)
    assert charged.certificate.mean_summand == pytest.approx(
        base.certificate.mean_summand * ratio, rel=1e-12)
    assert charged.certificate.upper_bound >= base.certificate.upper_bound * ratio * (1 - 1e-9)
