"""The noise-variance math of the spectrum rules (private helpers of the rule classes).

The rule objects (:mod:`pacpriv.pac.noise`: ``Anisotropic``, ``Isotropic``, ``ExactMI``,
``Algorithm1``, ...) call these functions; the registry of rule classes by name is
:mod:`pacpriv.pac.noise._registry`.

A spectrum is given as eigenvalues ``lam`` with multiplicities ``mult`` (a multiplicity > 1
stands for a group of directions sharing one eigenvalue and one noise variance, e.g. the
complement of the held eigenvectors). Every function returns noise **variances** ``s²``
(not standard deviations), one per group. docs/math.rst, Gaussian noise, [PAC] Thm 3,
[PAC-ALG] Thm 1.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from pacpriv.exceptions import CalibrationError
from pacpriv.pac.bounds._mutual_info import (
    gaussian_mi_bound,
    gaussian_mi_bound_whitened,
    linearised_mi_bound,
)
from pacpriv.pac.noise._plan import NoisePlan, _block_rows
from pacpriv.pac.noise._rule import noise_out_of_range

_MAX_BRACKET_STEPS = 400
_BRACKET_FACTOR = math.log(4.0)
_LOG_MU_MIN = -700.0  # exp(-700) ~ 1e-304, just above the float64 underflow


def square_root_rule(lam: np.ndarray, mult: np.ndarray, mi_budget: float) -> np.ndarray:
    """``s_j² = sqrt(λ_j) · Σ_k m_k sqrt(λ_k) / (2v)``: min ``E||B||²`` s.t. ``½ Σ m λ/s² = v``."""
    root = np.sqrt(lam)
    with np.errstate(over="ignore"):  # +inf where the noise leaves float64: callers refuse it
        return root * float(np.sum(mult * root)) / (2.0 * mi_budget)


def isotropic_rule(lam: np.ndarray, mult: np.ndarray, mi_budget: float) -> float:
    """``s² = tr(Σ) / (2v)`` in every direction (one variance)."""
    return float(np.sum(mult * lam)) / (2.0 * mi_budget)


def _snr_log(log_t: np.ndarray) -> np.ndarray:
    """``λ/s²`` of the exact-MI optimum from ``ln t``, ``t = λ/μ``: ``(t + sqrt(t² + 4t))/2``.

    Evaluated as ``sqrt(t)·(sqrt(t) + sqrt(t + 4))/2`` (``t <= 1``) or
    ``t·(1 + sqrt(1 + 4/t))/2`` (``t > 1``) with ``sqrt(t) = exp(ln(t)/2)``, so ``t`` itself
    may be far below the smallest double (budgets down to 1e-300 nats put ``μ`` near 1e600).
    """
    log_t = np.minimum(np.asarray(log_t, dtype=np.float64), 700.0)
    big = log_t > 0.0
    t = np.exp(np.where(big, log_t, 0.0))
    root = np.exp(0.5 * np.where(big, 0.0, log_t))
    small_t = root * root
    return np.where(big, t * (1.0 + np.sqrt(1.0 + 4.0 / t)) / 2.0,
                    root * (root + np.sqrt(small_t + 4.0)) / 2.0)


def _exact_variances(lam: np.ndarray, log_mu: float) -> np.ndarray:
    """``s² = (−λ + sqrt(λ² + 4μλ))/2``, evaluated as ``λ / snr(λ/μ)`` in log space.

    For ``t = λ/μ <= 1``: ``s² = sqrt(λμ) / g`` with ``g = (sqrt(t) + sqrt(t + 4))/2``, so a
    ``sqrt(t)`` below the smallest double never divides by 0 (``+inf`` only where ``s²`` itself
    leaves float64's range; the plan refuses that).
    """
    out = np.zeros_like(lam)
    pos = lam > 0
    log_lam = np.log(lam[pos])
    log_t = log_lam - log_mu
    big = log_t > 0.0
    root = np.exp(0.5 * np.minimum(log_t, 0.0))
    g = (root + np.sqrt(root * root + 4.0)) / 2.0
    with np.errstate(over="ignore"):
        small = np.exp(0.5 * (log_lam + log_mu)) / g
    out[pos] = np.where(big, lam[pos] / _snr_log(np.maximum(log_t, 0.0)), small)
    return out


def round_up_variances(lam, mult, s2, mi_budget: float, bound=None) -> np.ndarray:
    """``s2`` scaled up by a few ulps until ``½ Σ m ln(1 + λ/s²) <= mi_budget`` exactly.

    Rules are exact in real arithmetic; float rounding can leave the bound an ulp or two above
    the budget. More noise is always on the safe side, so the noise is rounded up, never the
    bound down. ``bound(s2)`` replaces the eigenbasis bound where given. Raises
    ``CalibrationError`` if 64 steps do not suffice (a bug).
    """
    def _eigen_bound(x):
        return gaussian_mi_bound(lam, x, multiplicity=mult)

    bound = bound or _eigen_bound
    step = 4.0 * np.finfo(np.float64).eps
    for _ in range(64):
        if bound(s2) <= mi_budget:
            return s2
        s2 = s2 * (1.0 + step)
        step *= 2.0
    raise CalibrationError("the noise variances could not be rounded up to meet the budget "
                           f"{mi_budget!r}; this is a bug, please report it.")


def exact_mi_rule(lam: np.ndarray, mult: np.ndarray, mi_budget: float):
    """Water-filling optimum of ``min Σ m s²`` s.t. ``½ Σ m ln(1 + λ/s²) = v``.

    Returns ``(variances, details)``. ``ln μ`` is found by ``scipy.optimize.brentq`` after
    geometric bracket growth, all in log space (``μ`` itself may exceed float64's range at
    budgets near 1e-300 nats; ``details["log_mu"]`` holds ``ln μ``); afterwards the variances
    are rounded up until ``½ Σ m ln(1+λ/s²) <= v`` (one-sided calibration). If the result used
    more noise power than the square-root rule (it cannot in exact arithmetic), or ``μ`` would
    underflow (budgets of hundreds of nats per direction), the square-root rule is returned
    instead and ``details["fallback"]`` says so.
    """
    pos = (lam > 0) & (mult > 0)
    sqrt_var = square_root_rule(lam, mult, mi_budget)
    if not np.any(pos):
        return np.zeros_like(lam), {"mu": 0.0, "log_mu": None, "fallback": None}
    lp, mp = lam[pos], mult[pos]
    log_lp = np.log(lp)

    def excess(log_mu: float) -> float:
        return 0.5 * float(np.sum(mp * np.log1p(_snr_log(log_lp - log_mu)))) - mi_budget

    start = 2.0 * (math.log(float(np.sum(mp * np.sqrt(lp)))) - math.log(2.0 * mi_budget))
    lo = hi = max(start, _LOG_MU_MIN)  # subnormal spectra: exp(start) would underflow to 0
    while excess(lo) < 0:
        lo -= _BRACKET_FACTOR
        if lo < _LOG_MU_MIN:  # μ would underflow: a budget this large needs ~no noise anyway
            return sqrt_var, {"mu": None, "log_mu": None,
                              "fallback": "no bracket for μ (budget too large)"}
    for _ in range(_MAX_BRACKET_STEPS):
        if excess(hi) <= 0:
            break
        hi += _BRACKET_FACTOR
    else:
        raise CalibrationError("exact-MI rule: no upper bracket for the multiplier μ was found.")
    log_mu = hi if lo == hi else brentq(excess, lo, hi, xtol=1e-13, rtol=4 * np.finfo(float).eps)
    s2 = _exact_variances(lam, log_mu)
    if not np.all(np.isfinite(s2)):
        raise CalibrationError(noise_out_of_range("exact-mi", mi_budget))
    s2 = round_up_variances(lam, mult, s2, mi_budget)
    mu = math.exp(log_mu) if log_mu < 709.0 else None  # ln μ is in details["log_mu"]
    details = {"mu": mu, "log_mu": log_mu}
    if float(np.sum(mult * s2)) > float(np.sum(mult * sqrt_var)):
        return sqrt_var, {**details, "fallback": "square-root rule used less noise power"}
    return s2, {**details, "fallback": None}


# --- plan builders ----------------------------------------------------------------------------


def _groups(spectrum):
    """Held eigenvalues (multiplicity 1) plus the complement as one pooled group.

    The complement's eigenvalues sum to ``tail_variance``; pooling them as ``d − k`` equal
    eigenvalues with one shared noise variance bounds their MI term from above (concavity of
    ``ln``), so the certified bound stays on the safe side.
    """
    lam = np.asarray(spectrum.eigenvalues, dtype=np.float64)
    n_comp = spectrum.dim - lam.shape[0]
    mult = np.ones_like(lam)
    if n_comp > 0:
        lam = np.append(lam, spectrum.tail_variance / n_comp)
        mult = np.append(mult, float(n_comp))
    return lam, mult, n_comp


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _certify(plan_bound: float, mi_budget: float, rule: str) -> None:
    if not plan_bound <= mi_budget * (1.0 + 1e-12):
        raise CalibrationError(
            f"rule {rule!r} produced a plan whose certified MI bound {plan_bound!r} exceeds the "
            f"budget {mi_budget!r}; this is a bug, please report it."
        )


def _floor_variance(noise_variance: np.ndarray, signal: np.ndarray) -> np.ndarray:
    """Raise noise variances that underflowed below the smallest normal double (signal > 0).

    Rules give ``s² ∝ λ``; for subnormal ``λ`` that product underflows (to 0 or to a subnormal
    that lost its precision) and the MI bound would be inf or understated. More noise is always
    on the safe side, and ``tiny`` (2.2e-308) is far below any meaningful output scale.
    """
    tiny = np.finfo(np.float64).tiny
    return np.where(np.asarray(signal) > 0, np.maximum(noise_variance, tiny), noise_variance)


def _variance_only_bound(spectrum, e: np.ndarray) -> float:
    """Log-det bound of coordinate noise ``diag(e)``; an un-held tail adds ``½ Σ R_jj/e_j``."""
    bound = gaussian_mi_bound_whitened(
        spectrum.eigenvalues, spectrum.eigenvectors, noise_variance=e
    )
    if spectrum.tail_variance > 0:
        vecs = spectrum.eigenvectors
        held_diag = np.empty(spectrum.dim)
        step = _block_rows(vecs.shape[1])
        for s in range(0, spectrum.dim, step):
            block = np.asarray(vecs[s : s + step], dtype=np.float64)
            held_diag[s : s + step] = (block**2) @ spectrum.eigenvalues
        rem = np.clip(spectrum.variances - held_diag, 0.0, None)
        bound += linearised_mi_bound(rem, e)  # ln det(I+P+Q) <= ln det(I+P) + tr Q
    return bound


def _spectrum_plan(rule, spectrum, lam, mult, n_comp, v, s2, iso, details=None, claim=None,
                   conf=None) -> NoisePlan:
    """A plan from per-group noise variances ``s2`` (eigenbasis, or isotropic if ``iso``)."""
    details = details or {}
    d = spectrum.dim
    if not np.all(np.isfinite(s2)):
        raise CalibrationError(noise_out_of_range(rule, v))
    s2 = round_up_variances(lam, mult, _floor_variance(s2, lam), v)
    bound = gaussian_mi_bound(lam, s2, multiplicity=mult)
    _certify(bound, v, rule)
    # the plug-in claim: the budget, or the plan's own MI where rounding put it a few ulps
    # above (the headline must not be computed below the plan's MI)
    claim = max(v, float(bound)) if claim is None else claim
    lin = linearised_mi_bound(lam, s2, multiplicity=mult)
    if iso:
        return NoisePlan(
            rule=rule, mi_budget=v, mi_bound=bound, linearised_mi_bound=lin, mi_claim=claim,
            confidence=conf, dim=d, basis=None,
            noise_std=_readonly(np.full(d, np.sqrt(s2[0]))), residual_std=0.0, details=details,
        )
    k = spectrum.n_components
    return NoisePlan(
        rule=rule, mi_budget=v, mi_bound=bound, linearised_mi_bound=lin, mi_claim=claim,
        confidence=conf, dim=d, basis=spectrum.eigenvectors,
        noise_std=_readonly(np.sqrt(s2[:k])),
        residual_std=float(np.sqrt(s2[k])) if n_comp > 0 else 0.0, details=details,
    )

