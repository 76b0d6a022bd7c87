"""Certified mutual-information bounds for Gaussian noise on a black box ([PAC] Thm 3).

Release ``Y = f(X) + B`` with ``B ~ N(0, Σ_B)`` independent of ``X``; with ``Σ = Cov(f(X))``
under the sampler,

    MI(X; Y) <= ½ ln det(I + Σ Σ_B⁻¹)                              (nats)

(Xiao & Devadas, CRYPTO 2023, Thm 3). In a shared eigenbasis this is
``½ Σ_j ln(1 + λ_j / s_j²) <= ½ Σ_j λ_j / s_j²``
(the *linearised* bound that the square-root rule calibrates). All evaluations use ``log1p`` of
eigenvalues; none forms a ``d x d`` matrix.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy: Automatic Privacy Measurement and Control of Data
   Processing. CRYPTO 2023, arXiv:2210.03458, Thm 3.
"""

from __future__ import annotations

import numpy as np

from pacpriv._validation import check_array_real, check_real

__all__ = ["gaussian_mi_bound", "gaussian_mi_bound_whitened", "linearised_mi_bound"]

_ROWS_PER_BLOCK = 65536
#: A signal component of energy below this fraction of trace(Σ) in a zero-noise subspace is
#: eigen-decomposition round-off, not signal (otherwise the bound would be +inf).
_ZERO_NOISE_LEAK = (1e3 * np.finfo(np.float64).eps) ** 2


def _pair(eigenvalues, noise_variance, multiplicity):
    lam = check_array_real(eigenvalues, "eigenvalues", low=0.0)
    s2 = check_array_real(noise_variance, "noise_variance", low=0.0)
    if lam.shape != s2.shape or lam.ndim != 1:
        raise ValueError(
            f"`eigenvalues` and `noise_variance` must be 1-D of the same length; got shapes "
            f"{lam.shape} and {s2.shape}."
        )
    if multiplicity is None:
        mult = np.ones_like(lam)
    else:
        mult = check_array_real(multiplicity, "multiplicity", low=0.0)
        if mult.shape != lam.shape:
            raise ValueError(
                f"`multiplicity` must have the shape of `eigenvalues` {lam.shape}; "
                f"got {mult.shape}."
            )
    return lam, s2, mult


def gaussian_mi_bound(eigenvalues, noise_variance, *, multiplicity=None) -> float:
    """``½ Σ_j m_j ln(1 + λ_j / s_j²)``: the MI bound when Σ and Σ_B share an eigenbasis.

    Parameters
    ----------
    eigenvalues : array_like of shape (k,)
        Eigenvalues ``λ_j >= 0`` of the output covariance.
    noise_variance : array_like of shape (k,)
        Noise **variances** ``s_j² >= 0`` along the same eigenvectors.
    multiplicity : array_like of shape (k,), optional
        Number of directions ``m_j >= 0`` sharing ``(λ_j, s_j²)`` (default 1 each).

    Returns
    -------
    float
        Bound in nats: ``+inf`` if some ``λ_j > 0`` has ``s_j² = 0``; terms with ``λ_j = 0``
        contribute 0.

    Raises
    ------
    TypeError, ValueError
        If an input is not numeric, negative, non-finite or the shapes differ.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 3.

    Examples
    --------
    >>> round(gaussian_mi_bound([4.0, 1.0], [6.0, 3.0]), 5)
    0.39925
    """
    lam, s2, mult = _pair(eigenvalues, noise_variance, multiplicity)
    signal = (lam > 0) & (mult > 0)
    if np.any(signal & (s2 == 0)):
        return float("inf")
    return float(0.5 * np.sum(mult[signal] * np.log1p(lam[signal] / s2[signal])))


def linearised_mi_bound(eigenvalues, noise_variance, *, multiplicity=None) -> float:
    """``½ Σ_j m_j λ_j / s_j²``: the linearised (trace) bound, ``>=`` :func:`gaussian_mi_bound`.

    Parameters and Raises as :func:`gaussian_mi_bound`. Returns nats (``+inf`` if a
    signal direction has zero noise).

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 3 (``ln(1+x) <= x``).
    """
    lam, s2, mult = _pair(eigenvalues, noise_variance, multiplicity)
    signal = (lam > 0) & (mult > 0)
    if np.any(signal & (s2 == 0)):
        return float("inf")
    return float(0.5 * np.sum(mult[signal] * lam[signal] / s2[signal]))


def _row_blocks(d: int):
    for start in range(0, d, _ROWS_PER_BLOCK):
        yield slice(start, min(start + _ROWS_PER_BLOCK, d))


def gaussian_mi_bound_whitened(
    eigenvalues,
    eigenvectors,
    *,
    noise_variance,
    noise_basis=None,
    residual_variance: float = 0.0,
) -> float:
    """``½ ln det(I + Σ Σ_B⁻¹)`` for a noise covariance in a different basis.

    ``Σ = V diag(λ) V^T`` (``V`` of shape ``(d, k)``, orthonormal columns). The noise is
    ``Σ_B = W diag(e) W^T + r (I - W W^T)`` for an orthonormal ``noise_basis`` ``W`` of shape
    ``(d, m)``, or ``Σ_B = diag(e)`` (coordinate axes) when ``noise_basis`` is None.

    Parameters
    ----------
    eigenvalues : array_like of shape (k,)
        ``λ >= 0``.
    eigenvectors : ndarray or LazyEigenbasis of shape (d, k)
        Orthonormal eigenvectors of ``Σ``.
    noise_variance : array_like of shape (m,) or (d,)
        Noise variances ``e >= 0`` along ``noise_basis`` columns (or along the axes).
    noise_basis : ndarray of shape (d, m), optional
        Orthonormal noise directions; None means the coordinate axes (``m = d``).
    residual_variance : float, default 0
        Noise variance ``r`` on the complement of ``span(W)`` (ignored when ``W`` is None).

    Returns
    -------
    float
        Bound in nats; ``+inf`` when a signal component lies in a zero-noise direction.

    Raises
    ------
    ValueError
        If shapes disagree or values are negative / non-finite.

    Notes
    -----
    With ``A = Σ_B^{-1/2} V diag(sqrt λ)`` (``d x k``), Sylvester's identity
    ``det(I_d + A A^T) = det(I_k + A^T A)`` reduces the bound to the ``k x k`` matrix
    ``M = A^T A``, accumulated over row blocks; the result is ``½ Σ log1p(eig(M))``.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 3; [2] Sridhar, Xiao & Devadas,
       PAC-Private Algorithms, IEEE S&P 2025, Thm 1 (noise in a fixed public basis).
    """
    lam = check_array_real(eigenvalues, "eigenvalues", low=0.0)
    # a lazy basis (spectrum._eigenbasis) is read by row blocks below, never formed whole
    vecs = eigenvectors if hasattr(eigenvectors, "matvec") else np.asarray(eigenvectors)
    if vecs.ndim != 2 or lam.shape != (vecs.shape[1],):
        raise ValueError(
            f"`eigenvectors` must have shape (d, {lam.shape[0] if lam.ndim else '?'}); "
            f"got {vecs.shape}."
        )
    d, k = vecs.shape
    e = check_array_real(noise_variance, "noise_variance", low=0.0)
    r = check_real(residual_variance, "residual_variance", low=0.0)
    root = np.sqrt(lam)
    trace = float(np.sum(lam))
    if trace == 0.0:
        return 0.0
    leak_tol = _ZERO_NOISE_LEAK * trace
    m_mat = np.zeros((k, k))
    if noise_basis is None:
        if e.shape != (d,):
            raise ValueError(f"`noise_variance` must have shape ({d},); got {e.shape}.")
        inv = np.where(e > 0, 1.0 / np.where(e > 0, e, 1.0), 0.0)
        leak = 0.0
        for rows in _row_blocks(d):
            f = np.asarray(vecs[rows], dtype=np.float64) * root
            m_mat += f.T @ (f * inv[rows, None])
            leak += float(np.sum(f[e[rows] == 0] ** 2))
        if leak > leak_tol:
            return float("inf")
    else:
        w = noise_basis if hasattr(noise_basis, "matvec") else np.asarray(noise_basis)
        if w.ndim != 2 or w.shape[0] != d or e.shape != (w.shape[1],):
            raise ValueError(
                f"`noise_basis` must have shape ({d}, m) and `noise_variance` shape (m,); got "
                f"{w.shape} and {e.shape}."
            )
        proj = np.zeros((w.shape[1], k))
        gram = np.zeros((k, k))
        for rows in _row_blocks(d):
            f = np.asarray(vecs[rows], dtype=np.float64) * root
            proj += np.asarray(w[rows], dtype=np.float64).T @ f
            gram += f.T @ f
        if np.any(e == 0) and float(np.sum(proj[e == 0] ** 2)) > leak_tol:
            return float("inf")
        inv = np.where(e > 0, 1.0 / np.where(e > 0, e, 1.0), 0.0)
        m_mat = proj.T @ (proj * inv[:, None])
        outside = gram - proj.T @ proj  # signal energy outside span(W)
        if r > 0.0:
            m_mat += outside / r
        elif float(np.trace(outside)) > leak_tol:
            return float("inf")
    ev = np.linalg.eigvalsh((m_mat + m_mat.T) / 2.0)
    return float(0.5 * np.sum(np.log1p(np.clip(ev, 0.0, None))))
