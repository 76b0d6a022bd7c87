"""Covariance spectrum of simulated mechanism outputs ([1]_ §4, Algorithm 1).

The noise calibration needs the eigen-decomposition ``Σ = V diag(λ) V^T`` of the output
covariance under the sampler. :func:`estimate_output_spectrum` estimates it from the engine's
``(n_trials, d)`` output matrix without ever forming a ``d x d`` matrix when ``d > n_trials``
(Gram path); :func:`spectrum_from_covariance` wraps a known ``Σ``.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy: Automatic Privacy Measurement and Control of Data
   Processing. CRYPTO 2023, arXiv:2210.03458, §4 and Algorithm 1.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import entr

from pacpriv._validation import check_int
from pacpriv.exceptions import ConstantOutputWarning
from pacpriv.pac.spectrum._eigenbasis import LazyEigenbasis
from pacpriv.pac.spectrum._gram import CentredGram
from pacpriv.pac.spectrum._resolution import floor_gram, resolved_eigh
from pacpriv.pac.spectrum._spectral import dense_covariance, gram_spectrum, one_blas_thread

__all__ = ["OutputSpectrum", "estimate_output_spectrum", "spectrum_from_covariance"]

_METHODS = ("auto", "dense", "gram")
_BASES = ("auto", "dense", "lazy")

#: ``eigenvectors="auto"`` keeps the Gram path's basis lazy when the formed ``(d, k)`` float64
#: matrix would exceed this many bytes (forming it costs about two Gram products).
LAZY_BASIS_BYTES = 64 * 2**20

#: ``gram_dtype=None`` computes the Gram in float32 for float32 outputs when the product has at
#: least this many multiply-adds (``n² d``; below it float64 costs well under a second).
FLOAT32_GRAM_MIN_WORK = 2**33


@dataclass(frozen=True, eq=False)
class OutputSpectrum:
    """Eigen-decomposition of the (estimated) output covariance ``Σ``.

    Attributes
    ----------
    mean : ndarray of shape (d,), float64
        Sample mean of the outputs.
    eigenvalues : ndarray of shape (k,), float64
        Held *safe-side* eigenvalues, descending, ``>= 0``: those of the unbiased (``ddof=1``)
        sample covariance, each raised by the numerical ``resolution`` (never lowered; see
        Notes of :func:`estimate_output_spectrum`). 0 only on exactly constant coordinates.
    eigenvectors : ndarray or LazyEigenbasis of shape (d, k)
        Orthonormal columns, ``eigenvectors[:, j]`` belongs to ``eigenvalues[j]``. float64, or
        float32 when the outputs were float32 (see ``eigenvector_dtype``); or, on the Gram path,
        a :class:`~pacpriv.pac.spectrum._eigenbasis.LazyEigenbasis` (``eigenvectors="lazy"``) that
        applies ``V z`` / ``Vᵀ y`` by one pass over the outputs and forms rows on request.
    variances : ndarray of shape (d,), float64
        Coordinate variances ``diag(Σ)`` (``ddof=1``).
    total_variance : float
        ``trace(Σ) = sum(variances)``.
    tail_variance : float
        Variance charged to the complement of ``span(eigenvectors)``: the eigenvalues not held
        (``n_components`` truncation, or Gram eigenpairs below ``sqrt(eps)·λ_max``) plus the
        resolution per complement direction, or the whole trace when the complement is
        unresolved (``unresolved_dim > 0``). The calibration spreads it over the complement.
    n_trials : int or None
        Number of simulated outputs (``None`` for :func:`spectrum_from_covariance`).
    dim : int
        Output dimension ``d``.
    rank : int
        Number of eigenvalues of ``Σ`` above round-off (held or not).
    method : {"dense", "gram", "covariance"}
        How the spectrum was obtained.
    resolution : float
        Largest numerical floor ``eps · λ_max · max(n_trials, d)`` added to the eigenvalues
        (per scale block), plus ``rounding``.
    scale_blocks : int
        Number of scale blocks decomposed separately (coordinates whose variances differ by
        more than 1e8; dense path and known covariances only).
    block_inflation : float
        Largest cross-block factor ``Σ_a ||R_ab||₂`` by which a block's coordinate variances
        were added to bound the ignored cross-covariance (0 with one block).
    unresolved_dim : int
        Directions outside the sample span that the simulation could not resolve (the sample
        filled all ``n_trials − 1`` directions); they are charged the whole trace.
    gram_dtype : str or None
        ``"float32"`` or ``"float64"``: precision of the Gram product (Gram path), else None.
    rounding : float
        A priori bound on the float32 Gram's round-off in every eigenvalue (0 in float64),
        included in ``resolution`` (see Notes of :func:`estimate_output_spectrum`).
    """

    mean: np.ndarray
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    variances: np.ndarray
    total_variance: float
    tail_variance: float
    n_trials: int | None
    dim: int
    rank: int
    method: str
    resolution: float = 0.0
    scale_blocks: int = 1
    block_inflation: float = 0.0
    unresolved_dim: int = 0
    gram_dtype: str | None = None
    rounding: float = 0.0

    @property
    def n_components(self) -> int:
        """Number ``k`` of held eigenpairs."""
        return int(self.eigenvalues.shape[0])

    @property
    def effective_rank(self) -> float:
        """Roy & Vetterli (2007) effective rank ``exp(entropy(λ / Σλ))`` of the held spectrum.

        ``p·ln p`` is taken as 0 for ``p = 0`` (its limit), so eigenvalues many orders below the
        largest (or underflowing to 0 in ``λ / Σλ``) add nothing, without a NaN or a warning;
        ``λ`` is divided by its largest value first, so ``Σλ`` cannot overflow. In
        ``[1, n_components]``; 0 for an all-zero spectrum.
        """
        return effective_rank(self.eigenvalues)

    def to_dict(self, *, n_top: int = 10) -> dict:
        """JSON-serialisable summary without the length-``d`` arrays (top ``n_top`` eigenvalues)."""
        return {
            "method": self.method,
            "n_trials": self.n_trials,
            "dim": self.dim,
            "rank": self.rank,
            "n_components": self.n_components,
            "total_variance": float(self.total_variance),
            "tail_variance": float(self.tail_variance),
            "top_eigenvalues": [float(x) for x in self.eigenvalues[:n_top]],
            "effective_rank": self.effective_rank,
            "max_coordinate_variance": float(np.max(self.variances)) if self.dim else 0.0,
            "eigenvector_dtype": str(self.eigenvectors.dtype),
            "lazy_eigenvectors": isinstance(self.eigenvectors, LazyEigenbasis),
            "gram_dtype": self.gram_dtype,
            "rounding": float(self.rounding),
            "resolution": float(self.resolution),
            "scale_blocks": self.scale_blocks,
            "block_inflation": float(self.block_inflation),
            "unresolved_dim": self.unresolved_dim,
        }


def _readonly(a):
    if isinstance(a, np.ndarray):
        a.setflags(write=False)
    return a


def _check_outputs(outputs) -> np.ndarray:
    arr = outputs if isinstance(outputs, np.ndarray) else np.asarray(outputs)
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        raise TypeError(f"`outputs` must hold real numbers; got dtype {arr.dtype}.")
    if arr.ndim != 2:
        raise ValueError(f"`outputs` must be 2-D (n_trials, d); got shape {arr.shape}.")
    if arr.shape[0] < 2:
        raise ValueError(f"`outputs` must have at least 2 trials (rows); got {arr.shape[0]}.")
    if arr.shape[1] < 1:
        raise ValueError("`outputs` must have at least one column (d >= 1); got d = 0.")
    return arr


def _warn_if_constant(total_variance: float, stacklevel: int = 3) -> None:
    if total_variance == 0.0:
        warnings.warn(
            "the outputs did not vary across trials (all variances are 0). This does not "
            "show that the output is independent of the subset: a change rarer than about "
            "ln(1/γ)/n_trials was not tested (pacpriv.pac.noise.constant_output_bound); "
            "plug-in rules add no noise here, rule='certified' with output_bound adds a "
            "certified minimum.",
            ConstantOutputWarning,
            stacklevel=stacklevel,
        )


def estimate_output_spectrum(
    outputs,
    *,
    method: str = "auto",
    n_components: int | None = None,
    eigenvector_dtype=None,
    block_size: int | None = None,
    eigenvectors: str = "auto",
    gram_dtype=None,
    gram: CentredGram | None = None,
) -> OutputSpectrum:
    """Estimate the covariance spectrum of simulated outputs.

    Parameters
    ----------
    outputs : array_like or np.memmap of shape (n_trials, d)
        Mechanism outputs on random subsets (real, finite, ``n_trials >= 2``). Read in blocks;
        an ``np.memmap`` is never loaded whole.
    method : {"auto", "dense", "gram"}, default "auto"
        ``"dense"`` eigen-decomposes the ``d x d`` sample covariance; ``"gram"`` the
        ``n x n`` Gram matrix of the centred outputs (no ``d x d`` matrix). ``"auto"`` uses
        dense when ``d <= n_trials``, Gram otherwise.
    n_components : int, optional
        Keep at most this many leading eigenpairs (the rest is summarised in
        ``tail_variance``). Default: all ``d`` (dense) or every eigenpair above
        ``sqrt(eps)·λ_max`` (Gram; at most ``n_trials - 1``).
    eigenvector_dtype : {float64, float32}, optional
        Default float32 for float32 (or narrower) outputs, float64 otherwise. float32 halves
        the ``(d, k)`` eigenvector memory (e.g. 4 GB instead of 8 GB at d = 1e6, k = 1000);
        eigenvalues and all accumulations stay float64.
    block_size : int, optional
        Rows (dense) or columns (Gram) per block; default about 16 MiB of float64.
    eigenvectors : {"auto", "dense", "lazy"}, default "auto"
        Gram path only: ``"dense"`` forms the ``(d, k)`` eigenvector matrix (a second pass of
        ``n·k·d`` multiply-adds, about two Gram products when ``k ≈ n``); ``"lazy"`` returns a
        :class:`~.spectrum._eigenbasis.LazyEigenbasis` that keeps a reference to ``outputs``
        (which must then not change) and the ``(n, k)`` coefficients, and applies the basis by
        one pass over the outputs per product (noise draws, projections). ``"auto"``: lazy when
        the formed matrix would exceed :data:`LAZY_BASIS_BYTES` in float64. Ignored by the
        dense path.
    gram_dtype : {None, float32, float64}, optional
        Gram path only: precision of the Gram product. Default: float32 for float32 (or
        narrower) floating outputs when ``n² d >= FLOAT32_GRAM_MIN_WORK``, else float64. Means,
        variances, centring and the eigen-decomposition are float64 either way; see Notes for
        the float32 round-off.
    gram : CentredGram, optional
        Gram path only: the centred Gram matrix of exactly these ``outputs``, already made by
        :func:`~pacpriv.pac.spectrum._gram.centred_gram` (float64) and shared with the
        certificate; the outputs are then not read again for it (``gram_dtype`` must be None or
        float64). :func:`pacpriv.pac._pipeline.measure` passes it.

    Returns
    -------
    OutputSpectrum

    Raises
    ------
    TypeError
        If ``outputs`` is not real-valued or an option has the wrong type.
    ValueError
        If ``outputs`` is not 2-D, has fewer than 2 rows or no column, contains NaN/inf, or an
        option is out of range.

    Warns
    -----
    ConstantOutputWarning
        If every coordinate is constant (the calibration then returns zero noise, MI bound 0).
    DegenerateOutputWarning
        If a material negative eigenvalue (beyond round-off) had to be clipped.

    Notes
    -----
    Numerical resolution may *raise* an eigenvalue, never lower a positive variance to zero
    (a direction with eigenvalue 0 would get no noise and an unbounded MI):

    * every eigenvalue is reported as ``max(λ̂, 0) + eps · λ_max · max(n, d)``, the backward
      error of the eigensolver and of the scatter sum (Weyl's inequality), so a direction lost
      to round-off gets noise at the resolution;
    * **scale-separated outputs** (coordinate variances differing by more than 1e8, e.g. a total
      in dollars next to a share) fall back **per block**: coordinates are grouped by scale,
      each block is eigen-decomposed on its own, and the ignored cross-block covariance is
      bounded in the Loewner order by adding ``ρ · Var_j`` to each block's coordinate
      variances, ``ρ`` the summed spectral norms of its cross-correlation blocks (``≈ 0`` for
      uncorrelated blocks, ``<= 2×`` for fully correlated ones). Dense path and known
      covariances only; the Gram path keeps one block (safe but over-noised small scales);
    * **unresolved directions**: when the sample filled all ``n − 1`` directions it can span
      (``rank = n − 1 < d``, always possible when ``n_trials <= d``), the directions outside
      the sample span are charged the whole trace ``tr Σ̂`` (an upper bound on their variance),
      pooled; below that rank they are at the resolution. Use more trials than output
      dimensions to avoid paying for unresolved directions.

    Exactly constant coordinates keep eigenvalue 0.

    **float32 Gram** (``gram_dtype=float32``). Blocks of ``w`` columns (``w ≈ 2²²/n``) enter
    ``ssyrk`` in float32, uncentred or shifted by their means (float64 means, variances and
    sums over blocks; the Gram is double-centred in float64). The error ``E`` of the scaled
    Gram obeys ``||E||₂ <= ρ = (γ_{w+2} + 3u) e`` (``u = 2⁻²⁴``, ``e`` the rows' energy as
    they entered, between ``tr Σ̂`` and ``2 tr Σ̂``; Higham 2002, eq. (3.5); reported as
    ``rounding``; ``ρ ≈ 2.5e-4 · e`` at ``n = 1000``). Its sign is
    unknown, so it is charged upward: every held eigenvalue is raised by ``ρ`` (Weyl);
    computed eigenvalues within ``ρ`` of 0 count as 0 for ``rank`` but may be positive, so the
    sample is never taken to have left a direction unexplored and the complement is charged
    ``tr Σ̂`` (the unresolved case above; no subspace carries more). The floors above are kept,
    never lowered. ``ρ`` is a worst case (typical errors are orders of magnitude smaller), so
    small eigenpairs of float32 outputs are pooled into the complement and noised there: more
    noise, never less. For the plug-in rules this is part of their estimate of ``Σ``
    (Algorithm 1 sees every eigenvalue raised by at least the round-off); the default
    ``"certified"`` rule does not use this spectrum (it certifies its noise on held-out trials
    in float64, :func:`pacpriv.pac.noise.certify_noise`), so no round-off here can loosen
    a certified bound. The basis vectors ``Xcᵀ u_j / sqrt((n−1) λ_j)`` are orthonormal up to
    ``||E|| / λ_j`` (round-off).

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, §4 (Algorithm 1 step: estimate Σ).
    """
    arr = _check_outputs(outputs)
    if not isinstance(method, str) or method not in _METHODS:
        raise ValueError(f"`method` must be one of {_METHODS}; got {method!r}.")
    if n_components is not None:
        n_components = check_int(n_components, "n_components", low=1)
    if block_size is not None:
        block_size = check_int(block_size, "block_size", low=1)
    if eigenvector_dtype is None:
        eigenvector_dtype = np.float32 if arr.dtype.itemsize <= 4 and np.issubdtype(
            arr.dtype, np.floating) else np.float64
    eigenvector_dtype = np.dtype(eigenvector_dtype)
    if eigenvector_dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(
            f"`eigenvector_dtype` must be float32 or float64; got {eigenvector_dtype}."
        )
    if not isinstance(eigenvectors, str) or eigenvectors not in _BASES:
        raise ValueError(f"`eigenvectors` must be one of {_BASES}; got {eigenvectors!r}.")
    n, d = arr.shape
    if method == "auto":
        method = "dense" if d <= n else "gram"
    if gram is not None:
        _check_shared(gram, arr, method, gram_dtype)
        gram_dtype = np.float64
    gram_dtype = _gram_dtype(gram_dtype, arr.dtype, n, d)
    with one_blas_thread(n, d):
        return _spectrum(arr, method, n_components, eigenvector_dtype, block_size, gram_dtype,
                         eigenvectors, gram)


def _check_shared(gram, arr: np.ndarray, method: str, gram_dtype) -> None:
    """Refuse a shared Gram that does not describe ``arr`` or does not fit the options."""
    if not isinstance(gram, CentredGram):
        raise TypeError(f"`gram` must be a CentredGram or None; got {type(gram).__name__}.")
    if gram.outputs is not arr or gram.variances is None:
        raise ValueError("`gram` must be the centred Gram of `outputs` itself (made by "
                         "centred_gram(outputs)).")
    if method != "gram":
        raise ValueError("`gram` applies to the Gram path only (method='gram', or 'auto' with "
                         f"d > n_trials); got method={method!r}.")
    if gram_dtype is not None and np.dtype(gram_dtype) != np.float64:
        raise ValueError(f"`gram` is a float64 Gram: `gram_dtype` must be None or float64; got "
                         f"{gram_dtype!r}.")


def _spectrum(arr, method, n_components, eigenvector_dtype, block_size, gram_dtype,
              eigenvectors, shared=None) -> OutputSpectrum:
    """The body of :func:`estimate_output_spectrum` on validated arguments."""
    n, d = arr.shape
    if method == "dense":
        mean, variances, cov = dense_covariance(arr, block_size=block_size)
        safe = resolved_eigh(cov, n_trials=n, stacklevel=4)
        k = d if n_components is None else min(n_components, d)
        lam, tail = safe.eigenvalues[:k], float(np.sum(safe.eigenvalues[k:]))
        basis: np.ndarray | LazyEigenbasis = np.ascontiguousarray(
            safe.eigenvectors[:, :k], dtype=eigenvector_dtype)
        rank, res, blocks, infl, unresolved = (safe.rank, safe.resolution, safe.n_blocks,
                                               safe.block_inflation, safe.unresolved_dim)
        rounding, gram_name = 0.0, None
    else:
        lazy = eigenvectors == "lazy" or (
            eigenvectors == "auto" and 8 * d * min(n - 1, n_components or n) > LAZY_BASIS_BYTES)
        mean, variances, lam, vecs, tail, rank, rounding = gram_spectrum(
            arr, n_components=n_components, eigenvector_dtype=None if lazy else eigenvector_dtype,
            block_size=block_size, gram_dtype=gram_dtype, shared=shared,
        )
        basis = vecs
        if lazy:
            basis = LazyEigenbasis(arr, _readonly(mean), vecs, block_size=block_size)
        lam, tail, res, unresolved = floor_gram(
            lam, tail, rank=rank, n_trials=n, dim=d, total_variance=float(np.sum(variances)),
            rounding=rounding)
        blocks, infl, gram_name = 1, 0.0, gram_dtype.name
    total = float(np.sum(variances))
    _warn_if_constant(total, stacklevel=4)
    return OutputSpectrum(
        mean=_readonly(mean), eigenvalues=_readonly(lam), eigenvectors=_readonly(basis),
        variances=_readonly(variances), total_variance=total, tail_variance=tail,
        n_trials=n, dim=d, rank=rank, method=method, resolution=res, scale_blocks=blocks,
        block_inflation=infl, unresolved_dim=unresolved, gram_dtype=gram_name, rounding=rounding,
    )


def _gram_dtype(gram_dtype, out_dtype: np.dtype, n: int, d: int) -> np.dtype:
    """The Gram product's dtype: the given one (float32/float64), or the default rule."""
    if gram_dtype is None:
        narrow = np.issubdtype(out_dtype, np.floating) and out_dtype.itemsize <= 4
        return np.dtype(np.float32 if narrow and n * n * d >= FLOAT32_GRAM_MIN_WORK
                        else np.float64)
    try:
        dt = np.dtype(gram_dtype)
    except TypeError as exc:
        raise TypeError(f"`gram_dtype` must be None, float32 or float64; got {gram_dtype!r}.") \
            from exc
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"`gram_dtype` must be None, float32 or float64; got {dt}.")
    return dt


def spectrum_from_covariance(cov, mean=None) -> OutputSpectrum:
    """Wrap a known output covariance ``Σ`` (e.g. computed analytically) as an OutputSpectrum.

    Parameters
    ----------
    cov : array_like of shape (d, d)
        Symmetric positive semidefinite covariance (float, finite). Symmetric up to
        ``1e-8 · max|Σ|``; it is symmetrised.
    mean : array_like of shape (d,), optional
        Output mean (default zeros); only carried along.

    Returns
    -------
    OutputSpectrum
        With ``method="covariance"`` and ``n_trials=None``.

    Raises
    ------
    TypeError
        If ``cov`` is not real-valued.
    ValueError
        If ``cov`` is not square, not symmetric, not finite, has a clearly negative eigenvalue,
        or ``mean`` has the wrong shape or is not finite.

    Warns
    -----
    DegenerateOutputWarning
        If a negative eigenvalue beyond round-off (but not clearly negative) is clipped.
    ConstantOutputWarning
        If ``Σ = 0``.
    """
    c = np.asarray(cov)
    if c.dtype == bool or not (np.issubdtype(c.dtype, np.floating) or np.issubdtype(
            c.dtype, np.integer)):
        raise TypeError(f"`cov` must hold real numbers; got dtype {c.dtype}.")
    c = c.astype(np.float64)
    if c.ndim != 2 or c.shape[0] != c.shape[1] or c.shape[0] < 1:
        raise ValueError(f"`cov` must be a square (d, d) matrix with d >= 1; got shape {c.shape}.")
    if not np.all(np.isfinite(c)):
        raise ValueError("`cov` must be finite; found NaN or inf.")
    d = c.shape[0]
    scale = float(np.max(np.abs(c)))
    if np.max(np.abs(c - c.T)) > 1e-8 * scale:
        raise ValueError("`cov` must be symmetric (up to 1e-8 relative); it is not.")
    if mean is None:
        m = np.zeros(d)
    else:
        m = np.array(mean, dtype=np.float64)
        if m.shape != (d,) or not np.all(np.isfinite(m)):
            raise ValueError(f"`mean` must be a finite array of shape ({d},); got {m.shape}.")
    safe = resolved_eigh((c + c.T) / 2.0, n_trials=None, stacklevel=3)
    variances = np.clip(np.diag(c).copy(), 0.0, None)
    total = float(np.sum(variances))
    _warn_if_constant(total)
    return OutputSpectrum(
        mean=_readonly(m), eigenvalues=_readonly(safe.eigenvalues),
        eigenvectors=_readonly(np.ascontiguousarray(safe.eigenvectors)),
        variances=_readonly(variances), total_variance=total, tail_variance=0.0,
        n_trials=None, dim=d, rank=safe.rank, method="covariance", resolution=safe.resolution,
        scale_blocks=safe.n_blocks, block_inflation=safe.block_inflation,
    )


def effective_rank(eigenvalues) -> float:
    """Roy & Vetterli (2007) effective rank ``exp(−Σ p ln p)``, ``p = λ / Σλ`` over ``λ > 0``
    (``0 ln 0 = 0``); 0 when no eigenvalue is positive. See :attr:`OutputSpectrum.effective_rank`.
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    lam = lam[lam > 0]
    if lam.size == 0:
        return 0.0
    p = lam / lam.max()
    p = p / p.sum()
    return float(min(np.exp(float(np.sum(entr(p)))), lam.size))
