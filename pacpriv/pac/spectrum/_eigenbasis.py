"""Lazy eigenvector basis of the Gram path (private; see :mod:`pacpriv.pac.spectrum._covariance`).

For ``d > n_trials`` the eigenvectors of the sample covariance ``Σ̂ = Xcᵀ Xc / (n − 1)``
(``Xc = X − 1 μᵀ``, the centred ``(n, d)`` outputs) are ``V = Xcᵀ C`` with the ``(n, k)``
coefficients ``C = U Λ^{-1/2} / sqrt(n − 1)`` of the Gram eigenpairs ``(U, Λ)``. Forming the
``(d, k)`` matrix costs ``n·k·d`` multiply-adds (about two Gram products when ``k ≈ n``) and
``d·k`` memory. :class:`LazyEigenbasis` keeps ``X`` (a reference, e.g. an ``np.memmap``), ``μ``
and ``C`` instead and applies ``V z`` and ``Vᵀ y`` on demand, one pass over ``X`` by row blocks
each, in float64. Row blocks ``V[rows]`` and the whole matrix (``np.asarray``) are formed on
request only, for callers that need entries.
"""

from __future__ import annotations

import numpy as np

from pacpriv.pac.spectrum._moments import iter_row_blocks
from pacpriv.pac.spectrum._spectral import _back_project, _cols_per_block, _ColumnBlocks

__all__ = ["LazyEigenbasis"]


class LazyEigenbasis:
    """``V = (X − 1 μᵀ)ᵀ C`` of shape ``(d, k)``, applied without being formed.

    Parameters
    ----------
    outputs : ndarray or np.memmap of shape (n, d)
        The trial outputs ``X`` (kept by reference: they must not change while the basis is
        used).
    mean : ndarray of shape (d,), float64
        Column means ``μ`` of ``X``.
    coef : ndarray of shape (n, k), float64
        Coefficients ``C``.
    block_size : int, optional
        Columns per block when rows of ``V`` are formed (default about 16 MiB of float64).
    scale : ndarray of shape (d,), float64, optional
        Positive column scales ``s``: the basis is then that of the rescaled outputs ``Y = X
        diag(s)⁻¹`` (``mean`` is ``Y``'s column means), applied from ``X`` itself (no rescaled
        copy of the outputs is kept).

    Notes
    -----
    ``V z = Xᵀ (C z) − μ · 1ᵀ(C z)`` and ``Vᵀ y = Cᵀ (X y) − (Cᵀ 1)(μᵀ y)``: ``O(n·d)`` work
    and ``O(n + d)`` memory each, against ``O(n·k·d)`` to form ``V``. Exact in exact arithmetic;
    in floating point each product is a float64 sum of ``n`` (or ``d``) terms (with ``scale``,
    ``Yᵀa = (Xᵀa)/s`` and ``Y y = X (y/s)``: one more rounding per entry).
    """

    ndim = 2
    dtype = np.dtype(np.float64)

    def __init__(self, outputs: np.ndarray, mean: np.ndarray, coef: np.ndarray, *,
                 block_size: int | None = None, scale: np.ndarray | None = None) -> None:
        self._outputs = outputs
        self._scale = scale
        self._mean = mean
        self._coef = np.array(coef, dtype=np.float64)
        self._coef.setflags(write=False)
        self._coef_sum = self._coef.sum(axis=0)
        n, d = outputs.shape
        self.shape = (d, self._coef.shape[1])
        self._step = min(_cols_per_block(n, block_size), d)

    @property
    def coef(self) -> np.ndarray:
        """The ``(n, k)`` coefficients ``C`` (read-only)."""
        return self._coef

    @property
    def nbytes(self) -> int:
        """Bytes held by the basis itself (the coefficients; the outputs are referenced)."""
        return int(self._coef.nbytes + self._coef_sum.nbytes)

    def __len__(self) -> int:
        return self.shape[0]

    def _in_memory(self) -> bool:
        """Whether X is an in-memory float64 array, used as it is (no block copies: one
        ``gemv`` per product; its finiteness was checked when it was stored)."""
        x = self._outputs
        return (type(x) is np.ndarray and x.dtype == np.float64 and x.flags.c_contiguous)

    def matvec(self, z) -> np.ndarray:
        """``V z`` for ``z`` of shape ``(k,)``: a ``(d,)`` float64 vector (one pass over X)."""
        a = self._coef @ np.asarray(z, dtype=np.float64)
        if self._in_memory():
            out = a @ self._outputs
        else:
            out = np.zeros(self.shape[0])
            start = 0
            for block in iter_row_blocks(self._outputs):
                stop = start + block.shape[0]
                out += a[start:stop] @ block
                start = stop
        if self._scale is not None:
            out /= self._scale
        out -= self._mean * float(np.sum(a))
        return out

    def rmatvec(self, y) -> np.ndarray:
        """``Vᵀ y`` for ``y`` of shape ``(d,)``: a ``(k,)`` float64 vector (one pass over X)."""
        y = np.asarray(y, dtype=np.float64)
        mean_y = float(self._mean @ y)
        if self._scale is not None:
            y = y / self._scale
        if self._in_memory():
            xy = self._outputs @ y
        else:
            xy = np.empty(self._outputs.shape[0])
            start = 0
            for block in iter_row_blocks(self._outputs):
                stop = start + block.shape[0]
                xy[start:stop] = block @ y
                start = stop
        return self._coef.T @ xy - self._coef_sum * mean_y

    def _rows(self, rows: slice) -> np.ndarray:
        d = self.shape[0]
        start, stop, step = rows.indices(d)
        if step != 1:
            return np.asarray(self)[rows]
        stop = max(start, stop)
        out = np.empty((stop - start, self.shape[1]))
        if stop == start:
            return out
        with _ColumnBlocks(self._outputs, self._step, self._scale) as reader:
            for s in range(start, stop, self._step):
                cols = slice(s, min(s + self._step, stop))
                block = reader.read(cols)
                block -= self._mean[cols]
                np.matmul(block.T, self._coef, out=out[s - start : cols.stop - start])
        return out

    def __getitem__(self, key) -> np.ndarray:
        """Rows of ``V`` (float64), formed by reading the matching columns of ``X``."""
        rest = ()
        if isinstance(key, tuple):
            key, rest = key[0], key[1:]
        rows = self._rows(key) if isinstance(key, slice) else np.asarray(self)[key]
        index = (slice(None), *rest)
        return rows[index] if rest else rows

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """The whole ``(d, k)`` matrix (``n·k·d`` work, ``d·k`` memory): for small cases only."""
        full = _back_project(self._outputs, self._mean, self._coef, self._step, np.float64,
                             self._scale)
        return full if dtype is None else full.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"LazyEigenbasis(shape={self.shape})"
