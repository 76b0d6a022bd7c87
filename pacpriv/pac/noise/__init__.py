"""Noise for a mutual-information budget: rules, plans, the (1−γ) certificate, coupling.

A rule is an object (:class:`Certified`, :class:`Algorithm1`, :class:`Anisotropic`,
:class:`Isotropic`, :class:`VarianceOnly`, :class:`ExactMI`, :class:`AsymptoticT`; a name is a
shorthand for the defaults). It turns the simulated outputs (or their spectrum) and a budget
``v`` (nats) into a :class:`NoisePlan` (basis and per-direction noise std); the default
``Certified()`` certifies ``MI <= v`` for the true covariance with probability ``1 − γ`` over the
simulation.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 3, Algorithm 1.
.. [2] M. Sridhar, H. Xiao, S. Devadas. PAC-Private Algorithms. IEEE S&P 2025, Thm 1.
"""

from pacpriv.pac.noise._algorithm1 import Algorithm1
from pacpriv.pac.noise._calibration import calibrate_noise, calibrate_variance_only
from pacpriv.pac.noise._certificate import Certificate, certify_noise
from pacpriv.pac.noise._certified import AsymptoticT, Certified
from pacpriv.pac.noise._concentration import (
    betting_upper,
    constant_output_bound,
    empirical_bernstein_upper,
    predictable_betting_upper,
    student_t_upper,
)
from pacpriv.pac.noise._confidence import confidence_for_trials, trials_for_confidence
from pacpriv.pac.noise._plan import NoisePlan
from pacpriv.pac.noise._planning import (
    InflationUnreachable,
    predicted_inflation,
    shown_inflation,
    trials_for_inflation,
)
from pacpriv.pac.noise._plugin import Anisotropic, ExactMI, Isotropic, VarianceOnly
from pacpriv.pac.noise._randomized import (
    CouplingResult,
    RandomizedComparison,
    compare_randomized_noise,
    coupling_noise,
    matched_distance,
)
from pacpriv.pac.noise._registry import (
    DEFAULT_RULE,
    RULE_CLASSES,
    RULES,
    SPECTRUM_RULES,
    as_rule,
    rule_with,
)
from pacpriv.pac.noise._rule import NoiseRule

__all__ = [
    # rule objects (what to certify) and their names
    "Algorithm1",
    "Anisotropic",
    "AsymptoticT",
    "Certified",
    "ExactMI",
    "Isotropic",
    "NoiseRule",
    "VarianceOnly",
    "DEFAULT_RULE",
    "RULES",
    "RULE_CLASSES",
    "SPECTRUM_RULES",
    "as_rule",
    "rule_with",
    # plans
    "NoisePlan",
    "calibrate_noise",
    "calibrate_variance_only",
    # the (1−γ) certificate and its planning model
    "Certificate",
    "betting_upper",
    "certify_noise",
    "constant_output_bound",
    "empirical_bernstein_upper",
    "predictable_betting_upper",
    "predicted_inflation",
    "student_t_upper",
    "trials_for_inflation",
    "InflationUnreachable",
    "shown_inflation",
    # Algorithm 1's confidence
    "confidence_for_trials",
    "trials_for_confidence",
    # randomized mechanisms (coupling bound)
    "CouplingResult",
    "RandomizedComparison",
    "compare_randomized_noise",
    "coupling_noise",
    "matched_distance",
]
