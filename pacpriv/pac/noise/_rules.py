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
    lo = hi = max(start, _LOG_MU_MIN)  # subnormal spectra: exp(start) would underflow to 0
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
    s2 = _floor_variance(s2, lam)
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

