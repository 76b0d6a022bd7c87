"""Safe-side eigenvalue post-processing for :mod:`pacpriv.pac.spectrum._covariance` (private).

The noise rules give a direction noise in proportion to (a power of) its eigenvalue, so an
eigenvalue that is *understated* understates the risk: an eigenvalue rounded to 0 gets no noise
and an infinite true MI. This module therefore follows one rule: **numerical resolution may
raise an eigenvalue, never lower a positive variance**. Three cases:

* **Round-off.** A symmetric eigensolver is backward stable: the computed ``V diag(λ̂) V^T``
  equals ``Σ + E`` with ``||E||₂ <= c · eps · ||Σ||₂`` (Golub & Van Loan, *Matrix
  Computations*, 4th ed., §8.3, symmetric QR), so by Weyl's inequality (Horn & Johnson,
  *Matrix Analysis*, 2nd ed., Thm 4.3.1) each eigenvalue is off by at most ``||E||₂``; the
  scatter matrix itself carries an error of order ``n · eps · ||Σ||``. With the
  *resolution* ``ρ_res = eps · λ_max · max(n, d)`` every eigenvalue is reported as
  ``max(λ̂, 0) + ρ_res``, so ``Σ ⪯ V diag(λ) V^T`` up to that round-off: a rounded-away
  direction gets noise at the resolution, never none.
* **Scale separation.** An absolute resolution of ``eps · λ_max`` wipes out coordinates whose
  variance is more than ``~1/eps`` below the largest (e.g. a dollar total next to a share).
  Coordinates are split into *scale blocks* (sorted by variance; a new block starts when a
  variance falls more than :data:`SCALE_SEPARATION` below the block's largest) and each block is
  eigen-decomposed on its own, with its own resolution. The blocks' cross-covariances are
  covered by a Loewner upper bound (proof: for ``S = diag(s_a)``, ``||S_a⁻¹ C_ab S_b⁻¹||₂ <=
  ρ_ab`` gives ``[[ρ_ab S_a², −C_ab], [−C_abᵀ, ρ_ab S_b²]] ⪰ 0``)::

      Σ ⪯ blockdiag_b( Σ_bb + (Σ_{a≠b} ρ_ab) · diag(Var_b) ),   ρ_ab = ||R_ab||₂,

  where ``R`` is the correlation matrix. Uncorrelated blocks cost nothing (``ρ ≈ 0``); fully
  correlated ones at most double their block's variances. The eigenvectors are block-embedded
  (still orthonormal), so every noise rule runs unchanged on the bounding spectrum. This is the
  "fall back per block" option: per-coordinate standardisation would need a non-orthogonal
  noise basis. Only the dense path (``d <= n_trials``) and known covariances do this; the Gram
  path keeps one block and the resolution floor (safe, but it over-noises small-scale
  coordinates; split such outputs or use ``rule="variance-only"``).
* **Unresolved directions.** With ``n`` trials the sample covariance has rank ``<= n − 1``.
  If the sample filled all ``n − 1`` directions (its rank is ``n − 1 < d``), the directions
  outside the sample span were *not resolved*: the simulation says nothing about them, so they
  are charged an upper bound, the block's whole trace (``tr Σ̂``, which no sub-trace exceeds),
  spread over them as one pooled group (by concavity of ``ln`` and Fischer's inequality this
  bounds their MI term whatever the split). If the sample rank is below ``n − 1``, the outputs
  lie in a lower-dimensional subspace and the remaining directions are at the resolution.

Exactly constant coordinates (sample variance 0) keep eigenvalue 0: the simulation saw no
variation there at all, which the calibration reports separately.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pacpriv.pac.spectrum._spectral import clip_eigenvalues

#: Coordinates whose variances differ by more than this factor go to separate scale blocks.
SCALE_SEPARATION = 1e8

_EPS = float(np.finfo(np.float64).eps)
_TINY = float(np.finfo(np.float64).tiny)
#: Relative safety margin on the cross-correlation norms (their own round-off).
_RHO_MARGIN = 1e-9


@dataclass(frozen=True)
class Resolved:
    """Safe-side eigen-decomposition (private result of :func:`resolved_eigh`).

    ``eigenvalues`` (descending) and ``eigenvectors`` ``(d, d)`` describe a matrix that bounds
    the input covariance from above (Loewner order) up to round-off; ``rank`` is the number of
    sample eigenvalues above round-off; ``resolution`` the largest floor added; ``n_blocks`` the
    number of scale blocks; ``block_inflation`` the largest cross-block factor ``Σ_a ρ_ab``;
    ``unresolved_dim`` the number of directions charged the trace bound.
    """

    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    rank: int
    resolution: float
    n_blocks: int
    block_inflation: float
    unresolved_dim: int


def resolution(lam_max: float, size: int) -> float:
    """Eigenvalue resolution ``max(eps · λ_max · size, tiny)`` (``size = max(n_trials, d)``).

    ``tiny`` (2.2e-308, the smallest normal double) keeps subnormal eigenvalues, whose noise
    variances would underflow, at a representable floor; 0 for ``λ_max = 0``.
    """
    if not lam_max > 0:
        return 0.0
    return max(_EPS * float(lam_max) * max(int(size), 1), _TINY)


def scale_blocks(variances: np.ndarray) -> list[np.ndarray]:
    """Coordinate index blocks of positive variance, largest scale first (see module doc)."""
    pos = np.flatnonzero(variances > 0)
    order = pos[np.argsort(-variances[pos], kind="stable")]
    blocks: list[list[int]] = []
    top = 0.0
    for j in order:
        if not blocks or variances[j] * SCALE_SEPARATION < top:
            blocks.append([])
            top = float(variances[j])
        blocks[-1].append(int(j))
    return [np.sort(np.asarray(b, dtype=np.intp)) for b in blocks]


def _cross_inflation(cov: np.ndarray, std: np.ndarray, blocks: list[np.ndarray]) -> np.ndarray:
    """``Σ_{a≠b} ||R_ab||₂`` per block (with a small relative margin), ``R`` the correlation."""
    infl = np.zeros(len(blocks))
    for a in range(len(blocks)):
        for b in range(a + 1, len(blocks)):
            ia, ib = blocks[a], blocks[b]
            r_ab = cov[np.ix_(ia, ib)] / np.outer(std[ia], std[ib])
            rho = float(np.linalg.norm(r_ab, 2)) * (1.0 + _RHO_MARGIN)
            infl[a] += rho
            infl[b] += rho
    return infl


def floor_block(lam: np.ndarray, *, n_trials: int | None, size: int, trace: float):
    """Floor one block's descending eigenvalues (already clipped >= 0).

    Returns ``(lam_safe, rank, resolution, unresolved)``: eigenvalues above round-off get
    ``+ resolution``; those at round-off get the resolution, or, when the sample filled all
    ``n_trials − 1`` directions (unresolved complement), ``trace / (number of them)``.
    """
    lam = np.asarray(lam, dtype=np.float64)
    if lam.size == 0:
        return lam.copy(), 0, 0.0, 0
    res = resolution(lam[0], size)
    rank = int(np.sum(lam > 0))
    out = lam + res
    rest = lam.size - rank
    unresolved = 0
    if rest and n_trials is not None and rank >= n_trials - 1:
        unresolved = rest
        out[rank:] = max(trace / rest, res)
    return out, rank, res, unresolved


def resolved_eigh(cov: np.ndarray, *, n_trials: int | None, stacklevel: int = 4) -> Resolved:
    """Safe-side eigen-decomposition of a ``(d, d)`` covariance (scale blocks, floors).

    Parameters
    ----------
    cov : ndarray of shape (d, d), float64
        Symmetric sample (or known) covariance (symmetrised by the caller; not copied).
    n_trials : int or None
        Number of samples behind ``cov`` (None for a known covariance: nothing unresolved).
    """
    d = cov.shape[0]
    size_n = 0 if n_trials is None else n_trials
    if np.any(np.diag(cov) < 0):  # PSD check on the whole matrix (raises if clearly negative)
        clip_eigenvalues(np.linalg.eigvalsh(cov)[::-1], size=max(size_n, d), eps=_EPS,
                         stacklevel=stacklevel + 1, computed=n_trials is not None)
    var = np.clip(np.diag(cov).copy(), 0.0, None)
    blocks = scale_blocks(var)
    if len(blocks) == 1 and blocks[0].size == d:  # one block, no constant coordinate:
        lam, v = np.linalg.eigh(cov)                # no d x d copies beyond eigh's own
        lam = clip_eigenvalues(lam[::-1], size=max(size_n, d), eps=_EPS,
                               stacklevel=stacklevel + 1, computed=n_trials is not None)
        lam, rank, res, unresolved = floor_block(lam, n_trials=n_trials, size=max(size_n, d),
                                                 trace=float(np.sum(var)))
        order = np.argsort(-lam, kind="stable") if unresolved else slice(None)
        return Resolved(eigenvalues=lam[order], eigenvectors=v[:, ::-1][:, order], rank=rank,
                        resolution=res, n_blocks=1, block_inflation=0.0,
                        unresolved_dim=unresolved)
    lam_out = np.zeros(d)
    vecs = np.zeros((d, d))
    zero = np.flatnonzero(var == 0)
    col = 0
    for j in zero:  # exactly constant coordinates: eigenvalue 0 on their own axis
        vecs[j, col] = 1.0
        col += 1
    infl = _cross_inflation(cov, np.sqrt(var), blocks) if len(blocks) > 1 else np.zeros(1)
    rank_total, res_max, unresolved_total = 0, 0.0, 0
    for b, idx in enumerate(blocks):
        sub = cov[np.ix_(idx, idx)]
        if infl[b] > 0:
            sub = sub + infl[b] * np.diag(var[idx])
        lam, v = np.linalg.eigh(sub)
        lam = clip_eigenvalues(lam[::-1], size=max(size_n, idx.size), eps=_EPS,
                               stacklevel=stacklevel + 1, computed=n_trials is not None)
        lam, rank, res, unresolved = floor_block(
            lam, n_trials=n_trials, size=max(size_n, idx.size), trace=float(np.trace(sub)))
        k = idx.size
        lam_out[col : col + k] = lam
        vecs[idx, col : col + k] = v[:, ::-1]
        col += k
        rank_total += rank
        res_max = max(res_max, res)
        unresolved_total += unresolved
    order = np.argsort(-lam_out, kind="stable")
    return Resolved(
        eigenvalues=lam_out[order], eigenvectors=vecs[:, order], rank=rank_total,
        resolution=res_max, n_blocks=len(blocks),
        block_inflation=float(np.max(infl)) if len(blocks) > 1 else 0.0,
        unresolved_dim=unresolved_total,
    )


def floor_gram(lam_held: np.ndarray, tail: float, *, rank: int, n_trials: int, dim: int,
               total_variance: float, rounding: float = 0.0):
    """Gram path: held eigenvalues ``+ resolution``; the complement's pooled mass.

    The ``dim − k`` complement directions carry the dropped sample eigenvalues plus, each, the
    resolution; or, when the sample filled all ``n_trials − 1`` directions, the whole trace
    (they are unresolved). ``rounding`` is an a priori bound on the Gram's own round-off (the
    float32 Gram's :func:`~pacpriv.pac.spectrum._spectral.float32_gram_error`): by Weyl's inequality
    each sample eigenvalue is at most its computed value plus ``rounding``, so it is added to
    every held eigenvalue; and since computed eigenvalues within ``rounding`` of 0 may be
    positive, such a Gram cannot show that the sample left a direction unexplored: its
    complement is always treated as unresolved (charged ``tr Σ̂``). Returns
    ``(lam_held_safe, tail_safe, resolution, unresolved_dim)``; ``resolution`` includes
    ``rounding``.
    """
    lam = np.asarray(lam_held, dtype=np.float64)
    k = lam.size
    res = resolution(lam[0], max(n_trials, dim)) if k else 0.0
    n_comp = dim - k
    filled = rank >= n_trials - 1 or rounding > 0
    if filled and dim > rank and total_variance > 0:
        unresolved = dim - rank
        tail_safe = tail + max(total_variance, n_comp * res)  # >= tr Σ̂ >= the complement's mass
    else:
        unresolved = 0
        tail_safe = tail + n_comp * res
    return lam + res + rounding, float(tail_safe), res + rounding, unresolved
