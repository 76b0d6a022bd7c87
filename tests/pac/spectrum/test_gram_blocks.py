"""The Gram path's block passes: exact against numpy, and bounded memory (issue 13 item 6)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from pacpriv.pac.spectrum._covariance import estimate_output_spectrum
from pacpriv.pac.spectrum._spectral import _back_project, _gram_pass


def _write(tmp_path, x, dtype):
    path = tmp_path / "outputs.bin"
    mm = np.memmap(path, dtype=dtype, mode="w+", shape=x.shape)
    mm[:] = x
    mm.flush()
    del mm
    return np.memmap(path, dtype=dtype, mode="r", shape=x.shape)


@pytest.mark.parametrize("source", ["array", "memmap32", "memmap64", "int", "view"])
@pytest.mark.parametrize("step", [1, 7, 64, 200])
def test_gram_pass_equals_numpy(tmp_path, source, step):
    """Gram, means and variances equal numpy's for every block width (uneven last block too)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(9, 5)) @ rng.normal(size=(5, 200)) * 10 + 1e3
    if source == "int":
        x = np.round(x).astype(np.int64)
    elif source == "memmap32":
        x = _write(tmp_path, x.astype(np.float32), np.float32)
    elif source == "memmap64":
        x = _write(tmp_path, x, np.float64)
    elif source == "view":
        x = _write(tmp_path, np.hstack([x, x]), np.float64)[:, ::2]
    ref = np.asarray(x, dtype=np.float64)
    xc = ref - ref.mean(axis=0)
    gram, mean, variances = _gram_pass(x, step)
    assert gram.flags.c_contiguous and np.array_equal(gram, gram.T)
    np.testing.assert_allclose(gram, xc @ xc.T, rtol=1e-11, atol=1e-9 * np.abs(xc).max() ** 2)
    np.testing.assert_allclose(mean, ref.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(variances, ref.var(axis=0, ddof=1), rtol=1e-10)
    coef = rng.normal(size=(9, 4))
    for dtype in (np.float64, np.float32):
        v = _back_project(x, mean, coef, step, np.dtype(dtype))
        assert v.dtype == dtype and v.shape == (200, 4)
        tol = 1e-12 if dtype == np.float64 else 1e-6
        np.testing.assert_allclose(v, xc.T @ coef, rtol=tol, atol=tol * np.abs(xc.T @ coef).max())


def test_non_finite_block_is_rejected(tmp_path):
    """A NaN in the last column block of a memmap is found."""
    x = np.ones((4, 30), dtype=np.float32)
    x[2, 29] = np.nan
    with pytest.raises(ValueError, match="must be finite"):
        _gram_pass(_write(tmp_path, x, np.float32), 8)


def test_gram_path_peak_memory_is_result_plus_one_block(tmp_path):
    """Traced peak = eigenvectors + mean/variances + O(one block): nothing of size d x k twice."""
    n, d, step = 40, 30_000, 500
    rng = np.random.default_rng(1)
    x = _write(tmp_path, rng.normal(size=(n, d)).astype(np.float32), np.float32)
    tracemalloc.start()
    try:
        spec = estimate_output_spectrum(x, block_size=step)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    result = spec.eigenvectors.nbytes + spec.mean.nbytes + spec.variances.nbytes
    block = n * step * (8 + 4) + step * (n - 1) * 8  # float64 + raw buffers, product buffer
    assert spec.n_components == n - 1
    assert peak <= result + 2 * block + 2 * n * n * 8 + 200_000, (peak, result)


class _Copied(np.ndarray):
    """An ndarray subclass: the pass reads its blocks through the copying reader."""


@pytest.mark.parametrize("step", [1, 7, 64, 200])
@pytest.mark.parametrize("head", [0, 3])
def test_direct_centring_is_the_copying_pass_bit_for_bit(step, head):
    """In-memory float64 outputs are centred straight into the buffer (no copy pass): the Gram,
    means, variances and head means equal the copying reader's bit for bit, and a non-finite
    value is still refused."""
    rng = np.random.default_rng(3)
    x = rng.poisson(0.5, size=(11, 200)).astype(np.float64) * 3.7 + 1e3
    x[:, 5] = 0.0
    results = []
    for source in (x, x.view(_Copied)):
        top = np.empty(x.shape[1]) if head else None
        gram, mean, variances = _gram_pass(source, step, head=(head, top) if head else None)
        results.append((gram, mean, variances, top))
    for a, b in zip(*results, strict=True):
        assert (a is None and b is None) or np.array_equal(a, b)
    bad = x.copy()
    bad[4, 150] = np.nan
    with pytest.raises(ValueError, match="finite"):
        _gram_pass(bad, step)
