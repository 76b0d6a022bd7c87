"""All worlds evaluated in one batched call: equal to the per-world loop, for each sibling.

Linear scikit-learn models are stacked into one coefficient matrix; torch modules into one
ensemble; everything else (naive Bayes, trees, callable outputs) keeps the per-world loop.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge, RidgeClassifier
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC
from sklearn.tree import DecisionTreeClassifier

from pacpriv.prediction._evaluate import EVALUATIONS, Worlds

from ._helpers import cancer

STACKED, LOOP = EVALUATIONS[1], EVALUATIONS[2]


def _halves(n_records: int, m: int = 6) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.random(n_records) < 0.5 for _ in range(m)]


def _worlds(estimator, X, y, output):
    from sklearn.base import clone

    models = [clone(estimator).fit(X[h], y[h]) for h in _halves(len(X))]
    return Worlds(models, output)


def _iris():
    X, y = load_iris(return_X_y=True)
    return X, y


CASES = [
    # (estimator, data, output, batched?)
    (LogisticRegression(max_iter=500), "binary", "proba", STACKED),
    (LogisticRegression(max_iter=500), "iris", "proba", STACKED),
    (LogisticRegression(max_iter=500), "iris", "logits", STACKED),
    (LogisticRegression(max_iter=500), "binary", "label", STACKED),
    (make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), "iris", "proba",
     STACKED),
    (make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), "iris", "label",
     STACKED),
    (RidgeClassifier(), "iris", "logits", STACKED),
    (LinearSVC(), "binary", "label", STACKED),
    (Ridge(alpha=1.0), "regression", "value", STACKED),
    (make_pipeline(StandardScaler(), LinearRegression()), "regression", "value", STACKED),
    (GaussianNB(), "iris", "proba", LOOP),
    (DecisionTreeClassifier(max_depth=3, random_state=0), "iris", "label", LOOP),
    (RidgeClassifier(), "iris", "proba", LOOP),  # no predict_proba: not stacked
]


@pytest.mark.parametrize(("estimator", "data", "output", "evaluation"), CASES,
                         ids=[f"{type(c[0]).__name__}-{c[1]}-{c[2]}" for c in CASES])
def test_batched_evaluation_equals_the_per_world_loop(estimator, data, output, evaluation):
    if data == "iris":
        X, y = _iris()
    else:
        X, y = cancer()
        if data == "regression":
            y = X @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.1 * np.cos(np.arange(len(X)))
    worlds = _worlds(estimator, X, y, output)
    assert worlds.evaluation == evaluation
    Q = np.vstack([X[:7], X[:3] * 3.0])  # pool rows and rows outside the data
    if evaluation == LOOP and output == "proba" and not hasattr(estimator, "predict_proba"):
        with pytest.raises(AttributeError):
            worlds.evaluate(Q)
        return
    got, want = worlds.evaluate(Q), worlds.evaluate_each(Q)
    assert got.shape == want.shape == (6, len(Q), want.shape[2])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_mixed_worlds_fall_back_to_the_loop():
    X, y = cancer()
    models = [LogisticRegression().fit(X, y), RidgeClassifier().fit(X, y)]
    assert Worlds(models, "logits").evaluation == LOOP
    assert Worlds(models[:1], "logits", batched=False).evaluation == LOOP


def test_a_stacked_form_that_disagrees_with_the_loop_is_not_used(monkeypatch):
    """The probe check: a stacked formula that differs from scikit-learn's is refused."""
    from pacpriv.prediction import _linear

    X, y = cancer()
    models = [LogisticRegression().fit(X[h], y[h]) for h in _halves(len(X))]
    assert Worlds(models, "logits").evaluation == STACKED
    monkeypatch.setattr(_linear.StackedLinear, "scores",
                        lambda self, Q: np.zeros((len(models), len(Q), 1)) + 1e-3)
    assert Worlds(models, "logits").evaluation == LOOP


def test_torch_modules_answer_as_one_ensemble():
    torch = pytest.importorskip("torch")
    from ._helpers import torch_mlp

    torch.manual_seed(0)
    modules = [torch_mlp().eval() for _ in range(5)]
    X, _ = cancer()
    X.setflags(write=False)  # rows from a read-only file or buffer
    for output in ("proba", "logits", "label"):
        worlds = Worlds(modules, output)
        assert worlds.evaluation == EVALUATIONS[0]
        np.testing.assert_allclose(worlds.evaluate(X[:9]), worlds.evaluate_each(X[:9]),
                                   rtol=1e-5, atol=1e-6)  # float32 summation order
    norm = [torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).eval()
            for _ in range(2)]
    assert Worlds(norm, "proba").evaluation == LOOP  # batch norm cannot be stacked
