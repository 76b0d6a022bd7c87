"""Streaming per-coordinate mean and variance of simulated outputs, in O(d) memory.

Welford's update generalised to blocks (Chan, Golub & LeVeque's pairwise merge): each row
block's mean and sum of squared deviations are merged into the running totals, so any number
of trials and any dimension ``d`` fit in ``O(d)`` memory plus one block. Works on an
``np.memmap`` by reading contiguous row blocks, or on an iterable of row chunks (e.g. results
streamed from the engine).

References
----------
.. [1] T. F. Chan, G. H. Golub, R. J. LeVeque. Algorithms for computing the sample variance:
   analysis and recommendations. The American Statistician 37(3), 1983 (pairwise update).
"""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from pacpriv._validation import check_int

__all__ = ["OutputMoments", "streaming_moments"]

#: Target size in bytes of one float64 block read from a large array (rows x d or n x cols).
BLOCK_BYTES = 16 * 2**20


@dataclass(frozen=True, eq=False)
class OutputMoments:
    """Per-coordinate moments of simulated outputs.

    Attributes
    ----------
    mean : ndarray of shape (d,), float64
        Sample mean of each output coordinate.
    variances : ndarray of shape (d,), float64
        Unbiased (``ddof=1``) sample variance of each coordinate.
    n_trials : int
        Number of rows (trials) read, ``>= 2``.
    dim : int
        Output dimension ``d``.
    """

    mean: np.ndarray
    variances: np.ndarray
    n_trials: int
    dim: int

    @property
    def total_variance(self) -> float:
        """Trace of the sample covariance, ``sum(variances)``."""
        return float(np.sum(self.variances))

    def to_dict(self) -> dict:
        """JSON-serialisable summary (no length-``d`` arrays)."""
        return {
            "n_trials": self.n_trials,
            "dim": self.dim,
            "total_variance": self.total_variance,
            "max_variance": float(np.max(self.variances)),
            "n_constant_coordinates": int(np.sum(self.variances == 0)),
        }


def _check_block(block, name: str, dim: int | None) -> np.ndarray:
    arr = np.asarray(block)
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        raise TypeError(f"`{name}` must hold real numbers; got dtype {arr.dtype}.")
    if arr.ndim != 2:
        raise ValueError(f"`{name}` must be 2-D (n_trials, d); got shape {arr.shape}.")
    if dim is not None and arr.shape[1] != dim:
        raise ValueError(
            f"`{name}` chunks must all have the same number of columns; got {arr.shape[1]} "
            f"after {dim}."
        )
    out = np.array(arr, dtype=np.float64)  # an owned copy: callers update it in place
    if not np.all(np.isfinite(out)):
        raise ValueError(f"`{name}` must be finite; found NaN or inf.")
    return out


def rows_per_block(dim: int, chunk_size: int | None = None) -> int:
    """Rows per block: ``chunk_size`` or about :data:`BLOCK_BYTES` of float64."""
    if chunk_size is not None:
        return chunk_size
    return max(1, BLOCK_BYTES // (8 * max(dim, 1)))


def release_mapped_pages(arr) -> None:
    """Drop an ``np.memmap``'s pages from this process's resident set (best effort).

    Reading a memmap block by block maps every page it touches; without this the resident set
    grows to the whole file even though each block is used once. ``MADV_DONTNEED`` only unmaps:
    the data stay in the page cache (and dirty pages of a shared mapping are kept), so it is
    skipped for copy-on-write (``mode="c"``) maps, whose private changes it would discard.
    Uses numpy's private ``_mmap`` attribute; does nothing where unavailable.
    """
    mm = getattr(arr, "_mmap", None)
    if mm is None or getattr(arr, "mode", "c") == "c" or not hasattr(mmap, "MADV_DONTNEED"):
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):
        mm.madvise(mmap.MADV_DONTNEED)


def iter_row_blocks(outputs: np.ndarray, chunk_size: int | None = None) -> Iterator[np.ndarray]:
    """Yield validated float64 row blocks of a 2-D array (memmap-friendly: contiguous reads)."""
    rows = rows_per_block(outputs.shape[1], chunk_size)
    for start in range(0, outputs.shape[0], rows):
        block = _check_block(outputs[start : start + rows], "outputs", outputs.shape[1])
        release_mapped_pages(outputs)
        yield block


def streaming_moments(chunks_or_array, *, chunk_size: int | None = None) -> OutputMoments:
    """Mean and unbiased variance of every output coordinate, reading row blocks.

    Parameters
    ----------
    chunks_or_array : array_like of shape (n_trials, d), np.memmap, or iterable of 2-D arrays
        Simulated outputs. A 2-D array (including an ``np.memmap``) is read in blocks of
        ``chunk_size`` rows; an iterable (not an array) is consumed chunk by chunk, each chunk
        of shape ``(rows, d)`` with the same ``d``. Integer or floating dtypes; computed in
        float64.
    chunk_size : int, optional
        Rows per block when an array is given; default about 16 MiB of float64 per block.

    Returns
    -------
    OutputMoments
        Mean and ``ddof=1`` variances, ``O(d)`` memory.

    Raises
    ------
    TypeError
        If the data are not real numbers or ``chunk_size`` is not an integer.
    ValueError
        If the data are not 2-D, chunks disagree on ``d``, a value is NaN/inf, fewer than two
        rows are given, or ``chunk_size < 1``.

    Notes
    -----
    Merging block ``b`` into the running ``a``: ``delta = mean_b - mean_a``,
    ``mean = mean_a + delta * n_b / n``, ``M2 = M2_a + M2_b + delta**2 * n_a * n_b / n``
    (Chan et al. 1983); the variance is ``M2 / (n - 1)``.

    Examples
    --------
    >>> m = streaming_moments(np.array([[0.0, 1.0], [2.0, 1.0]]))
    >>> m.variances.tolist()
    [2.0, 0.0]
    """
    if chunk_size is not None:
        chunk_size = check_int(chunk_size, "chunk_size", low=1)
    data = chunks_or_array
    if isinstance(data, (list, tuple)) and data and np.ndim(data[0]) < 2:
        data = np.asarray(data)  # a nested list of rows is one array, not a list of chunks
    if isinstance(data, np.ndarray):
        if data.ndim != 2:
            raise ValueError(f"`outputs` must be 2-D (n_trials, d); got shape {data.shape}.")
        blocks: Iterable[np.ndarray] = iter_row_blocks(data, chunk_size)
    else:
        blocks = (_check_block(b, "outputs", None) for b in data)
    n = 0
    mean = m2 = None
    for block in blocks:
        if mean is not None and block.shape[1] != mean.shape[0]:
            raise ValueError(
                f"`outputs` chunks must all have the same number of columns; got "
                f"{block.shape[1]} after {mean.shape[0]}."
            )
        nb = block.shape[0]
        if nb == 0:
            continue
        mean_b = block.mean(axis=0)
        block -= mean_b  # block is our own float64 copy unless the input was float64
        m2_b = np.einsum("ij,ij->j", block, block)
        if mean is None:
            n, mean, m2 = nb, mean_b, m2_b
            continue
        total = n + nb
        delta = mean_b - mean
        mean = mean + delta * (nb / total)
        m2 = m2 + m2_b + delta**2 * (n * nb / total)
        n = total
    if mean is None or m2 is None or n < 2:
        raise ValueError(f"`outputs` must have at least 2 trials (rows); got {n}.")
    return OutputMoments(mean=mean, variances=m2 / (n - 1), n_trials=n, dim=mean.shape[0])
