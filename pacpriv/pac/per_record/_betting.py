"""Betting upper confidence bounds for means of variables in ``[0, 1]`` (private math).

For i.i.d. ``X_1, …, X_T`` in ``[0, 1]`` with mean ``μ`` and a candidate mean ``m``, the capital

    K_T(m) = Π_t (1 + λ_t(m) (m − X_t)),   λ_t(m) = min(λ̃_t, c / (1 − m)),   0 < c < 1,

is a non-negative martingale at ``m = μ`` whenever the bets ``λ̃_t >= 0`` are *predictable*
(functions of trials ``1..t−1`` only): each factor has conditional mean 1 and is at least
``1 − c > 0``. By Ville's (here Markov's) inequality ``P(K_T(μ) >= 1/δ) <= δ``, so

    U = sup{m ∈ [0, 1] : K_T(m) < 1/δ}

is a ``1 − δ`` upper confidence bound of ``μ`` (Waudby-Smith & Ramdas [1]_, Thm 3 and §4, the
"predictable plug-in" bets of their eq. (26) for a fixed sample size, one-sided).

Two monotonicity facts make the bound usable for noise calibration
(:mod:`pacpriv.pac.per_record._certificate`):

* each factor is non-decreasing in ``m`` (``∂/∂m [1 + c(m − x)/(1 − m)] = c(1 − x)/(1 − m)² >= 0``
  on the capped branch), so the confidence set is an interval ``[0, U)`` and ``U <= m`` iff
  ``K_T(m) >= 1/δ``;
* for fixed bets each factor is non-increasing in every ``X_t``, so ``U`` is non-decreasing in the
  data. With bets computed from a *reference* copy of the data (not from the values being
  bounded), ``U`` is therefore monotone along any family ``X_t(s)`` that is monotone in ``s``.

References
----------
.. [1] I. Waudby-Smith, A. Ramdas. Estimating means of bounded random variables by betting.
   J. R. Stat. Soc. B 86(1), 1–27, 2024 (arXiv:2010.09686), Thm 3, eqs. (26)–(27).
"""

from __future__ import annotations

import numpy as np

__all__ = ["DEFAULT_CAP", "betting_upper", "log_capital", "predictable_bets"]

#: Truncation ``c`` of the bets, ``λ <= c / (1 − m)``. Waudby-Smith & Ramdas use 1/2 or 3/4;
#: larger ``c`` tightens the bound when the variance is small (measured in
#: ``benchmarks/per_record.py``), and any ``c < 1`` is valid.
DEFAULT_CAP = 0.9

_EPS = np.finfo(np.float64).eps


def predictable_bets(reference: np.ndarray, *, delta, horizon: int, prior_mean,
                     prior_variance, prior_weight: float = 1.0,
                     variance_floor: float = 1e-10) -> np.ndarray:
    """Predictable bets ``λ̃_t = sqrt(2 ln(1/δ) / (horizon · σ̂²_{t−1}))`` ([1]_ eq. (26)).

    ``σ̂²_{t−1}`` is the running variance of ``reference`` before trial ``t``, started from
    ``prior_mean``/``prior_variance`` with weight ``prior_weight`` (pseudo-observations):
    ``μ̂_t = (w μ₀ + Σ_{j<=t} x_j)/(w + t)``, ``σ̂²_t = (w σ₀² + Σ_{j<=t} (x_j − μ̂_{j−1})²)/(w + t)``.
    Row ``t`` depends on rows ``< t`` only.

    Parameters
    ----------
    reference : ndarray of shape (T, k)
        Values in ``[0, 1]`` the bets learn from (trial order = betting order).
    delta : float or ndarray of shape (k,)
        Failure probability of each column's bound, in (0, 1).
    horizon : int
        Number of trials ``T`` the bound will use (fixed-sample form of the bets).
    prior_mean, prior_variance : float or ndarray of shape (k,)
        Starting estimates (e.g. from independent trials); ``prior_variance > 0``.
    prior_weight : float, default 1
        Pseudo-count of the prior, > 0.
    variance_floor : float, default 1e-10
        Lower limit of ``σ̂²`` (bets stay finite).

    Returns
    -------
    ndarray of shape (T, k), float64, >= 0
    """
    x = np.asarray(reference, dtype=np.float64)
    t_count, k = x.shape
    w = float(prior_weight)
    mu0 = np.broadcast_to(np.asarray(prior_mean, dtype=np.float64), (k,))
    var0 = np.broadcast_to(np.asarray(prior_variance, dtype=np.float64), (k,))
    steps = np.arange(1, t_count + 1, dtype=np.float64)[:, None]
    mu = (w * mu0 + np.cumsum(x, axis=0)) / (w + steps)
    mu_before = np.vstack([mu0[None, :], mu[:-1]])
    var = (w * var0 + np.cumsum((x - mu_before) ** 2, axis=0)) / (w + steps)
    var_before = np.vstack([var0[None, :], var[:-1]])
    log_inv = np.log(1.0 / np.broadcast_to(np.asarray(delta, dtype=np.float64), (k,)))
    return np.sqrt(2.0 * log_inv / (int(horizon) * np.maximum(var_before, variance_floor)))


def log_capital(values: np.ndarray, bets: np.ndarray, m, *, cap: float = DEFAULT_CAP
                ) -> np.ndarray:
    """``ln K_T(m) = Σ_t ln(1 + min(λ̃_t, c/(1 − m)) (m − X_t))`` per column.

    Parameters
    ----------
    values : ndarray of shape (T, k)
        The ``X_t`` in ``[0, 1]``.
    bets : ndarray of shape (T, k)
        Predictable ``λ̃_t >= 0`` (:func:`predictable_bets`).
    m : float or ndarray of shape (k,)
        Candidate means in ``[0, 1)``.
    cap : float, default :data:`DEFAULT_CAP`
        ``c`` in (0, 1).

    Returns
    -------
    ndarray of shape (k,)
        Non-decreasing in ``m``, non-increasing in every ``X_t``.
    """
    m = np.asarray(m, dtype=np.float64)
    lam = np.minimum(bets, cap / (1.0 - m))
    return np.log1p(lam * (m - values)).sum(axis=0)


def betting_upper(values: np.ndarray, bets: np.ndarray, delta, *, cap: float = DEFAULT_CAP,
                  tol: float = 1e-12) -> np.ndarray:
    """Upper ``1 − δ`` confidence bound of each column's mean (``sup`` of the confidence set).

    Bisection on ``m`` for ``ln K_T(m) >= ln(1/δ)``; the upper end of the final bracket is
    returned (never below the exact ``U`` by more than ``tol``, then nudged up by a few ulps).

    Parameters
    ----------
    values, bets : ndarray of shape (T, k)
        As in :func:`log_capital`.
    delta : float or ndarray of shape (k,)
        Failure probability per column, in (0, 1).
    cap : float, default :data:`DEFAULT_CAP`
    tol : float, default 1e-12
        Width of the final bracket.

    Returns
    -------
    ndarray of shape (k,), values in ``[0, 1]``

    Examples
    --------
    Constant data ``X_t = 0`` and saturated bets: ``K_T(m) = (1 + c m/(1 − m))^T``, so
    ``U`` solves ``T ln(1 + c U/(1 − U)) = ln(1/δ)``:

    >>> import numpy as np
    >>> u = betting_upper(np.zeros((100, 1)), np.full((100, 1), 1e9), 0.05, cap=0.5)
    >>> r = np.expm1(np.log(20) / 100)
    >>> bool(abs(u[0] - r / (0.5 + r)) < 1e-9)
    True
    """
    x = np.asarray(values, dtype=np.float64)
    k = x.shape[1]
    thr = np.log(1.0 / np.broadcast_to(np.asarray(delta, dtype=np.float64), (k,)))
    lo = np.zeros(k)
    hi = np.ones(k)
    # m = 0 is rejected only if the capital at 0 reaches 1/δ (impossible: every factor <= 1)
    while np.any(hi - lo > tol):
        mid = 0.5 * (lo + hi)
        rejected = log_capital(x, bets, mid, cap=cap) >= thr
        hi = np.where(rejected, mid, hi)
        lo = np.where(rejected, lo, mid)
    return np.minimum(hi * (1.0 + 8 * _EPS) + 8 * _EPS, 1.0)
