"""PAC Privacy for black-box mechanisms (Xiao & Devadas, CRYPTO 2023).

Data flow: sampler → :func:`simulate` (Monte-Carlo engine, :mod:`pacpriv.pac.engine`) →
:func:`estimate_output_spectrum` (:mod:`pacpriv.pac.spectrum`) → a noise rule
(:mod:`pacpriv.pac.noise`, :class:`NoisePlan`) → :func:`privatize` → posterior bounds
(:mod:`pacpriv.pac.bounds`); :func:`run_pac` chains them and returns a :class:`PacResult` for
:mod:`pacpriv.report`. Per-record (informed-adversary) bounds: :mod:`pacpriv.pac.per_record`.
"""

from pacpriv.pac import samplers
from pacpriv.pac.bounds import (
    LedgerEntry,
    MembershipPrior,
    PrivacyLedger,
    _posterior,
    gaussian_mi_bound,
    gaussian_mi_bound_whitened,
    individual_mi_bound,
    linearised_mi_bound,
    mi_budget_for_accuracy,
    pinsker_bound,
    posterior_success_rate,
    resolve_membership_prior,
)
from pacpriv.pac.engine import ExecutionOptions, SimulationResult, simulate
from pacpriv.pac.job import PacResult, run_pac
from pacpriv.pac.noise import (
    RULES,
    Algorithm1,
    Anisotropic,
    AsymptoticT,
    Certified,
    CouplingResult,
    ExactMI,
    Isotropic,
    NoisePlan,
    NoiseRule,
    RandomizedComparison,
    VarianceOnly,
    calibrate_noise,
    calibrate_variance_only,
    compare_randomized_noise,
    confidence_for_trials,
    coupling_noise,
    matched_distance,
    trials_for_confidence,
)
from pacpriv.pac.per_record import (
    InformedAttackResult,
    PerRecordPlan,
    RecordDifferences,
    RecordExposure,
    calibrate_from_differences,
    calibrate_per_record,
    exposure_from_differences,
    informed_attack,
    record_exposure,
    simulate_differences,
)
from pacpriv.pac.release import privatize
from pacpriv.pac.samplers import *  # noqa: F403  (the samplers: samplers.__all__)
from pacpriv.pac.spectrum import (
    OutputMoments,
    OutputSpectrum,
    estimate_output_spectrum,
    spectrum_from_covariance,
    streaming_moments,
)
from pacpriv.pac.wrapper import PacPrivateFunction, from_estimator, from_torch, pac_private

__all__ = [
    "ExecutionOptions",
    # samplers (the data distribution D)
    *samplers.__all__,
    # Monte-Carlo engine
    "SimulationResult",
    "simulate",
    # covariance / spectrum / moments
    "OutputMoments",
    "OutputSpectrum",
    "estimate_output_spectrum",
    "spectrum_from_covariance",
    "streaming_moments",
    # noise rules (objects; names are shorthands for their defaults), calibration and release
    "RULES",
    "Algorithm1",
    "Anisotropic",
    "AsymptoticT",
    "Certified",
    "ExactMI",
    "Isotropic",
    "NoiseRule",
    "VarianceOnly",
    "NoisePlan",
    "calibrate_noise",
    "calibrate_variance_only",
    "confidence_for_trials",
    "privatize",
    "trials_for_confidence",
    # mutual information and posterior bounds
    "gaussian_mi_bound",
    "gaussian_mi_bound_whitened",
    "individual_mi_bound",
    "linearised_mi_bound",
    "accuracy_for_mi_budget",
    "mi_budget_for_accuracy",
    "pinsker_bound",
    "posterior_success_rate",
    # the membership prior of a posterior bound (declared or bounded from the masks)
    "MembershipPrior",
    "resolve_membership_prior",
    # randomized mechanisms (coupling bound, PAC-private algorithms S&P 2025)
    "CouplingResult",
    "RandomizedComparison",
    "compare_randomized_noise",
    "coupling_noise",
    "matched_distance",
    # the main job
    "PacResult",
    "run_pac",
    # wrapping a function you already have; composition ledger
    "LedgerEntry",
    "PacPrivateFunction",
    "PrivacyLedger",
    "from_estimator",
    "from_torch",
    "pac_private",
]

#: Membership-inference accuracy bound ``posterior_success_rate(v, prior=prior)`` for an MI
#: budget ``v`` (nats; ``prior`` ½ unless given); the inverse of :func:`mi_budget_for_accuracy`
#: (Xiao & Devadas 2023, Thm 1).
accuracy_for_mi_budget = _posterior.accuracy_for_mi_budget

# per-record membership privacy (informed adversary; PAC Privacy §2)
__all__ += [
    "InformedAttackResult",
    "PerRecordPlan",
    "RecordDifferences",
    "RecordExposure",
    "calibrate_from_differences",
    "calibrate_per_record",
    "exposure_from_differences",
    "informed_attack",
    "record_exposure",
    "simulate_differences",
]
