"""One-sided (1−γ) upper confidence bounds on a mean, for the PAC certificate.

Bounded summands (after the release clip): the empirical-Bernstein bound of Maurer & Pontil
(2009, Thm 4) and a constant-bet capital process (Waudby-Smith & Ramdas 2024); without a bound,
a Student-t approximation (not certified). Also what identical outputs support
(:func:`constant_output_bound`).

References
----------
.. [1] A. Maurer, M. Pontil. Empirical Bernstein bounds and sample variance penalization.
   COLT 2009, Thm 4.
.. [2] I. Waudby-Smith, A. Ramdas. Estimating means of bounded random variables by betting.
   J. R. Stat. Soc. B 86(1), 2024.
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


def _bet_from_shape(z_shape: np.ndarray, n: int, b: float, gamma: float) -> float:
    """``λ·b`` from the shape trials' pairs (independent of the certificate trials).

    ``λ = sqrt(2 ln(1/γ)/(n σ̂²))`` minimises ``ln(1/γ)/(nλ) + λσ²/2`` (the second-order
    expansion of the bound); capped at :data:`MAX_BET`/b.
    """
    if z_shape.size < 2 or b == 0:
        return MAX_BET
    var = float(np.var(z_shape, ddof=1))
    if var <= 0:
        return MAX_BET
    return min(MAX_BET, b * math.sqrt(2.0 * math.log(1.0 / gamma) / (n * var)))


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
