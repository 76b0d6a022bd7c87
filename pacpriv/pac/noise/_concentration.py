"""One-sided (1−γ) upper confidence bounds on a mean, for the PAC certificate.

Bounded summands (after the release clip): the capital process of Waudby-Smith & Ramdas (2024)
with predictable, variance-adaptive bets and per-summand ranges (:func:`predictable_betting_upper`,
the certificate's default), with a constant bet (:func:`betting_upper`), and the
empirical-Bernstein bound of Maurer & Pontil (2009, Thm 4); without a bound, a Student-t
approximation (not certified). Also what identical outputs support
(:func:`constant_output_bound`).

References
----------
.. [1] A. Maurer, M. Pontil. Empirical Bernstein bounds and sample variance penalization.
   COLT 2009, Thm 4.
.. [2] I. Waudby-Smith, A. Ramdas. Estimating means of bounded random variables by betting.
   J. R. Stat. Soc. B 86(1), 2024.
.. [3] A. Ramdas, T. Manole. Randomized and exchangeable improvements of Markov's, Chebyshev's
   and Chernoff's inequalities. arXiv:2304.02611, 2023 (the randomized threshold).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats
from scipy.optimize import brentq

from pacpriv._stats import empirical_bernstein
from pacpriv._validation import check_int, check_real

__all__ = [
    "MAX_BET",
    "betting_upper",
    "predictable_betting_upper",
    "constant_output_bound",
    "empirical_bernstein_upper",
    "student_t_upper",
]

#: Largest bet ``λ·b`` of :func:`betting_upper` (every capital factor stays ``>= 1 − 3/4``).
MAX_BET = 0.75


def _check_confidence(confidence) -> float:
    return check_real(confidence, "confidence", low=0.0, high=1.0, low_inclusive=False,
                      high_inclusive=False)


def empirical_bernstein_upper(z, *, bound: float, confidence: float) -> float:
    """One-sided (1−γ) upper confidence bound on ``E[Z]`` for i.i.d. ``Z ∈ [0, bound]``.

    Parameters
    ----------
    z : array_like of shape (n,)
        Independent summands, ``n >= 2``, each in ``[0, bound]``.
    bound : float
        Range ``b >= 0`` of the summands.
    confidence : float
        ``1 − γ`` in ``(0, 1)``.

    Returns
    -------
    float
        ``Z̄ + sqrt(2 V_n ln(2/γ) / n) + 7 b ln(2/γ) / (3(n − 1))`` with ``V_n`` the unbiased
        sample variance; ``P(E[Z] > U) <= γ``.

    Raises
    ------
    ValueError
        If ``n < 2``, ``bound < 0``, a summand lies outside ``[0, bound]`` or ``confidence`` is
        outside ``(0, 1)``.

    References
    ----------
    .. [1] Maurer & Pontil, COLT 2009, Thm 4 (applied to ``Z/b ∈ [0, 1]``).

    Examples
    --------
    >>> round(empirical_bernstein_upper([0.0, 1.0] * 50, bound=1.0, confidence=0.95), 6)
    0.723438
    """
    arr = np.asarray(z, dtype=np.float64).reshape(-1)
    n = arr.size
    if n < 2:
        raise ValueError(f"`z` needs at least 2 summands; got {n}.")
    b = check_real(bound, "bound", low=0.0)
    conf = _check_confidence(confidence)
    if np.any(arr < 0) or np.any(arr > b * (1 + 1e-12)):
        raise ValueError(f"`z` must lie in [0, bound={b!r}]; got range "
                         f"[{float(arr.min())!r}, {float(arr.max())!r}].")
    return float(empirical_bernstein(float(np.mean(arr)), float(np.var(arr, ddof=1)), n,
                                     width=b, delta=1.0 - conf))


def betting_upper(z, *, bound: float, confidence: float, bet: float | None = None) -> float:
    """One-sided (1−γ) upper confidence bound on ``E[Z]`` by a constant-bet capital process.

    For i.i.d. ``Z_i ∈ [0, b]`` with mean ``μ`` and a bet ``0 <= λ < 1/b`` fixed before seeing
    them, ``K(m) = Π_i (1 + λ(m − Z_i))`` is positive, increasing in ``m``, and
    ``E[K(μ)] = 1``; by Markov's inequality ``P(K(μ) >= 1/γ) <= γ``. The bound is the root
    ``U`` of ``Σ_i ln(1 + λ(U − Z_i)) = ln(1/γ)``, so ``P(μ > U) <= γ``. This is the capital
    process of Waudby-Smith & Ramdas (2024) with a constant bet at a fixed sample size; it has
    no ``7b/(3(n−1))`` range term and is tighter than :func:`empirical_bernstein_upper` when
    ``b`` is large against the spread of ``Z``.

    Parameters
    ----------
    z : array_like of shape (n,)
        Independent summands in ``[0, bound]``, ``n >= 1``.
    bound : float
        Range ``b > 0``.
    confidence : float
        ``1 − γ`` in ``(0, 1)``.
    bet : float, optional
        ``λ·b`` in ``(0, MAX_BET]``, chosen **without** looking at ``z`` (default ``MAX_BET``).

    Returns
    -------
    float
        ``U`` (``<= b``; ``b`` when even ``U = b`` is not rejected).

    Raises
    ------
    ValueError
        If a summand lies outside ``[0, bound]`` or an argument is out of range.

    References
    ----------
    .. [1] I. Waudby-Smith, A. Ramdas. Estimating means of bounded random variables by betting.
       J. R. Stat. Soc. B 86(1), 2024, §4 (capital process; here with a constant bet and
       Markov's inequality at a fixed n).

    Examples
    --------
    >>> round(betting_upper([0.0, 1.0] * 50, bound=1.0, confidence=0.95), 6)
    0.628702
    """
    arr = np.asarray(z, dtype=np.float64).reshape(-1)
    if arr.size < 1:
        raise ValueError("`z` needs at least 1 summand; got 0.")
    b = check_real(bound, "bound", low=0.0, low_inclusive=False)
    conf = _check_confidence(confidence)
    frac = MAX_BET if bet is None else check_real(bet, "bet", low=0.0, high=MAX_BET,
                                                   low_inclusive=False)
    if np.any(arr < 0) or np.any(arr > b * (1 + 1e-12)):
        raise ValueError(f"`z` must lie in [0, bound={b!r}]; got range "
                         f"[{float(arr.min())!r}, {float(arr.max())!r}].")
    lam = frac / b
    target = math.log(1.0 / (1.0 - conf))

    def log_capital(m: float) -> float:
        return float(np.sum(np.log1p(lam * (m - arr)))) - target

    if log_capital(b) < 0:
        return b
    if log_capital(0.0) >= 0:
        return 0.0
    root = brentq(log_capital, 0.0, b, xtol=1e-15 * b, rtol=4 * np.finfo(float).eps)
    # one-sided: step up until the capital at the returned value is >= 1/γ
    while log_capital(root) < 0:
        root = min(b, root + max(abs(root), b) * 1e-15)
    return root


def _running(prior: float, values: np.ndarray, weight: float) -> np.ndarray:
    """Predictable running means: entry ``i`` averages ``prior`` (weight ``weight``) and
    ``values[:i]``."""
    sums = np.concatenate([[0.0], np.cumsum(values)[:-1]])
    return (weight * prior + sums) / (weight + np.arange(values.size))


def predictable_betting_upper(
    z, ranges, *, confidence: float, prior_mean: float, prior_variance: float,
    prior_weight: float = 8.0, mean_limit: float | None = None, threshold: float = 1.0,
) -> float:
    """One-sided (1−γ) upper bound on a common lower bound of conditional means, by betting.

    The summands arrive in order; ``F_{i−1}`` is what is known before ``Z_i`` (earlier summands
    and anything fixed in advance). Assumptions: ``0 <= Z_i <= b_i`` with ``b_i`` known before
    ``Z_i`` (``F_{i−1}``-measurable), and ``E[Z_i | F_{i−1}] >= μ`` for one unknown ``μ``. For
    each candidate ``t`` the capital ``K(t) = Π_i (1 + λ_i(t)(t − Z_i))`` with predictable bets
    ``λ_i(t) = min(λ*_i, c/(b_i − t))`` (``c`` = :data:`MAX_BET`) is positive, and for
    ``t <= μ`` a nonnegative supermartingale in ``j`` (``K_0 = 1``,
    ``E[1 + λ_j(t − Z_j) | F_{j−1}] <= 1 + λ_j(t − μ) <= 1``). ``t ↦ λ_j(t)(t − z)`` is
    non-decreasing for every ``z <= b_j``, so every partial capital ``K_j(t)`` is
    non-decreasing in ``t``; the bound is
    ``U = sup{t : max_{j<=n} K_j(t) < 1/γ and K_n(t) < θ/γ}``, so ``μ > U`` implies that
    ``K_j(μ)`` crossed ``1/γ`` at some ``j`` or ``K_n(μ) >= θ/γ``. Let ``τ`` be the first
    crossing (``n`` if none), a bounded stopping time: the event lies in
    ``{K_τ(μ) >= θ/γ}`` (``θ <= 1``), and ``P(K_τ >= θ/γ) <= γ E[K_τ] <= γ`` by optional
    stopping, with Markov's inequality at ``θ = 1`` (Ville's inequality) and the uniformly
    randomized one, ``P(K_τ >= W/γ) = E[min(1, γK_τ)] <= γ`` for ``W ~ U(0, 1)`` independent of
    everything (Ramdas & Manole 2023), at ``θ = W``.
    The bet
    ``λ*_i = sqrt(2 ln(1/γ)/(n σ̂²_{i−1}))`` uses the running variance ``σ̂²_{i−1}`` of the earlier
    summands around their running mean, started at a prior: the fixed-``n`` tuning of the
    predictable plug-in bets of Waudby-Smith & Ramdas (2024), which minimises the quadratic
    expansion ``ln(1/γ)/(nλ) + λσ²/2`` of the bound's width.

    Parameters
    ----------
    z : array_like of shape (n,)
        Summands in order, ``n >= 1``.
    ranges : array_like of shape (n,)
        ``b_i > 0`` with ``0 <= z_i <= b_i``, each fixed before ``z_i``.
    confidence : float
        ``1 − γ`` in ``(0, 1)``.
    prior_mean, prior_variance : float
        Prior guesses (``>= 0``) of the summands' mean and variance, fixed before ``z[0]``
        (e.g. from independent trials); only the bets use them.
    prior_weight : float, default 8
        Pseudo-count of the prior in the running estimates (``> 0``).
    mean_limit : float, optional
        A bound ``μ <= mean_limit`` known in advance (``<= min b_i``); ``U`` never exceeds it.
        Default ``min b_i``.
    threshold : float, default 1
        ``θ`` in ``(0, 1]``: a uniform draw independent of everything for the randomized
        threshold ``θ/γ``, else 1 (Markov's ``1/γ``).

    Returns
    -------
    float
        ``U`` in ``[min(z̄, mean_limit), mean_limit]`` with ``P(μ > U) <= γ`` (raising a root
        below the sample mean ``z̄`` to ``z̄`` only loosens it).

    Raises
    ------
    ValueError
        If a summand lies outside ``[0, b_i]`` or an argument is out of range.

    References
    ----------
    .. [1] I. Waudby-Smith, A. Ramdas. Estimating means of bounded random variables by betting.
       J. R. Stat. Soc. B 86(1), 2024 (capital processes, predictable plug-in bets).
    .. [2] A. Ramdas, T. Manole. Randomized and exchangeable improvements of Markov's,
       Chebyshev's and Chernoff's inequalities. arXiv:2304.02611 (uniformly randomized Markov).

    Examples
    --------
    >>> z = [0.0, 1.0] * 50
    >>> round(predictable_betting_upper(z, [1.0] * 100, confidence=0.95, prior_mean=0.5,
    ...                                 prior_variance=0.25), 4)
    0.6166
    """
    arr = np.asarray(z, dtype=np.float64).reshape(-1)
    b = np.asarray(ranges, dtype=np.float64).reshape(-1)
    n = arr.size
    if n < 1:
        raise ValueError("`z` needs at least 1 summand; got 0.")
    if b.shape != arr.shape:
        raise ValueError(f"`ranges` must have the shape of `z` {arr.shape}; got {b.shape}.")
    if not (np.all(np.isfinite(b)) and np.all(b > 0)):
        raise ValueError("`ranges` must be finite and > 0.")
    if np.any(arr < 0) or np.any(arr > b * (1 + 1e-12)):
        raise ValueError("`z` must lie in [0, ranges]; got a summand outside.")
    conf = _check_confidence(confidence)
    mu0 = check_real(prior_mean, "prior_mean", low=0.0)
    var0 = check_real(prior_variance, "prior_variance", low=0.0)
    w0 = check_real(prior_weight, "prior_weight", low=0.0, low_inclusive=False)
    theta = check_real(threshold, "threshold", low=0.0, high=1.0, low_inclusive=False)
    limit = float(b.min()) if mean_limit is None else check_real(
        mean_limit, "mean_limit", low=0.0, high=float(b.min()))
    arr = np.minimum(arr, b)
    mean = _running(mu0, arr, w0)
    var = _running(var0, (arr - mean) ** 2, w0)
    scale = max(float(np.max(b)), 1e-300)
    var = np.maximum(var, (1e-12 * scale) ** 2)
    target = math.log(theta / (1.0 - conf))
    lam_star = np.sqrt(2.0 * math.log(1.0 / (1.0 - conf)) / (n * var))

    ville = math.log(1.0 / (1.0 - conf))

    def log_capital(t: float) -> float:
        """``>= 0`` iff ``t`` is rejected: the running capital crossed ``1/γ`` (Ville) or the
        final one ``θ/γ``; non-decreasing in ``t``."""
        # λ(t − z) >= −MAX_BET·(b − t)/gap >= −MAX_BET for every z <= b, even at the floor
        lam = np.minimum(lam_star, MAX_BET / np.maximum(b - t, 1e-12 * scale))
        path = np.cumsum(np.log1p(lam * (t - arr)))
        return max(float(path.max()) - ville, float(path[-1]) - target)

    floor = min(limit, float(np.mean(arr)))  # never below the sample mean (only loosens U)
    if limit == 0.0 or log_capital(floor) >= 0:
        return floor
    if log_capital(limit) < 0:
        return limit
    root = brentq(log_capital, floor, limit, xtol=1e-14 * limit, rtol=4 * np.finfo(float).eps)
    while log_capital(root) < 0:  # one-sided: the capital at the returned value is >= θ/γ
        root = min(limit, root + max(abs(root), limit) * 1e-15)
    return float(root)


def student_t_upper(z, *, confidence: float) -> float:
    """Asymptotic one-sided upper bound ``Z̄ + t_{1−γ, n−1} · s/√n`` (not certified).

    Parameters
    ----------
    z : array_like of shape (n,), n >= 2
    confidence : float in (0, 1)

    Returns
    -------
    float
        Student-t upper limit; exact only for Gaussian ``Z``, asymptotically valid otherwise
        (central limit theorem). Heavy right tails make it too small: it may understate.
    """
    arr = np.asarray(z, dtype=np.float64).reshape(-1)
    if arr.size < 2:
        raise ValueError(f"`z` needs at least 2 summands; got {arr.size}.")
    conf = _check_confidence(confidence)
    sd = float(np.std(arr, ddof=1))
    return float(np.mean(arr)) + float(stats.t.ppf(conf, arr.size - 1)) * sd / math.sqrt(arr.size)


def constant_output_bound(n_trials: int, *, confidence: float = 0.95) -> float:
    """What ``m`` identical outputs support: ``P(f(X) ≠ seen value) <= 1 − γ^{1/m}``.

    If the output differs from the seen value with probability ``p``, all ``m`` independent
    trials agree with probability ``(1 − p)^m``; this is ``>= γ`` only for
    ``p <= 1 − γ^{1/m} <= ln(1/γ)/m`` (one-sided Clopper–Pearson at zero events).

    Parameters
    ----------
    n_trials : int
        Number ``m >= 1`` of trials that all gave the same output.
    confidence : float, default 0.95
        ``1 − γ`` in ``(0, 1)``.

    Returns
    -------
    float
        The upper confidence bound on ``p`` (``<= ln(1/γ)/m``).

    Examples
    --------
    >>> round(constant_output_bound(200, confidence=0.95), 6)
    0.014867
    """
    m = check_int(n_trials, "n_trials", low=1)
    gamma = 1.0 - _check_confidence(confidence)
    return -math.expm1(math.log(gamma) / m)
