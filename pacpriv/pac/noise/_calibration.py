"""Gaussian noise for a mutual-information budget ([PAC] Thm 3, Algorithm 1; [PAC-ALG] Thm 1).

:func:`calibrate_noise` turns an :class:`~pacpriv.pac.spectrum.OutputSpectrum` and a budget
``v`` (nats) into a :class:`NoisePlan`; :func:`calibrate_variance_only` needs only the ``(d,)``
coordinate variances (e.g. from :func:`~pacpriv.pac.spectrum.streaming_moments`). Formulas:
docs/math.rst, Gaussian noise. Every plan records the certified ``½ ln det(I + Σ Σ_B⁻¹)`` on
the estimated ``Σ``.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 3 and Algorithm 1.
.. [2] M. Sridhar, H. Xiao, S. Devadas. PAC-Private Algorithms. IEEE S&P 2025, Thm 1.
"""

from __future__ import annotations

import numpy as np

from pacpriv._validation import check_array_real, check_real
from pacpriv.exceptions import CalibrationError
from pacpriv.pac.bounds._mutual_info import (
    linearised_mi_bound,
)
from pacpriv.pac.engine._options import refuses_removed
from pacpriv.pac.noise import _rules
from pacpriv.pac.noise._plan import NoisePlan
from pacpriv.pac.noise._registry import (
    DEFAULT_RULE,
    RULES,
    SPECTRUM_RULES,
    as_rule,
    rule_hints,
)
from pacpriv.pac.noise._rule import NoiseRule, noise_out_of_range
from pacpriv.pac.spectrum._covariance import OutputSpectrum

__all__ = ["DEFAULT_RULE", "RULES", "NoisePlan", "calibrate_noise", "calibrate_variance_only"]


#: Smallest MI budget accepted (nats): the noise variance scales like 1/v, and below this
#: ``1/v`` leaves float64's range (the noise would overflow to inf and the release to NaN).
MIN_MI_BUDGET = 1e-300

#: Largest MI budget accepted (nats): at ``v >= -ln p`` every posterior success bound of a
#: prior ``p >= e^-100`` is already 1 (nothing is protected), and far above it the noise
#: scale ``e^{2v/d}`` leaves float64's range (an ``OverflowError`` in 0.3 at ``v = 1e9``).
MAX_MI_BUDGET = 100.0


def _check_budget(mi_budget) -> float:
    v = check_real(mi_budget, "mi_budget", low=0.0, low_inclusive=False)
    if v < MIN_MI_BUDGET:
        raise ValueError(f"`mi_budget` must be >= {MIN_MI_BUDGET:g} nats (the noise variance "
                         f"scales like 1/v and would overflow float64); got {v!r}.")
    if v > MAX_MI_BUDGET:
        raise ValueError(f"`mi_budget` must be <= {MAX_MI_BUDGET:g} nats (there every posterior "
                         "success bound is already 1, and the noise scale leaves float64's "
                         f"range); got {v!r}.")
    return v


def calibrate_variance_only(variances, *, mi_budget: float) -> NoisePlan:
    """Variance-only rule on the coordinate axes: needs only the ``(d,)`` variances.

    Noise variance ``e_j = sqrt(t_j) · Σ_k sqrt(t_k) / (2v)`` on coordinate ``j`` with
    ``t_j = Var(f(X)_j)``; ``MI <= ½ Σ_j t_j / e_j = v`` ([PAC-ALG] Thm 1). ``O(d)`` memory.

    Parameters
    ----------
    variances : array_like of shape (d,), or OutputMoments
        Coordinate variances ``t_j >= 0`` (e.g. ``streaming_moments(outputs).variances``), or
        the :class:`~pacpriv.pac.spectrum.OutputMoments` of ``streaming_moments`` itself (its
        ``variances`` are used).
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
    if not isinstance(variances, np.ndarray) and hasattr(variances, "variances"):
        # streaming_moments(...) passed whole: "`variances` must be numeric; got dtype object"
        # before (seventh new-user pass, #534)
        variances = variances.variances
    t = check_array_real(variances, "variances", low=0.0)
    if t.ndim != 1 or t.size == 0:
        raise ValueError(f"`variances` must be a non-empty 1-D array; got shape {t.shape}.")
    v = _check_budget(mi_budget)
    e = _rules.square_root_rule(t, np.ones_like(t), v)
    if not np.all(np.isfinite(e)):
        raise CalibrationError(noise_out_of_range("variance-only", v))
    e = _rules.round_up_variances(None, None, e, v, bound=lambda x: linearised_mi_bound(t, x))
    trace_bound = linearised_mi_bound(t, e)
    _rules._certify(trace_bound, v, "variance-only")
    return NoisePlan(
        rule="variance-only", mi_budget=v, mi_bound=trace_bound, linearised_mi_bound=trace_bound,
        mi_claim=v, confidence=None, dim=int(t.size), basis=None,
        noise_std=_rules._readonly(np.sqrt(e)), residual_std=0.0,
    )


@refuses_removed(rule_hints())
def calibrate_noise(
    spectrum: OutputSpectrum,
    *,
    mi_budget: float,
    rule: str | NoiseRule = "anisotropic",
) -> NoisePlan:
    """Calibrate Gaussian noise so that ``½ ln det(I + Σ Σ_B⁻¹) <= mi_budget``.

    Parameters
    ----------
    spectrum : OutputSpectrum
        Estimated (or known) output covariance spectrum.
    mi_budget : float
        Budget ``v > 0`` in nats.
    rule : NoiseRule or str, default "anisotropic"
        A spectrum rule (:data:`SPECTRUM_RULES`) as an object, or its name for the default
        parameters (the default ``Certified`` rule of :func:`~pacpriv.pac.job.run_pac` needs the
        outputs: see :func:`~pacpriv.pac.noise.certify_noise`). All but
        :class:`~pacpriv.pac.noise.Algorithm1` are **plug-in estimates**: they meet the budget
        for the estimated ``Σ``.

        * ``Anisotropic()``: square-root rule ``s_j² = sqrt(λ_j) Σ_k sqrt(λ_k) / (2v)`` in the
          eigenbasis; minimises ``E||B||² = (Σ sqrt λ)²/(2v)`` under the linearised bound, so
          the exact bound is below ``v``.
        * ``Isotropic()``: ``s² = tr(Σ)/(2v)`` in every direction.
        * ``VarianceOnly()``: coordinate axes, as :func:`calibrate_variance_only`.
        * ``ExactMI()``: water-filling ``s_j² = (−λ_j + sqrt(λ_j² + 4μλ_j))/2`` with ``μ`` set so
          that the exact bound equals ``v``; never more noise power than the square-root rule.
        * ``Algorithm1(c=..., beta=..., output_bound=..., confidence=...)``: Algorithm 1 of
          [1]_: square-root rule on ``λ + 10·c·v/β`` in every direction if the eigen-gaps are
          large, else isotropic ``(Σλ + d·c)/(2v)``; claims ``MI <= v + β`` with probability
          ``>= confidence`` (the conservative matrix-Bernstein count for
          ``spectrum.n_trials``; a ``CalibrationError`` if it is below the requested value).

        The 0.2 keywords ``confidence``, ``c``, ``beta``, ``output_bound`` beside a rule name
        were removed in 0.4 (a ``TypeError`` naming the rule object that takes them).

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
    :func:`~pacpriv.pac.spectrum.estimate_output_spectrum`), so every rule gives them noise.
    Constant outputs give zero noise and
    ``mi_bound = 0`` (except Algorithm 1, which still inflates). Worked examples
    (docs/math.rst, Gaussian noise, ``λ = (4, 1)``, ``v = ½``): square-root ``s² = (6, 3)``;
    isotropic 5; exact-MI
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
    spec = as_rule(rule)
    if spec.source != "spectrum":
        raise ValueError(
            f"rule {spec.name!r} needs the simulated outputs, not a spectrum: use "
            "pacpriv.pac.noise.certify_noise(outputs, ...) or run_pac; calibrate_noise "
            f"takes {SPECTRUM_RULES}."
        )
    return spec.plan(spectrum, mi_budget=v)
