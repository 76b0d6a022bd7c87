"""Math of per-record PAC membership privacy (private helpers of :mod:`pacpriv.pac.per_record`).

* :func:`bayes_accuracy`: Bayes accuracy of two Gaussians with a common covariance at
  Mahalanobis distance ``d`` and prior ``q`` (PAC Privacy [1]_ §2, individual privacy).
* :func:`record_mi_term`: ``min(q(1−q)d², H_b(q))``, an upper bound of ``I(b_i; Y | X₋ᵢ, θ)``.
* :func:`bernstein_upper`: the empirical-Bernstein upper confidence bound of Maurer & Pontil
  [2]_ Thm 4, and :func:`box_bernstein_upper`, the same bound made valid uniformly over an
  interval of noise scales (used to certify a calibrated scale chosen on the same data).
* :class:`NoiseGeometry`: ``‖Δ‖²`` in the ``Σ_B⁻¹`` norm for every accepted noise description.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, §2.
.. [2] A. Maurer, M. Pontil. Empirical Bernstein bounds and sample variance penalization.
   COLT 2009, Thm 4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from pacpriv._stats import empirical_bernstein
from pacpriv._validation import check_array_real, check_real
from pacpriv.pac.noise._plan import NoisePlan

__all__ = [
    "NoiseGeometry",
    "bayes_accuracy",
    "bernstein_upper",
    "binary_entropy",
    "box_bernstein_upper",
    "record_mi_term",
]

_EPS = np.finfo(np.float64).eps


def bayes_accuracy(distance, prior: float) -> np.ndarray:
    """Bayes accuracy of ``N(μ₁, Σ)`` (prior ``q``) against ``N(μ₀, Σ)`` (prior ``1 − q``).

    ``acc(d) = q Φ(d/2 + λ/d) + (1 − q) Φ(d/2 − λ/d)`` with ``λ = ln(q/(1 − q))`` and
    ``d = ‖μ₁ − μ₀‖_{Σ⁻¹}``; ``Φ(d/2)`` at ``q = ½``; the limit ``max(q, 1 − q)`` at ``d = 0``
    and 1 at ``d = ∞``. Non-decreasing in ``d``.

    Derivation: whitening by ``Σ^{-1/2}`` and projecting on the unit vector along
    ``Σ^{-1/2}(μ₁ − μ₀)`` (a sufficient statistic) gives ``z ~ N(d, 1)`` or ``N(0, 1)``. The
    Bayes test guesses ``b = 1`` iff ``q φ(z − d) > (1 − q) φ(z)``, i.e. ``z > d/2 − λ/d``, so
    ``acc = q P(N(d,1) > d/2 − λ/d) + (1 − q) P(N(0,1) < d/2 − λ/d)``.

    Parameters
    ----------
    distance : array_like of float, >= 0 (``inf`` allowed)
        Mahalanobis distances ``d``.
    prior : float
        ``q`` in ``(0, 1)``.

    Returns
    -------
    ndarray of float64, shape of ``distance``, values in ``[max(q, 1−q), 1]``.
    """
    d = np.asarray(distance, dtype=np.float64)
    q = float(prior)
    base = max(q, 1.0 - q)
    if q == 0.5:
        acc = ndtr(d / 2.0)
    else:
        lam = math.log(q / (1.0 - q))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            shift = lam / d  # ±inf at d = 0; 0 at d = inf
            half = d / 2.0
            acc = q * ndtr(half + shift) + (1.0 - q) * ndtr(half - shift)
        acc = np.where(d == 0.0, base, acc)
    acc = np.clip(acc, base, 1.0)
    # a positive distance gives an accuracy strictly above the prior (tiny d: the float sum
    # rounds to it): the next float up, so no bound above the prior is shown equal to it
    return np.where((d > 0) & (acc <= base), np.nextafter(base, 2.0), acc)[()]


def binary_entropy(q: float) -> float:
    """``H_b(q) = −q ln q − (1 − q) ln(1 − q)`` in nats."""
    return float(-q * math.log(q) - (1.0 - q) * math.log1p(-q))


def record_mi_term(sq_distance, prior: float) -> np.ndarray:
    """``min(q(1 − q) d², H_b(q))`` (nats), an upper bound of ``I(b; Y | X₋ᵢ, θ)``.

    Convexity of KL in its second argument gives ``q(1 − q) d²`` (each KL term is ``d²/2``); the
    conditional entropy of the bit gives ``H_b(q)``.
    """
    q = float(prior)
    return np.minimum(q * (1.0 - q) * np.asarray(sq_distance, dtype=np.float64),
                      binary_entropy(q))


def bernstein_upper(values: np.ndarray, *, low: float, high: float, delta: float) -> np.ndarray:
    """One-sided empirical-Bernstein upper bound of the mean, per column (Maurer & Pontil Thm 4).

    For i.i.d. ``Z_1..Z_n`` in ``[low, high]``, with probability ``>= 1 − delta``
    ``E Z <= Z̄ + sqrt(2 V_n ln(2/δ) / n) + 7 (high − low) ln(2/δ) / (3(n − 1))`` with ``V_n`` the
    unbiased sample variance. The result is capped at ``high`` and nudged up by a few ulps
    (safe-side rounding).

    Parameters
    ----------
    values : ndarray of shape (n, k)
        ``n >= 2`` i.i.d. samples for each of ``k`` columns.
    low, high : float
        Range of the values.
    delta : float
        Failure probability in ``(0, 1)`` (per column).

    Returns
    -------
    ndarray of shape (k,)
    """
    z = np.asarray(values, dtype=np.float64)
    upper = empirical_bernstein(z.mean(axis=0), z.var(axis=0, ddof=1), z.shape[0],
                                width=high - low, delta=delta)
    return np.minimum(upper * (1.0 + 8 * _EPS) + 8 * _EPS, high)


def box_bernstein_upper(hi: np.ndarray, lo: np.ndarray, *, low: float, high: float,
                        delta: float) -> np.ndarray:
    """Maurer–Pontil bound valid for every sample ``z`` with ``lo <= z <= hi`` entrywise.

    Used for a monotone family ``z_t(s)`` (accuracy at noise scale ``s``, non-increasing in
    ``s``) over an interval ``[s_a, s_b]``: ``hi = z(s_a)``, ``lo = z(s_b)``. The mean is at
    most ``mean(hi)``; the sample variance is at most ``(1/(n−1)) Σ_t max_{z∈[lo_t,hi_t]}(z − c)²``
    for ``c = mean(lo)`` (the sum of squares about the mean is the minimum over centres). Both
    parts grow with the box, so the bound is monotone in the interval.

    Returns
    -------
    ndarray of shape (k,)
        ``>=`` :func:`bernstein_upper` of every sample inside the box.
    """
    hi = np.asarray(hi, dtype=np.float64)
    lo = np.asarray(lo, dtype=np.float64)
    n = hi.shape[0]
    c = lo.mean(axis=0)
    var = np.maximum((hi - c) ** 2, (lo - c) ** 2).sum(axis=0) / (n - 1)
    upper = empirical_bernstein(hi.mean(axis=0), var, n, width=high - low, delta=delta)
    return np.minimum(upper * (1.0 + 8 * _EPS) + 8 * _EPS, high)


def bernstein_floor(n: int, *, low: float, high: float, delta: float) -> float:
    """Smallest value :func:`bernstein_upper` can return: ``low + 7(high−low)ln(2/δ)/(3(n−1))``."""
    return float(empirical_bernstein(low, 0.0, n, width=high - low, delta=delta))


@dataclass(frozen=True)
class NoiseGeometry:
    """``Σ_B`` as ``W diag(var) Wᵀ + residual_var (I − W Wᵀ)`` (``W = None``: ``diag(var)``).

    Built by :meth:`from_spec` from a scalar variance, a ``(d,)`` vector of variances, a
    ``(d, d)`` covariance matrix or a :class:`NoisePlan`.
    """

    dim: int
    variances: np.ndarray
    basis: np.ndarray | None = None
    residual_variance: float = 0.0

    @classmethod
    def from_spec(cls, noise_cov, dim: int, *, name: str = "noise_cov") -> NoiseGeometry:
        """Validate ``noise_cov`` for outputs of dimension ``dim``.

        Raises
        ------
        TypeError, ValueError
            If ``noise_cov`` is not positive (definite), has the wrong shape, or is a plan for
            another dimension.
        """
        if isinstance(noise_cov, NoisePlan):
            if noise_cov.dim != dim:
                raise ValueError(
                    f"`{name}` is a NoisePlan for outputs of dimension {noise_cov.dim}; the "
                    f"mechanism returns dimension {dim}."
                )
            var = np.asarray(noise_cov.noise_variance, dtype=np.float64)
            basis = None if noise_cov.basis is None else np.asarray(noise_cov.basis, np.float64)
            return cls(dim, var, basis, float(noise_cov.residual_variance))
        if np.ndim(noise_cov) == 0:
            v = check_real(noise_cov, name, low=0.0, low_inclusive=False)
            return cls(dim, np.full(dim, v))
        arr = check_array_real(noise_cov, name)
        if arr.shape == (dim,):
            if np.any(arr <= 0):
                raise ValueError(
                    f"`{name}` variances must all be > 0 (per-record exposure is infinite "
                    f"without noise); got minimum {float(arr.min())!r}."
                )
            return cls(dim, arr)
        if arr.shape == (dim, dim):
            if not np.allclose(arr, arr.T, rtol=1e-10, atol=0.0):
                raise ValueError(f"`{name}` must be a symmetric ({dim}, {dim}) matrix.")
            vals, vecs = np.linalg.eigh((arr + arr.T) / 2.0)
            if vals[0] <= 1e-12 * max(vals[-1], 0.0) or vals[0] <= 0:
                raise ValueError(
                    f"`{name}` must be positive definite; got smallest eigenvalue "
                    f"{float(vals[0])!r}."
                )
            return cls(dim, vals, vecs, 0.0)
        raise ValueError(
            f"`{name}` must be a positive scalar variance, a ({dim},) vector of variances, a "
            f"({dim}, {dim}) covariance or a NoisePlan; got shape {arr.shape}."
        )

    def scaled(self, scale: float) -> NoiseGeometry:
        """``scale² Σ_B``."""
        s2 = float(scale) ** 2
        return NoiseGeometry(self.dim, self.variances * s2, self.basis,
                             self.residual_variance * s2)

    def sq_norm(self, delta: np.ndarray) -> np.ndarray:
        """``Δᵀ Σ_B⁻¹ Δ`` over the last axis (``inf`` for signal in a zero-noise direction)."""
        x = np.asarray(delta, dtype=np.float64)
        if self.basis is None:
            return _ratio_sum(x**2, self.variances)
        proj = x @ self.basis
        out = _ratio_sum(proj**2, self.variances)
        if self.basis.shape[1] < self.dim:
            rest = np.clip(np.sum(x**2, axis=-1) - np.sum(proj**2, axis=-1), 0.0, None)
            tol = 1e3 * _EPS * np.sum(x**2, axis=-1)
            rest = np.where(rest <= tol, 0.0, rest)
            out = out + _ratio(rest, self.residual_variance)
        return out

    def covariance(self) -> np.ndarray:
        """The ``(d, d)`` matrix ``Σ_B``."""
        if self.basis is None:
            return np.diag(self.variances)
        w = self.basis
        cov = (w * self.variances) @ w.T
        if w.shape[1] < self.dim:
            cov += self.residual_variance * (np.eye(self.dim) - w @ w.T)
        return cov


def _ratio(num: np.ndarray, den) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.asarray(num) / den
    return np.where(np.asarray(num) == 0.0, 0.0, r)


def _ratio_sum(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.sum(_ratio(num, den), axis=-1)
