"""The certificate's lift from the Gram matrix, with a round-off bound (``d > n_trials``).

:func:`~pacpriv.pac.noise._reduced.realign` needs, for the shape's directions ``V = Z̃ᵀ B``
(``Z̃`` the centred outputs, ``n × d``; ``B`` ``n × k`` coefficients with ``BᵀKB = I``), the
rows' coordinates ``C = Z̃ V = (Z̃ Z̃ᵀ) B``. In exact arithmetic that is ``K B`` with the Gram
matrix ``K`` already made: no pass over the outputs, and ``V`` itself is never formed (the plan
keeps it as a :class:`~pacpriv.pac.spectrum._eigenbasis.LazyEigenbasis`, applied at release
time by passes over the outputs). In floating point ``K̂ = Z̃Z̃ᵀ + E`` with ``||E||₂ <= e_K``
(:func:`pacpriv.pac.spectrum._gram.pass_error`), and going through ``K̂`` squares condition
numbers (the error of a direction of variance ``λ`` is relative ``e_K/λ``, not
``sqrt(e_K/λ)``). :func:`lift_slack` bounds what this does to the certificate:

Let ``q̂(w) = wᵀ M̂ w`` be the whitened norm the certificate computes for a combination
``y = Z̃ᵀw`` of the rows (``1ᵀw = 0``: every summand, clip and trace is of such
differences; ``M̂ = P' W P'ᵀ`` from its rows ``P'``), and ``q(y) = yᵀ S_eff⁻¹ y`` the one of
the noise the release really adds (with the basis ``V``, not exactly orthonormal:
``VᵀV = I + Δ``, ``||Δ||₂ <= δ``). Then ``q(y) <= (1 + ε) q̂(w)`` for every such ``w``, with

* ``δ <= ||fl(BᵀK̂B) − I||₂ + γ_{2n+2}|| |B|ᵀ|K̂||B| ||₂ + ||B||₂² e_K``;
* the release's noise (``Σ = V D Vᵀ + a_c (I − VVᵀ)²``, signal map ``L = I + VΔVᵀ``) against
  ``A_Q = Q D Qᵀ + a_c (I − QQᵀ)`` (``V = QH`` polar): ``||Σ − A_Q|| <= (2δ + δ²) a_max +
  δ² a_c = θ₁ a_min`` and ``||L − I|| <= (1 + δ)δ = ℓ``, so
  ``q(y) <= q_Q(y) (1 + ℓ sqrt(a_max/a_min))² / (1 − θ₁) = (1 + ε₁) q_Q(y)``;
* ``q_Q(y) = wᵀ M_Q w``, ``M_Q = Z̃Z̃ᵀ/a_c + (Z̃V) H⁻¹D'H⁻¹ (Z̃V)ᵀ`` (``D' = D⁻¹ − I/a_c``),
  ``Z̃V = fl(K̂B) + Δ_C`` with ``||Δ_C|| <= γ_{n+2} || |K̂||B| ||₂ + e_K ||B||₂ = e_C``; so
  ``||M_Q − M̂|| <= e_K/a_c + ||D'||((||C|| + e_C)²(2t + t²) + 2e_C||C|| + e_C²) + ||M̂_K −
  M̂||`` (``t = δ/(1 − δ)``, ``M̂_K`` the formula on ``K̂``), and ``M_Q <= (1 + ε₂) M̂`` on
  ``1⊥`` with ``ε₂`` that over ``λ_min(M̂|1⊥)`` (less its eigenvalue round-off);
* ``ε₃ = γ_{4(k+n)+8} a_max/a_min`` for the summands' own arithmetic.

``1 + ε = (1 + ε₁)(1 + ε₂)(1 + ε₃)``. The certificate multiplies every summand, range and trace
by ``1 + ε`` (the summands then dominate the exact ones: a valid input of the same bound).
:data:`MAX_SLACK` caps ``ε``: above it (ill-conditioned or rank-deficient outputs, where the
Gram route loses too much) :func:`gram_lift` answers None and the lift reads the outputs
(the direct route, ``C = Z̃V`` from the data). Reference: N. J. Higham, *Accuracy and Stability
of Numerical Algorithms*, 2nd ed., SIAM 2002, §3.1 (``γ_k``) and §10.1 (the polar factor).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg

from pacpriv.pac.spectrum._gram import _gamma

__all__ = ["MAX_SLACK", "gram_lift", "lift_slack"]

#: Largest round-off factor ``ε`` the Gram route may charge; above it the lift reads the data.
MAX_SLACK = 1e-5


def gram_lift(gram: np.ndarray, coef: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(B, C)``: ``B = coef R⁻¹`` with ``R = chol(coefᵀ K coef)`` (so ``BᵀKB = I``) and the
    coordinates ``C = K B`` (n, k); None when the Cholesky factor does not exist."""
    try:
        upper = linalg.cholesky(coef.T @ gram @ coef, lower=False)
    except linalg.LinAlgError:
        return None
    b = linalg.solve_triangular(upper, coef.T, lower=False, trans="T").T
    return b, gram @ b


def _basis_of_ones_complement(n: int) -> np.ndarray:
    """An orthonormal basis (n, n − 1) of ``1⊥``: a Householder reflector's last columns."""
    v = np.full(n, -1.0 / math.sqrt(n))
    v[0] += 1.0
    v /= np.linalg.norm(v)
    return (np.eye(n) - 2.0 * np.outer(v, v))[:, 1:]


def lift_slack(gram: np.ndarray, error: float, b: np.ndarray, c: np.ndarray,
               rows: np.ndarray, a: np.ndarray, a_c: float) -> float:
    """``ε`` of the module docstring (``math.inf`` when the bound does not close).

    ``gram`` ``K̂`` (n, n) with ``||K̂ − Z̃Z̃ᵀ||₂ <= error``; ``b``, ``c`` from :func:`gram_lift`;
    ``rows`` ``P'`` (n, k + p): the coordinates ``c`` then the rest, whitened by ``1/a`` and
    ``1/a_c``.
    """
    n, k = b.shape
    if not (np.isfinite(error) and a_c > 0 and np.all(a > 0)):
        return math.inf
    fro_k = float(np.linalg.norm(gram))
    b2 = float(np.linalg.norm(b, 2))
    abs_kb = np.abs(gram) @ np.abs(b)
    ortho = b.T @ gram @ b
    ortho[np.diag_indices(k)] -= 1.0
    delta = (float(np.linalg.norm(ortho, 2))
             + _gamma(2 * n + 2) * float(np.linalg.norm(np.abs(b).T @ abs_kb, 2))
             + b2 * b2 * error)
    if not delta < 0.25:
        return math.inf
    a_max, a_min = max(float(a.max()), a_c), min(float(a.min()), a_c)
    theta = ((2.0 * delta + delta * delta) * a_max + delta * delta * a_c) / a_min
    if not theta < 0.5:
        return math.inf
    ell = (1.0 + delta) * delta
    eps1 = (1.0 + ell * math.sqrt(a_max / a_min)) ** 2 / (1.0 - theta) - 1.0
    t = delta / (1.0 - delta)
    e_c = _gamma(n + 2) * float(np.linalg.norm(abs_kb, 2)) + error * b2
    c2 = float(np.linalg.norm(c, 2))
    d_prime = 1.0 / a - 1.0 / a_c
    d_max = float(np.max(np.abs(d_prime)))
    weights = np.concatenate([1.0 / a, np.full(rows.shape[1] - k, 1.0 / a_c)])
    m_rows = (rows * weights) @ rows.T
    m_gram = gram / a_c + (c * d_prime) @ c.T
    arith = _gamma(rows.shape[1] + n + 4) * (
        float(np.linalg.norm(rows)) ** 2 / a_min + fro_k / a_c
        + float(np.linalg.norm(c)) ** 2 * d_max)
    gap = (error / a_c + d_max * ((c2 + e_c) ** 2 * (2.0 * t + t * t) + 2.0 * e_c * c2
                                  + e_c * e_c)
           + float(np.linalg.norm(m_rows - m_gram, 2)) + arith)
    comp = _basis_of_ones_complement(n)
    low = float(linalg.eigvalsh(comp.T @ m_rows @ comp)[0])
    low -= _gamma(8 * n) * float(np.linalg.norm(m_rows))
    if not low > 0:
        return math.inf
    eps2 = gap / low
    eps3 = _gamma(4 * (rows.shape[1] + n) + 8) * a_max / a_min
    return (1.0 + eps1) * (1.0 + eps2) * (1.0 + eps3) - 1.0
