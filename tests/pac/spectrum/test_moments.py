"""Tests for pacpriv.pac.spectrum._moments (streaming mean / variance, Chan et al. merge)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacpriv.pac.noise._calibration import calibrate_noise, calibrate_variance_only
from pacpriv.pac.spectrum._covariance import estimate_output_spectrum
from pacpriv.pac.spectrum._moments import streaming_moments


@settings(max_examples=50, deadline=None)
@given(n=st.integers(2, 40), d=st.integers(1, 5), chunk=st.integers(1, 50), seed=st.integers(0, 99))
def test_matches_numpy_any_chunking(n, d, chunk, seed):
    """Blockwise merge equals numpy mean / var(ddof=1) for every chunk size."""
    x = np.random.default_rng(seed).normal(1e3, 1.0, size=(n, d))
    m = streaming_moments(x, chunk_size=chunk)
    assert np.allclose(m.mean, x.mean(0), rtol=1e-13)
    assert np.allclose(m.variances, x.var(0, ddof=1), rtol=1e-9)
    assert m.n_trials == n and m.dim == d


def test_iterable_of_chunks_and_memmap(tmp_path):
    """A generator of uneven chunks and a memmap give the same moments as the array."""
    x = np.random.default_rng(1).normal(size=(23, 4))
    chunks = (x[i : i + 5] for i in range(0, 23, 5))
    a = streaming_moments(chunks)
    mm = np.memmap(tmp_path / "m.dat", dtype=np.float64, mode="w+", shape=x.shape)
    mm[:] = x
    b = streaming_moments(mm, chunk_size=4)
    for m in (a, b):
        assert np.allclose(m.variances, x.var(0, ddof=1)) and np.allclose(m.mean, x.mean(0))
    assert streaming_moments([[0.0, 1.0], [2.0, 1.0]]).variances.tolist() == [2.0, 0.0]


def test_does_not_modify_input():
    """The caller's float64 array is not centred in place."""
    x = np.arange(12.0).reshape(4, 3)
    before = x.copy()
    streaming_moments(x, chunk_size=2)
    assert np.array_equal(x, before)


def test_variance_only_from_streaming_equals_spectrum_rule():
    """Variance-only plan from streamed variances equals the spectrum-based one."""
    x = np.random.default_rng(2).normal(size=(30, 6)) * np.arange(1, 7)
    a = calibrate_variance_only(streaming_moments(x, chunk_size=7).variances, mi_budget=0.3)
    b = calibrate_noise(estimate_output_spectrum(x), mi_budget=0.3, rule="variance-only")
    assert np.allclose(a.noise_std, b.noise_std)


def test_memory_is_o_d(tmp_path):
    """10 000 x 500 memmap in 50-row blocks: peak traced memory far below the 40 MB matrix."""
    n, d = 10_000, 500
    mm = np.memmap(tmp_path / "tall.dat", dtype=np.float64, mode="w+", shape=(n, d))
    mm[:] = 1.0
    mm[::2] = 3.0
    mm.flush()
    tracemalloc.start()
    try:
        m = streaming_moments(mm, chunk_size=50)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.allclose(m.variances, np.var([1.0, 3.0] * (n // 2), ddof=1))
    assert peak < 2e6, peak


def test_to_dict():
    """to_dict summarises without arrays."""
    d = streaming_moments(np.array([[0.0, 1.0], [2.0, 1.0]])).to_dict()
    assert d == {"n_trials": 2, "dim": 2, "total_variance": 2.0, "max_variance": 2.0,
                 "n_constant_coordinates": 1}


def test_error_too_few_rows():
    """At least two rows in total."""
    with pytest.raises(ValueError, match="at least 2 trials"):
        streaming_moments(np.ones((1, 3)))


def test_error_not_2d():
    """A 1-D array is rejected."""
    with pytest.raises(ValueError, match=r"must be 2-D \(n_trials, d\)"):
        streaming_moments(np.ones(3))


def test_error_chunk_width():
    """Chunks with different d are rejected."""
    with pytest.raises(ValueError, match="same number of columns"):
        streaming_moments([np.ones((2, 3)), np.ones((2, 4))])


def test_error_non_finite():
    """NaN in a chunk is rejected."""
    with pytest.raises(ValueError, match="must be finite"):
        streaming_moments(np.array([[1.0], [np.nan]]))


def test_error_chunk_size():
    """chunk_size must be >= 1."""
    with pytest.raises(ValueError, match="`chunk_size` must be an integer in"):
        streaming_moments(np.ones((3, 3)), chunk_size=0)


def test_error_dtype():
    """Boolean data are a TypeError."""
    with pytest.raises(TypeError, match="must hold real numbers"):
        streaming_moments(np.ones((3, 3), dtype=bool))
