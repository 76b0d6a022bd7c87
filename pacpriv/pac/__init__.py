"""PAC Privacy for black-box mechanisms (Xiao & Devadas, CRYPTO 2023).

Data flow: sampler → :func:`simulate` (Monte-Carlo engine) → :func:`estimate_output_spectrum`
→ :func:`calibrate_noise` (:class:`NoisePlan`) → :func:`privatize` → posterior bounds;
:func:`run_pac` chains them and returns a :class:`PacResult` for :mod:`pacpriv.report`.
"""

from pacpriv._deprecation import deprecated_names
from pacpriv.pac import posterior as _posterior
from pacpriv.pac import samplers
from pacpriv.pac._rules import Algorithm1
from pacpriv.pac.calibration import RULES, NoisePlan, calibrate_noise, calibrate_variance_only
from pacpriv.pac.confidence import confidence_for_trials, trials_for_confidence
from pacpriv.pac.covariance import (
    OutputSpectrum,
    estimate_output_spectrum,
    spectrum_from_covariance,
)
from pacpriv.pac.empirical import EmpiricalAttackResult, empirical_membership_attack
from pacpriv.pac.engine import SimulationResult, simulate
from pacpriv.pac.job import PacResult, run_pac
from pacpriv.pac.moments import OutputMoments, streaming_moments
from pacpriv.pac.mutual_info import (
    gaussian_mi_bound,
    gaussian_mi_bound_whitened,
    linearised_mi_bound,
)
from pacpriv.pac.options import ExecutionOptions
from pacpriv.pac.per_record import (
    RecordDifferences,
    RecordExposure,
    exposure_from_differences,
    record_exposure,
    simulate_differences,
)
from pacpriv.pac.per_record_attack import InformedAttackResult, informed_attack
from pacpriv.pac.per_record_calibration import (
    PerRecordPlan,
    calibrate_from_differences,
    calibrate_per_record,
)
from pacpriv.pac.posterior import (
    individual_mi_bound,
    mi_budget_for_accuracy,
    pinsker_bound,
    posterior_success_rate,
)
from pacpriv.pac.prior import MembershipPrior, resolve_membership_prior
from pacpriv.pac.randomized import (
    CouplingResult,
    RandomizedComparison,
    compare_randomized_noise,
    coupling_noise,
    matched_distance,
)
from pacpriv.pac.release import privatize
from pacpriv.pac.samplers import *  # noqa: F403  (the samplers: samplers.__all__)

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
    # noise calibration and release
    "RULES",
    "Algorithm1",
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
    # empirical membership attack on simulated outputs
    "EmpiricalAttackResult",
    "empirical_membership_attack",
    # the main job
    "PacResult",
    "run_pac",
]

#: Membership-inference accuracy bound ``posterior_success_rate(v, prior=½)`` for an MI budget
#: ``v`` (nats); the inverse of :func:`mi_budget_for_accuracy` (Xiao & Devadas 2023, Thm 1).
accuracy_for_mi_budget = _posterior.membership_inference_accuracy_bound

#: Deprecated names (one release).
__getattr__ = deprecated_names("pacpriv.pac", {
    "membership_inference_accuracy_bound": (
        "accuracy_for_mi_budget", accuracy_for_mi_budget,
        "it shared its name with the DP-SGD bound "
        "pacpriv.dpsgd.membership_inference_accuracy_bound",
    ),
})

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
