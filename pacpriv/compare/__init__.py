"""PAC Privacy vs DP-SGD at the same membership-inference accuracy bound.

:func:`compare_pac_dpsgd` (:mod:`pacpriv.compare.run`) validates its input, then runs the
trainings in :mod:`pacpriv.compare.models` (torch, imported only there); the result dataclasses
live in the leaf :mod:`pacpriv.compare.results` and their text in :mod:`pacpriv.compare.render`.
``import pacpriv.compare`` imports neither torch nor matplotlib.
"""

from pacpriv.compare.results import ComparisonResult, ComparisonRow
from pacpriv.compare.run import compare_pac_dpsgd
from pacpriv.threat_models import THREAT_MODELS

__all__ = ["THREAT_MODELS", "ComparisonResult", "ComparisonRow", "compare_pac_dpsgd"]
