"""Issue 13 item 1: round-off bounds derived from the computation actually run.

At (σ, M, E) = (0.5, 1e7, 1e6) the interval used to stop at 1.7e-4 with a warning: three
worst-case round-off allowances, each multiplied by E = 1e6, made up most of its width:

* the geometric grid's pair sums were charged ``(D + 2c + 16)·u`` per combine (``D ≈ c ln c``
  terms), although each output is a dot product of at most ``taps_max ≈ 1.1c`` terms whose
  sums over columns and tail split now run in long double (:func:`_geo.kernel_roundoff`);
* the single coordinate was charged ``8·n·u`` for its mean, a BLAS dot product of ``n``
  terms, now summed in long double (:func:`_pld.dot_lower`, :func:`_pld.dot_upper`);
* the binning into the log lattice was charged ``4·n·u`` for ``n`` lattice nodes, although a
  label's sequential sum holds only the nodes it receives (``binning_err``).

Each bound is checked here against an independent computation (exact rationals, or a
brute-force long-double reference), and the cell itself against its former width.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacpriv.dpsgd import exact as exact_mod
from pacpriv.dpsgd import exact_membership_inference_accuracy
from pacpriv.dpsgd._exact import composition as _comp
from pacpriv.dpsgd._exact import geometric as _geo
from pacpriv.dpsgd._exact import hybrid as _hybrid
from pacpriv.dpsgd._exact import lattice as _pld

_U = 2.0**-53


def _reference_pair_sum(a, b, g, upper, d_max=None):
    """Brute force over all pairs (both operand orders), sums in long double.

    Independent of ``_kernel``. The split weights are exact (long double) unless ``d_max`` is
    given: then pairs at distance ``d ≤ d_max`` use the kernel's float64 formula, so that the
    entries differ from the computed ones by the arithmetic's round-off only.
    """
    n = a.size
    ld = np.longdouble
    g_ld = ld(g)
    out = np.zeros(n + int(math.log(2.0) / g) + 4, dtype=ld)
    for i in range(n):
        for j in range(n):
            big, small = max(i, j), min(i, j)
            w = ld(a[i]) * ld(b[j])
            if w == 0:
                continue
            d = big - small
            if not upper:
                out[big + int(np.rint(np.log1p(np.exp(-d * g_ld)) / g_ld))] += w
                continue
            if d_max is not None and d <= d_max:
                kap = math.floor(math.log1p(math.exp(-d * g)) / g)
                e64 = math.exp(kap * g)
                b64 = min(max((1.0 + math.exp(-d * g) - e64) / (e64 * math.expm1(g)), 0.0), 1.0)
                lo_w, hi_w = ld(1.0 - b64), ld(b64)
            else:
                kap = int(np.floor(np.log1p(np.exp(-d * g_ld)) / g_ld))
                # (e^{-dg} − (e^{κg} − 1)) / (e^{κg}(e^g − 1)): no cancellation at κ = 0
                beta = (np.exp(-d * g_ld) - np.expm1(kap * g_ld)) / (
                    np.exp(kap * g_ld) * np.expm1(g_ld))
                hi_w = min(max(beta, ld(0)), ld(1))
                lo_w = 1 - hi_w
            out[big + kap] += lo_w * w
            out[big + kap + 1] += hi_w * w
    return out


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("c", [8.0, 24.0])
def test_pair_sum_error_is_within_kernel_roundoff(upper, c):
    rng = np.random.default_rng(7)
    n = 160
    # masses over 12 orders of magnitude, as in a heavy-tailed block law
    a = 10.0 ** rng.uniform(-12, 0, n)
    b = 10.0 ** rng.uniform(-12, 0, n)
    kern = _geo._kernel(1.0 / c, upper)
    got = _geo._pair_sum(a, b, kern, mirror=True)
    ref = _reference_pair_sum(a, b, 1.0 / c, upper, d_max=kern.d_max)[: got.size]
    bound = _geo.kernel_roundoff(kern, n, np.float64)
    err = np.abs(got.astype(np.longdouble) - ref)
    if upper:
        # the tail split cum − geo to offsets 0/1 errs relative to the mass it splits, which
        # lies in the entry and its neighbours (lower chain: no subtraction, entrywise)
        pad = np.concatenate(([0], ref, [0]))
        scale = pad[:-2] + 2 * ref + pad[2:]
    else:
        scale = ref
    assert np.all(err <= bound * scale)
    assert float(np.max(err / np.where(ref > 0, ref, 1))) > 1e-17  # a real comparison
    # the float64 split weights (absolute error ~4u/g) move mass between neighbours only:
    # the mean shifts by a few u, which the stop-loss slack charged per combine covers
    exact = _reference_pair_sum(a, b, 1.0 / c, upper)[: got.size]
    x = np.exp(np.arange(got.size, dtype=np.longdouble) / c)
    shift = abs(float(np.dot(x, got.astype(np.longdouble)) / np.dot(x, exact) - 1))
    assert shift <= 8.0 * _U + bound
    # and the bound is the derived one, far below the former (D + 2c + 16)·u
    assert bound < (kern.d_max + 2.0 * c + 16.0) * _U


def test_kernel_roundoff_grows_like_c_not_c_log_c():
    for c in (128.0, 1024.0, 4096.0):
        kern = _geo._kernel(1.0 / c, True)
        bound = _geo.kernel_roundoff(kern, 30_000, np.float64)
        # longest dot product ~1.1c terms, the rest in long double
        assert bound <= (1.2 * c + 60.0) * _U
        assert bound < 0.25 * (kern.d_max + 2.0 * c + 16.0) * _U


_masses = st.lists(
    st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)
    | st.floats(min_value=1e-300, max_value=1e-200),
    min_size=1, max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(_masses, st.randoms(use_true_random=False))
def test_dot_bounds_bracket_the_exact_value(v, rnd):
    w = [rnd.uniform(0.0, 2.0) * x for x in reversed(v)]
    exact = sum((Fraction(x) * Fraction(y) for x, y in zip(v, w, strict=True)), Fraction(0))
    va, wa = np.array(v), np.array(w)
    assert Fraction(_pld.dot_lower(va, wa)) <= exact <= Fraction(_pld.dot_upper(va, wa))


def test_coordinate_mean_no_longer_costs_n_u():
    # the single coordinate at (0.5, 1e7): ~9.8e3 nodes; its slack used to include 8·n·u
    sigma, steps, epochs = 0.5, 10**7, 10**6
    k_lo, k_hi, g = _geo.geo_grid(sigma, steps, epochs, 178.4, 1e-6)
    x = _geo._coordinate(1.0 / sigma, steps, g, k_lo, k_hi, True)
    assert x.p.size > 9000
    assert x.slack < 8.0 * x.p.size * _U  # the former size term alone
    # the computed q_inf keeps the mean likelihood ratio at least 1 (exact rational check)
    nodes = np.exp((k_lo + np.arange(x.p.size)) * g) * steps
    mean = sum((Fraction(float(s)) * Fraction(float(t)) for s, t in zip(nodes, x.p, strict=True)),
               Fraction(0))
    assert Fraction(x.q_inf) - Fraction(x.slack) >= 1 - mean


@pytest.mark.parametrize("upper", [True, False])
def test_binning_error_covers_a_long_double_recomputation(upper):
    sigma, steps = 1.5, 2**12
    h = _pld.lattice_base(sigma, steps) / 40.0
    s = 1.0 / sigma
    k = math.ceil(math.exp(0.5 * s * s + 7.0 * s) / h)
    j0 = min(math.floor(math.exp(-0.5 * s * s - 9.0 * s) / h), k - 4)
    lat = _pld._coordinate(s, h, j0, k, upper, steps)
    # five self-combinations: 113,633 masses, nine times the log lattice's ~12,000 bins (a
    # sixth doubled the size at four times the O(n²) direct convolution's cost: 3/4 of the
    # test's time, for the same check)
    for _ in range(5):
        lat = _pld._combine_direct(lat, lat)
    assert lat.p.size > 100_000
    pair = _comp.to_log_lattice(lat, delta=1e-3, ln_range=60.0, upper=upper)
    assert 0.0 < pair.binning_err < 4.0 * lat.p.size * _U / 10.0
    # reference: the same label assignment, summed with np.add.at in long double
    lr = lat.lr()
    ld = np.longdouble
    if upper:
        pos = lr > 0
        lrp, pp = lr[pos], lat.p[pos]
        t_lo, t_hi = math.exp(pair.a0 * 1e-3), math.exp((pair.a0 + pair.p.size - 1) * 1e-3)
        mid = (lrp >= t_lo) & (lrp <= t_hi)
        a = np.clip(np.floor(np.log(lrp[mid]) / 1e-3).astype(np.int64), pair.a0,
                    pair.a0 + pair.p.size - 2)
        t_a = np.exp(a * 1e-3)
        beta = np.clip((lrp[mid] - t_a) / (t_a * math.expm1(1e-3)), 0.0, 1.0)
        ref = np.zeros(pair.p.size, dtype=ld)
        np.add.at(ref, a - pair.a0, (1 - beta.astype(ld)) * pp[mid].astype(ld))
        np.add.at(ref, a + 1 - pair.a0, beta.astype(ld) * pp[mid].astype(ld))
        below = lrp < t_lo
        ref[0] += np.sum((lrp[below] / t_lo).astype(ld) * pp[below].astype(ld))
        ref[-1] += np.sum(pp[lrp > t_hi].astype(ld))
        total = ref.sum() + np.sum(lat.p[~pos].astype(ld)) + np.sum(
            ((1 - lrp[below] / t_lo) * pp[below]).astype(ld))
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.log(lat.q / lat.p)
        a_hi = pair.a0 + pair.p.size - 1
        r = np.nan_to_num(np.where(np.isnan(r), 0.0, r) / 1e-3, posinf=a_hi, neginf=pair.a0)
        a = np.clip(np.floor(r), pair.a0, a_hi).astype(np.int64)
        ref = np.zeros(pair.p.size, dtype=ld)
        np.add.at(ref, a - pair.a0, lat.p.astype(ld))
        total = ref.sum()
    ref = ref / total
    l1 = float(np.sum(np.abs(pair.p.astype(ld) - ref)))
    assert l1 <= pair.binning_err


def test_upper_chain_slack_at_the_former_warning_cell():
    # (0.5, 1e7, 1e6) at c = 100: E·slack was 6.7e-5 of TV from the geometric levels alone
    sigma, steps, epochs = 0.5, 10**7, 10**6
    tail = 1e-6
    lat = _hybrid.epoch_hybrid(
        sigma, steps, epochs, c=100.0, max_points=exact_mod._HYBRID_MAX_POINTS, upper=True,
        tail=tail, t_top=exact_mod._t_top(sigma, steps, epochs, 0.0, tail),
        top_q=max(1e-14, tail / (epochs * 2 * (exact_mod._levels(steps) + 1))),
        extended=True, tol=1e-4, min_dln=0.0,
    )
    assert epochs * lat.slack < 2e-5


@pytest.mark.slow
def test_former_warning_cell_converges():
    # (0.5, 1e7, 1e6): 1.71e-4 wide with a PacprivWarning after ~3 min of CPU; now ~7.5e-5
    # in about a minute. The chi-square bound is 1 here.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = exact_membership_inference_accuracy(0.5, steps_per_epoch=10**7, epochs=10**6,
                                                progress=False)
    assert r.converged and r.width <= 1e-4
    assert 0.87 < r.lower <= r.upper < 0.88
