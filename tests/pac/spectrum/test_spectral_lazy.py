"""Gram path at scale: the lazy eigenvector basis and the float32 Gram (issue 13 item 6)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from pacpriv.pac.bounds._mutual_info import gaussian_mi_bound_whitened
from pacpriv.pac.noise import Algorithm1
from pacpriv.pac.noise._calibration import calibrate_noise
from pacpriv.pac.noise._registry import SPECTRUM_RULES, shorthands
from pacpriv.pac.release import privatize
from pacpriv.pac.spectrum._covariance import estimate_output_spectrum
from pacpriv.pac.spectrum._eigenbasis import LazyEigenbasis
from pacpriv.pac.spectrum._spectral import (
    _double_centre,
    _gram_pass,
    _gram_pass32,
    float32_gram_error,
)

#: The plug-in spectrum rules usable by name (read from the registry).
RULES = tuple(n for n in SPECTRUM_RULES if n in shorthands())


def _outputs(n, d, rank, *, noise, seed, offset=2.0):
    rng = np.random.default_rng(seed)
    basis = rng.normal(size=(rank, d)) * np.geomspace(3, 0.3, rank)[:, None]
    x = rng.normal(size=(n, rank)) @ basis
    return x + noise * rng.normal(size=(n, d)) + offset


CASES = {
    "wide": dict(n=50, d=3000, rank=5, noise=0.1),  # d >> n, the sample fills n - 1 directions
    "rank-deficient": dict(n=50, d=3000, rank=5, noise=0.0),  # exactly rank 5
    "narrow": dict(n=60, d=40, rank=6, noise=0.05),  # d < n (Gram path forced)
}


def _pair(case, **kw):
    x = _outputs(**CASES[case], seed=3)
    dense = estimate_output_spectrum(x, method="gram", eigenvectors="dense", **kw)
    lazy = estimate_output_spectrum(x, method="gram", eigenvectors="lazy", **kw)
    return x, dense, lazy


@pytest.mark.parametrize("case", list(CASES))
def test_lazy_and_dense_spectra_agree(case):
    """Same eigenvalues, tail, rank; the lazy basis applied equals the formed matrix."""
    _, dense, lazy = _pair(case)
    assert isinstance(lazy.eigenvectors, LazyEigenbasis) and isinstance(dense.eigenvectors,
                                                                        np.ndarray)
    assert lazy.to_dict()["lazy_eigenvectors"] and not dense.to_dict()["lazy_eigenvectors"]
    np.testing.assert_array_equal(lazy.eigenvalues, dense.eigenvalues)
    assert (lazy.tail_variance, lazy.rank, lazy.unresolved_dim) == (
        dense.tail_variance, dense.rank, dense.unresolved_dim)
    d, k = dense.eigenvectors.shape
    assert lazy.eigenvectors.shape == (d, k)
    if case == "rank-deficient":
        assert k == lazy.rank == 5 and lazy.unresolved_dim == 0
    v = dense.eigenvectors
    np.testing.assert_allclose(np.asarray(lazy.eigenvectors), v, atol=1e-12)
    np.testing.assert_allclose(v.T @ v, np.eye(k), atol=1e-9)  # orthonormal
    rng = np.random.default_rng(0)
    z, y = rng.normal(size=k), rng.normal(size=d)
    np.testing.assert_allclose(lazy.eigenvectors.matvec(z), v @ z, atol=1e-11)
    np.testing.assert_allclose(lazy.eigenvectors.rmatvec(y), v.T @ y, atol=1e-11)
    rows = slice(3, min(d, 1700))
    np.testing.assert_allclose(lazy.eigenvectors[rows], v[rows], atol=1e-12)
    np.testing.assert_allclose(lazy.eigenvectors[rows, 1:3], v[rows, 1:3], atol=1e-12)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("rule", RULES)
def test_lazy_basis_gives_the_same_plan_and_noise(case, rule):
    """Same plan and, for a fixed seed, the same release (to round-off) as the formed basis."""
    x, dense, lazy = _pair(case)
    pd_, pl = (calibrate_noise(s, mi_budget=0.5, rule=rule) for s in (dense, lazy))
    assert pl.mi_bound == pytest.approx(pd_.mi_bound, rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(pl.noise_std, pd_.noise_std, rtol=1e-12)
    assert pl.residual_std == pytest.approx(pd_.residual_std, rel=1e-12)
    rd, rl = (privatize(x[0], p, rng=11) for p in (pd_, pl))
    np.testing.assert_allclose(rl, rd, rtol=1e-10, atol=1e-10 * np.abs(rd).max())


def test_algorithm1_and_whitened_bound_accept_the_lazy_basis():
    """Algorithm 1 and the coordinate-noise log-det bound read the lazy basis by row blocks."""
    _, dense, lazy = _pair("wide")
    kw = dict(mi_budget=0.5, rule=Algorithm1(c=1e-3, beta=0.25, output_bound=1e3))
    a, b = calibrate_noise(dense, **kw), calibrate_noise(lazy, **kw)
    assert b.mi_bound == pytest.approx(a.mi_bound, rel=1e-12)
    e = np.linspace(1.0, 2.0, dense.dim)
    got = gaussian_mi_bound_whitened(lazy.eigenvalues, lazy.eigenvectors, noise_variance=e)
    ref = gaussian_mi_bound_whitened(dense.eigenvalues, dense.eigenvectors, noise_variance=e)
    assert got == pytest.approx(ref, rel=1e-11)


def test_lazy_release_has_the_planned_covariance():
    """1000 lazy-basis draws: variances along the basis and in the complement are as planned."""
    _, dense, lazy = _pair("wide")
    plan = calibrate_noise(lazy, mi_budget=0.5, rule="anisotropic")
    rng = np.random.default_rng(5)
    draws = np.stack([plan.sample(rng) for _ in range(1000)])
    v = dense.eigenvectors
    coef = draws @ v
    np.testing.assert_allclose(coef.var(axis=0), plan.noise_variance, rtol=0.25)
    resid = draws - coef @ v.T
    per_dir = np.sum(resid**2, axis=1).mean() / (plan.dim - v.shape[1])
    assert per_dir == pytest.approx(plan.residual_variance, rel=0.01)
    assert np.abs(draws.mean(axis=0)).max() < 6 * np.sqrt(np.max(draws.var(axis=0)) / 1000)


def test_lazy_spectrum_memory_holds_no_d_by_k_matrix(tmp_path):
    """From a float32 memmap, the lazy Gram path never allocates the (d, k) eigenvectors."""
    n, d, step = 40, 30_000, 500
    path = tmp_path / "out.f32"
    _outputs(n, d, 4, noise=0.1, seed=1).astype(np.float32).tofile(path)
    x = np.memmap(path, dtype=np.float32, mode="r", shape=(n, d))
    tracemalloc.start()
    try:
        spec = estimate_output_spectrum(x, block_size=step, eigenvectors="lazy")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    k = spec.n_components
    assert k == n - 1 and isinstance(spec.eigenvectors, LazyEigenbasis)
    assert peak < d * k * 4 / 2, peak  # half of even the float32 eigenvectors


@pytest.mark.parametrize("dtype", [np.float32, ">f4", np.float64])
@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_float32_gram_error_bound_holds(tmp_path, offset, dtype):
    """The a priori bound covers the float32 Gram's actual error; statistics stay float64.

    Offset 0: blocks enter the product uncentred; 1e3: shifted by their float32 means (narrow
    outputs), or centred in float64 (float64 outputs). Both from a memmap and in memory.
    """
    x = _outputs(30, 4000, 4, noise=0.3, seed=7, offset=offset).astype(dtype)
    path = tmp_path / "x.bin"
    x.tofile(path)
    sources = (x, np.memmap(path, dtype=dtype, mode="r", shape=x.shape))
    ref = np.asarray(x, dtype=np.float64)
    for src, step in zip(sources, (64, 4000), strict=True):
        g32, mean32, var32, energy = _gram_pass32(src, step)
        g64, mean64, var64 = _gram_pass(ref, step)
        np.testing.assert_allclose(mean32, mean64, rtol=1e-14, atol=1e-12)
        np.testing.assert_allclose(var32, var64, rtol=1e-11)
        n = x.shape[0]
        centred = (n - 1) * float(np.sum(var64))
        assert centred * (1 - 1e-9) <= energy <= 2.0 * centred
        _double_centre(g32)
        err = np.linalg.norm(g32 - g64, 2) / (n - 1)
        bound = float32_gram_error(energy / (n - 1), step)
        assert 0 < err <= bound
        assert bound == pytest.approx((step + 5) * 2**-24 * energy / (n - 1), rel=1e-3)


def test_float32_gram_pass_rejects_non_finite(tmp_path):
    """A NaN or inf in a float32 block is found from the block's float64 sums."""
    for bad in (np.nan, np.inf):
        x = np.ones((4, 30), dtype=np.float32)
        x[2, 29] = bad
        with pytest.raises(ValueError, match="must be finite"):
            _gram_pass32(x, 8)


def test_float32_gram_spectrum_is_on_the_safe_side():
    """float32 Gram: held eigenvalues >= the float64 sample eigenvalues; complement gets tr Σ̂."""
    x = _outputs(50, 3000, 5, noise=0.0, seed=3).astype(np.float32)
    ref = estimate_output_spectrum(x, gram_dtype=np.float64, eigenvectors="dense")
    got = estimate_output_spectrum(x, gram_dtype=np.float32, eigenvectors="lazy")
    assert got.gram_dtype == "float32" and ref.gram_dtype == "float64"
    assert ref.rounding == 0.0 and got.rounding > 0
    assert got.resolution >= got.rounding
    raw = ref.eigenvalues - ref.resolution  # the float64 sample eigenvalues
    k = got.n_components
    assert k == 5
    assert np.all(got.eigenvalues >= raw[:k])  # ρ covers the float32 error (Weyl)
    np.testing.assert_allclose(got.eigenvalues - got.resolution, raw[:k], rtol=1e-5)
    assert np.all(got.eigenvalues - raw[:k] >= 0.99 * got.rounding)
    # the float32 Gram cannot show that directions were left unexplored: trace charged
    assert got.unresolved_dim == 3000 - got.rank and got.tail_variance >= got.total_variance
    assert ref.unresolved_dim == 0 and ref.tail_variance < 1e-6 * ref.total_variance
    for rule in ("anisotropic", "exact-mi"):
        assert calibrate_noise(got, mi_budget=0.5, rule=rule).expected_noise_power >= \
            calibrate_noise(ref, mi_budget=0.5, rule=rule).expected_noise_power


def test_gram_dtype_and_basis_defaults_and_errors(tmp_path):
    """Small problems keep float64 and the formed basis; bad options are refused by name."""
    x = _outputs(20, 200, 3, noise=0.1, seed=2).astype(np.float32)
    spec = estimate_output_spectrum(x)
    assert spec.gram_dtype == "float64" and isinstance(spec.eigenvectors, np.ndarray)
    assert estimate_output_spectrum(x.astype(float), method="dense").gram_dtype is None
    with pytest.raises(ValueError, match="`eigenvectors` must be one of"):
        estimate_output_spectrum(x, eigenvectors="sparse")
    with pytest.raises(ValueError, match="`gram_dtype` must be None, float32 or float64"):
        estimate_output_spectrum(x, gram_dtype=np.float16)
    with pytest.raises(TypeError, match="`gram_dtype`"):
        estimate_output_spectrum(x, gram_dtype="not-a-dtype")
