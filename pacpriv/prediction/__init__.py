"""PAC-private prediction: answer adaptive queries from world models, serve them over HTTP.

``m`` world models are fitted by the PAC engine on subsets drawn by a sampler (complementary
pairs by default); a secret index ``J`` picks the world that answers. Each query is answered with
Gaussian noise calibrated to the covariance of the world outputs under the *current* posterior
over worlds, so the mutual information between ``J`` and all answers adds up linearly,
``I(J; Y_1..Y_T) <= Σ_t b_t``, even when queries are chosen adaptively ([1]_, chain rule).

:class:`PrivatePredictor` fits, answers and keeps a crash-safe state directory, and behaves as
a scikit-learn estimator where that is sound (every answered row spends budget);
:class:`TorchFit` declares torch worlds (model factory, training spec, loss) that are trained
all at once by the vectorised ensemble (:mod:`pacpriv.ensemble`); :func:`create_app`
(``pip install pacpriv[serve]``) serves a predictor over HTTP with FastAPI.

References
----------
.. [1] Y. Zhu, M. Sridhar, S. Devadas. Private Prediction via PAC Privacy. arXiv:2601.14033, 2026.
.. [2] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 1 and Thm 3.
"""

from pacpriv.exceptions import BudgetExceededError
from pacpriv.prediction._answers import project_to_simplex
from pacpriv.prediction._evaluate import OUTPUTS
from pacpriv.prediction._noise import NOISE_RULES, QueryNoise, answer_query, calibrate_query
from pacpriv.prediction._predictor import THREAT_MODEL, PrivatePredictor
from pacpriv.prediction._torch_worlds import TorchFit
from pacpriv.prediction._worlds import SklearnFit

__all__ = [
    "NOISE_RULES",
    "OUTPUTS",
    "THREAT_MODEL",
    "BudgetExceededError",
    "PrivatePredictor",
    "QueryNoise",
    "SklearnFit",
    "TorchFit",
    "answer_query",
    "calibrate_query",
    "create_app",
    "project_to_simplex",
]


def __getattr__(name: str):
    if name == "create_app":  # FastAPI is optional and imported only when serving
        from pacpriv.prediction._app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
