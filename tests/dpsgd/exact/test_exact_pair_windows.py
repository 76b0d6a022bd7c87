"""Issue 32 item 5: the geometric pair sum's long runs as window sums (dyadic tables).

The far pairs of a pair sum on the geometric grid (``d ≥ d_split``, runs of one offset at
least ``_MIN_RUN`` long) are summed as windows instead of FIR dot products. Checked against a
brute-force long-double reference with exact split weights (independent of ``_kernel``):

* lower chain: every entry within :func:`kernel_roundoff` of the reference (relative);
* upper chain: the mass, the mean and the stop-loss transform ``E[(X − t)_+]`` at every node
  within :func:`kernel_roundoff` per unit value, the measure ``combine`` charges to ``q_inf``
  (so the computed law plus its charge dominates the exact split's law in the
  increasing-convex order);
* the window sums themselves against exact rationals, and whole evaluations against the
  former all-FIR path.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacpriv.dpsgd import exact_membership_inference_accuracy
from pacpriv.dpsgd._exact import geometric as _geo
from pacpriv.dpsgd._exact import windows as _win

_LD = np.longdouble


def _reference(a: np.ndarray, b: np.ndarray, g: float, upper: bool) -> np.ndarray:
    """All pairs, both operand orders, exact (long-double) offsets and split weights."""
    n = a.size
    g_ld = _LD(g)
    out = np.zeros(n + int(math.log(2.0) / g) + 4, dtype=_LD)
    a_ld, b_ld = a.astype(_LD), b.astype(_LD)
    for d in range(n):
        i = np.arange(d, n)
        w = a_ld[i] * b_ld[i - d]
        if d > 0:
            w = w + b_ld[i] * a_ld[i - d]
        val = np.log1p(np.exp(-d * g_ld)) / g_ld
        if not upper:
            np.add.at(out, i + int(np.rint(val)), w)
            continue
        kap = int(np.floor(val))
        beta = (np.exp(-d * g_ld) - np.expm1(kap * g_ld)) / (np.exp(kap * g_ld) * np.expm1(g_ld))
        beta = min(max(beta, _LD(0)), _LD(1))
        np.add.at(out, i + kap, (1 - beta) * w)
        np.add.at(out, i + kap + 1, beta * w)
    return out


def _operands(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    # masses over 15 orders of magnitude, as in a heavy-tailed block law
    return 10.0 ** rng.uniform(-15, 0, n), 10.0 ** rng.uniform(-15, 0, n)


@pytest.mark.parametrize("c", [64.0, 160.0])
def test_lower_pair_sum_with_window_runs_is_within_kernel_roundoff(c):
    kern = _geo._kernel(1.0 / c, False)
    n = 900
    assert kern.ranges and kern.ranges[0][1] < n  # the window path runs
    a, b = _operands(n, 3)
    got = _geo._pair_sum(a, b, kern, mirror=True)
    ref = _reference(a, b, 1.0 / c, False)[: got.size]
    bound = _geo.kernel_roundoff(kern, n, np.float64)
    err = np.abs(got.astype(_LD) - ref)
    assert np.all(err <= bound * ref)
    assert float(np.max(err / np.where(ref > 0, ref, 1))) > 1e-17  # a real comparison
    # a run's window sum errs by O(log L)·u, less than its FIR dot product (L terms)
    longest = max(r[2] - r[1] + 1 for r in kern.ranges)
    assert kern.win_units <= 2 * kern.p_max + 2 < longest


def _stop_loss(p: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``Σ_j p_j (x_j − x_m)_+`` at every node ``m`` (long double)."""
    px = np.cumsum((p * x)[::-1])[::-1]
    pm = np.cumsum(p[::-1])[::-1]
    above_px = np.append(px[1:], 0)
    above_p = np.append(pm[1:], 0)
    return above_px - x * above_p


@pytest.mark.parametrize("c", [64.0, 160.0])
@pytest.mark.parametrize("seed", [1, 2])
def test_upper_pair_sum_with_window_runs_dominates_within_kernel_roundoff(c, seed):
    kern = _geo._kernel(1.0 / c, True)
    n = 900
    assert kern.ranges and kern.ranges[0][1] < n
    a, b = _operands(n, seed)
    got = _geo._pair_sum(a, b, kern, mirror=True).astype(_LD)
    ref = _reference(a, b, 1.0 / c, True)[: got.size]
    bound = _geo.kernel_roundoff(kern, n, np.float64)
    x = np.exp(np.arange(got.size, dtype=_LD) / _LD(c))
    mean = float(np.dot(ref, x))
    assert abs(float(got.sum() - ref.sum())) <= bound * float(ref.sum())
    assert abs(float(np.dot(got, x)) - mean) <= bound * mean
    gap = np.asarray(_stop_loss(got, x) - _stop_loss(ref, x), dtype=np.float64)
    # what combine charges (3.01·r per unit value) covers the deficit at every threshold
    assert np.all(gap >= -bound * mean)
    assert float(np.max(np.abs(gap))) <= bound * mean
    assert float(np.max(np.abs(gap))) > 0.0  # a real comparison


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1e3) | st.floats(min_value=1e-200,
                                                                      max_value=1e-150),
                min_size=1, max_size=70),
       st.integers(min_value=0, max_value=40), st.integers(min_value=1, max_value=40))
def test_window_sums_match_exact_rationals(vals, d_lo, length):
    s = np.array(vals, dtype=np.float64)
    n = s.size
    d_lo = min(d_lo, n - 1)
    d_hi = d_lo + length - 1
    p_max = max(length.bit_length() - 1, 0)
    pad = 1 << (p_max + 1)
    g = 1.0 / 16.0
    t, te = _win.tables(s, pad, p_max, g)
    m, e = _win.window_sums(t, te, pad, d_lo, d_hi, n, g)
    assert e is not None
    e_units = _win.exp_sum_error(length, p_max) + 4.0  # + the float64 factors (exp)
    for i in range(d_lo, n):
        terms = [(d, s[i - d]) for d in range(d_lo, d_hi + 1) if i - d >= 0]
        exact_m = sum((Fraction(float(v)) for _, v in terms), Fraction(0))
        exact_e = sum((Fraction(math.exp(-(d - d_lo) * g)) * Fraction(float(v))
                       for d, v in terms), Fraction(0))
        assert abs(Fraction(float(m[i - d_lo])) - exact_m) <= \
            Fraction(_win.sum_error(length, p_max) * 2.0**-53) * exact_m
        # exp(-k g) itself is within 2u of e^{-kg}: compare with the float64 weights
        assert abs(Fraction(float(e[i - d_lo])) - exact_e) <= Fraction(e_units * 2.0**-53) * \
            exact_e


@pytest.mark.parametrize("sigma, m, e", [(0.58, 10_000, 1000), (0.5, 1000, 10),
                                         (0.7, 1000, 1000)])
def test_evaluations_agree_with_the_fir_path(monkeypatch, sigma, m, e):
    """Both paths are certified: their intervals overlap and have about the same width."""
    new = exact_membership_inference_accuracy(sigma, steps_per_epoch=m, epochs=e,
                                              progress=False)
    assert new.details["method"] == "geometric"
    monkeypatch.setattr(_geo, "_MIN_RUN", 10**9)  # part of the kernel cache's key
    assert not _geo._kernel(1.0 / 64, True).ranges
    old = exact_membership_inference_accuracy(sigma, steps_per_epoch=m, epochs=e,
                                              progress=False)
    assert max(new.lower, old.lower) <= min(new.upper, old.upper)
    assert new.upper - new.lower <= 1.05 * (old.upper - old.lower) + 1e-9
    assert new.upper - new.lower <= 1e-4


@pytest.mark.parametrize("dtype", [np.float64, np.longdouble])
@pytest.mark.parametrize("epochs", [65, 1000, 10**5])
def test_power_skips_only_coefficients_that_underflow_to_zero(dtype, epochs):
    """``_power`` evaluates the phases of the live coefficients only: the same array, bit for
    bit, as the formula on every coefficient."""
    from scipy import fft as sp_fft

    from pacpriv.dpsgd._exact import composition as _comp

    rng = np.random.default_rng(epochs)
    w = rng.random(3000).astype(dtype)
    w /= w.sum()
    w[:5] = 0.0
    lo, hi = -10 * epochs, -10 * epochs + 200_000
    got = _comp._power(w, -10, epochs, lo, hi)
    n = sp_fft.next_fast_len(hi - lo + 1, real=True)
    spec = sp_fft.rfft(w, n)
    mag = np.abs(spec)
    ok = mag > 0
    logmag = np.log(np.where(ok, mag, 1.0))
    phase = np.mod(epochs * np.angle(spec), 2.0 * np.pi)
    full = sp_fft.irfft(np.where(ok, np.exp(epochs * logmag) * np.exp(1j * phase), 0.0), n)
    want = full[(np.arange(lo, hi + 1) + 10 * epochs) % n]
    assert got.dtype == want.dtype and np.array_equal(got, want)
    if epochs * 4.3 > -float(np.log(np.finfo(dtype).smallest_subnormal)):  # some skipped
        assert np.count_nonzero(np.exp(epochs * logmag) == 0) > 0


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("c", [24.0, 160.0])
def test_self_pair_sum_doubles_the_off_diagonal_within_kernel_roundoff(upper, c):
    """``x ⊕ x`` (the same array twice): ``2·(d ≥ 1) + (d = 0)``, against the reference and
    against the two-order path on a copy."""
    kern = _geo._kernel(1.0 / c, upper)
    n = 900
    a, _ = _operands(n, 5)
    got = _geo._pair_sum(a, a, kern, mirror=True).astype(_LD)
    two = _geo._pair_sum(a, a.copy(), kern, mirror=True).astype(_LD)
    ref = _reference(a, a, 1.0 / c, upper)[: got.size]
    bound = _geo.kernel_roundoff(kern, n, np.float64)
    if upper:
        x = np.exp(np.arange(got.size, dtype=_LD) / _LD(c))
        mean = float(np.dot(ref, x))
        for arr in (got, two):
            gap = np.asarray(_stop_loss(arr, x) - _stop_loss(ref, x), dtype=np.float64)
            assert np.all(np.abs(gap) <= bound * mean)
            assert abs(float(arr.sum() - ref.sum())) <= bound * float(ref.sum())
    else:
        for arr in (got, two):
            assert np.all(np.abs(arr - ref) <= bound * ref)
    assert kern.row0 and abs(sum(w for _, w in kern.row0) - 1.0) < 1e-12  # the d = 0 pairs
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(two, np.float64),
                               rtol=1e-12, atol=1e-300)
