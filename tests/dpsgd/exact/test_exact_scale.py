"""Issue 13 items 1-2 at large M and E: derived round-off bounds, former warning cells, memory.

The round-off of the exact interval is no longer an l1 error multiplied by M (the doubling
levels) and E (the epochs): the upper chain turns it into Q-mass at +inf (``q_inf``, a
stop-loss slack), the lower chain into a scale κ of the likelihood ratios (relative errors).
These tests check the ingredients against independent computations (mpmath, adversarial
perturbations of the size the bounds allow) and the end-to-end cells that used to warn.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import special
from scipy.stats import norm

from pacpriv.dpsgd import exact_membership_inference_accuracy
from pacpriv.dpsgd._exact import composition as _comp
from pacpriv.dpsgd._exact import lattice as _pld
from pacpriv.dpsgd._exact.lattice import cell_masses_bounded

from ._memory_cap import assert_runs_under_memory_cap

_U = 2.0**-53


def _exact(sigma, m, e, **kw):
    kw.setdefault("progress", False)
    return exact_membership_inference_accuracy(sigma, steps_per_epoch=m, epochs=e, **kw)


def test_ndtr_error_model_against_mpmath():
    """scipy's Φ(−|z|) is within half the stated model (16 + 4z²)u (mpmath, 50 digits)."""
    mp.mp.dps = 50
    z = -np.concatenate((np.linspace(0.0, 37.5, 1500), [11.169115915105053, 17.556777458530924]))
    got = special.ndtr(z)
    worst = 0.0
    for zi, gi in zip(z, got, strict=True):
        t = mp.ncdf(mp.mpf(float(zi)))
        rel = float(abs(mp.mpf(float(gi)) - t) / t) / _U
        worst = max(worst, rel / (_pld._NDTR_C0 + _pld._NDTR_C2 * zi * zi))
    assert worst <= 0.5


@pytest.mark.parametrize("sigma", [0.05, 0.7, 2.0])
def test_cell_mass_error_bounds_cover_mpmath(sigma):
    """Per-cell P/Q mass errors (partition of the computed P-side z edges) are within bounds."""
    mp.mp.dps = 50
    s = 1.0 / sigma
    edges = np.concatenate(([0.0], np.arange(1, 120) * 0.05, np.geomspace(6.05, 1e6, 120),
                            [np.inf]))
    pc, qc, ep, eq = cell_masses_bounded(edges, s)
    with np.errstate(divide="ignore"):
        zp = (np.log(edges) + 0.5 * s * s) / s

    def sf(z, shift):  # P(N(shift, 1) > z), in the survival form (no cancellation)
        if z == np.inf:
            return mp.mpf(0)
        if z == -np.inf:
            return mp.mpf(1)
        return mp.ncdf(-(mp.mpf(float(z)) - shift))

    ratio = 0.0
    for k in range(pc.size):
        tp = sf(zp[k], 0) - sf(zp[k + 1], 0)
        tq = sf(zp[k], mp.mpf(s)) - sf(zp[k + 1], mp.mpf(s))
        ratio = max(ratio, float(abs(pc[k] - tp) / ep[k]), float(abs(qc[k] - tq) / eq[k]))
    assert ratio <= 1.0
    assert ratio > 1e-3  # the bounds are not vacuous


def _stop_loss(values, masses, t):
    return np.array([float(np.sum(masses * np.maximum(values - ti, 0.0))) for ti in t])


def test_upper_combine_slack_covers_adversarial_fft_error(monkeypatch):
    """Upper chain: an FFT error as large as the bound allows is covered by the q_inf slack.

    The exact block sum of two blocks (direct convolution, exact to ~1e-16 relative) is
    compared with the block computed from a convolution perturbed by an error of l2 norm
    equal to :func:`fft_conv_error_l2`, concentrated where it hurts the stop-loss transform
    most (mass moved from the top of the lattice to the bottom). The certified block must
    dominate: ``E[(S − t)_+] + m·q_inf ≥`` the exact one for every ``t``.
    """
    rng = np.random.default_rng(0)
    p = rng.random(400) ** 6
    p /= p.sum()
    h = 0.05
    a = _pld._Lattice(0, h, p, None, 0.0, 4, 0.0, 64)
    a = _pld._normalise(a)
    exact = np.convolve(p, p)
    bound = _pld.fft_conv_error_l2(p, p)

    def bad_conv(x, y):
        out = np.convolve(x, y)
        delta = np.zeros_like(out)
        k = 20  # move mass down: -e/sqrt(2k) at the top k nodes, +e/sqrt(2k) at the bottom k
        delta[-k:] = -bound / math.sqrt(2 * k)
        delta[:k] = bound / math.sqrt(2 * k)
        return np.maximum(out + delta, 0.0)

    monkeypatch.setattr(_pld, "_conv", bad_conv)
    b = _pld._combine(a, a)
    s_vals = (b.n0 + np.arange(b.p.size)) * h
    t = np.linspace(0.0, s_vals[-1], 200)
    got = _stop_loss(s_vals, b.p / b.p.sum(), t) + b.m * b.q_inf
    ref = _stop_loss(s_vals[: exact.size], exact, t) + b.m * a.q_inf
    assert np.all(got >= ref - 1e-18)
    assert b.slack > 0


def test_lower_kappa_covers_adversarial_relative_error():
    """Lower chain: relative errors r of masses and conditional means are covered by κ.

    With every mass and Q-mass perturbed by a factor in [1 − r, 1 + r] (signs chosen to
    push the law up), the stored law scaled by (1 − κ), κ = 4.01 r, is below the exact one in
    the increasing convex order: its stop-loss transform is at most the exact one.
    """
    rng = np.random.default_rng(1)
    p = rng.random(300) ** 4
    p /= p.sum()
    lr = np.sort(rng.gamma(0.5, 2.0, 300))
    q = lr * p
    r = 1e-6
    p_hat = p * (1 - r * (lr > np.median(lr))) * (1 + r * (lr <= np.median(lr)))
    q_hat = q * (1 + r)
    kappa = 4.01 * r
    x_hat = (1 - kappa) * q_hat / p_hat
    t = np.linspace(0.0, lr[-1] * 1.1, 400)
    got = _stop_loss(x_hat, p_hat / p_hat.sum(), t)
    ref = _stop_loss(lr, p, t)
    assert np.all(got <= ref + 1e-15)


def test_float64_bounds_bracket_long_double():
    """The float64 chains (slack / κ) bracket the long-double ones (independent round-off)."""
    from pacpriv.dpsgd import exact as ex

    sigma, m, e = 1.0, 1000, 100
    tail = 1e-6
    t_top = ex._t_top(sigma, m, e, 0.0, tail)
    res = {}
    for upper in (True, False):
        for extended in (False, True):
            pair, _, eps, kappa, _, _ = ex._epoch_pair(
                sigma, m, e, c=40.0, c_epoch=40.0, method="linear", tail=tail, t_top=t_top,
                upper=upper, delta=2e-3, label_range=None, extended=extended, tick=None)
            tv, werr, rnd = _comp.compose_tv(pair, e, direction="add", tau=1e-15)
            slack = rnd + 2.0 * e * eps + e * kappa + werr
            res[upper, extended] = (tv + slack, tv - slack) if upper else (tv - slack, tv + slack)
    assert res[True, False][0] >= res[True, True][1]
    assert res[False, False][0] <= res[False, True][1]


def test_large_steps_gaussian_regime_value():
    """M = 1e6, E = 1e4, σ = 2: the per-epoch loss is nearly Gaussian with variance
    ln(1 + χ²); the accuracy is Φ(sqrt(E ln(1 + χ²))/2) up to a small skew correction."""
    res = _exact(2.0, 10**6, 10**4)
    mu = math.sqrt(10**4 * math.log1p(math.expm1(0.25) / 10**6))
    assert abs(res.estimate - norm.cdf(mu / 2)) < 2e-4
    assert res.width <= 1e-4


@pytest.mark.slow
def test_monotone_in_epochs_and_sigma_at_large_e():
    """E ↑ ⇒ accuracy ↑ and σ ↑ ⇒ accuracy ↓, beyond the interval widths (M = 1e4)."""
    base = _exact(1.0, 10**4, 10**4)
    more_e = _exact(1.0, 10**4, 10**5)
    more_s = _exact(1.3, 10**4, 10**4)
    assert more_e.lower > base.upper
    assert more_s.upper < base.lower




@pytest.mark.slow
def test_memory_cap_corner_cells():
    """Corner cells (M up to 1e8, E up to 1e5) run under a 2 GiB address-space cap."""
    cases = [(0.2, 10**8, 100), (4.0, 10**8, 10**4), (1.0, 10**7, 10**4), (1.0, 10, 10**5)]
    assert_runs_under_memory_cap(cases, max_width=1e-4)
