"""DP-SGD with random allocation: analytic membership-inference bounds (no torch here).

Closed form (chi-square), certified exact accuracy, calibration of σ, comparators and the
``DPSGDSpec`` description. Torch-only modules (allocation, trainer) are imported separately.
"""

from pacpriv.dpsgd.bounds import (
    AccuracyBound,
    closed_form_noise_multiplier,
    log1p_chi_square,
    membership_inference_accuracy_bound,
)
from pacpriv.dpsgd.calibration import (
    NoiseCalibration,
    calibrate_noise_multiplier,
    noise_multiplier_for_accuracy,
)
from pacpriv.dpsgd.comparators import ComparisonRow as AccountantRow
from pacpriv.dpsgd.comparators import ComparisonTable, compare_accountants
from pacpriv.dpsgd.epsilon import EpsilonBound, epsilon_bound
from pacpriv.dpsgd.epsilon_calibration import (
    EpsilonCalibration,
    calibrate_epsilon,
    epsilon_of,
    noise_multiplier_for_epsilon,
)
from pacpriv.dpsgd.exact import ExactAccuracy, exact_membership_inference_accuracy
from pacpriv.dpsgd.sampling import PoissonSampling, RandomAllocation
from pacpriv.dpsgd.spec import THREAT_MODEL, DPSGDSpec
from pacpriv.dpsgd.tradeoff import TradeoffCurve, tradeoff_curve

__all__ = [
    # description
    "THREAT_MODEL",
    "DPSGDSpec",
    "PoissonSampling",
    "RandomAllocation",
    # closed form (chi-square)
    "AccuracyBound",
    "closed_form_noise_multiplier",
    "log1p_chi_square",
    "membership_inference_accuracy_bound",
    # exact (certified)
    "ExactAccuracy",
    "exact_membership_inference_accuracy",
    # calibration
    "NoiseCalibration",
    "calibrate_noise_multiplier",
    "noise_multiplier_for_accuracy",
    "EpsilonCalibration",
    "calibrate_epsilon",
    "epsilon_of",
    "noise_multiplier_for_epsilon",
    # comparators
    "AccountantRow",
    "ComparisonTable",
    "compare_accountants",
    # trade-off curve (certified ROC) and epsilon
    "EpsilonBound",
    "TradeoffCurve",
    "epsilon_bound",
    "tradeoff_curve",
    # your own torch training loop, private (torch, imported on first use)
    "PrivateTraining",
    "make_private",
]

#: Public names of torch modules, imported on first use (``import pacpriv.dpsgd`` stays
#: torch-free): make your own torch training private in one call.
_TORCH_NAMES = {"make_private": "pacpriv.dpsgd.private",
                "PrivateTraining": "pacpriv.dpsgd.private"}


def __getattr__(name: str):
    if name in _TORCH_NAMES:
        import importlib

        return getattr(importlib.import_module(_TORCH_NAMES[name]), name)
    raise AttributeError(f"module 'pacpriv.dpsgd' has no attribute {name!r}")
