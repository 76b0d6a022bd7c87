"""Cheap certified bounds on the random-allocation total variation (no discretisation).

Private helper of :mod:`pacpriv.dpsgd.exact`. Notation as there: ``P = N(0, σ² I_M)``,
``Q = (1/M) Σ_i N(e_i, σ² I_M)``, ``E`` epochs, ``μ = 1/σ``; ``TV_E = TV(P^⊗E, Q^⊗E)``;
accuracy ``= ½ + ½·TV_E``.

Upper bounds (used to cap the certified upper end)

* chi-square: ``TV ≤ ½ sqrt(χ²)`` (:mod:`pacpriv.dpsgd.bounds`);
* the ``M = 1`` pair: ``Q^⊗E`` is the uniform mixture, over allocations, of Gaussians
  shifted by ``e_{i_1} ⊕ … ⊕ e_{i_E}`` (norm ``sqrt(E)``); by joint convexity of TV,
  ``TV_E ≤ TV(N(0, σ²), N(sqrt(E), σ²)) = 2Φ(sqrt(E)/(2σ)) − 1``.

Lower bounds (data processing: the TV of any statistic is at most ``TV_E``)

* *spike count*: ``K = #{epochs e : max_i y_{e,i} > t}`` (``y`` in noise units) is
  ``Bin(E, p₀)`` under P and ``Bin(E, p₁)`` under Q with ``p₀ = 1 − Φ(t)^M`` and
  ``p₁ = 1 − Φ(t − μ)·Φ(t)^{M−1}``; the binomial pair has a monotone likelihood ratio, so its
  TV is ``max_k (P₁(K ≥ k) − P₀(K ≥ k))``. Best over a grid of ``t``. Tight when σ is small
  (one coordinate per epoch stands out): there the accuracy is 1 to many digits.
* *sum*: ``Σ_{e,i} y_{e,i}`` is ``N(0, ME)`` vs ``N(E μ, ME)``: ``TV ≥ 2Φ(sqrt(E/M)/(2σ)) − 1``.
  Tight in the Gaussian regime (large σ or M).

Every value is computed in log space or from survival functions (no cancellation), and a
stated allowance is subtracted from the lower bounds / added to the upper bounds.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

#: Allowance for round-off in the special functions (scipy's ndtr/log_ndtr/betainc are
#: accurate to a few hundred ulps; 1e-12 absolute is a wide margin for values in [0, 1]).
SCREEN_ROUNDOFF = 1e-12


def gaussian_upper_tv(sigma: float, epochs: int) -> float:
    """``2Φ(sqrt(E)/(2σ)) − 1`` plus the allowance: TV of the ``M = 1`` pair, an upper bound."""
    z = math.sqrt(epochs) / (2.0 * sigma)
    return min(1.0, float(special.erf(z / math.sqrt(2.0))) + SCREEN_ROUNDOFF)


def sum_lower_tv(sigma: float, steps: int, epochs: int) -> float:
    """``2Φ(sqrt(E/M)/(2σ)) − 1`` minus the allowance (the sum statistic)."""
    z = math.sqrt(epochs / steps) / (2.0 * sigma)
    return max(0.0, float(special.erf(z / math.sqrt(2.0))) - SCREEN_ROUNDOFF)


def spike_lower_tv(sigma: float, steps: int, epochs: int, n_grid: int = 96) -> float:
    """Best spike-count lower bound on ``TV_E`` over a grid of thresholds (minus the allowance)."""
    mu = 1.0 / sigma
    # threshold grid: from the bulk of max_i y (about sqrt(2 ln(ME))) up to well past it
    centre = math.sqrt(2.0 * math.log(max(2.0, steps * epochs)))
    t = np.linspace(min(0.0, mu - 3.0), max(centre + 4.0, mu), n_grid)
    log_phi = special.log_ndtr(t)
    stay0 = steps * log_phi  # ln P_P(no spike in an epoch)
    stay1 = special.log_ndtr(t - mu) + (steps - 1) * log_phi
    p0 = -np.expm1(stay0)
    p1 = -np.expm1(stay1)
    ok = (p1 > p0) & (p0 > 0) & (p1 < 1)
    best = 0.0
    if not ok.any():
        return 0.0
    p0, p1, stay0, stay1 = p0[ok], p1[ok], stay0[ok], stay1[ok]
    # crossing of the two binomial pmfs: k* = E·ln((1−p0)/(1−p1)) / ln(p1(1−p0)/(p0(1−p1)))
    num = epochs * (stay0 - stay1)
    den = np.log(p1) - np.log(p0) + (stay0 - stay1)
    kstar = np.ceil(num / den)
    for off in (-1.0, 0.0, 1.0):
        k = np.clip(kstar + off, 1.0, float(epochs))
        # P(K >= k) = sf(k − 1)
        diff = stats.binom.sf(k - 1, epochs, p1) - stats.binom.sf(k - 1, epochs, p0)
        best = max(best, float(np.max(diff)))
    # and one spike anywhere (k = 1), in log space: (1 − p0)^E − (1 − p1)^E
    one = np.exp(epochs * stay0) - np.exp(epochs * stay1)
    best = max(best, float(np.max(one)))
    return max(0.0, min(1.0, best) - SCREEN_ROUNDOFF)


def screen(sigma: float, steps: int, epochs: int) -> tuple[float, float, dict]:
    """Certified ``(tv_lower, tv_upper_gaussian, details)`` without discretisation."""
    spike = spike_lower_tv(sigma, steps, epochs)
    total = sum_lower_tv(sigma, steps, epochs)
    upper = gaussian_upper_tv(sigma, epochs)
    lower = max(spike, total)
    return lower, upper, {"tv_lower_spike": spike, "tv_lower_sum": total, "tv_upper_m1": upper}
