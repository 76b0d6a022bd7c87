"""pacpriv: measure and control how much a data-processing function leaks about its records.

Two halves answer one question -- how well can an adversary tell whether a record was used?

* :mod:`pacpriv.pac` -- PAC Privacy for black-box functions (Xiao & Devadas, CRYPTO 2023):
  Monte-Carlo simulation, noise calibration for a mutual-information budget (nats), posterior
  success bounds, release, report.
* :mod:`pacpriv.dpsgd` -- DP-SGD with random allocation: closed-form chi-square bound on
  membership-inference accuracy, certified exact accuracy, calibration, comparators; the torch
  trainer lives in ``pacpriv.dpsgd.trainer`` (needs ``pacpriv[torch]``).

``import pacpriv`` imports neither torch, matplotlib, dp-accounting nor dask, and loads the
public names on first use.
"""

from typing import TYPE_CHECKING

from pacpriv import exceptions
from pacpriv._version import __version__
from pacpriv.exceptions import *  # noqa: F403  (the errors and warnings: exceptions.__all__)

#: Public name -> the module that defines it, imported on first use (PEP 562): ``import
#: pacpriv`` loads only the exceptions, and a name costs only its own room.
_LAZY = {
    **dict.fromkeys(("ComparisonResult", "compare_pac_dpsgd"), "pacpriv.compare"),
    **dict.fromkeys(("Dataset", "load_dataset"), "pacpriv.datasets"),
    **dict.fromkeys(("DPSGDSpec", "exact_membership_inference_accuracy",
                     "noise_multiplier_for_accuracy"), "pacpriv.dpsgd"),
    **dict.fromkeys(("ComplementaryPairsSampler", "FixedSizeSampler", "NoisePlan", "PacResult",
                     "PoissonSampler", "PrivacyLedger", "SimulationResult", "calibrate_noise",
                     "estimate_output_spectrum", "mi_budget_for_accuracy", "pac_private",
                     "pinsker_bound", "posterior_success_rate", "privatize", "run_pac",
                     "simulate"), "pacpriv.pac"),
    "PrivatePredictor": "pacpriv.prediction",
    **dict.fromkeys(("available_mechanisms", "register_mechanism", "resolve_mechanism"),
                    "pacpriv.registry"),
    "write_report": "pacpriv.report",
    # scikit-learn's estimator machinery loads only when these are used
    **dict.fromkeys(("PACPrivateClassifier", "PACPrivateRegressor"), "pacpriv.estimators"),
}

if TYPE_CHECKING:  # the names as type checkers and IDEs see them
    from pacpriv.compare import ComparisonResult, compare_pac_dpsgd
    from pacpriv.datasets import Dataset, load_dataset
    from pacpriv.dpsgd import (
        DPSGDSpec,
        exact_membership_inference_accuracy,
        noise_multiplier_for_accuracy,
    )
    from pacpriv.estimators import PACPrivateClassifier, PACPrivateRegressor
    from pacpriv.pac import (
        ComplementaryPairsSampler,
        FixedSizeSampler,
        NoisePlan,
        PacResult,
        PoissonSampler,
        PrivacyLedger,
        SimulationResult,
        calibrate_noise,
        estimate_output_spectrum,
        mi_budget_for_accuracy,
        pac_private,
        pinsker_bound,
        posterior_success_rate,
        privatize,
        run_pac,
        simulate,
    )
    from pacpriv.prediction import PrivatePredictor
    from pacpriv.registry import available_mechanisms, register_mechanism, resolve_mechanism
    from pacpriv.report import write_report


__all__ = [
    "__version__",
    # PAC Privacy: engine, calibration, release
    "ComplementaryPairsSampler",
    "FixedSizeSampler",
    "NoisePlan",
    "PacResult",
    "PoissonSampler",
    "SimulationResult",
    "calibrate_noise",
    "estimate_output_spectrum",
    "privatize",
    "run_pac",
    "simulate",
    # PAC Privacy: posterior bounds (MI in nats)
    "mi_budget_for_accuracy",
    "pinsker_bound",
    "posterior_success_rate",
    # PAC-private prediction: adaptive queries, posterior-tracked worlds (serve: pacpriv[serve])
    "PrivatePredictor",
    # PAC Privacy: scikit-learn meta-estimators (Pipeline, cross_val_score)
    "PACPrivateClassifier",
    "PACPrivateRegressor",
    # PAC Privacy: wrapping a function, composition ledger
    "PrivacyLedger",
    "pac_private",
    # DP-SGD with random allocation (analytic; the torch trainer is pacpriv.dpsgd.trainer)
    "DPSGDSpec",
    "exact_membership_inference_accuracy",
    "noise_multiplier_for_accuracy",
    # PAC vs DP-SGD at the same membership-inference bound (needs pacpriv[torch] to run)
    "ComparisonResult",
    "compare_pac_dpsgd",
    # mechanisms and data
    "Dataset",
    "available_mechanisms",
    "load_dataset",
    "register_mechanism",
    "resolve_mechanism",
    # reports
    "write_report",
    # errors and warnings (all of pacpriv.exceptions)
    *exceptions.__all__,
]


#: Subpackages reachable as attributes (``pacpriv.pac.run_pac`` after ``import pacpriv``).
_SUBPACKAGES = ("audit", "cli", "compare", "datasets", "dpsgd", "ensemble", "estimators",
                "mechanisms", "pac", "plotting", "prediction", "registry", "report", "storage",
                "threat_models")


def __getattr__(name: str):
    import importlib

    if name in _SUBPACKAGES:
        return importlib.import_module(f"pacpriv.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pacpriv' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBPACKAGES))
