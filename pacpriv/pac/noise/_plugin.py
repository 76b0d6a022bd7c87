"""The plug-in noise rules: they meet the budget for the *estimated* covariance ("estimated").

``Anisotropic`` (square-root rule in the eigenbasis), ``Isotropic`` (``tr(Σ)/(2v)`` in every
direction), ``VarianceOnly`` (square-root rule on the coordinate variances, [2]_ Thm 1) and
``ExactMI`` (water-filling on the exact log-det bound). Formulas: docs/math.rst, Gaussian noise.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 3.
.. [2] M. Sridhar, H. Xiao, S. Devadas. PAC-Private Algorithms. IEEE S&P 2025, Thm 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pacpriv.exceptions import CalibrationError
from pacpriv.pac.bounds._mutual_info import linearised_mi_bound
from pacpriv.pac.noise import _rules
from pacpriv.pac.noise._plan import NoisePlan
from pacpriv.pac.noise._rule import NoiseRule, noise_out_of_range

__all__ = ["Anisotropic", "ExactMI", "Isotropic", "VarianceOnly"]


@dataclass(frozen=True, kw_only=True)
class Anisotropic(NoiseRule):
    """Plug-in square-root rule in the estimated eigenbasis (an estimate).

    ``s_j² = sqrt(λ_j) · Σ_k sqrt(λ_k) / (2v)``: the least ``E||B||² = (Σ sqrt λ)²/(2v)`` under
    the linearised bound ``½ Σ λ_j/s_j² = v`` ([1]_ Thm 3), so the log-det bound is below ``v``.

    Examples
    --------
    >>> Anisotropic().name, Anisotropic().certified
    ('anisotropic', False)
    """

    name = "anisotropic"
    summary = "plug-in square-root rule in the estimated eigenbasis (estimate)"

    def _plan(self, source, mi_budget: float) -> NoisePlan:
        lam, mult, n_comp = _rules._groups(source)
        return _rules._spectrum_plan(self.name, source, lam, mult, n_comp, mi_budget,
                                     _rules.square_root_rule(lam, mult, mi_budget), False)


@dataclass(frozen=True, kw_only=True)
class Isotropic(NoiseRule):
    """Plug-in isotropic rule: ``s² = tr(Σ)/(2v)`` in every direction (an estimate).

    Needs no eigenvectors; safe with fewer trials than output dimensions (the trace is
    estimated in every direction at once).
    """

    name = "isotropic"
    needs_eigenvectors = False
    safe_when_undersampled = True
    summary = "plug-in tr(Σ)/(2v) in every direction (estimate)"

    def _plan(self, source, mi_budget: float) -> NoisePlan:
        lam, mult, n_comp = _rules._groups(source)
        s2 = np.full_like(lam, _rules.isotropic_rule(lam, mult, mi_budget))
        return _rules._spectrum_plan(self.name, source, lam, mult, n_comp, mi_budget, s2, True)


@dataclass(frozen=True, kw_only=True)
class VarianceOnly(NoiseRule):
    """Plug-in square-root rule on the coordinate variances ([2]_ Thm 1; an estimate).

    Noise variance ``e_j = sqrt(t_j) · Σ_k sqrt(t_k) / (2v)`` on coordinate ``j``,
    ``t_j = Var(f(X)_j)``; ``O(d)`` memory with :func:`~pacpriv.pac.noise.calibrate_variance_only`.
    """

    name = "variance-only"
    needs_eigenvectors = False
    safe_when_undersampled = True
    summary = "plug-in square-root rule on the coordinate variances (estimate)"

    def _plan(self, source, mi_budget: float) -> NoisePlan:
        d, v = source.dim, mi_budget
        e = _rules.square_root_rule(source.variances, np.ones(d), v)
        if not np.all(np.isfinite(e)):
            raise CalibrationError(noise_out_of_range(self.name, v))

        # the spectrum may bound Σ from above (resolution, scale blocks): the trace bound on
        # the coordinate variances themselves is then the tighter certificate
        def certified(x: np.ndarray) -> float:
            return min(_rules._variance_only_bound(source, x),
                       linearised_mi_bound(source.variances, x))

        e = _rules.round_up_variances(None, None, _rules._floor_variance(e, source.variances),
                                      v, bound=certified)
        bound = certified(e)
        _rules._certify(bound, v, self.name)
        return NoisePlan(
            rule=self.name, mi_budget=v, mi_bound=bound,
            linearised_mi_bound=linearised_mi_bound(source.variances, e), mi_claim=v,
            confidence=None, dim=d, basis=None, noise_std=_rules._readonly(np.sqrt(e)),
            residual_std=0.0,
        )


@dataclass(frozen=True, kw_only=True)
class ExactMI(NoiseRule):
    """Plug-in water-filling on the exact log-det bound (an estimate).

    ``s_j² = (−λ_j + sqrt(λ_j² + 4μλ_j))/2`` with ``μ`` set so that ``½ Σ ln(1 + λ/s²) = v``;
    never more noise power than :class:`Anisotropic`.
    """

    name = "exact-mi"
    summary = "plug-in water-filling on the exact log-det bound (estimate)"

    def _plan(self, source, mi_budget: float) -> NoisePlan:
        lam, mult, n_comp = _rules._groups(source)
        s2, details = _rules.exact_mi_rule(lam, mult, mi_budget)
        return _rules._spectrum_plan(self.name, source, lam, mult, n_comp, mi_budget, s2,
                                     False, details)
