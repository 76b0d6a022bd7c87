"""The two closed-form ε(δ) bounds of random-allocation DP-SGD, O(1) and with no PLD, so
that :mod:`pacpriv.dpsgd.tradeoff` and :mod:`pacpriv.dpsgd.epsilon` both use them without an
import cycle. Their derivation is in :mod:`pacpriv.dpsgd.epsilon`'s docstring:

* Gaussian dominance at ``μ = √(kE)/σ`` (Zhu, Dong & Wang 2022, Thm. 10; the Gaussian ε is
  exact by Balle & Wang 2018, Thm. 8);
* chi-square: ``ε = 0`` when ``½√χ² ≤ δ``, else ``ε ≤ −ln(1 − χ²/δ)`` when ``χ² < δ``
  (Chebyshev on ``L = dQ/dP``), with ``χ²`` from :func:`pacpriv.dpsgd.log1p_chi_square`.
"""

from __future__ import annotations

import math

from scipy import special

__all__ = ["closed_form_epsilon", "gaussian_epsilon"]

_U = 2.0**-52


def _gauss_ok(eps: float, mu: float, log_delta: float) -> bool:
    """Whether ``δ_μ(ε) ≤ δ`` for the Gaussian pair of shift μ, with its float round-off.

    In log space, so that δ down to the smallest subnormal is resolved:
    ``δ_μ(ε) = Φ(a)·(1 − e^{ε + ln Φ(b) − ln Φ(a)})``, ``a = μ/2 − ε/μ``, ``b = −μ/2 − ε/μ``.
    """
    log_a = float(special.log_ndtr(mu / 2.0 - eps / mu))
    diff = eps + float(special.log_ndtr(-mu / 2.0 - eps / mu)) - log_a
    factor = -math.expm1(min(diff, 0.0)) + 16.0 * _U  # 1 − e^diff, plus its round-off
    return log_a + math.log(factor) + 16.0 * _U * (1.0 + abs(log_a)) <= log_delta


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest ε ≥ 0 (rounded up) with ``δ_μ(ε) ≤ delta`` for the Gaussian pair of shift μ.

    Balle & Wang, Improving the Gaussian Mechanism for Differential Privacy, ICML 2018, Thm. 8.
    ``mu = inf`` gives ``inf``.
    """
    if not math.isfinite(mu):
        return math.inf
    log_delta = math.log(delta)
    if mu <= 0.0 or _gauss_ok(0.0, mu, log_delta):
        return 0.0
    hi = mu * mu / 2.0 + mu * (math.sqrt(2.0 * -log_delta) + 2.0)
    while not _gauss_ok(hi, mu, log_delta):
        hi *= 2.0
        if not math.isfinite(hi):
            return math.inf
    lo = 0.0
    for _ in range(200):
        if hi - lo <= 1e-12 * hi:
            break
        mid = 0.5 * (lo + hi)
        if _gauss_ok(mid, mu, log_delta):
            hi = mid
        else:
            lo = mid
    return hi


def _chi_square_epsilon(sigma: float, steps: int, epochs: int, k: int, delta: float) -> float:
    from pacpriv.dpsgd.bounds import log1p_chi_square

    l1p = float(log1p_chi_square(sigma, steps_per_epoch=steps, epochs=epochs, k=k))
    chi2 = math.expm1(l1p) * (1.0 + 16.0 * _U) if l1p < 700.0 else math.inf
    if 0.5 * math.sqrt(chi2) * (1.0 + 4.0 * _U) <= delta:
        return 0.0
    if chi2 < delta:
        return -math.log1p(-chi2 / delta) * (1.0 + 8.0 * _U)
    return math.inf


def closed_form_epsilon(sigma: float, steps: int, epochs: int, k: int, delta: float) -> float:
    """The smaller of the two closed-form ε bounds at ``delta`` (arguments already checked)."""
    mu = math.sqrt(k * epochs) / sigma if sigma > 1e-150 else math.inf
    return min(gaussian_epsilon(mu, delta), _chi_square_epsilon(sigma, steps, epochs, k, delta))
