"""The one pass over the outputs that the spectrum and the certificate share (private).

For ``d > n_trials`` the output spectrum (:func:`pacpriv.pac.spectrum.estimate_output_spectrum`,
Gram path) and the certificate (:func:`pacpriv.pac.noise.certify_noise`, reduced route) both
start from the ``n × n`` centred Gram matrix ``K = Z Zᵀ`` (``Z = X − 1 x̄ᵀ``) and the column
means ``x̄``. :func:`centred_gram` makes them by **one** pass over column blocks of the outputs
(``dsyrk`` into one float64 ``n × n`` matrix; each block is widened to float64 and centred by
its column means in a reused 16 MiB buffer: no centred copy of the outputs is made, and a
large common offset costs no precision), and the two consumers take it instead of reading the
outputs again. That pass is ``n²·d/2`` multiply-adds.

:meth:`CentredGram.restrict` gives the Gram of a subset of the rows (the certificate's
independent trials, e.g. one member of each complementary pair) without a second product:
for rows ``S``, ``X_S − 1 x̄_Sᵀ = Z_S − 1 δᵀ`` and the double centring ``C_S = I − 11ᵀ/|S|``
removes any ``1 δᵀ`` term exactly, so ``K_S = C_S K[S, S] C_S`` (an ``O(|S|²)`` step; only the
subset's column means need one more read of its rows, ``|S|·d`` additions).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pacpriv.pac.spectrum._spectral import (
    _cols_per_block,
    _ColumnBlocks,
    _double_centre,
    _gram_pass,
    one_blas_thread,
)

__all__ = ["CentredGram", "centred_gram", "pass_error", "rows_all_equal"]


@dataclass(frozen=True, eq=False)
class CentredGram:
    """The centred Gram matrix of an ``(n, d)`` output matrix, with its column moments.

    Attributes
    ----------
    outputs : ndarray or np.memmap of shape (n, d)
        The outputs it describes (a reference: they must not change while it is used).
    gram : ndarray of shape (n, n), float64, read-only
        ``K = Z Zᵀ`` (unscaled), ``Z = X − 1 x̄ᵀ``.
    mean : ndarray of shape (d,), float64, read-only
        Column means ``x̄``.
    variances : ndarray of shape (d,), float64, or None
        Column variances (``ddof=1``); None for a :meth:`restrict` ed Gram (not needed there).
    step : int
        Columns per block of the pass (the later passes of the certificate use it too).
    error : float
        A bound on the spectral norm of ``gram − Z̃ Z̃ᵀ`` (``Z̃ = X − 1 x̄ᵀ`` in exact arithmetic
        with the stored ``x̄``): the pass's round-off (:func:`pass_error`), and for a
        :meth:`restrict` ed Gram that of the double centring too. The certificate's lift
        from the Gram matrix charges it (:mod:`pacpriv.pac.noise._gram_lift`).
    """

    outputs: np.ndarray
    gram: np.ndarray
    mean: np.ndarray
    variances: np.ndarray | None
    step: int
    error: float = float("nan")  # unknown: the certificate's lift then reads the outputs

    @property
    def shape(self) -> tuple[int, int]:
        """``(n, d)`` of the outputs."""
        return (int(self.outputs.shape[0]), int(self.outputs.shape[1]))

    def restrict(self, rows: slice | np.ndarray) -> CentredGram:
        """The centred Gram of ``outputs[rows]`` (``rows`` a slice or an index array): ``self``
        when ``rows`` selects every row in order, else ``C_S K[S, S] C_S`` and the subset's
        column means (one read of its rows, no product)."""
        n = self.outputs.shape[0]
        index = np.arange(n)[rows]
        if index.size == n and np.array_equal(index, np.arange(n)):
            return self
        sub = self.outputs[rows]
        gram = np.array(self.gram[np.ix_(index, index)])
        m = index.size
        # the pass's bound on these rows, plus the double centring's (each entry a sum of four
        # terms of magnitude <= max|K[S, S]|, each a mean of <= m entries: <= 8 γ_{2m+4} max|K|
        # per entry, times m for the spectral norm)
        error = (pass_error(float(np.trace(gram)), self.outputs.shape[1], self.step)
                 + 8.0 * _gamma(2 * m + 4) * m * float(np.max(np.abs(gram))))
        _double_centre(gram)
        return CentredGram(sub, _readonly((gram + gram.T) / 2.0), _readonly(
            _column_means(sub, self.step)), None, self.step, error)


def _gamma(k: int) -> float:
    """Higham's ``γ_k = k u / (1 − k u)``, ``u = 2⁻⁵³``: the relative bound of a float64 sum of
    ``k`` products in any order (Higham 2002, Lemma 3.1 and §3.1)."""
    u = 2.0**-53
    return k * u / (1.0 - k * u)


def pass_error(trace: float, d: int, step: int) -> float:
    """A bound on ``||K̂ − Z̃ Z̃ᵀ||₂`` for the Gram pass of :func:`centred_gram` (``trace`` =
    ``tr K̂``, ``d`` columns read in blocks of ``step``).

    Each entry of ``K̂`` is a float64 sum of ``d`` products, in whatever order ``dsyrk`` and
    the accumulation over the ``ceil(d/step)`` blocks take them, so ``|K̂ − ẐẐᵀ| <= γ_d
    |Ẑ||Ẑ|ᵀ`` entrywise (Higham 2002, §3.1: any summation order; fused multiply-adds
    included), and ``|| |Ẑ||Ẑ|ᵀ ||₂ <= ||Ẑ||_F² = tr(ẐẐᵀ)``; the centring rounds each entry of
    ``Ẑ`` by a relative ``u`` (``3u·tr`` more). ``tr(ẐẐᵀ) <= tr K̂ (1 + γ_d)``. (``step`` is
    kept for the record: the bound does not assume the blocks are summed separately.)
    """
    g = _gamma(max(d, 1) + 2)
    return (g + 3.0 * 2.0**-53) * max(trace, 0.0) * (1.0 + 2.0 * g)


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _column_means(x: np.ndarray, step: int) -> np.ndarray:
    """Float64 column means of ``x`` by column blocks (as :func:`_gram_pass` computes them)."""
    n, d = x.shape
    mean = np.empty(d)
    with _ColumnBlocks(x, step) as reader:
        for start in range(0, d, step):
            cols = slice(start, min(start + step, d))
            np.add.reduce(reader.read(cols, check=False), axis=0, out=mean[cols])
    mean /= n
    return mean


def centred_gram(outputs: np.ndarray, *, block_size: int | None = None) -> CentredGram:
    """One column-block pass over ``outputs`` (n, d): ``K = Z Zᵀ``, ``x̄`` and the variances.

    ``outputs`` must be real and 2-D with ``n >= 2`` (the callers check it); any real dtype or
    a memory map (read in blocks of about 16 MiB of float64, never copied whole). Runs BLAS on
    one thread (:func:`~pacpriv.pac.spectrum._spectral.one_blas_thread`).

    Raises
    ------
    ValueError
        When ``outputs`` holds NaN or inf (found from the column sums of each block), or a
        column sum overflows float64.
    """
    n, d = outputs.shape
    step = min(_cols_per_block(n, block_size), d)
    with one_blas_thread(n, d):
        gram, mean, variances = _gram_pass(outputs, step)
    return CentredGram(outputs, _readonly(gram), _readonly(mean), _readonly(variances), step,
                       pass_error(float(np.trace(gram)), d, step))


def rows_all_equal(x: np.ndarray) -> bool:
    """Whether every row of ``x`` equals the first, read in row blocks of about 16 MiB (stops at
    the first block that differs; no full-size mask)."""
    step = max(1, (16 * 2**20) // max(x.shape[1] * x.dtype.itemsize, 1))
    first = np.asarray(x[0])
    return all(bool(np.all(x[s : s + step] == first)) for s in range(1, x.shape[0], step))
