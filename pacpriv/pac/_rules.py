"""Noise-variance rules on a weighted spectrum (private helpers of :mod:`.calibration`).

A spectrum is given as eigenvalues ``lam`` with multiplicities ``mult`` (a multiplicity > 1
stands for a group of directions sharing one eigenvalue and one noise variance, e.g. the
complement of the held eigenvectors). Every function returns noise **variances** ``s²``
(not standard deviations), one per group. MATH.md §2, [PAC] Thm 3, [PAC-ALG] Thm 1.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from pacpriv.exceptions import CalibrationError
from pacpriv.pac.mutual_info import gaussian_mi_bound

_MAX_BRACKET_STEPS = 400
_BRACKET_FACTOR = math.log(4.0)
_LOG_MU_MIN = -700.0  # exp(-700) ~ 1e-304, just above the float64 underflow


def square_root_rule(lam: np.ndarray, mult: np.ndarray, mi_budget: float) -> np.ndarray:
    """``s_j² = sqrt(λ_j) · Σ_k m_k sqrt(λ_k) / (2v)``: min ``E||B||²`` s.t. ``½ Σ m λ/s² = v``."""
    root = np.sqrt(lam)
    return root * float(np.sum(mult * root)) / (2.0 * mi_budget)


def isotropic_rule(lam: np.ndarray, mult: np.ndarray, mi_budget: float) -> float:
    """``s² = tr(Σ) / (2v)`` in every direction (one variance)."""
    return float(np.sum(mult * lam)) / (2.0 * mi_budget)


def _snr(t: np.ndarray) -> np.ndarray:
    """``λ/s²`` of the exact-MI optimum as a function of ``t = λ/μ``: ``(t + sqrt(t² + 4t))/2``."""
    big = t > 1.0
    tb = np.where(big, t, 1.0)
    ts = np.where(big, 0.0, t)
    return np.where(big, tb * (1.0 + np.sqrt(1.0 + 4.0 / tb)) / 2.0,
                    (ts + np.sqrt(ts * ts + 4.0 * ts)) / 2.0)


def _exact_variances(lam: np.ndarray, mu: float) -> np.ndarray:
    """``s² = (−λ + sqrt(λ² + 4μλ))/2``, evaluated as ``λ / snr(λ/μ)`` (no cancellation)."""
    out = np.zeros_like(lam)
    pos = lam > 0
    out[pos] = lam[pos] / _snr(lam[pos] / mu)
    return out


def exact_mi_rule(lam: np.ndarray, mult: np.ndarray, mi_budget: float):
    """Water-filling optimum of ``min Σ m s²`` s.t. ``½ Σ m ln(1 + λ/s²) = v``.

    Returns ``(variances, details)``. ``μ`` is found by ``scipy.optimize.brentq`` on ``ln μ``
    after geometric bracket growth; afterwards the certified bound is checked and ``μ`` nudged
    up until ``½ Σ m ln(1+λ/s²) <= v`` (one-sided calibration). If the result used more noise
    power than the square-root rule (it cannot in exact arithmetic), or ``μ`` would underflow
    (budgets of hundreds of nats per direction), the square-root rule is returned instead and
    ``details["fallback"]`` says so.
    """
    pos = (lam > 0) & (mult > 0)
    sqrt_var = square_root_rule(lam, mult, mi_budget)
    if not np.any(pos):
        return np.zeros_like(lam), {"mu": 0.0, "fallback": None}
    lp, mp = lam[pos], mult[pos]

    def excess(log_mu: float) -> float:
        return 0.5 * float(np.sum(mp * np.log1p(_snr(lp / math.exp(log_mu))))) - mi_budget

    start = 2.0 * math.log(float(np.sum(mp * np.sqrt(lp))) / (2.0 * mi_budget))
    lo = hi = start
    while excess(lo) < 0:
        lo -= _BRACKET_FACTOR
        if lo < _LOG_MU_MIN:  # μ would underflow: a budget this large needs ~no noise anyway
            return sqrt_var, {"mu": None, "fallback": "no bracket for μ (budget too large)"}
    for _ in range(_MAX_BRACKET_STEPS):
        if excess(hi) <= 0:
            break
        hi += _BRACKET_FACTOR
    else:
        raise CalibrationError("exact-MI rule: no upper bracket for the multiplier μ was found.")
    log_mu = hi if lo == hi else brentq(excess, lo, hi, xtol=1e-13, rtol=4 * np.finfo(float).eps)
    mu = math.exp(log_mu)
    s2 = _exact_variances(lam, mu)
    nudge = 1e-12
    while gaussian_mi_bound(lam, s2, multiplicity=mult) > mi_budget:
        mu *= 1.0 + nudge
        nudge *= 2.0
        s2 = _exact_variances(lam, mu)
    if float(np.sum(mult * s2)) > float(np.sum(mult * sqrt_var)):
        return sqrt_var, {"mu": mu, "fallback": "square-root rule used less noise power"}
    return s2, {"mu": mu, "fallback": None}


def algorithm1_rule(lam: np.ndarray, mult: np.ndarray, *, n_held: int, mi_budget: float,
                    c: float, beta: float, output_bound: float, dim: int,
                    complement_unresolved: bool):
    """Algorithm 1 of [PAC] as implemented by the authors' group (MATH.md §2).

    ``j0`` = number of eigenvalues ``> c``; if the smallest consecutive gap among the first
    ``j0`` eigenvalues exceeds ``r·sqrt(d·c) + 2c`` (vacuously true when ``j0 <= 1``) the
    square-root rule runs on ``λ + 10·c·v/β`` in **every** direction (held and complement),
    else the isotropic rule ``(Σλ + d·c)/(2v)``. When the complement's eigenvalues are not
    resolved individually and could exceed ``c`` (``complement_unresolved``) the gap test cannot
    be run and the isotropic branch is taken (safe side).

    The first ``n_held`` entries of ``lam`` are the held eigenvalues (descending); a further
    entry, if any, is the complement group. Returns ``(variances, isotropic: bool, details)``.
    """
    lam_held = lam[:n_held]
    j0 = int(np.sum(lam_held > c))
    gaps = -np.diff(lam_held[:j0])
    min_gap = float(np.min(gaps)) if gaps.size else math.inf
    threshold = output_bound * math.sqrt(dim * c) + 2.0 * c
    inflation = 10.0 * c * mi_budget / beta
    details = {"j0": j0, "min_gap": None if gaps.size == 0 else min_gap,
               "gap_threshold": threshold,
               "inflation": inflation}
    if min_gap > threshold and not complement_unresolved:
        details["branch"] = "anisotropic"
        return square_root_rule(lam + inflation, mult, mi_budget), False, details
    details["branch"] = "isotropic"
    iso = (float(np.sum(mult * lam)) + dim * c) / (2.0 * mi_budget)
    return np.full_like(lam, iso), True, details
