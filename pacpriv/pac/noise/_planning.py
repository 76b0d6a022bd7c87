"""Trial planning for the PAC certificate: predicted noise inflation over the oracle.

A heuristic model (Gaussian outputs, flat spectrum) of the certified noise power relative to
the square-root rule on the true covariance, used to choose ``n_trials``; not a bound.

References
----------
.. [1] V. A. Marchenko, L. A. Pastur. Distribution of eigenvalues for some sets of random
   matrices. Math. USSR-Sbornik 1(4), 1967 (the shape factor).
.. [2] I. Waudby-Smith, A. Ramdas. Estimating means of bounded random variables by betting.
   J. R. Stat. Soc. B 86(1), 2024 (the certificate term).
"""

from __future__ import annotations

import math

from scipy import stats

from pacpriv._validation import check_int, check_real
from pacpriv.pac.noise._concentration import MAX_BET, _check_confidence

__all__ = ["predicted_inflation", "trials_for_inflation"]

#: Fewest certificate pairs (as in :func:`pacpriv.pac.noise.certify_noise`).
_MIN_PAIRS = 2


def _mp_shape_factor(y: float) -> float:
    """``E[mean(μ^{-1/2})]·E[mean(μ^{1/2})]`` under the Marchenko–Pastur law of ratio ``y < 1``.

    The excess noise power of the square-root rule fixed from a sample covariance of
    ``m_s = d/y`` Gaussian trials with a flat true spectrum (``(Σ 1/√λ̂)(Σ √λ̂)/d² >= 1``,
    docs/math.rst, Certifying), in the large-``d`` limit.
    """
    if y <= 0:
        return 1.0
    lo, hi = (1 - math.sqrt(y)) ** 2, (1 + math.sqrt(y)) ** 2
    from scipy.integrate import quad

    def dens(t):
        return math.sqrt(max((hi - t) * (t - lo), 0.0)) / (2 * math.pi * y * t)

    neg = quad(lambda t: dens(t) / math.sqrt(t), lo, hi, limit=200)[0]
    pos = quad(lambda t: dens(t) * math.sqrt(t), lo, hi, limit=200)[0]
    return neg * pos


def predicted_inflation(
    n_trials: int, dim: int, *, confidence: float = 0.95, shape_fraction: float = 0.5,
    clip_margin: float = 1.25, effective_dim: float | None = None,
) -> float:
    """Planning model: certified noise power / oracle square-root-rule noise power.

    Model (Gaussian outputs, flat spectrum of ``effective_dim`` directions): the shape costs
    the Marchenko–Pastur factor of ratio ``d/m_s``; the certificate (:func:`betting_upper`)
    costs ``1 + L/(nλ) + λ s²/2`` in units of ``T = tr(A⁻¹Σ)``, with ``L = ln(1/γ)``, ``n``
    pairs, ``s² = 2/d_eff`` (the relative variance of a summand) and
    ``λ = min(sqrt(2L/(n s²)), MAX_BET/b)``, ``b = 2ρ²`` with
    ``ρ² = clip_margin² · χ²_{d_eff}(1 − 1/m_s)/d_eff`` (the expected maximum whitened radius).
    A heuristic for choosing ``n_trials``, not a bound; skewed spectra have a smaller
    ``effective_dim`` (e.g. :attr:`OutputSpectrum.effective_rank`).

    Returns
    -------
    float
        Predicted inflation (``>= 1``); ``inf`` when ``n_trials`` is too small (``m_s <= d``).
    """
    m = check_int(n_trials, "n_trials", low=1)
    d = check_int(dim, "dim", low=1)
    conf = _check_confidence(confidence)
    deff = float(d if effective_dim is None else check_real(effective_dim, "effective_dim",
                                                             low=1.0, high=float(d)))
    m_s = max(2, math.ceil(shape_fraction * m))
    n = (m - m_s) // 2
    if n < _MIN_PAIRS or m_s <= d:
        return math.inf
    log_term = math.log(1.0 / (1.0 - conf))
    rho2 = clip_margin**2 * float(stats.chi2.ppf(1.0 - 1.0 / m_s, deff)) / deff
    s2 = 2.0 / deff
    lam = min(math.sqrt(2.0 * log_term / (n * s2)), MAX_BET / (2.0 * rho2))
    cert = 1.0 + log_term / (n * lam) + lam * s2 / 2.0
    return _mp_shape_factor(d / m_s) * cert


def trials_for_inflation(
    dim: int, *, target_inflation: float = 1.2, confidence: float = 0.95,
    shape_fraction: float = 0.5, clip_margin: float = 1.25, effective_dim: float | None = None,
    max_trials: int = 10**8,
) -> int:
    """Smallest ``n_trials`` whose :func:`predicted_inflation` is ``<= target_inflation``.

    Parameters
    ----------
    dim : int
        Output dimension ``d >= 1``.
    target_inflation : float, default 1.2
        Allowed certified noise power relative to the oracle square-root rule, ``> 1``.
    confidence, shape_fraction, clip_margin, effective_dim
        As in :func:`predicted_inflation`.
    max_trials : int, default 1e8
        Search limit.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If an argument is out of range or no ``n_trials <= max_trials`` reaches the target.

    Examples
    --------
    >>> trials_for_inflation(12) > trials_for_inflation(12, target_inflation=2.0)
    True
    """
    d = check_int(dim, "dim", low=1)
    target = check_real(target_inflation, "target_inflation", low=1.0, low_inclusive=False)
    cap = check_int(max_trials, "max_trials", low=6)

    def ok(m: int) -> bool:
        return predicted_inflation(m, d, confidence=confidence, shape_fraction=shape_fraction,
                                   clip_margin=clip_margin, effective_dim=effective_dim) <= target

    hi = max(6, 2 * d + 6)
    while not ok(hi):
        if hi >= cap:
            raise ValueError(f"no n_trials <= max_trials={cap} reaches target_inflation="
                             f"{target!r} for dim={d}.")
        hi = min(cap, hi * 2)
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi
