"""Regressions from the twelfth fresh new-user pass (issue 35), each a kind with siblings."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge

from pacpriv.audit import EstimatorModel, run_audit
from pacpriv.pac.engine import ExecutionOptions

QUIET = ExecutionOptions(progress=False)
X = np.random.default_rng(0).normal(size=(40, 3))
Y = (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize("inner, words", [
    (LogisticRegression, "got the class LogisticRegression: pass LogisticRegression(...)"),
    (lambda: LogisticRegression(), "got a function (a factory: call it"),
    (Ridge(), "got Ridge (a scikit-learn regressor)"),
])
def test_estimator_model_of_a_class_a_factory_or_a_regressor_is_refused_up_front(inner, words):
    """N35/N36: EstimatorModel(Ridge()), EstimatorModel(lambda: ...) and EstimatorModel(Class)
    failed in trial 0 with a withheld AttributeError/TypeError; refused before any training."""
    with pytest.raises(TypeError) as info:
        run_audit(X, Y, model=EstimatorModel(inner), reference_models=4, rng=0,
                  execution=QUIET)
    assert words in str(info.value) and "\n" not in str(info.value)
