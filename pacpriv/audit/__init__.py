"""Membership-inference audits: attacks, low-FPR metrics, certified curves, the one-run ε.

:func:`run_audit` trains a batch of reference models (each record a member of half of them,
every model the target in turn), runs online and offline LiRA [1]_, RMIA [2]_ and the loss
attack [3]_, reports TPR at FPR 0.01%–10% with exact intervals beside the training algorithm's
certified trade-off curve (DP-SGD, PAC MI budget, per-record PAC), and optionally the one-run
ε lower bound [4]_ beside the accountant's ε. ``pacpriv audit`` is its command line.

``import pacpriv.audit`` imports no torch; the DP-SGD family imports it when it trains.

References
----------
.. [1] N. Carlini et al. Membership Inference Attacks From First Principles. IEEE S&P 2022.
.. [2] S. Zarifzadeh, P. Liu, R. Shokri. Low-Cost High-Power Membership Inference Attacks.
   ICML 2024.
.. [3] S. Yeom et al. Privacy Risk in Machine Learning. CSF 2018 (the loss attack).
.. [4] T. Steinke, M. Nasr, M. Jagielski. Privacy Auditing with One (1) Training Run.
   NeurIPS 2023.
"""

from pacpriv.audit._attacks import (
    AttackResult,
    evaluate_attack,
    logit_scaled_confidence,
    loss_threshold_attack,
)
from pacpriv.audit._curves import (
    TradeoffCurve,
    accuracy_curve,
    binary_test_information,
    curve_value,
    mi_curve,
)
from pacpriv.audit._empirical import EmpiricalAttackResult, empirical_membership_attack
from pacpriv.audit._families import (
    DPSGDModel,
    EstimatorModel,
    LinearLogits,
    MLPFactory,
    PacReleaseModel,
    image_shifts,
    phi_from_logits,
)
from pacpriv.audit._lira import lira_scores
from pacpriv.audit._metrics import DEFAULT_FPRS, RocMetrics, TprAtFpr, roc_metrics
from pacpriv.audit._onerun import (
    OneRunResult,
    OneRunSpec,
    one_run_audit,
    one_run_epsilon,
    one_run_p_value,
)
from pacpriv.audit._rmia import rmia_scores
from pacpriv.audit._run import AuditReport, AuditSettings, run_audit
from pacpriv.audit._suite import ATTACKS, DEFAULT_ATTACKS, LiraAttack, LossAttack, RmiaAttack
from pacpriv.audit._user_model import SizedFactory, user_model_family

__all__ = [
    # the audit
    "AuditSettings",
    "AuditReport",
    "run_audit",
    # model families
    "DPSGDModel",
    "EstimatorModel",
    "LinearLogits",
    "MLPFactory",
    "PacReleaseModel",
    "SizedFactory",
    "image_shifts",
    "user_model_family",
    # attacks
    "ATTACKS",
    "DEFAULT_ATTACKS",
    "LiraAttack",
    "LossAttack",
    "RmiaAttack",
    "lira_scores",
    "rmia_scores",
    "phi_from_logits",
    # metrics
    "DEFAULT_FPRS",
    "RocMetrics",
    "TprAtFpr",
    "roc_metrics",
    # certified trade-off curves
    "TradeoffCurve",
    "accuracy_curve",
    "binary_test_information",
    "curve_value",
    "mi_curve",
    # the one-run audit
    "OneRunResult",
    "OneRunSpec",
    "one_run_audit",
    "one_run_epsilon",
    "one_run_p_value",
    # score-level evaluation and the earlier attacks
    "AttackResult",
    "evaluate_attack",
    "logit_scaled_confidence",
    "loss_threshold_attack",
    # the empirical attack on simulated PAC releases
    "EmpiricalAttackResult",
    "empirical_membership_attack",
]
