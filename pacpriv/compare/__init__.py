"""PAC Privacy vs DP-SGD at the same membership-inference accuracy bound.

:func:`compare_pac_dpsgd` (one dataset, one bound) and :func:`compare_table` (several
datasets and bounds) live in :mod:`pacpriv.compare.run`; they validate their input, then run
the rows in :mod:`pacpriv.compare.experiment` (torch, imported only there). The PAC black box
is a spec of :mod:`pacpriv.compare.blackbox`; the result dataclasses live in the leaf
:mod:`pacpriv.compare.results` and their text in :mod:`pacpriv.compare.render`.
``import pacpriv.compare`` imports neither torch nor matplotlib.
"""

from pacpriv.compare.blackbox import SgdBlackBox, StableBlackBox
from pacpriv.compare.curve import PrivacyUtilityCurve, privacy_utility_curve
from pacpriv.compare.results import ComparisonResult, ComparisonRow, ComparisonTable
from pacpriv.compare.run import ComparisonSettings, compare_pac_dpsgd, compare_table
from pacpriv.threat_models import THREAT_MODELS

__all__ = ["THREAT_MODELS", "ComparisonResult", "ComparisonRow", "ComparisonSettings",
           "ComparisonTable", "PrivacyUtilityCurve", "SgdBlackBox", "StableBlackBox",
           "compare_pac_dpsgd", "compare_table", "privacy_utility_curve"]
