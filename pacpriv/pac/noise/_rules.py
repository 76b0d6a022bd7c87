"""The noise-rule table and the noise-variance rules (private helpers of :mod:`.calibration`).

:data:`RULE_TABLE` maps every rule name to a :class:`RuleInfo` (its plan builder and the
properties the rest of the package reads: whether it needs eigenvectors, whether it is safe
with fewer trials than output dimensions, whether it is certified). Adding a rule = its
function + one row.

A spectrum is given as eigenvalues ``lam`` with multiplicities ``mult`` (a multiplicity > 1
stands for a group of directions sharing one eigenvalue and one noise variance, e.g. the
complement of the held eigenvectors). Every function returns noise **variances** ``s²``
(not standard deviations), one per group. docs/math.rst, Gaussian noise, [PAC] Thm 3,
[PAC-ALG] Thm 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from pacpriv._validation import check_real
from pacpriv.exceptions import CalibrationError
from pacpriv.pac.bounds._mutual_info import (
    gaussian_mi_bound,
    gaussian_mi_bound_whitened,
    linearised_mi_bound,
)
from pacpriv.pac.noise._confidence import confidence_for_trials
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


def algorithm1_rule(lam: np.ndarray, mult: np.ndarray, *, n_held: int, mi_budget: float,
                    c: float, beta: float, output_bound: float, dim: int,
                    complement_unresolved: bool):
    """Algorithm 1 of [PAC] as implemented by the authors' group (docs/math.rst, Gaussian noise).

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


def _build_anisotropic(spectrum, v: float) -> NoisePlan:
    lam, mult, n_comp = _groups(spectrum)
    return _spectrum_plan("anisotropic", spectrum, lam, mult, n_comp, v,
                          square_root_rule(lam, mult, v), False)


def _build_isotropic(spectrum, v: float) -> NoisePlan:
    lam, mult, n_comp = _groups(spectrum)
    return _spectrum_plan("isotropic", spectrum, lam, mult, n_comp, v,
                          np.full_like(lam, isotropic_rule(lam, mult, v)), True)


def _build_exact_mi(spectrum, v: float) -> NoisePlan:
    lam, mult, n_comp = _groups(spectrum)
    s2, details = exact_mi_rule(lam, mult, v)
    return _spectrum_plan("exact-mi", spectrum, lam, mult, n_comp, v, s2, False, details)


def _build_variance_only(spectrum, v: float) -> NoisePlan:
    d = spectrum.dim
    e = _floor_variance(square_root_rule(spectrum.variances, np.ones(d), v), spectrum.variances)
    # the spectrum may bound Σ from above (resolution, scale blocks): the trace bound on
    # the coordinate variances themselves is then the tighter certificate
    bound = min(_variance_only_bound(spectrum, e), linearised_mi_bound(spectrum.variances, e))
    _certify(bound, v, "variance-only")
    return NoisePlan(
        rule="variance-only", mi_budget=v, mi_bound=bound,
        linearised_mi_bound=linearised_mi_bound(spectrum.variances, e), mi_claim=v,
        confidence=None, dim=d, basis=None, noise_std=_readonly(np.sqrt(e)), residual_std=0.0,
    )


def _build_algorithm1(spectrum, v: float, *, c, beta, output_bound, confidence=None) -> NoisePlan:
    for name, val in (("c", c), ("beta", beta), ("output_bound", output_bound)):
        if val is None:
            raise ValueError(f"rule='algorithm1' needs `{name}`; got None.")
    c_ = check_real(c, "c", low=0.0, low_inclusive=False)
    beta_ = check_real(beta, "beta", low=0.0, low_inclusive=False)
    r_ = check_real(output_bound, "output_bound", low=0.0, low_inclusive=False)
    d = spectrum.dim
    lam, mult, n_comp = _groups(spectrum)
    # complement eigenvalues are each <= min(tail, smallest held): if that exceeds c,
    # some of them may count towards j0 and their gaps are unknown
    k_held = spectrum.n_components
    ceiling = spectrum.tail_variance if k_held == 0 else min(
        spectrum.tail_variance, float(lam[k_held - 1]))
    unresolved = n_comp > 0 and ceiling > c_
    s2, iso, details = algorithm1_rule(
        lam, mult, n_held=k_held, mi_budget=v, c=c_, beta=beta_,
        output_bound=r_, dim=d, complement_unresolved=unresolved,
    )
    conf = 1.0 if spectrum.n_trials is None else confidence_for_trials(
        spectrum.n_trials, c=c_, output_bound=r_, dim=d)
    details.update(c=c_, beta=beta_, output_bound=r_, certified_confidence=conf)
    if confidence is not None:
        req = check_real(confidence, "confidence", low=0.0, high=1.0, low_inclusive=False,
                         high_inclusive=False)
        if conf < req:
            raise CalibrationError(
                f"n_trials={spectrum.n_trials} certifies confidence {conf:.6g} < requested "
                f"{req!r} (conservative matrix Bernstein, see trials_for_confidence)."
            )
    return _spectrum_plan("algorithm1", spectrum, lam, mult, n_comp, v, s2, iso, details,
                          claim=v + beta_, conf=conf)


def _build_certified(outputs, v: float, **params) -> NoisePlan:
    from pacpriv.pac.noise._certificate import certify_noise  # certificate imports _plan only

    return certify_noise(outputs, mi_budget=v, method="betting", **params)


def _build_asymptotic_t(outputs, v: float, **params) -> NoisePlan:
    from pacpriv.pac.noise._certificate import certify_noise

    for name in ("output_bound", "clip_margin", "clip_probability"):
        params.pop(name, None)
    return certify_noise(outputs, mi_budget=v, method="student-t", **params)


# --- the table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuleInfo:
    """One noise rule and the properties the rest of pacpriv reads from it.

    Attributes
    ----------
    function : callable
        Plan builder ``function(source, mi_budget, **parameters) -> NoisePlan``; ``source`` is
        an :class:`~pacpriv.pac.spectrum.OutputSpectrum` or the ``(n_trials, d)`` outputs
        (see ``source``).
    source : {"spectrum", "outputs"}
        What the builder needs.
    needs_eigenvectors : bool
        Whether the noise lives in the eigenbasis of ``Σ`` (else coordinate axes / isotropic).
    safe_when_undersampled : bool
        Whether the guarantee still holds with fewer trials than output dimensions.
    certified : bool
        Whether ``MI <= v`` is claimed for the *true* covariance with a stated confidence
        (``"certified"``, ``"algorithm1"``); plug-in rules meet it for the estimate only.
    parameters : tuple of str
        Extra keyword parameters the builder accepts (all others are refused).
    summary : str
        One line for CLI help and reports.
    """

    function: Callable[..., NoisePlan]
    source: str
    needs_eigenvectors: bool
    safe_when_undersampled: bool
    certified: bool
    parameters: tuple[str, ...] = ()
    summary: str = ""


_CERT_PARAMS = ("confidence", "shape_fraction", "output_bound", "clip_margin",
                "clip_probability", "shrinkage", "scaling")

#: name → :class:`RuleInfo`; the first entry is the default rule.
RULE_TABLE: dict[str, RuleInfo] = {
    "certified": RuleInfo(
        _build_certified, "outputs", True, True, True, _CERT_PARAMS,
        "square-root shape from part of the trials, scale certified (1−γ) by a betting "
        "bound on every other trial; clipped release"),
    "anisotropic": RuleInfo(
        _build_anisotropic, "spectrum", True, False, False, (),
        "plug-in square-root rule in the estimated eigenbasis (estimate)"),
    "isotropic": RuleInfo(
        _build_isotropic, "spectrum", False, True, False, (),
        "plug-in tr(Σ)/(2v) in every direction (estimate)"),
    "variance-only": RuleInfo(
        _build_variance_only, "spectrum", False, True, False, (),
        "plug-in square-root rule on the coordinate variances (estimate)"),
    "exact-mi": RuleInfo(
        _build_exact_mi, "spectrum", True, False, False, (),
        "plug-in water-filling on the exact log-det bound (estimate)"),
    "algorithm1": RuleInfo(
        _build_algorithm1, "spectrum", True, True, True,
        ("confidence", "c", "beta", "output_bound"),
        "Algorithm 1 of Xiao & Devadas (MI <= v + β, conservative matrix-Bernstein confidence)"),
    "asymptotic-t": RuleInfo(
        _build_asymptotic_t, "outputs", True, True, False, ("confidence", "shape_fraction"),
        "as 'certified' but a Student-t bound and no clip (asymptotic, not certified)"),
}

#: The default noise rule of run_pac, the wrapper, the CLI and the comparison.
DEFAULT_RULE = "certified"


def rule_info(rule) -> RuleInfo:
    """The table row of ``rule``; ``ValueError`` naming the allowed names otherwise."""
    if not isinstance(rule, str) or rule not in RULE_TABLE:
        raise ValueError(f"`rule` must be one of {tuple(RULE_TABLE)}; got {rule!r}.")
    return RULE_TABLE[rule]


@dataclass(frozen=True)
class Algorithm1:
    """Algorithm 1 of Xiao & Devadas (CRYPTO 2023) with its parameters, usable as ``rule=``.

    ``rule=Algorithm1(confidence=0.95, c=1e-3, beta=0.25, output_bound=1.0)`` is the same as
    ``rule="algorithm1", confidence=0.95, c=1e-3, beta=0.25, output_bound=1.0`` in
    :func:`~pacpriv.pac.noise.calibrate_noise` and :func:`~pacpriv.pac.job.run_pac`: the
    parameters travel with the rule instead of widening every signature.

    Attributes
    ----------
    confidence : float
        Required ``1 − γ`` in ``(0, 1)``.
    c : float
        Eigenvalue threshold ``c > 0``.
    beta : float
        Slack ``β > 0`` in nats (the claim is ``MI <= v + β``).
    output_bound : float
        ``r > 0`` with ``||f(X)||₂ <= r``.
    """

    confidence: float
    c: float
    beta: float
    output_bound: float

    name = "algorithm1"

    def parameters(self) -> dict:
        """The keyword parameters of the rule."""
        return {"confidence": self.confidence, "c": self.c, "beta": self.beta,
                "output_bound": self.output_bound}


def unpack_rule(rule, **given):
    """``(name, parameters)`` from a rule name plus keyword parameters, or a rule object.

    A rule object (:class:`Algorithm1`) supplies its own parameters; giving one of them again as
    a keyword raises ``TypeError``. Keywords that are None are dropped.
    """
    given = {k: v for k, v in given.items() if v is not None}
    if isinstance(rule, Algorithm1):
        clash = sorted(set(given) & set(rule.parameters()))
        if clash:
            raise TypeError(f"{clash} are given twice: by the Algorithm1 rule object and as "
                            "keywords; give them once.")
        return rule.name, {**given, **rule.parameters()}
    return rule, given
