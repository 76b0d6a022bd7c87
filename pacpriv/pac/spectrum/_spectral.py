"""Block algorithms behind :func:`pacpriv.pac.spectrum.estimate_output_spectrum`.

Private. Two paths, both reading the ``(n_trials, d)`` output matrix in blocks so that an
``np.memmap`` is never loaded whole:

* dense (``d <= n_trials``): streaming mean, then ``Σ = Σ_blocks Bc^T Bc / (n-1)`` over row
  blocks (a ``d x d`` matrix, small in this regime), then ``eigh``;
* Gram (``d > n_trials``): one pass over *column* blocks accumulates the ``n x n`` Gram matrix
  ``G = Xc Xc^T / (n-1)`` (its nonzero eigenvalues are those of ``Σ``), the mean and the
  variances; the eigenvectors are ``V = Xc^T U / sqrt((n-1) λ)``: either formed by a second
  pass, column block by column block (peak memory the ``(d, k)`` matrix plus one block), or
  kept lazy (:class:`pacpriv.pac.spectrum._eigenbasis.LazyEigenbasis`, only the ``(n, k)``
  coefficients). No ``d x d`` matrix is formed.

The Gram product may run in float32 (``ssyrk``, twice the speed of ``dsyrk``) for float32
outputs; means, variances, the centring and the sum over blocks stay float64, and the
float32 round-off is bounded a priori by :func:`float32_gram_error` (Higham, *Accuracy and
Stability of Numerical Algorithms*, 2nd ed., 2002, §3.1, eq. (3.5): ``|fl(xᵀy) − xᵀy| <=
γ_m |x|ᵀ|y|``, ``γ_m = m u / (1 − m u)``).
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import warnings

import numpy as np

from pacpriv.exceptions import DegenerateOutputWarning
from pacpriv.pac.spectrum._moments import (
    BLOCK_BYTES,
    iter_row_blocks,
    release_mapped_pages,
    streaming_moments,
)

#: Eigenpairs of the Gram matrix below this fraction of the largest are not turned into
#: eigenvectors (their ``Xc^T u / sqrt(λ)`` loses orthogonality); their mass is kept as
#: ``tail_variance`` and covered by the calibration's complement noise.
GRAM_RELATIVE_CUTOFF = float(np.sqrt(np.finfo(np.float64).eps))

#: A negative eigenvalue below ``-max(SIGNIFICANT_NEGATIVE_RATIO * max|λ|, tol)`` is an error.
SIGNIFICANT_NEGATIVE_RATIO = 1e-5


def clip_eigenvalues(eigenvalues: np.ndarray, *, size: int, eps: float, stacklevel: int = 4,
                     floor: float = 0.0, computed: bool = True):
    """Zero round-off eigenvalues (as sklearn's ``_check_psd_eigenvalues``); raise if clearly < 0.

    ``tol = max(eps * max|λ| * size, floor)`` (``floor``: an absolute bound on the round-off of
    the matrix, e.g. :func:`float32_gram_error`). Values in ``[-tol, tol]`` are round-off and
    set to 0 silently;
    negatives below ``-tol`` but above ``-max(1e-5 max|λ|, tol)`` are clipped with a
    :class:`DegenerateOutputWarning`; anything more negative raises ``ValueError``. With
    ``computed`` (the matrix was computed here from simulated outputs, which cannot give an
    indefinite covariance) the error says it is a numerical failure of the linear algebra.
    """
    lam = np.array(eigenvalues, dtype=np.float64)
    if lam.size == 0:
        return lam
    scale = float(np.max(np.abs(lam)))
    tol = max(eps * scale * size, floor)
    lowest = float(np.min(lam))
    if lowest < -max(SIGNIFICANT_NEGATIVE_RATIO * scale, tol):
        if computed:  # seventh new-user pass, #573: under `ulimit -v`, with no other word
            raise ValueError(
                f"the covariance computed from the simulated outputs has a clearly negative "
                f"eigenvalue {lowest:.6g} (largest magnitude {scale:.6g}), which a covariance "
                "of outputs cannot have: a numerical failure of the linear algebra (e.g. the "
                "BLAS library short of memory under a memory limit such as ulimit -v); "
                "nothing was calibrated or released: rerun with more memory or fewer trials "
                "or output coordinates.")
        raise ValueError(
            f"the covariance has a clearly negative eigenvalue {lowest:.6g} (largest magnitude "
            f"{scale:.6g}); it is not positive semidefinite."
        )
    if lowest < -tol:
        warnings.warn(
            f"clipped {int(np.sum(lam < -tol))} negative eigenvalue(s) down to {lowest:.3g} "
            f"(largest {scale:.3g}) to zero; the covariance is numerically degenerate.",
            DegenerateOutputWarning,
            stacklevel=stacklevel,
        )
    lam[lam <= tol] = 0.0
    return lam


def _cols_per_block(n_trials: int, block_size: int | None) -> int:
    if block_size is not None:
        return block_size
    return max(1, BLOCK_BYTES // (8 * n_trials))


def _file_backed(outputs: np.ndarray):
    """``(path, offset)`` of a whole C-ordered ``np.memmap`` (not a view), else None."""
    if (
        isinstance(outputs, np.memmap)
        and isinstance(outputs.base, mmap.mmap)
        and outputs.flags.c_contiguous
        and outputs.filename
        and os.path.isfile(outputs.filename)
    ):
        return outputs.filename, int(outputs.offset)
    return None


def _check_finite(values: np.ndarray) -> None:
    if not np.isfinite(values).all():
        raise ValueError("`outputs` must be finite; found NaN or inf.")


class _ColumnBlocks:
    """Read float64 column blocks ``outputs[:, cols]``, validated finite, into reused buffers.

    A column block of a row-major memmap touches every row; the kernel then maps far more of
    the file than the block (large folios / fault-around), so the resident set of a single
    block can approach the whole file. For a whole C-ordered memmap the rows' segments are
    therefore read with ``os.preadv`` (page cache only, nothing mapped); other arrays are sliced.
    The raw, float64 and float32 buffers (one block each, made on first use) are reused, so a
    pass over the matrix allocates nothing per block; each read overwrites the previous block.
    ``scale`` (shape (d,), positive): :meth:`read` gives ``outputs[:, cols] / scale[cols]``
    instead, the same float64 values as the block of ``np.divide(outputs, scale,
    dtype=np.float64)`` (one correctly rounded division each) without that copy.
    """

    def __init__(self, outputs: np.ndarray, step: int, scale: np.ndarray | None = None) -> None:
        self.outputs = outputs
        self.scale = scale
        self.source = _file_backed(outputs)
        self.fd = None if self.source is None else os.open(self.source[0], os.O_RDONLY)
        n = outputs.shape[0]
        self.size = n * step
        self.work: np.ndarray | None = None  # float64 buffer of read, made on first use
        self.raw = None if self.fd is None else np.empty(n * step, dtype=outputs.dtype)
        self.single: np.ndarray | None = None  # float32 buffer of read32, made on first use

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)

    def _pread(self, cols: slice) -> np.ndarray:
        """The raw block (the file's dtype) read row by row with ``os.preadv``."""
        n, d = self.outputs.shape
        width = cols.stop - cols.start
        assert self.fd is not None and self.raw is not None  # set for file-backed outputs
        raw = self.raw[: n * width].reshape(n, width)
        item = self.outputs.dtype.itemsize
        row_bytes = width * item
        view = memoryview(raw.reshape(-1)).cast("B")  # type: ignore[arg-type]
        offset = self.source[1] + cols.start * item
        stride = d * item
        for i in range(n):
            got = os.preadv(self.fd, [view[i * row_bytes : (i + 1) * row_bytes]],
                            offset + i * stride)
            if got != row_bytes:
                raise OSError(f"short read from {self.source[0]!r}: {got} of "
                              f"{row_bytes} bytes")
        return raw

    def _fill(self, block: np.ndarray, cols: slice) -> np.ndarray:
        """Copy ``outputs[:, cols]`` into ``block`` (converting its dtype)."""
        if self.fd is None:
            np.copyto(block, self.outputs[:, cols], casting="unsafe")
            release_mapped_pages(self.outputs)
        else:
            np.copyto(block, self._pread(cols), casting="unsafe")
        return block

    def buffer(self, cols: slice) -> np.ndarray:
        """The reused float64 buffer shaped as the block ``outputs[:, cols]`` (contents
        unspecified)."""
        if self.work is None:
            self.work = np.empty(self.size)
        return self.work[: self.outputs.shape[0] * (cols.stop - cols.start)].reshape(
            self.outputs.shape[0], -1)

    def read(self, cols: slice, *, check: bool = True) -> np.ndarray:
        """The float64 block ``outputs[:, cols]``; ``check=False`` leaves the finiteness check
        to the caller (e.g. on the block's column sums, which are finite iff the block is)."""
        block = self._fill(self.buffer(cols), cols)
        if self.scale is not None:
            np.divide(block, self.scale[cols], out=block)
        if check:
            _check_finite(block)
        return block

    def read32(self, cols: slice) -> np.ndarray:
        """The block as native float32 (exact: for float32-or-narrower floating outputs only),
        in a reused buffer owned by the reader; not checked for finiteness."""
        assert self.scale is None  # (a rescaled block is float64: read it with read())
        if self.fd is not None and self.outputs.dtype == np.dtype(np.float32):
            return self._pread(cols)
        if self.single is None:
            self.single = np.empty(self.size, dtype=np.float32)
        n = self.outputs.shape[0]
        return self._fill(self.single[: n * (cols.stop - cols.start)].reshape(n, -1), cols)


def float32_gram_error(energy: float, width: int) -> float:
    """A priori bound on ``||Ĝ − G||₂`` for the float32 Gram of :func:`_gram_pass32`.

    ``energy`` is ``Σ_i ||x_i − c||² / (n − 1)`` over the rows as they entered the product
    (each block shifted by its mean, or by 0 when its offset is small: then ``energy <= 2 tr
    Σ̂``); ``width`` the block width. A shifted entry is exact or rounded once to float32
    (relative error ``<= u``, ``u = 2⁻²⁴``), then ``ssyrk`` sums ``width`` products in float32
    and rounds: per entry ``|E_ij| <= (γ_{width+1} + 2u + u²) Σ_c |x̃_ic||x̃_jc|`` (Higham 2002,
    eq. (3.5)); the float64 sum over blocks adds ``O(2⁻⁵³)`` relative. So ``||E||₂ <= ||E||_F
    <= (γ + 2u + u²) Σ_i ||x̃_i||²``, and after the ``1/(n−1)`` scaling ``(γ_{width+2} + 3u) ·
    energy`` (``+1e-6`` relative for the float64 terms). The shifts themselves cost nothing:
    the double centring ``C Ĝ C`` removes any ``1 cᵀ`` term exactly and ``||C E C|| <= ||E||``.
    Weyl's inequality turns the bound into one on every eigenvalue. It is a worst case: typical
    errors are several orders of magnitude smaller.
    """
    u = float(np.finfo(np.float32).eps) / 2.0
    m = width + 2
    gamma = m * u / (1.0 - m * u)
    return (gamma + 3.0 * u) * (1.0 + 1e-6) * float(energy)


def _gram_pass(outputs: np.ndarray, step: int, scale: np.ndarray | None = None,
               head: tuple[int, np.ndarray] | None = None, *, variances: bool = True):
    """One pass over column blocks: Gram ``Xc Xc^T`` (unscaled), column means, variances.

    ``dsyrk`` accumulates each centred block into the upper triangle of one Fortran-ordered
    ``n x n`` float64 matrix in place (no per-block ``n x n`` temporary); mirrored at the end.
    ``scale``: the pass is over ``outputs / scale`` (column-wise, each block divided as it is
    read; :class:`_ColumnBlocks`), bit for bit the pass over that float64 copy, without it.
    ``head = (rows, out)``: also the float64 column means of the first ``rows`` rows into
    ``out`` (d,), from the same blocks (as ``np.mean(block[:rows], axis=0)``).
    ``variances=False``: the third result is None (no sums of squares: one product less per
    block; the Gram and the means are the same numbers).
    """
    from scipy.linalg.blas import dsyrk

    n, d = outputs.shape
    gram = np.zeros((n, n), order="F")
    mean = np.empty(d)
    m2 = np.empty(d) if variances else None
    # in-memory float64 outputs: each block is centred straight from the outputs into the
    # buffer (one copy pass less; the same sums in the same order, so the same numbers)
    direct = scale is None and type(outputs) is np.ndarray and outputs.dtype == np.float64
    with _ColumnBlocks(outputs, step, scale) as reader:
        for start in range(0, d, step):
            cols = slice(start, min(start + step, d))
            source = outputs[:, cols] if direct else reader.read(cols, check=False)
            if head is not None:
                np.add.reduce(source[: head[0]], axis=0, out=head[1][cols])
            block = reader.buffer(cols) if direct else source
            _centre(source, mean[cols], None if m2 is None else m2[cols], into=block)
            # block.T is Fortran (w, n): trans=1 gives block @ block.T, added to gram in place.
            gram = dsyrk(1.0, block.T, beta=1.0, c=gram, trans=1, lower=0, overwrite_c=1)
    if m2 is not None:
        m2 /= n - 1
    if head is not None:
        np.divide(head[1], head[0], out=head[1])
    return _mirror(gram), mean, m2


def _centre(block: np.ndarray, mean: np.ndarray, m2: np.ndarray | None, *,
            into: np.ndarray | None = None) -> None:
    """Centre a float64 block in place (or into the buffer ``into``, of its shape); its column
    means and (``m2`` not None) sums of squared deviations."""
    np.add.reduce(block, axis=0, out=mean)
    _check_sums(block, mean)
    mean /= block.shape[0]
    out = block if into is None else into
    np.subtract(block, mean, out=out)
    if m2 is not None:
        np.einsum("ij,ij->j", out, out, out=m2)


def _check_sums(block: np.ndarray, *sums: np.ndarray) -> None:
    """Column sums are finite iff the block is (barring overflow): cheaper than the block."""
    if not all(np.isfinite(x).all() for x in sums):
        _check_finite(block)
        raise ValueError("`outputs` are too large: a column sum overflows float64.")


def _mirror(gram: np.ndarray) -> np.ndarray:
    upper = np.triu_indices(gram.shape[0], 1)
    gram[upper[1], upper[0]] = gram[upper]
    return np.ascontiguousarray(gram)


#: Row chunk of the float64 statistics of a float32 block (stays in cache).
_STATS_CHUNK_BYTES = 256 * 2**10


def _shifted_sums(block: np.ndarray, chunk: np.ndarray, s1: np.ndarray, s2: np.ndarray):
    """``Σ_i (x_i − c)`` and ``Σ_i (x_i − c)²`` in float64 with ``c`` the block's first row.

    Row chunks small enough to stay in cache are widened to float64 one at a time (one read of
    the block). The shift keeps ``Σ(x−c)² − (Σ(x−c))²/n`` accurate: ``n (μ − c)² <= (n − 1)
    M2`` for any sample row ``c``, so the cancellation costs at most a factor ``n``.
    """
    n, w = block.shape
    c = block[0].astype(np.float64)
    rows = max(1, _STATS_CHUNK_BYTES // (8 * w))
    tmp = np.empty(w)
    s1[:] = 0.0
    s2[:] = 0.0
    for a in range(0, n, rows):
        part = chunk[: min(rows, n - a) * w].reshape(-1, w)
        np.subtract(block[a : a + rows], c, out=part)
        s1 += np.add.reduce(part, axis=0, out=tmp)
        s2 += np.einsum("ij,ij->j", part, part, out=tmp)
    return c


def _gram_pass32(outputs: np.ndarray, step: int):
    """The Gram pass with a float32 product. Returns gram (unscaled, *not* centred), mean,
    variances and the energy of :func:`float32_gram_error` (unscaled).

    float32-or-narrower outputs are widened to float32 exactly; each block's float64 means and
    variances come from :func:`_shifted_sums`; the block enters ``ssyrk`` as is when its mean
    carries no more energy than its spread (``n ||μ||² <= Σ M2``), else shifted by its float32
    mean (one float32 pass). Wider outputs are centred in float64 and rounded to float32. The
    caller double-centres the Gram (:func:`_double_centre`), which removes the shifts exactly.
    """
    from scipy.linalg.blas import ssyrk

    n, d = outputs.shape
    narrow = np.issubdtype(outputs.dtype, np.floating) and outputs.dtype.itemsize <= 4
    gram = np.zeros((n, n), order="F")
    part = np.zeros((n, n), dtype=np.float32, order="F")
    mean = np.empty(d)
    m2 = np.empty(d)
    energy = 0.0
    with _ColumnBlocks(outputs, step) as reader:
        chunk = np.empty(max(_STATS_CHUNK_BYTES // 8, step))
        s1 = np.empty(step)
        low = None if narrow else np.empty(n * step, dtype=np.float32)
        for start in range(0, d, step):
            cols = slice(start, min(start + step, d))
            w = cols.stop - cols.start
            if narrow:
                block = reader.read32(cols)
                c = _shifted_sums(block, chunk, s1[:w], m2[cols])
                _check_sums(block, s1[:w], m2[cols])
                mu = mean[cols]
                np.multiply(s1[:w], 1.0 / n, out=mu)
                m2[cols] -= s1[:w] * mu
                np.maximum(m2[cols], 0.0, out=m2[cols])
                mu += c
                offset = n * float(mu @ mu)
                if offset > float(np.sum(m2[cols])):
                    mu32 = mu.astype(np.float32)
                    block -= mu32
                    gap = mu - mu32
                    offset = n * float(gap @ gap)
            else:
                wide = reader.read(cols, check=False)
                _centre(wide, mean[cols], m2[cols])
                assert low is not None  # allocated above for non-narrow outputs
                block = low[: n * w].reshape(n, w)
                np.copyto(block, wide, casting="same_kind")
                offset = 0.0
            energy += float(np.sum(m2[cols])) + offset
            # block.T is Fortran (w, n): trans=1 gives block @ block.T (upper triangle).
            part = ssyrk(1.0, block.T, beta=0.0, c=part, trans=1, lower=0, overwrite_c=1)
            gram += part
    return _mirror(gram), mean, m2 / (n - 1), energy


def _double_centre(gram: np.ndarray) -> None:
    """``G ← C G C`` with ``C = I − 11ᵀ/n``, in place in ``O(n²)``.

    The exact centred Gram satisfies ``G 1 = 0``; this projects the round-off of the centring
    (and of the float32 rounding) out of the ``1`` direction, so it is an exact null vector.
    """
    r = gram.mean(axis=1)
    s = float(r.mean())
    gram -= r[:, None]
    gram -= r[None, :]
    gram += s


def _back_project(outputs: np.ndarray, mean: np.ndarray, coef: np.ndarray, step: int,
                  eigenvector_dtype, scale: np.ndarray | None = None) -> np.ndarray:
    """Second pass: ``V[cols] = (X[:, cols] - mean[cols])^T coef``, one column block at a time
    (``scale``: of ``X / scale``, read as :class:`_ColumnBlocks` reads it)."""
    d = outputs.shape[1]
    k = coef.shape[1]
    eigvecs = np.empty((d, k), dtype=eigenvector_dtype)
    if k == 0:
        return eigvecs
    direct = eigvecs.dtype == np.float64
    tmp = None if direct else np.empty(step * k)
    with _ColumnBlocks(outputs, step, scale) as reader:
        for start in range(0, d, step):
            cols = slice(start, min(start + step, d))
            block = reader.read(cols)
            block -= mean[cols]
            width = cols.stop - cols.start
            if direct:
                np.matmul(block.T, coef, out=eigvecs[cols])
            else:  # float64 product, rounded once into the float32 result
                assert tmp is not None  # allocated above when the result is float32
                out = tmp[: width * k].reshape(width, k)
                np.matmul(block.T, coef, out=out)
                eigvecs[cols] = out
    return eigvecs


def dense_covariance(outputs: np.ndarray, *, block_size: int | None):
    """Return mean, variances and the ``d x d`` sample covariance (``ddof=1``), by row blocks."""
    moments = streaming_moments(outputs, chunk_size=block_size)
    d = outputs.shape[1]
    scatter = np.zeros((d, d))
    for block in iter_row_blocks(outputs, block_size):
        block -= moments.mean
        scatter += block.T @ block
    cov = scatter / (moments.n_trials - 1)
    return moments.mean, moments.variances, (cov + cov.T) / 2.0


def dense_spectrum(outputs: np.ndarray, *, block_size: int | None):
    """Return mean, variances, eigenvalues (descending, unclipped), eigenvectors via a d x d Σ."""
    mean, variances, cov = dense_covariance(outputs, block_size=block_size)
    lam, vecs = np.linalg.eigh(cov)
    return mean, variances, lam[::-1], vecs[:, ::-1]


#: ``n x n`` eigen-decompositions up to this size run on one BLAS thread (see _small_eigh).
SINGLE_THREAD_EIGH = 2048


#: ``n_trials × d`` from which the certificate and the spectrum run BLAS on one thread.
SINGLE_THREAD_WORK = 2**12


def one_blas_thread(n: int, d: int):
    """A context that runs BLAS/LAPACK on one thread for ``n·d >= 2**12`` output values (else
    nothing: the smallest runs do not pay threadpoolctl's import, about 10 ms).

    The analysis of the outputs is Householder reductions of at most ``n × n`` matrices and
    passes of ``dsyrk``/``dgemm`` over ``(n, 16 MiB)`` column blocks. On 2 cores shared with
    other work, OpenBLAS's waiting threads made them 4-25x slower than one thread (measured at
    load 11-13: the certificate at ``n = 128, d = 10⁵`` 14.6 s vs 1.6 s, at ``d = 10³`` 6 s vs
    0.07 s, a 768 × 768 ``eigh`` 12 s vs 1 s); on an idle machine a second thread gains at
    most 2x on the passes.
    """
    if n * d < SINGLE_THREAD_WORK:
        return contextlib.nullcontext()
    return _blas_controller().limit(limits=1, user_api="blas")


@functools.cache
def _blas_controller():
    """threadpoolctl's view of the loaded BLAS libraries, found once per process (each
    ``threadpool_limits`` call would scan the loaded libraries again: 5-35 ms)."""
    from threadpoolctl import ThreadpoolController  # a dependency

    return ThreadpoolController()


def _small_eigh(matrix: np.ndarray):
    """``np.linalg.eigh`` on one BLAS thread for ``n <= SINGLE_THREAD_EIGH``.

    The Householder tridiagonalisation of a matrix this small is memory-bound level-2 BLAS:
    threads gain little, and on a busy machine OpenBLAS's waiting threads made a 1000 x 1000
    ``eigh`` take 4-12 s instead of 0.6 s (measured on 2 shared cores).
    """
    if matrix.shape[0] > SINGLE_THREAD_EIGH:
        return np.linalg.eigh(matrix)
    # the controller found once per process (a fresh threadpool_limits scans the loaded
    # libraries again on every call: 5-35 ms each, four calls per certified run)
    with _blas_controller().limit(limits=1, user_api="blas"):
        return np.linalg.eigh(matrix)


def gram_spectrum(
    outputs: np.ndarray,
    *,
    n_components: int | None,
    eigenvector_dtype: np.dtype | None,
    block_size: int | None,
    gram_dtype=np.float64,
    shared=None,
):
    """Gram path. Returns mean, variances, held eigenvalues, eigenvectors, tail, rank, rounding.

    ``shared``: a :class:`~pacpriv.pac.spectrum._gram.CentredGram` of ``outputs`` (float64,
    the pass already made): its ``K``, means and variances are used instead of a new pass.

    ``eigenvector_dtype=None`` returns the ``(n, k)`` coefficients ``C`` instead of the
    eigenvectors (``V = Xc^T C``, for :class:`~pacpriv.pac.spectrum._eigenbasis.LazyEigenbasis`).
    ``rounding`` is the float32 Gram's error bound (:func:`float32_gram_error`; 0 for float64):
    eigenvalues within it of 0 count as 0 (rank) and the caller adds it to the floors.
    """
    n, d = outputs.shape
    step = min(_cols_per_block(n, block_size), d)
    rounding = 0.0
    if shared is not None:
        gram, mean, variances = np.array(shared.gram), shared.mean, shared.variances
        gram /= n - 1
    elif np.dtype(gram_dtype) == np.float32:
        # 16 MiB of float32 per block: half as many n x n additions as float64-sized blocks
        step = min(block_size or max(1, BLOCK_BYTES // (4 * n)), d)
        gram, mean, variances, energy = _gram_pass32(outputs, step)
        gram /= n - 1
        _double_centre(gram)
        rounding = float32_gram_error(energy / (n - 1), step)
    else:
        gram, mean, variances = _gram_pass(outputs, step)
        gram /= n - 1
    lam, vecs = _small_eigh((gram + gram.T) / 2.0)
    lam, vecs = lam[::-1], vecs[:, ::-1]
    lam = clip_eigenvalues(lam, size=max(n, d), eps=float(np.finfo(np.float64).eps),
                           stacklevel=5, floor=rounding)
    rank = int(np.sum(lam > 0))
    held = int(np.sum(lam > GRAM_RELATIVE_CUTOFF * lam[0])) if rank else 0
    if n_components is not None:
        held = min(held, n_components)
    tail = float(np.sum(lam[held:]))
    lam_held = lam[:held]
    coef = vecs[:, :held] / np.sqrt((n - 1) * lam_held)  # (n, k): V = Xc^T coef
    if eigenvector_dtype is None:
        return mean, variances, lam_held, coef, tail, rank, rounding
    eigvecs = _back_project(outputs, mean, coef, step, eigenvector_dtype)
    return mean, variances, lam_held, eigvecs, tail, rank, rounding
