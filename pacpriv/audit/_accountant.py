"""The accountant's ε of a DP-SGD run with random allocation (for the one-run audit).

Two certified upper bounds on ε(δ), the smaller reported:

* **Random-allocation PLD**: :meth:`pacpriv.dpsgd.TradeoffCurve.get_epsilon` of
  :func:`pacpriv.dpsgd.tradeoff_curve` -- the dominating (pessimistic) privacy-loss
  distribution of ``E`` epochs of ``M`` steps, each record used at one random step per epoch,
  both directions of add-or-remove (Feldman & Shenfeld, arXiv:2602.17284).
* **No amplification**: each epoch's dominating pair ``N(0, σ²I_M)`` vs the mixture
  ``(1/M) Σ_i N(e_i, σ²I_M)`` (RA-MIA) has every hockey-stick divergence at most that of one
  Gaussian shift ``N(0, σ²)`` vs ``N(1, σ²)`` (the divergence is jointly convex), so ``E`` epochs
  are ``μ``-GDP with ``μ = √E/σ`` (Dong, Roth & Su, JRSSB 2022, Cor. 2.13), whose exact
  ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)`` (Balle & Wang, ICML 2018, Thm 8) is inverted by
  bisection, rounded up. It is finite where the PLD's grids give up (very small σ).

A PLD evaluation that emits a ``RuntimeWarning`` (overflow in its numerics) is not used.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

from scipy import special

from pacpriv._validation import check_int, check_real

__all__ = ["checked_call", "dpsgd_epsilon", "gaussian_epsilon"]


def checked_call(fn: Callable[[], Any]) -> Any | None:
    """``fn()``, or None if it emitted a ``RuntimeWarning`` (an overflow or invalid value in
    its numerics): a bound computed through one is not relied on."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = fn()
    if any(issubclass(w.category, RuntimeWarning) for w in caught):
        return None
    return value


def _gaussian_delta(eps: float, mu: float) -> float:
    """``Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``, the second term in log space (no overflow)."""
    second = math.exp(min(eps + float(special.log_ndtr(-eps / mu - mu / 2)), 700.0))
    return float(special.ndtr(-eps / mu + mu / 2)) - second


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest ε (rounded up) with ``δ_μ(ε) <= delta`` for μ-GDP (Balle & Wang, Thm 8).

    Parameters
    ----------
    mu : float
        ``μ > 0``.
    delta : float
        In (0, 1).
    """
    mu = check_real(mu, "mu", low=0.0, low_inclusive=False)
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_inclusive=False,
                       high_inclusive=False)
    if _gaussian_delta(0.0, mu) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while _gaussian_delta(hi, mu) > delta:
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:  # pragma: no cover - δ_μ(ε) -> 0 as ε grows
            return math.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _gaussian_delta(mid, mu) > delta else (lo, mid)
    return hi * (1.0 + 1e-9)  # nudged up past the round-off of the δ formula


def dpsgd_epsilon(noise_multiplier: float, *, steps_per_epoch: int, epochs: int,
                  delta: float) -> tuple[float, str]:
    """``(ε, label)``: a certified upper bound on ε(δ) of random-allocation DP-SGD.

    Parameters
    ----------
    noise_multiplier : float
        σ >= 0 (σ = 0: not private, ε = inf).
    steps_per_epoch, epochs : int
        M >= 1 and E >= 1.
    delta : float
        δ in (0, 1).

    Returns
    -------
    (float, str)
        The smaller of the two bounds (see the module docstring) and which it is.
    """
    sigma = check_real(noise_multiplier, "noise_multiplier", low=0.0)
    M = check_int(steps_per_epoch, "steps_per_epoch", low=1)
    E = check_int(epochs, "epochs", low=1)
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_inclusive=False,
                       high_inclusive=False)
    if sigma == 0:
        return math.inf, "not private (σ = 0)"
    from pacpriv.dpsgd.epsilon import epsilon_bound

    # the smallest sound bound: certified PLD, Gaussian dominance or chi-square, monotone in
    # σ, M, E and δ (issue 35: the PLD alone is loose and not monotone at very large σ)
    b = epsilon_bound(sigma, steps_per_epoch=M, epochs=E, delta=delta)
    if b.source == "certified PLD":
        return b.epsilon, ("certified upper bound: random-allocation PLD "
                           "(pacpriv.dpsgd.tradeoff_curve, pessimistic)")
    if b.source.startswith("Gaussian"):
        return b.epsilon, ("certified upper bound: E-fold Gaussian mechanism without "
                           "amplification (Balle & Wang 2018, Thm 8)")
    if b.source.startswith("Chernoff"):
        return b.epsilon, ("certified upper bound: Chernoff bound of random allocation, one "
                           "direction (pacpriv.dpsgd.epsilon)")
    return b.epsilon, ("certified upper bound: chi-square closed form of random allocation "
                       "(pacpriv.dpsgd.epsilon)")
