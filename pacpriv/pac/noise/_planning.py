"""Trial planning for the PAC certificate: predicted noise inflation over the oracle.

A heuristic model (Gaussian outputs, flat spectrum of ``effective_dim`` directions) of the
certified noise power of :func:`~pacpriv.pac.noise.certify_noise` relative to the square-root
rule on the true covariance with the trace bound, used to choose ``n_trials``; not a bound.
The log-det scaling only lowers the noise further (by ``(2v/d)/(e^{2v/d} − 1)``), which the
model leaves out (it does not know ``v``).

References
----------
.. [1] V. A. Marchenko, L. A. Pastur. Distribution of eigenvalues for some sets of random
   matrices. Math. USSR-Sbornik 1(4), 1967 (the raw shape's excess on a flat spectrum).
.. [2] I. Waudby-Smith, A. Ramdas. Estimating means of bounded random variables by betting.
   J. R. Stat. Soc. B 86(1), 2024 (the certificate term).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats
from scipy.optimize import brentq

from pacpriv._validation import check_int, check_real
from pacpriv.pac.noise._concentration import MAX_BET, _check_confidence
from pacpriv.pac.noise._shape import shape_trials_model

__all__ = ["SHAPE_SLOPE", "InflationUnreachable", "predicted_inflation", "shown_inflation",
           "trials_for_inflation"]

#: Fewest trials of a certificate (as in :func:`pacpriv.pac.noise.certify_noise`).
_MIN_TRIALS = 6

#: Quantile grid of the summand law (its ``π`` top points sit at the clip).
_GRID = 512


#: Shape factor per unit of ``d/m_s``: the measured excess noise power of the shrunk
#: square-root shape on decaying and one-dominant spectra is ``≈ 0.2·d/m_s`` (0.02–0.12 at
#: ``d/m_s`` = 0.08–0.63; ``≈ 0`` on flat spectra, which the shrinkage fits;
#: benchmarks/certificate.py). The raw square-root shape costs the larger Marchenko–Pastur
#: factor ``≈ 1 + d/(4 m_s)`` on a flat spectrum.
SHAPE_SLOPE = 0.2


#: Largest output dimension the planning model answers for: ``2**53`` (every integer up to it
#: is exact in float64; above it the F-distribution quantiles are NaN).
MAX_DIM = 2**53


@functools.lru_cache(maxsize=64)
def _chi2_grid(k: float) -> np.ndarray:
    """``χ²_k/k`` at the midpoints of :data:`_GRID` quantiles (read-only; the same ``k`` for
    every step of :func:`trials_for_inflation`'s search)."""
    u = (np.arange(_GRID) + 0.5) / _GRID
    grid = stats.chi2.ppf(u, k) / k
    grid.setflags(write=False)
    return grid


def _certificate_factor(n: float, k: float, m_s: float, gamma: float, clip_probability: float,
                        bias: float) -> tuple[float, float]:
    """Width of :func:`predictable_betting_upper` in units of ``T`` (model), times ``1 + bias``,
    and the mean of the clipped summands (the factor's limit as ``n → ∞``, below 1).

    Summands ``Y = T·χ²_k/k`` clipped at ``ρ² = F_{k, k(m_s−1)}(1 − π)`` (units of ``T``); bet
    ``λ(t) = min(sqrt(2L/(n Var Y)), c/(ρ² − t))``; the bound is the ``t`` where the expected
    log-capital per summand reaches ``L/n``, ``L = ln(1/γ)``.
    """
    rho2 = float(stats.f.ppf(1.0 - clip_probability, k, max(k * (m_s - 1.0), 1.0)))
    y = np.minimum(_chi2_grid(k), rho2)
    log_term = math.log(1.0 / gamma)
    lam_star = math.sqrt(2.0 * log_term / (n * max(float(np.var(y)), 1e-300)))

    def excess(t: float) -> float:
        lam = min(lam_star, MAX_BET / (rho2 - t))
        return float(np.mean(np.log1p(lam * (t - y)))) - log_term / n

    mean = float(np.mean(y))
    top = rho2 * (1.0 - 1e-9)
    if excess(top) < 0:
        return rho2 * (1.0 + bias), mean
    return brentq(excess, mean, top, xtol=1e-10) * (1.0 + bias), mean


def predicted_inflation(
    n_trials: int, dim: int, *, confidence: float = 0.95, shape_fraction: float | None = None,
    clip_margin: float = 1.0, effective_dim: float | None = None,
    clip_probability: float = 0.02,
) -> float:
    """Planning model: certified noise power / oracle square-root-rule noise power.

    Model (Gaussian outputs, flat spectrum of ``effective_dim`` directions, trace scaling):
    the product of

    * the shape factor ``1 + 0.2·d/m_s`` (:data:`SHAPE_SLOPE`, measured on decaying and
      one-dominant spectra; flat ones cost less, the shrinkage fits them);
    * the certificate factor: the width of the betting bound for summands
      ``Y = T·χ²_k/k`` (``k = effective_dim``) clipped at the clip radius, with the bet of
      :func:`predictable_betting_upper` at the true variance, times ``1 + H/n`` for the
      running-mean bias (``H = Σ_{i=m_s}^{m−1} 1/i``), ``n = m − m_s``.

    ``m_s`` follows :func:`~pacpriv.pac.noise._shape.default_shape_trials` (without rounding)
    or ``shape_fraction · m``; ``clip_margin`` scales the clip radius. A heuristic for choosing
    ``n_trials``, not a bound: it leaves out Ville's running maximum (measured 2–7% less
    noise at ``d <= 5``, 128 trials) and the log-det scaling, and skewed spectra have a
    smaller ``effective_dim`` (e.g. :attr:`OutputSpectrum.effective_rank`).

    Returns
    -------
    float
        Predicted inflation, never below :func:`gaussian_floor` (what no certificate with
        this many trials can beat on Gaussian outputs) nor 1; ``inf`` when ``n_trials`` is too
        small (fewer than 6, or ``m_s <= d``). Where the model's own value falls below
        ``1 + δ`` (the clip deficit, see :func:`trials_for_inflation`) it has left its range,
        and :func:`trials_for_inflation` never plans there.

    Examples
    --------
    >>> 1.0 < predicted_inflation(1024, 20) < predicted_inflation(128, 20)
    True
    """
    model = _model_inflation(
        n_trials, dim, confidence=confidence, shape_fraction=shape_fraction,
        clip_margin=clip_margin, effective_dim=effective_dim, clip_probability=clip_probability)
    return max(1.0, model, gaussian_floor(n_trials, effective_dim or dim, confidence))


def gaussian_floor(n_trials: int, dof_per_trial: float, confidence: float) -> float:
    """What no ``n_trials``-trial certificate at ``confidence`` can beat on Gaussian outputs.

    An upper confidence bound on a variance from ``k = (n_trials − 1)·dof_per_trial`` degrees
    of freedom (the trials' centred squares, ``dof_per_trial`` independent directions each) is
    at least ``k / χ²_{1−confidence}(k)`` times the variance (the exact Gaussian bound, Cochran
    1934); certified noise power over the oracle's is at least that. The planning model is
    never allowed below it (an independent bound check found it 1% under at d = 1 and 2,000
    trials, 2.5% under from 9,000 trials). Wilson–Hilferty's quantile for ``k > 10⁷``.

    Returns
    -------
    float
        ``>= 1``; ``inf`` for fewer than 2 trials.
    """
    if n_trials < 2:
        return math.inf
    k = (n_trials - 1) * float(dof_per_trial)
    gamma = 1.0 - confidence
    if k <= 1e7:
        q = float(stats.chi2.ppf(gamma, k))
    else:
        z = float(stats.norm.ppf(gamma))
        q = k * (1.0 - 2.0 / (9.0 * k) + z * math.sqrt(2.0 / (9.0 * k))) ** 3
    return max(1.0, k / q) if q > 0 else math.inf


def _model_inflation(
    n_trials: int, dim: int, *, confidence: float, shape_fraction: float | None,
    clip_margin: float, effective_dim: float | None, clip_probability: float,
) -> float:
    """:func:`predicted_inflation` before its floor at 1: below 1 (many trials) the model has
    left what it resolves (the clip lowers its certificate term under the oracle's)."""
    return _model_terms(n_trials, dim, confidence=confidence, shape_fraction=shape_fraction,
                        clip_margin=clip_margin, effective_dim=effective_dim,
                        clip_probability=clip_probability)[0]


#: Largest share of the model's leading terms (its excess over its own ``n → ∞`` limit: the
#: certificate width and the shape factor) that its clip correction (the clipped mean's
#: deficit below the oracle, ``1 − E[min(Y, ρ²)]``) may reach for the model to resolve a
#: prediction. Past it the prediction is dominated by the correction: it bends to its floor
#: (below 1), so targets close to 1 all map to nearly the same trial count (issue 35, m12).
RESOLVED_SHARE = 0.5


def _model_terms(
    n_trials: int, dim: int, *, confidence: float, shape_fraction: float | None,
    clip_margin: float, effective_dim: float | None, clip_probability: float,
) -> tuple[float, float]:
    """(model inflation, the clip deficit ``1 − E[min(Y, ρ²)]``) at ``n_trials``."""
    m = check_int(n_trials, "n_trials", low=1)
    d = check_int(dim, "dim", low=1, high=MAX_DIM)
    gamma = 1.0 - _check_confidence(confidence)
    deff = float(d if effective_dim is None else check_real(effective_dim, "effective_dim",
                                                             low=1.0, high=float(d)))
    frac = None if shape_fraction is None else check_real(
        shape_fraction, "shape_fraction", low=0.0, high=1.0, low_inclusive=False,
        high_inclusive=False)
    margin = check_real(clip_margin, "clip_margin", low=1.0)
    pi = check_real(clip_probability, "clip_probability", low=0.0, high=0.5,
                    low_inclusive=False, high_inclusive=False)
    m_s = shape_trials_model(m, d) if frac is None else frac * m
    n = m - m_s
    if m < _MIN_TRIALS or m_s <= d or n < 2:
        return math.inf, 0.0
    bias = (math.log((m - 1.0) / max(m_s - 1.0, 1.0))) / n
    pi_eff = pi if margin == 1.0 else float(
        stats.f.sf(margin**2 * stats.f.ppf(1.0 - pi, deff, deff * (m_s - 1.0)),
                   deff, deff * (m_s - 1.0)))
    cert, clipped_mean = _certificate_factor(n, deff, m_s, gamma, max(pi_eff, 1e-12), bias)
    return (1.0 + SHAPE_SLOPE * d / m_s) * cert, 1.0 - clipped_mean


def _resolved(value: float, deficit: float) -> bool:
    """Whether the model resolves ``value``: its clip correction (``deficit``) is at most
    :data:`RESOLVED_SHARE` of its leading terms (``value − (1 − deficit)``), i.e.
    ``value >= 1 + deficit·(1/share − 1)``; implies ``value >= 1``."""
    return value - (1.0 - deficit) >= deficit / RESOLVED_SHARE


class InflationUnreachable(ValueError):
    """No ``n_trials`` within the search range has a resolved prediction ``<= target``.

    Attributes: ``target`` (asked), ``smallest`` (the smallest target the model reaches for
    this ``dim``/confidence, rounded up so that passing it succeeds), ``n_trials`` (where it is
    reached), ``capped`` (True: the trial cap stops the search; False: beyond ``n_trials`` the
    model's prediction falls below the oracle, 1, which it does not resolve).
    """

    def __init__(self, message: str, *, target: float, smallest: str, n_trials: int,
                 capped: bool) -> None:
        super().__init__(message)
        self.target, self.smallest, self.n_trials, self.capped = (
            target, smallest, n_trials, capped)


def shown_inflation(value: float, target: float) -> str:
    """``value`` rounded up, with 5 or more significant digits: as many as it takes for the
    text to stay ``<= target`` when ``value <= target`` (it is never shown below ``value``, and
    a value above ``target`` is never shown as ``target``: rounding up keeps it above).

    Examples
    --------
    >>> shown_inflation(1.19934, 1.2), shown_inflation(1.0000003, 1.0000004)
    ('1.1994', '1.0000003')
    """
    from decimal import Decimal

    from pacpriv._numbers import format_bound

    text = format_bound(float(value), 5, side="up")
    for digits in range(6, 18):
        if value > target or Decimal(text) <= Decimal(repr(float(target))):
            break
        text = format_bound(float(value), digits, side="up")
    return text


def trials_for_inflation(
    dim: int, *, target_inflation: float = 1.2, confidence: float = 0.95,
    shape_fraction: float | None = None, clip_margin: float = 1.0,
    effective_dim: float | None = None, clip_probability: float = 0.02,
    max_trials: int = 10**8,
) -> int:
    """Smallest ``n_trials`` whose :func:`predicted_inflation` is ``<= target_inflation``.

    Parameters
    ----------
    dim : int
        Output dimension, ``1 <= d <= 2**53`` (:data:`MAX_DIM`).
    target_inflation : float, default 1.2
        Allowed certified noise power relative to the oracle square-root rule, ``> 1``.
    confidence, shape_fraction, clip_margin, effective_dim, clip_probability
        As in :func:`predicted_inflation`.
    max_trials : int, default 1e8
        Search limit.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If an argument is out of range.
    InflationUnreachable
        (A ValueError.) If no ``n_trials <= max_trials`` reaches the target with a resolved
        prediction. Range of the model: its clip puts its ``n_trials → ∞`` limit below the
        oracle, at ``1 − δ`` with the clip deficit ``δ = 1 − E[min(Y, ρ²)]`` (about 0.034 at
        ``d = 1``, 0.011 at ``d = 4``, 0.0035 at ``d = 20``); a prediction is resolved while
        ``δ`` is at most :data:`RESOLVED_SHARE` (1/2) of the model's leading terms (its excess
        over that limit), i.e. while it is ``>= 1 + δ``. Below that the model bends to its
        floor, and targets near 1 would all map to nearly the same count (a wrong plan). Its
        message names the smallest target the model resolves (e.g. 1.0114 at ``d = 4``).

    Examples
    --------
    >>> trials_for_inflation(12) > trials_for_inflation(12, target_inflation=2.0)
    True
    """
    d = check_int(dim, "dim", low=1, high=MAX_DIM)
    target = check_real(target_inflation, "target_inflation", low=1.0, low_inclusive=False)
    cap = check_int(max_trials, "max_trials", low=_MIN_TRIALS)
    conf = _check_confidence(confidence)

    def terms(m: int) -> tuple[float, float]:
        return _model_terms(
            m, d, confidence=conf, shape_fraction=shape_fraction, clip_margin=clip_margin,
            effective_dim=effective_dim, clip_probability=clip_probability)

    def model(m: int) -> float:  # never below the Gaussian floor (gaussian_floor)
        return max(terms(m)[0], gaussian_floor(m, effective_dim or d, conf))

    def resolved(m: int) -> bool:
        return _resolved(*terms(m))

    hi = min(cap, max(_MIN_TRIALS, 2 * d + 6))  # never past the cap (it returned 1.14e8 > 1e8)
    while model(hi) > target:
        if hi >= cap:
            return _unreachable(d, conf, target, model, resolved, cap, 1)
        hi = min(cap, hi * 2)
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if model(mid) <= target:
            hi = mid
        else:
            lo = mid
    if not resolved(hi):  # reached only past what the model resolves (near its floor)
        return _unreachable(d, conf, target, model, resolved, hi, 1)
    return hi


def _unreachable(d: int, conf: float, target: float, model, resolved, top: int,
                 low: int) -> int:
    """Raise :class:`InflationUnreachable` naming the smallest resolved prediction: at the cap
    ``top`` when the model resolves it there, else at the last count below ``top`` where it
    does (the model's excess over 1 falls as the count grows, so resolution ends once)."""
    capped = resolved(top)
    if not capped:
        while top - low > 1:  # resolved(low) (too few trials: inf), not resolved(top)
            mid = (low + top) // 2
            if resolved(mid):
                low = mid
            else:
                top = mid
        top = low
    from pacpriv._numbers import format_bound

    smallest = format_bound(model(top), 8, side="up")  # > target: rounding up keeps it above
    why = (f"the search stops at max_trials={top}" if capped else
           f"past {top} trials the model leaves its range: its clip correction exceeds "
           f"{RESOLVED_SHARE:g} of its leading terms and it bends to its floor")
    raise InflationUnreachable(
        f"target_inflation={target!r} cannot be planned for dim={d} at confidence={conf!r}: "
        f"the smallest target the planning model resolves is {smallest} (at n_trials={top}; "
        f"{why}); pass target_inflation >= {smallest}.",
        target=target, smallest=smallest, n_trials=top, capped=capped)
