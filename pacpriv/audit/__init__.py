"""Membership-inference audits: attacks, their metrics, and the DP-SGD audit.

``import pacpriv.audit`` imports no torch; :func:`audit_dpsgd` imports it when called.

References
----------
.. [1] N. Carlini et al. Membership Inference Attacks From First Principles. IEEE S&P 2022.
.. [2] S. Yeom et al. Privacy Risk in Machine Learning. CSF 2018 (the loss attack).
"""

from pacpriv.audit._attacks import (
    AttackResult,
    evaluate_attack,
    lira_offline_scores,
    logit_scaled_confidence,
    loss_threshold_attack,
)
from pacpriv.audit._dpsgd import AuditResult, audit_dpsgd
from pacpriv.audit._empirical import EmpiricalAttackResult, empirical_membership_attack

__all__ = [
    # attacks and their evaluation
    "AttackResult",
    "evaluate_attack",
    "lira_offline_scores",
    "logit_scaled_confidence",
    "loss_threshold_attack",
    # the DP-SGD audit (torch)
    "AuditResult",
    "audit_dpsgd",
    # the empirical attack on simulated PAC releases
    "EmpiricalAttackResult",
    "empirical_membership_attack",
]
