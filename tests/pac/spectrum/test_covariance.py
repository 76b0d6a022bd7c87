"""Tests for pacpriv.pac.spectrum._covariance (output spectrum: dense and Gram paths)."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest

from pacpriv.exceptions import ConstantOutputWarning, DegenerateOutputWarning
from pacpriv.pac.spectrum._covariance import (
    OutputSpectrum,
    estimate_output_spectrum,
    spectrum_from_covariance,
)


def _low_rank(n, d, rank, seed=0, noise=0.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, rank)) @ rng.normal(size=(rank, d)) + 3.0
    return x + noise * rng.normal(size=(n, d))


def _projector(spec, k):
    v = np.asarray(spec.eigenvectors[:, :k], dtype=np.float64)
    return v @ v.T


def test_dense_matches_numpy_cov():
    """Dense eigenvalues, variances and mean equal numpy's ddof=1 covariance."""
    x = _low_rank(40, 6, 6, noise=0.1)
    spec = estimate_output_spectrum(x)
    assert spec.method == "dense"
    cov = np.cov(x.T)
    assert np.allclose(spec.eigenvalues, np.linalg.eigvalsh(cov)[::-1], rtol=1e-12, atol=1e-12)
    assert np.allclose(spec.variances, x.var(axis=0, ddof=1))
    assert np.allclose(spec.mean, x.mean(axis=0))
    assert spec.total_variance == pytest.approx(np.trace(cov))
    v = spec.eigenvectors
    assert np.allclose(v @ np.diag(spec.eigenvalues) @ v.T, cov, atol=1e-12)


@pytest.mark.parametrize(("n", "d"), [(12, 30), (30, 12)])
def test_gram_equals_dense(n, d):
    """Gram and dense paths agree on eigenvalues and on the eigenprojector (not signs)."""
    x = _low_rank(n, d, 5, seed=1)
    dense = estimate_output_spectrum(x, method="dense")
    gram = estimate_output_spectrum(x, method="gram")
    assert gram.method == "gram"
    k = gram.n_components
    assert k == 5 == gram.rank == dense.rank
    assert np.allclose(gram.eigenvalues, dense.eigenvalues[:k], rtol=1e-10)
    assert np.allclose(_projector(gram, k), _projector(dense, k), atol=1e-10)
    assert np.allclose(gram.variances, dense.variances)
    # rank 5 < n - 1: the complement is resolved (zero up to round-off) and sits at the
    # resolution eps * lambda_max * max(n, d), never at 0
    assert gram.unresolved_dim == 0 and gram.resolution > 0
    assert gram.tail_variance == pytest.approx((d - k) * gram.resolution, rel=1e-12)


def test_auto_uses_gram_when_wide_and_is_orthonormal():
    """d > n_trials selects the Gram path; its eigenvectors are orthonormal."""
    x = _low_rank(20, 200, 19, seed=2, noise=0.5)
    spec = estimate_output_spectrum(x)
    assert spec.method == "gram"
    v = spec.eigenvectors
    assert v.shape == (200, spec.n_components)
    assert np.allclose(v.T @ v, np.eye(v.shape[1]), atol=1e-10)
    assert np.sum(spec.eigenvalues) == pytest.approx(spec.total_variance, rel=1e-10)


def test_block_size_does_not_change_result():
    """Tiny blocks (rows and columns) give the same spectrum as one block."""
    x = _low_rank(15, 40, 4, seed=3)
    a = estimate_output_spectrum(x, method="gram")
    b = estimate_output_spectrum(x, method="gram", block_size=3)
    assert np.allclose(a.eigenvalues, b.eigenvalues, rtol=1e-12)
    c = estimate_output_spectrum(x[:, :10], method="dense", block_size=2)
    assert np.allclose(c.eigenvalues, estimate_output_spectrum(x[:, :10]).eigenvalues)


def test_memmap_input(tmp_path):
    """An np.memmap gives the same spectrum as the in-memory array."""
    x = _low_rank(10, 50, 3, seed=4)
    mm = np.memmap(tmp_path / "out.dat", dtype=np.float64, mode="w+", shape=x.shape)
    mm[:] = x
    mm.flush()
    ro = np.memmap(tmp_path / "out.dat", dtype=np.float64, mode="r", shape=x.shape)
    a, b = estimate_output_spectrum(x), estimate_output_spectrum(ro, block_size=7)
    assert np.allclose(a.eigenvalues, b.eigenvalues, rtol=1e-12)


def test_memmap_offset_byteorder_and_view(tmp_path):
    """A memmap with a header offset and big-endian float32 (and a view of it) reads correctly."""
    x = _low_rank(12, 40, 4, seed=10).astype(">f4")
    path = tmp_path / "hdr.dat"
    with open(path, "wb") as fh:
        fh.write(b"\0" * 24)
        x.tofile(fh)
    mm = np.memmap(path, dtype=">f4", mode="r", offset=24, shape=x.shape)
    ref = estimate_output_spectrum(x.astype(np.float64))
    got = estimate_output_spectrum(mm, block_size=7)
    assert np.allclose(got.eigenvalues, ref.eigenvalues, rtol=1e-10)
    assert np.allclose(got.mean, ref.mean)
    view = estimate_output_spectrum(mm[2:], block_size=7)
    assert np.allclose(view.eigenvalues, estimate_output_spectrum(
        x[2:].astype(np.float64)).eigenvalues, rtol=1e-10)


def test_float32_outputs_give_float32_eigenvectors():
    """float32 outputs keep float32 eigenvectors by default; eigenvalues stay float64."""
    x = _low_rank(10, 50, 3, seed=5).astype(np.float32)
    spec = estimate_output_spectrum(x)
    assert spec.eigenvectors.dtype == np.float32
    assert spec.eigenvalues.dtype == np.float64
    ref = estimate_output_spectrum(x.astype(np.float64))
    assert np.allclose(spec.eigenvalues, ref.eigenvalues, rtol=1e-10)
    assert estimate_output_spectrum(x, eigenvector_dtype=np.float64).eigenvectors.dtype == float


@pytest.mark.parametrize("method", ["dense", "gram"])
def test_n_components_tail(method):
    """Truncation keeps the top eigenpairs and puts the rest in tail_variance."""
    x = _low_rank(25, 20, 8, seed=6)
    full = estimate_output_spectrum(x, method=method)
    part = estimate_output_spectrum(x, method=method, n_components=3)
    assert part.n_components == 3
    assert np.allclose(part.eigenvalues, full.eigenvalues[:3])
    assert part.tail_variance == pytest.approx(np.sum(full.eigenvalues[3:]), rel=1e-10)
    assert part.rank == full.rank == 8


def test_constant_outputs_warn():
    """Constant outputs warn and give an all-zero spectrum."""
    x = np.tile([1.0, 2.0, 3.0], (5, 1))
    with pytest.warns(ConstantOutputWarning, match="did not vary"):
        spec = estimate_output_spectrum(x)
    assert spec.rank == 0 and spec.total_variance == 0.0
    assert np.all(spec.eigenvalues == 0)
    with pytest.warns(ConstantOutputWarning):
        gram = estimate_output_spectrum(np.ones((3, 10)))
    assert gram.n_components == 0 and gram.eigenvectors.shape == (10, 0)


def test_to_dict_is_json():
    """to_dict is JSON-serialisable and omits the big arrays."""
    spec = estimate_output_spectrum(_low_rank(10, 30, 4, seed=7))
    d = spec.to_dict()
    json.dumps(d)
    assert d["dim"] == 30 and d["rank"] == 4 and len(d["top_eigenvalues"]) == 4
    assert 1.0 <= d["effective_rank"] <= 4.0
    assert isinstance(spec, OutputSpectrum) and spec.eigenvalues.flags.writeable is False


def test_spectrum_from_covariance():
    """A known Σ round-trips through its spectrum."""
    rng = np.random.default_rng(8)
    a = rng.normal(size=(5, 5))
    cov = a @ a.T
    spec = spectrum_from_covariance(cov, mean=np.ones(5))
    v = spec.eigenvectors
    assert np.allclose(v @ np.diag(spec.eigenvalues) @ v.T, cov)
    assert spec.method == "covariance" and spec.n_trials is None
    assert np.all(np.diff(spec.eigenvalues) <= 0)


def test_roundoff_negative_clipped_silently():
    """A round-off negative eigenvalue is zeroed without a warning (filterwarnings=error)."""
    spec = spectrum_from_covariance(np.diag([1.0, -1e-17]))
    assert spec.eigenvalues[1] == 0.0  # treated as an exactly constant coordinate
    assert 1.0 < spec.eigenvalues[0] <= 1.0 + 4 * np.finfo(float).eps  # + resolution


def test_material_negative_warns():
    """A small but material negative eigenvalue is clipped with a DegenerateOutputWarning."""
    with pytest.warns(DegenerateOutputWarning, match="clipped 1 negative eigenvalue"):
        spec = spectrum_from_covariance(np.diag([1.0, -1e-8]))
    assert spec.eigenvalues[1] == 0.0
    assert 1.0 < spec.eigenvalues[0] <= 1.0 + 4 * np.finfo(float).eps


def test_clearly_negative_raises():
    """A clearly negative eigenvalue means Σ is not PSD."""
    with pytest.raises(ValueError, match="clearly negative eigenvalue"):
        spectrum_from_covariance(np.diag([1.0, -0.1]))


@pytest.mark.parametrize(
    ("bad", "exc", "match"),
    [
        (np.ones(5), ValueError, r"must be 2-D \(n_trials, d\)"),
        (np.ones((1, 5)), ValueError, "at least 2 trials"),
        (np.ones((3, 0)), ValueError, "at least one column"),
        (np.array([[1.0, np.nan], [2.0, 3.0]]), ValueError, "must be finite"),
        (np.array([[1.0, np.inf], [2.0, 3.0]] * 2).T, ValueError, "must be finite"),
        (np.ones((3, 2), dtype=bool), TypeError, "must hold real numbers"),
        (np.ones((3, 2), dtype=complex), TypeError, "must hold real numbers"),
    ],
)
def test_outputs_validation(bad, exc, match):
    """Each invalid outputs array raises with a message naming the problem."""
    with pytest.raises(exc, match=match):
        estimate_output_spectrum(bad)


def test_option_validation():
    """Invalid method, n_components, block_size and eigenvector_dtype are rejected."""
    x = np.arange(12.0).reshape(4, 3) ** 2
    with pytest.raises(ValueError, match="`method` must be one of"):
        estimate_output_spectrum(x, method="svd")
    with pytest.raises(ValueError, match="`n_components` must be an integer in"):
        estimate_output_spectrum(x, n_components=0)
    with pytest.raises(ValueError, match="`block_size` must be an integer in"):
        estimate_output_spectrum(x, block_size=0)
    with pytest.raises(ValueError, match="`eigenvector_dtype` must be float32 or float64"):
        estimate_output_spectrum(x, eigenvector_dtype=np.int64)


def test_covariance_validation():
    """spectrum_from_covariance rejects non-square, asymmetric, non-finite and bad means."""
    with pytest.raises(ValueError, match="must be a square"):
        spectrum_from_covariance(np.ones((2, 3)))
    with pytest.raises(ValueError, match="must be symmetric"):
        spectrum_from_covariance(np.array([[1.0, 0.5], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="`cov` must be finite"):
        spectrum_from_covariance(np.array([[1.0, np.nan], [np.nan, 1.0]]))
    with pytest.raises(ValueError, match="`mean` must be a finite array of shape"):
        spectrum_from_covariance(np.eye(2), mean=np.ones(3))
    with pytest.raises(TypeError, match="`cov` must hold real numbers"):
        spectrum_from_covariance(np.eye(2, dtype=bool))


def test_gram_memory_no_dxd(tmp_path):
    """d = 20 000, n = 50 from a memmap: peak traced memory < 50 MB (d x d would be 3.2 GB)."""
    n, d = 50, 20_000
    rng = np.random.default_rng(9)
    path = tmp_path / "wide.dat"
    mm = np.memmap(path, dtype=np.float64, mode="w+", shape=(n, d))
    mm[:] = rng.normal(size=(n, 5)) @ rng.normal(size=(5, d)) + 0.1 * rng.normal(size=(n, d))
    mm.flush()
    del mm
    outputs = np.memmap(path, dtype=np.float64, mode="r", shape=(n, d))
    tracemalloc.start()
    try:
        spec = estimate_output_spectrum(outputs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert spec.method == "gram" and spec.n_components == n - 1
    assert peak < 50e6, f"peak traced memory {peak / 1e6:.1f} MB"


def test_an_indefinite_computed_covariance_is_called_a_numerical_failure():
    """From simulated outputs a covariance cannot be indefinite: under ``ulimit -v`` the BLAS
    returned one and the user read "it is not positive semidefinite" (seventh new-user pass,
    #573); a covariance given by the caller keeps the plain words."""
    from pacpriv.pac.spectrum._spectral import clip_eigenvalues

    lam = np.array([1.97, 0.5, -1.69])
    with pytest.raises(ValueError, match=r"computed from the simulated outputs .* a numerical "
                       "failure of the linear algebra") as info:
        clip_eigenvalues(lam, size=3, eps=1e-16)
    assert "nothing was calibrated or released" in str(info.value)
    with pytest.raises(ValueError, match="it is not positive semidefinite"):
        clip_eigenvalues(lam, size=3, eps=1e-16, computed=False)
