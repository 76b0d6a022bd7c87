"""Gaussian noise for a mutual-information budget ([PAC] Thm 3, Algorithm 1; [PAC-ALG] Thm 1).

:func:`calibrate_noise` turns an :class:`~pacpriv.pac.covariance.OutputSpectrum` and a budget
``v`` (nats) into a :class:`NoisePlan`; :func:`calibrate_variance_only` needs only the ``(d,)``
coordinate variances (e.g. from :func:`~pacpriv.pac.moments.streaming_moments`). Formulas:
MATH.md §2. Every plan records the certified ``½ ln det(I + Σ Σ_B⁻¹)`` on the estimated ``Σ``.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 3 and Algorithm 1.
.. [2] M. Sridhar, H. Xiao, S. Devadas. PAC-Private Algorithms. IEEE S&P 2025, Thm 1.
"""

from __future__ import annotations

import numpy as np

from pacpriv._validation import check_array_real, check_real
from pacpriv.exceptions import CalibrationError
from pacpriv.pac import _rules
from pacpriv.pac._plan import NoisePlan, _block_rows
from pacpriv.pac.confidence import confidence_for_trials
from pacpriv.pac.covariance import OutputSpectrum
from pacpriv.pac.mutual_info import (
    gaussian_mi_bound,
    gaussian_mi_bound_whitened,
    linearised_mi_bound,
)

__all__ = ["RULES", "NoisePlan", "calibrate_noise", "calibrate_variance_only"]

#: Calibration rules accepted by :func:`calibrate_noise`.
RULES = ("anisotropic", "isotropic", "variance-only", "exact-mi", "algorithm1")


def _groups(spectrum: OutputSpectrum):
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


def _check_budget(mi_budget) -> float:
    return check_real(mi_budget, "mi_budget", low=0.0, low_inclusive=False)


def _certify(plan_bound: float, mi_budget: float, rule: str) -> None:
    if not plan_bound <= mi_budget * (1.0 + 1e-12):
        raise CalibrationError(
            f"rule {rule!r} produced a plan whose certified MI bound {plan_bound!r} exceeds the "
            f"budget {mi_budget!r}; this is a bug, please report it."
        )


def calibrate_variance_only(variances, *, mi_budget: float) -> NoisePlan:
    """Variance-only rule on the coordinate axes: needs only the ``(d,)`` variances.

    Noise variance ``e_j = sqrt(t_j) · Σ_k sqrt(t_k) / (2v)`` on coordinate ``j`` with
    ``t_j = Var(f(X)_j)``; ``MI <= ½ Σ_j t_j / e_j = v`` ([PAC-ALG] Thm 1). ``O(d)`` memory.

    Parameters
    ----------
    variances : array_like of shape (d,)
        Coordinate variances ``t_j >= 0`` (e.g. ``streaming_moments(outputs).variances``).
    mi_budget : float
        Budget ``v > 0`` in nats.

    Returns
    -------
    NoisePlan
        ``basis=None``; ``mi_bound`` is the trace bound ``½ Σ t_j/e_j`` (an upper bound of the
        log-det bound, which needs eigenvectors: use ``calibrate_noise(rule="variance-only")``).

    Raises
    ------
    TypeError, ValueError
        If ``variances`` is not a finite non-negative 1-D array or ``mi_budget <= 0``.

    References
    ----------
    .. [1] Sridhar, Xiao & Devadas, PAC-Private Algorithms, IEEE S&P 2025, Thm 1.
    """
    t = check_array_real(variances, "variances", low=0.0)
    if t.ndim != 1 or t.size == 0:
        raise ValueError(f"`variances` must be a non-empty 1-D array; got shape {t.shape}.")
    v = _check_budget(mi_budget)
    e = _rules.square_root_rule(t, np.ones_like(t), v)
    trace_bound = linearised_mi_bound(t, e)
    _certify(trace_bound, v, "variance-only")
    return NoisePlan(
        rule="variance-only", mi_budget=v, mi_bound=trace_bound, linearised_mi_bound=trace_bound,
        mi_claim=v, confidence=None, dim=int(t.size), basis=None,
        noise_std=_readonly(np.sqrt(e)), residual_std=0.0,
    )


def _variance_only_bound(spectrum: OutputSpectrum, e: np.ndarray) -> float:
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


def _floor_variance(noise_variance: np.ndarray, signal: np.ndarray) -> np.ndarray:
    """Raise noise variances that underflowed below the smallest normal double (signal > 0).

    Rules give ``s² ∝ λ``; for subnormal ``λ`` that product underflows (to 0 or to a subnormal
    that lost its precision) and the MI bound would be inf or understated. More noise is always
    on the safe side, and ``tiny`` (2.2e-308) is far below any meaningful output scale.
    """
    tiny = np.finfo(np.float64).tiny
    return np.where(np.asarray(signal) > 0, np.maximum(noise_variance, tiny), noise_variance)


def calibrate_noise(
    spectrum: OutputSpectrum,
    *,
    mi_budget: float,
    rule: str = "anisotropic",
    confidence: float | None = None,
    c: float | None = None,
    beta: float | None = None,
    output_bound: float | None = None,
) -> NoisePlan:
    """Calibrate Gaussian noise so that ``½ ln det(I + Σ Σ_B⁻¹) <= mi_budget``.

    Parameters
    ----------
    spectrum : OutputSpectrum
        Estimated (or known) output covariance spectrum.
    mi_budget : float
        Budget ``v > 0`` in nats.
    rule : {"anisotropic", "isotropic", "variance-only", "exact-mi", "algorithm1"}
        * ``"anisotropic"``: square-root rule ``s_j² = sqrt(λ_j) Σ_k sqrt(λ_k) / (2v)`` in the
          eigenbasis; minimises ``E||B||² = (Σ sqrt λ)²/(2v)`` under the linearised bound, so
          the exact bound is below ``v``.
        * ``"isotropic"``: ``s² = tr(Σ)/(2v)`` in every direction.
        * ``"variance-only"``: coordinate axes, as :func:`calibrate_variance_only`.
        * ``"exact-mi"``: water-filling ``s_j² = (−λ_j + sqrt(λ_j² + 4μλ_j))/2`` with ``μ`` set
          so that the exact bound equals ``v``; never more noise power than the square-root
          rule.
        * ``"algorithm1"``: Algorithm 1 of [1]_ (needs ``c``, ``beta``, ``output_bound``):
          square-root rule on ``λ + 10·c·v/β`` in every direction if the eigen-gaps are large,
          else isotropic ``(Σλ + d·c)/(2v)``; claims ``MI <= v + β`` with probability
          ``>= confidence``.
    confidence : float, optional
        ``"algorithm1"`` only: required ``1 − γ`` in ``(0, 1)``. The plan's ``confidence`` is
        what the conservative matrix-Bernstein bound certifies for ``spectrum.n_trials``; if it
        is below the requested value a ``CalibrationError`` is raised.
    c : float, optional
        ``"algorithm1"`` only: eigenvalue / estimation-error threshold ``c > 0`` (variance units).
    beta : float, optional
        ``"algorithm1"`` only: slack ``β > 0`` in nats.
    output_bound : float, optional
        ``"algorithm1"`` only: ``r > 0`` with ``||f(X)||₂ <= r``.

    Returns
    -------
    NoisePlan

    Raises
    ------
    TypeError, ValueError
        If an argument has the wrong type or value, or an Algorithm-1 parameter is given to
        another rule.
    CalibrationError
        If a root search fails, or the requested confidence is not certified.

    Notes
    -----
    Directions outside ``span(spectrum.eigenvectors)`` are pooled into one group carrying
    ``tail_variance`` (0 for a complete spectrum). The spectrum never reports a positive
    variance as 0: its eigenvalues carry the numerical resolution, and unresolved directions
    (the trials filled all ``n − 1`` sample directions) carry the whole trace (see
    :func:`~pacpriv.pac.covariance.estimate_output_spectrum`), so every rule gives them noise.
    Constant outputs give zero noise and
    ``mi_bound = 0`` (except ``"algorithm1"``, which still inflates). Worked examples
    (MATH.md §2, ``λ = (4, 1)``, ``v = ½``): square-root ``s² = (6, 3)``; isotropic 5; exact-MI
    ``(4.24694, 2.50101)``. Algorithm 1 with ``c = 1e-3``, ``v = β = ¼`` and ``d = 2``:
    ``(12.04497, 6.04497)`` when ``r·sqrt(d·c) + 2c < 3`` (e.g. ``r = 1``), else 10.004 each
    (e.g. ``r = 100``).

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 3 and Algorithm 1.
    .. [2] Sridhar, Xiao & Devadas, PAC-Private Algorithms, IEEE S&P 2025, Thm 1.
    """
    if not isinstance(spectrum, OutputSpectrum):
        raise TypeError(f"`spectrum` must be an OutputSpectrum; got {type(spectrum).__name__}.")
    v = _check_budget(mi_budget)
    if not isinstance(rule, str) or rule not in RULES:
        raise ValueError(f"`rule` must be one of {RULES}; got {rule!r}.")
    alg1 = {"confidence": confidence, "c": c, "beta": beta, "output_bound": output_bound}
    if rule != "algorithm1":
        given = [k for k, val in alg1.items() if val is not None]
        if given:
            raise ValueError(f"{given} only apply to rule='algorithm1'; got rule={rule!r}.")
    d = spectrum.dim
    lam, mult, n_comp = _groups(spectrum)
    details: dict = {}
    claim, conf = v, None
    if rule == "variance-only":
        e = _floor_variance(_rules.square_root_rule(spectrum.variances, np.ones(d), v),
                            spectrum.variances)
        # the spectrum may bound Σ from above (resolution, scale blocks): the trace bound on
        # the coordinate variances themselves is then the tighter certificate
        bound = min(_variance_only_bound(spectrum, e), linearised_mi_bound(spectrum.variances, e))
        _certify(bound, v, rule)
        return NoisePlan(
            rule=rule, mi_budget=v, mi_bound=bound,
            linearised_mi_bound=linearised_mi_bound(spectrum.variances, e), mi_claim=v,
            confidence=None, dim=d, basis=None, noise_std=_readonly(np.sqrt(e)),
            residual_std=0.0,
        )
    if rule == "anisotropic":
        s2, iso = _rules.square_root_rule(lam, mult, v), False
    elif rule == "isotropic":
        s2, iso = np.full_like(lam, _rules.isotropic_rule(lam, mult, v)), True
    elif rule == "exact-mi":
        (s2, details), iso = _rules.exact_mi_rule(lam, mult, v), False
    else:
        for name in ("c", "beta", "output_bound"):
            if alg1[name] is None:
                raise ValueError(f"rule='algorithm1' needs `{name}`; got None.")
        c_ = check_real(c, "c", low=0.0, low_inclusive=False)
        beta_ = check_real(beta, "beta", low=0.0, low_inclusive=False)
        r_ = check_real(output_bound, "output_bound", low=0.0, low_inclusive=False)
        # complement eigenvalues are each <= min(tail, smallest held): if that exceeds c,
        # some of them may count towards j0 and their gaps are unknown
        k_held = spectrum.n_components
        ceiling = spectrum.tail_variance if k_held == 0 else min(
            spectrum.tail_variance, float(lam[k_held - 1]))
        unresolved = n_comp > 0 and ceiling > c_
        s2, iso, details = _rules.algorithm1_rule(
            lam, mult, n_held=spectrum.n_components, mi_budget=v, c=c_, beta=beta_,
            output_bound=r_, dim=d, complement_unresolved=unresolved,
        )
        claim = v + beta_
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
    s2 = _floor_variance(s2, lam)
    bound = gaussian_mi_bound(lam, s2, multiplicity=mult)
    _certify(bound, v, rule)
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
