"""From mutual information to an adversary's success: posterior bounds, priors, MI, the ledger.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 1, Cor. 1, Thm 2,
   Thm 3.
"""

from pacpriv.pac.bounds._ledger import LedgerEntry, PrivacyLedger
from pacpriv.pac.bounds._mutual_info import (
    gaussian_mi_bound,
    gaussian_mi_bound_whitened,
    linearised_mi_bound,
)
from pacpriv.pac.bounds._posterior import (
    individual_mi_bound,
    membership_inference_accuracy_bound,
    mi_budget_for_accuracy,
    pinsker_bound,
    posterior_success_rate,
)
from pacpriv.pac.bounds._prior import (
    PRIOR_CONFIDENCE,
    MembershipPrior,
    blind_guess_upper_bound,
    resolve_membership_prior,
)

__all__ = [
    # posterior success (KL inversion of Thm 1)
    "individual_mi_bound",
    "membership_inference_accuracy_bound",
    "mi_budget_for_accuracy",
    "pinsker_bound",
    "posterior_success_rate",
    # the membership prior
    "PRIOR_CONFIDENCE",
    "MembershipPrior",
    "blind_guess_upper_bound",
    "resolve_membership_prior",
    # Gaussian MI bounds (Thm 3)
    "gaussian_mi_bound",
    "gaussian_mi_bound_whitened",
    "linearised_mi_bound",
    # composition
    "LedgerEntry",
    "PrivacyLedger",
]
