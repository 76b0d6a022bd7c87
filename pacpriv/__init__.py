"""pacpriv: measure and control how much a data-processing function leaks about its records.

Two halves answer one question -- how well can an adversary tell whether a record was used?

* :mod:`pacpriv.pac` -- PAC Privacy for black-box functions (Xiao & Devadas, CRYPTO 2023):
  Monte-Carlo simulation, noise calibration for a mutual-information budget (nats), posterior
  success bounds, release, report.
* :mod:`pacpriv.dpsgd` -- DP-SGD with random allocation: closed-form chi-square bound on
  membership-inference accuracy, certified exact accuracy, calibration, comparators; the torch
  trainer lives in ``pacpriv.dpsgd.trainer`` (needs ``pacpriv[torch]``).

``import pacpriv`` imports neither torch, matplotlib, dp-accounting nor dask.
"""

from typing import TYPE_CHECKING

from pacpriv import _deprecation, exceptions
from pacpriv._version import __version__
from pacpriv.compare import ComparisonResult, compare_pac_dpsgd
from pacpriv.datasets import Dataset, load_dataset
from pacpriv.dpsgd import (
    DPSGDSpec,
    exact_membership_inference_accuracy,
    noise_multiplier_for_accuracy,
)
from pacpriv.exceptions import *  # noqa: F403  (the errors and warnings: exceptions.__all__)
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

if TYPE_CHECKING:  # imported on first use (module __getattr__ below)
    from pacpriv.estimators import PACPrivateClassifier, PACPrivateRegressor

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

_deprecation.install_moved_finder()  # 0.2 module paths still import (DeprecationWarning)

#: Names imported on first use: scikit-learn's estimator machinery loads only when needed.
_LAZY = {"PACPrivateClassifier": "pacpriv.estimators", "PACPrivateRegressor": "pacpriv.estimators"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
