"""Issue 13 item 1 at large M: the hybrid grid (geometric below, linear on top) and the
geometric grid refined towards the top levels.

Each ingredient is checked against an independent computation: the exact embedding of a
refined grid, the increasing-convex order (stop-loss transforms) and garbling of the
conversion to the linear lattice, overlap with the other discretisations where they all
run, and the former warning cells of the corner grid under ``-W error``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from pacpriv.dpsgd import exact as exact_mod
from pacpriv.dpsgd import exact_membership_inference_accuracy
from pacpriv.dpsgd._exact import geometric as _geo
from pacpriv.dpsgd._exact import hybrid as _hybrid

from ._memory_cap import assert_runs_under_memory_cap


def _exact(sigma, m, e, **kw):
    kw.setdefault("progress", False)
    return exact_membership_inference_accuracy(sigma, steps_per_epoch=m, epochs=e, **kw)


def _block(sigma, steps, levels, upper, c=256.0):
    cur, _, _, _ = _geo.geo_blocks(sigma, steps, 100, c=c, upper=upper, tail=1e-6,
                                          levels=levels)
    return cur


def _stop_loss(values, p, q_inf, ts):
    """E[(X − t)_+] of the likelihood ratio under P (plus the +∞ atom's Q-mass)."""
    return np.array([float(np.dot(np.maximum(values - t, 0.0), p)) + q_inf for t in ts])


def test_refine_is_an_exact_embedding():
    x = _block(0.5, 2**10, 4, upper=True, c=64.0)
    y = _geo.refine(x, 4)
    assert y is not None
    nz = y.p > 0
    assert np.array_equal(y.p[::4], x.p) and np.count_nonzero(y.p) == np.count_nonzero(x.p)
    np.testing.assert_allclose(y.lr()[nz], x.lr()[x.p > 0], rtol=1e-13)
    assert y.q_inf == x.q_inf and y.m == x.m
    assert _geo.refine(None, 2) is None and _geo.refine(x, 1) is x


def test_refinement_schedule_keeps_integer_ratios():
    for c in (40.0, 128.0, 500.0, 3517.6):
        c0, j = _geo.refinement_schedule(20, c)
        assert c0 * 2**j == pytest.approx(c)
        assert c0 >= min(c, _geo.GEO_C_MIN) - 1e-9
        assert j <= 19 // _geo.GEO_REFINE_EVERY


@pytest.mark.parametrize("sigma", [0.5, 1.0])
def test_upper_conversion_is_an_icx_increase(sigma):
    """Stop-loss transforms of the block's likelihood ratio can only grow (Blackwell)."""
    steps = 2**18
    x = _block(sigma, steps, 8, upper=True)
    s = 1.0 / sigma
    sd_w = math.sqrt(math.expm1(s * s))
    h = _hybrid._step(x.m, 2.0 * sd_w, 40.0)
    lat = _hybrid.geo_to_linear(x, h=h, s_cap=steps * 3.0, upper=True)
    lr_geo = x.lr()
    lr_lin = lat.lr()
    ts = np.quantile(lr_geo[x.p > 0], np.linspace(0.0, 1.0, 25))
    before = _stop_loss(lr_geo, x.p / x.p.sum(), x.q_inf, ts)
    after = _stop_loss(lr_lin, lat.p / lat.p.sum(), lat.q_inf, ts)
    assert np.all(after >= before * (1 - 1e-12))
    # and it stays close (second order in the step): the mean moves by round-off only
    assert abs(float(np.dot(lr_lin, lat.p)) - float(np.dot(lr_geo, x.p))) < 1e-9
    assert lat.q_inf - x.q_inf < 1e-9


def test_lower_conversion_is_a_garbling():
    """Merging nodes keeps both total masses and can only lower the total variation."""
    steps = 2**18
    x = _block(0.5, steps, 8, upper=False)
    h = _hybrid._step(x.m, 2.0 * math.sqrt(math.expm1(4.0)), 40.0)
    lat = _hybrid.geo_to_linear(x, h=h, s_cap=steps * 3.0, upper=False)
    assert lat.q is not None and x.q is not None
    assert float(lat.p.sum()) == pytest.approx(float(x.p.sum()), rel=1e-13)
    assert float(lat.q.sum()) == pytest.approx(float(x.q.sum()), rel=1e-13)
    tv_before = float(np.sum(np.abs(x.q - x.p)))
    tv_after = float(np.sum(np.abs(lat.q - lat.p)))
    assert tv_after <= tv_before * (1 + 1e-12)
    assert lat.kappa >= x.kappa


def test_switch_level_respects_the_direct_convolution_limit():
    kw = {"c": 40.0, "top_q": 1e-12, "max_points": 2**20}
    level = _hybrid.switch_level(1.0, 10**8, epochs=10**6, **kw)
    assert 0 < level < 26
    # a tighter lattice limit can only delay the switch
    assert _hybrid.switch_level(1.0, 10**8, epochs=10**6, **{**kw, "max_points": 2**12}) >= level
    # few epochs: an FFT's l1 round-off times 2E·M/m is affordable, so it may switch earlier
    assert _hybrid.switch_level(1.0, 10**8, epochs=1, **kw) <= level
    # heavier tails switch later (the single-coordinate Q-quantile widens the lattice)
    assert _hybrid.switch_level(0.5, 10**8, epochs=10**6, **kw) > level


@pytest.mark.parametrize("case", [(1.0, 2**17, 100), (0.7, 2**17, 1000)])
def test_hybrid_overlaps_the_linear_and_geometric_grids(case):
    """Three discretisations of the same pair: every two certified intervals intersect."""
    runs = {}
    for method, c in (("linear", 40.0), ("geometric", 160.0), ("hybrid", 40.0)):
        runs[method] = exact_mod._numeric_once(
            *case, c=c, c_epoch=40.0, extra=0.0, direction="add", method=method,
            tail=1e-6, tol=1e-4, tick=None,
        )
    for a in runs.values():
        for b in runs.values():
            assert a["tv_lower_numerical"] <= b["tv_upper_numerical"]
    hyb = runs["hybrid"]
    assert hyb["tv_upper_numerical"] - hyb["tv_lower_numerical"] < 4e-4


@pytest.mark.parametrize("case", [(0.5, 10**8, 100), (1.0, 10**8, 10**6), (0.5, 10**7, 10**4)])
def test_former_warning_cells_converge(case):
    """Corner cells that warned (certified but wider than 1e-4) now meet the tolerance."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = _exact(*case)
    assert 0.5 <= res.lower <= res.upper <= 1.0
    assert res.width <= 1e-4
    assert res.details["method"] == "hybrid"
    # near-Gaussian regime: Φ(sqrt(E·ln(1 + χ²))/2), up to a small skew correction
    sigma, m, e = case
    mu = math.sqrt(e * math.log1p(math.expm1(1.0 / sigma**2) / m))
    assert abs(res.estimate - norm.cdf(mu / 2)) < 2e-3


def test_lighter_tails_at_the_largest_corner_fit_2_gib():
    """(1.7, 1e8, 1e6) took 3.6 GB and missed the tolerance on the linear lattice alone."""
    assert_runs_under_memory_cap([(1.7, 10**8, 10**6)], max_width=1e-4)
