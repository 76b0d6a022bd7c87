"""Per-record membership privacy against an informed adversary (PAC Privacy §2).

Each trial draws a subset ``S`` and evaluates ``f(S ∪ {i})`` and ``f(S ∖ {i})`` for the audited
records; the differences ``Δᵢ`` give each record's informed-adversary accuracy under Gaussian
noise, with empirical-Bernstein upper bounds made uniform over records by a union bound.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, §2.
.. [2] A. Maurer, M. Pontil. Empirical Bernstein bounds and sample variance penalization.
   COLT 2009, Thm 4.
"""

from pacpriv.pac.per_record._attack import InformedAttackResult, informed_attack
from pacpriv.pac.per_record._calibration import (
    SHAPES,
    PerRecordPlan,
    calibrate_from_differences,
    calibrate_per_record,
    uniform_max_upper,
)
from pacpriv.pac.per_record._exposure import (
    RecordDifferences,
    RecordExposure,
    exposure_from_differences,
    record_exposure,
    simulate_differences,
)
from pacpriv.pac.per_record._math import bayes_accuracy

__all__ = [
    # differences and exposure
    "RecordDifferences",
    "RecordExposure",
    "exposure_from_differences",
    "record_exposure",
    "simulate_differences",
    # calibration to a per-record target
    "SHAPES",
    "PerRecordPlan",
    "calibrate_from_differences",
    "calibrate_per_record",
    "uniform_max_upper",
    # the informed attack and its Bayes accuracy
    "InformedAttackResult",
    "bayes_accuracy",
    "informed_attack",
]
