"""The certificate's rows in at most ``n_trials`` coordinates when ``d > n_trials``.

Every vector :func:`~pacpriv.pac.noise.certify_noise` whitens is a difference of (clipped)
outputs, so it lies in ``span(x_i − x̄)``, of dimension ``r < n``. Its computations are rotation
invariant, so they run on coordinates ``P`` (``n × r``) of the centred rows in an orthonormal
basis of that span instead of on the ``n × d`` outputs; only the final noise basis is lifted to
``d`` dimensions. Nothing ``d × d`` is formed, and the outputs are read in column blocks (a
float32 or memory-mapped array is never copied whole):

1. :func:`reduce_rows`: one pass accumulates the Gram matrix ``K = Z Zᵀ`` (``Z = X − x̄``,
   float64) with :func:`pacpriv.pac.spectrum._spectral._gram_pass`; ``K = U Λ Uᵀ`` gives
   ``P = U Λ^{1/2}`` (``P Pᵀ = K``) and the basis ``Q = Zᵀ U Λ^{-1/2}``. The noise shape, the
   cross-validation and the clip radius are fitted on ``P`` (exactly the dense computation,
   rotated; their accuracy affects how much noise is added, never the certificate's validity).
2. :func:`realign`: the shape's directions with a value of their own (``a_j != a_c``) become
   the released basis ``V = Z̃ᵀB`` (``BᵀKB = I``), and the rows' coordinates along it,
   ``C = Z V``, are taken from the Gram matrix, ``C = K B`` (:mod:`pacpriv.pac.noise._gram_lift`):
   no pass over the outputs, ``V`` kept as a
   :class:`~pacpriv.pac.spectrum._eigenbasis.LazyEigenbasis` (applied at release time), and
   a bound ``ε`` on what the Gram's round-off can hide, charged on the safe side. Where the
   bound does not close (``ε`` above :data:`~pacpriv.pac.noise._gram_lift.MAX_SLACK`:
   ill-conditioned or rank-deficient outputs), the direct route: ``V`` formed and made
   orthonormal to round-off (Cholesky QR twice, the first step from ``K``) and the rows
   projected on it *from the data*, ``C = Z V``: one pass. The certificate's summands, clip
   and trace are then computed on ``P' = [C, R]`` with ``R Rᵀ = K − C Cᵀ``: the coordinates
   along the released basis ``V`` and the norm of the rest, the same numbers as the dense route
   computes in ``d`` dimensions, so the certified trace is that of the released noise
   ``Σ_B = κ (V diag(a) Vᵀ + a_c (I − V Vᵀ))``.

Memory: the outputs, a few ``n × n`` matrices and one column block (16 MiB); the direct route
adds ``V`` (``d × k``, ``k <= n_shape``). Time: the one Gram pass (``n²d/2`` multiply-adds,
shared with the spectrum) and ``O(n³)``; the direct route adds a pass of about
``2nkd + 2k²d``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg

from pacpriv.pac.noise._gram_lift import MAX_SLACK, gram_lift, lift_slack
from pacpriv.pac.noise._shape import Shape
from pacpriv.pac.spectrum._eigenbasis import LazyEigenbasis
from pacpriv.pac.spectrum._gram import CentredGram, pass_error
from pacpriv.pac.spectrum._spectral import (
    _back_project,
    _cols_per_block,
    _ColumnBlocks,
    _gram_pass,
    _small_eigh,
    clip_eigenvalues,
)

__all__ = ["Reduced", "head_mean", "realign", "reduce_rows", "rows_equal"]

@dataclass(frozen=True, eq=False)
class Reduced:
    """Coordinates of the centred outputs in an orthonormal basis of their span.

    Attributes
    ----------
    outputs : ndarray of shape (n, d)
        The outputs themselves (not copied; any real dtype, a memmap included).
    mean : ndarray of shape (d,), float64
        ``x̄``, the mean of the rows.
    gram : ndarray of shape (n, n), float64
        ``K = Z Zᵀ``, ``Z = X − x̄``.
    coords : ndarray of shape (n, r), float64
        ``P = U Λ^{1/2}`` over the ``r >= 1`` eigenvalues of ``K`` above round-off.
    lift : ndarray of shape (n, r), float64
        ``U Λ^{-1/2}``: the basis is ``Q = Zᵀ lift``.
    step : int
        Columns per block of the passes.
    error : float
        A bound on ``||K − Z̃Z̃ᵀ||₂`` (:attr:`pacpriv.pac.spectrum._gram.CentredGram.error`).
    scale : ndarray of shape (d,), float64, or None
        Positive column scales ``s``: the rows described are ``outputs / s`` (the rescaled
        outputs of :mod:`pacpriv.pac.noise._coordinates`), every pass dividing each column
        block as it reads it (no rescaled copy); ``mean``, ``gram`` and the rest are theirs.
    head_mean : ndarray of shape (d,), float64, or None
        Column means of the first ``head`` rows of :func:`reduce_rows` (read in its pass), if
        asked for.
    """

    outputs: np.ndarray
    mean: np.ndarray
    gram: np.ndarray
    coords: np.ndarray
    lift: np.ndarray
    step: int
    error: float = float("nan")  # unknown: the lift then reads the outputs
    scale: np.ndarray | None = None
    head_mean: np.ndarray | None = None


def reduce_rows(x: np.ndarray, gram: CentredGram | None = None,
                scale: np.ndarray | None = None, head: int = 0) -> Reduced:
    """One column-block pass over ``x`` (n, d): the Gram matrix and the coordinates ``P``.

    ``gram``: the pass already made (:func:`pacpriv.pac.spectrum._gram.centred_gram` of ``x``,
    shared with the spectrum); then ``x`` is not read here. ``scale`` (shape (d,), positive;
    not with ``gram``): the rows are ``x / scale``, divided block by block as the pass reads
    them (bit for bit the pass over ``np.divide(x, scale, dtype=np.float64)``, with no copy).
    ``head > 0`` (with a pass here): the pass also takes the column means of the first ``head``
    rows (:attr:`Reduced.head_mean`, as :func:`head_mean` computes them).
    Raises ``ValueError`` when ``x`` is not finite (checked block by block).
    """
    n, d = x.shape
    top = None
    if gram is None:
        step = min(_cols_per_block(n, None), d)
        top = np.empty(d) if head > 0 else None
        gram_k, mean, _ = _gram_pass(x, step, scale, None if top is None else (head, top),
                                      variances=False)
        error = pass_error(float(np.trace(gram_k)), d, step)
    else:
        if scale is not None:
            raise ValueError("a shared Gram is that of the unscaled outputs: no `scale` with it")
        gram_k, mean, step, error = gram.gram, gram.mean, gram.step, gram.error
    lam, u = _small_eigh((gram_k + gram_k.T) / 2.0)
    lam, u = lam[::-1], u[:, ::-1]
    lam = clip_eigenvalues(lam, size=max(n, d), eps=float(np.finfo(np.float64).eps))
    r = max(int(np.sum(lam > 0)), 1)
    root = np.sqrt(lam[:r])
    coords = u[:, :r] * root
    with np.errstate(divide="ignore"):
        lift = np.where(root > 0, u[:, :r] / np.where(root > 0, root, 1.0), 0.0)
    return Reduced(x, mean, gram_k, coords, lift, step, error, scale, top)


def _orthonormalise(v: np.ndarray) -> np.ndarray:
    """Cholesky QR, twice (Fukaya et al. 2014): ``V R⁻¹`` in place by row blocks; a Householder
    QR when ``VᵀV`` is too ill-conditioned for Cholesky. Columns keep their order and span."""
    for _ in range(2):
        try:
            upper = linalg.cholesky(v.T @ v, lower=False)
        except linalg.LinAlgError:
            return np.linalg.qr(v)[0]
        inv = _right_inverse(upper)
        rows = max(1, (16 * 2**20) // (8 * max(v.shape[1], 1)))
        for s in range(0, v.shape[0], rows):
            v[s : s + rows] = v[s : s + rows] @ inv
    return v


def _project(red: Reduced, v: np.ndarray) -> np.ndarray:
    """``C = (X − x̄) V`` (n, k) in float64, by column blocks."""
    n, d = red.outputs.shape
    out = np.zeros((n, v.shape[1]))
    with _ColumnBlocks(red.outputs, red.step, red.scale) as reader:
        for start in range(0, d, red.step):
            cols = slice(start, min(start + red.step, d))
            block = reader.read(cols, check=False)
            block -= red.mean[cols]
            out += block @ v[cols]
    return out


def _right_inverse(upper: np.ndarray) -> np.ndarray:
    return linalg.solve_triangular(upper, np.eye(upper.shape[0]), lower=False)


def _lift(red: Reduced, coef: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """``V`` orthonormal with ``span V = span Zᵀ coef``, and ``C = Z V`` from the data; one pass.

    Cholesky QR twice, the first step from the Gram matrix (``(Zᵀcoef)ᵀ(Zᵀcoef) = coefᵀ K
    coef``, no pass), the second from the lifted ``V₁`` itself: the pass that forms ``V₁`` by
    column blocks also accumulates ``V₁ᵀV₁`` and ``Z V₁``; then ``V = V₁R₂⁻¹`` and ``C = (Z V₁)
    R₂⁻¹``. Falls back to :func:`_orthonormalise` (``C`` None: the caller projects) when a
    Cholesky factor does not exist (an ill-conditioned lift).
    """
    try:
        first = _right_inverse(linalg.cholesky(coef.T @ red.gram @ coef, lower=False))
    except linalg.LinAlgError:
        v = _back_project(red.outputs, red.mean, coef, red.step, np.float64, red.scale)
        return _orthonormalise(v), None
    coef1 = coef @ first
    n, d = red.outputs.shape
    k = coef1.shape[1]
    v = np.empty((d, k))
    zv = np.zeros((n, k))
    gram = np.zeros((k, k))
    with _ColumnBlocks(red.outputs, red.step, red.scale) as reader:
        for start in range(0, d, red.step):
            cols = slice(start, min(start + red.step, d))
            block = reader.read(cols, check=False)
            block -= red.mean[cols]
            part = np.matmul(block.T, coef1, out=v[cols])
            zv += block @ part
            gram += part.T @ part
    try:
        second = _right_inverse(linalg.cholesky(gram, lower=False))
    except linalg.LinAlgError:
        return _orthonormalise(v), None
    rows = max(1, (16 * 2**20) // (8 * max(k, 1)))
    for s in range(0, d, rows):
        v[s : s + rows] = v[s : s + rows] @ second
    return v, zv @ second


def realign(red: Reduced, shape: Shape) -> tuple[np.ndarray, np.ndarray, Shape, float]:
    """The released basis and the rows in coordinates along it: ``(V, P', shape', ε)``.

    ``shape`` was fitted on ``red.coords``. Its directions whose value differs from the
    complement's (``a_j != a_c``; the others do not change ``A``) become the orthonormal
    ``V`` (d, k); ``P' = [Z V, R]`` (n, k + n) with ``R Rᵀ = K − (ZV)(ZV)ᵀ`` (negative
    round-off clipped, as the dense route clips a negative residual); ``shape'`` is ``shape``
    with ``vecs`` the first ``k`` unit vectors of ``P'``'s coordinates.

    First the Gram route (:mod:`pacpriv.pac.noise._gram_lift`): ``ZV = K B`` without reading
    the outputs, ``V`` a :class:`~pacpriv.pac.spectrum._eigenbasis.LazyEigenbasis` (never
    formed), and ``ε`` the round-off factor the certificate charges (at most
    :data:`~pacpriv.pac.noise._gram_lift.MAX_SLACK`). Where that bound does not close, the
    direct route: ``V`` formed and ``ZV`` projected from the data (one pass), ``ε = 0``.
    """
    d = red.outputs.shape[1]
    keep = np.ones(shape.a.size, dtype=bool) if shape.a_c is None else shape.a != shape.a_c
    if not np.any(keep):  # A = a_c I: any orthonormal basis (one unit vector)
        keep[0] = True
    coef = red.lift @ shape.vecs[:, keep]
    new_shape = Shape(np.eye(red.gram.shape[0] + int(np.sum(keep)), int(np.sum(keep))),
                      shape.a[keep].copy(), shape.a_c, d)
    if shape.a_c is not None and np.any(coef):
        fast = gram_lift(red.gram, coef)
        if fast is not None:
            b, coords = fast
            rows = _rows_along(red.gram, coords)
            slack = lift_slack(red.gram, red.error, b, coords, rows, new_shape.a, shape.a_c)
            if slack <= MAX_SLACK:
                basis = LazyEigenbasis(red.outputs, red.mean, b, block_size=red.step,
                                       scale=red.scale)
                return basis, rows, new_shape, slack  # type: ignore[return-value]
    c: np.ndarray | None = None
    if not np.any(coef):  # constant outputs: no direction was seen
        v = np.zeros((d, int(np.sum(keep))))
        v[np.arange(v.shape[1]), np.arange(v.shape[1])] = 1.0
    else:
        v, c = _lift(red, coef)
    if c is None:
        c = _project(red, v)
    return v, _rows_along(red.gram, c), new_shape, 0.0


def _rows_along(gram: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``P' = [C, R]`` with ``R Rᵀ = K − C Cᵀ`` (negative round-off clipped)."""
    rest = gram - c @ c.T
    lam, u = _small_eigh((rest + rest.T) / 2.0)
    return np.hstack([c, u * np.sqrt(np.maximum(lam, 0.0))])


def rows_equal(x: np.ndarray, scale: np.ndarray | None = None) -> bool:
    """Whether every row of ``x`` (of ``x / scale`` when ``scale`` is given, in float64) equals
    the first, read in row blocks (no full-size mask); stops at the first block that differs."""
    step = max(1, (16 * 2**20) // max(8 * x.shape[1], 1))
    if scale is None:
        first = np.asarray(x[0])
        return all(bool(np.all(x[s : s + step] == first)) for s in range(1, x.shape[0], step))
    first = np.divide(x[0], scale, dtype=np.float64)
    return all(bool(np.all(np.divide(x[s : s + step], scale, dtype=np.float64) == first))
               for s in range(1, x.shape[0], step))


def head_mean(x: np.ndarray, rows: int, scale: np.ndarray | None, step: int) -> np.ndarray:
    """Float64 column means of ``x[:rows]`` (of ``x[:rows] / scale`` when ``scale`` is given,
    by column blocks of ``step``: the same numbers as on a rescaled float64 copy, none made)."""
    if scale is None:
        return np.mean(x[:rows], axis=0, dtype=np.float64)
    d = x.shape[1]
    out = np.empty(d)
    for start in range(0, d, step):
        cols = slice(start, min(start + step, d))
        out[cols] = np.mean(np.divide(x[:rows, cols], scale[cols], dtype=np.float64), axis=0)
    return out
