"""Ninth new-user pass, interims 2-4: a user estimator's exception message is withheld on
every path (#517: ``PACPrivateClassifier.fit`` re-raised it verbatim), while pacpriv's own
words about an adapter's configuration are shown, before any trial (#528: the supervised
adapter on an unlabelled pool was withheld as if it were the user's text); ``drop_columns``
naming the label column is refused, not silently ignored (#613); ``run_audit`` with a plain
estimator names ``EstimatorModel`` (#821); a folder given as a mechanism module says so
(#1112)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.cluster import KMeans

from pacpriv.datasets.files import select_columns
from pacpriv.estimators import PACPrivateClassifier, PACPrivateRegressor
from pacpriv.exceptions import MechanismError, UserCodeError
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._simulate import simulate
from pacpriv.pac.wrapper import from_estimator

SECRET = "row 3 value 5.1 is odd"
X = np.random.default_rng(0).normal(size=(60, 3))
Y = (X[:, 0] > 0).astype(int)


class BadClassifier(ClassifierMixin, BaseEstimator):
    def fit(self, X, y):
        raise RuntimeError(SECRET)

    def predict(self, X):
        return X[:, 0]


class BadRegressor(RegressorMixin, BaseEstimator):
    def fit(self, X, y):
        raise RuntimeError(SECRET)

    def predict(self, X):
        return X[:, 0]


@pytest.mark.parametrize("wrapper, estimator, y", [
    (PACPrivateClassifier, BadClassifier(), Y), (PACPrivateRegressor, BadRegressor(), X[:, 1])])
def test_an_estimators_message_is_withheld_in_fit(wrapper, estimator, y):
    with pytest.raises((UserCodeError, MechanismError)) as info:
        wrapper(estimator, target_accuracy=0.7, n_trials=40, random_state=0).fit(X, y)
    text = str(info.value)
    assert SECRET not in text and "withheld" in text and "RuntimeError" in text
    assert str(info.value.__cause__) == SECRET  # kept for the user, chained


def test_a_supervised_adapter_on_unlabelled_data_says_so_before_any_trial():
    calls = []

    class Counting(KMeans):
        def fit(self, X, y=None, sample_weight=None):
            calls.append(1)
            return super().fit(X, y, sample_weight)

    mech = from_estimator(Counting(3, n_init=1, random_state=0),
                          attributes=("cluster_centers_",))
    with pytest.raises(ValueError) as info:
        simulate(mech, X, n_trials=10, rng=0, execution=ExecutionOptions(progress=False))
    text = str(info.value)
    assert "supervised=True" in text and "pass supervised=False for fit(X)" in text
    assert "ndarray" in text and "message is withheld" not in text and calls == []


def test_the_adapters_own_words_inside_a_trial_are_shown():
    """Called on an unlabelled subset inside a trial (the pre-check bypassed), the adapter's
    words are shown, not withheld as a user's message."""
    mech = from_estimator(KMeans(2, n_init=1, random_state=0), attributes=("cluster_centers_",))
    with pytest.raises(MechanismError) as info:
        simulate(lambda s: mech(s), X, n_trials=4, rng=0,
                 execution=ExecutionOptions(progress=False))
    text = str(info.value)
    assert "is a supervised estimator" in text and "in trial 0" in text
    assert "message is withheld" not in text


def test_drop_columns_naming_the_label_is_refused():
    names = ["a", "b", "label"]
    with pytest.raises(ValueError, match=r"`drop_columns` must not list the label column"):
        select_columns(names, drop_columns=["label"], exclude=(2,))
    with pytest.raises(ValueError, match=r"`drop_columns` must not list the label column"):
        select_columns(names, drop_columns=[-1], exclude=(2,))
    assert select_columns(names, drop_columns=["a"], exclude=(2,)) == [1]


def test_run_audit_with_a_plain_estimator_names_its_wrapper():
    """Ninth new-user pass #821: the CLI's --model takes a classifier; the API needs
    EstimatorModel, and now says so."""
    from sklearn.linear_model import LogisticRegression

    from pacpriv.audit import run_audit

    with pytest.raises(TypeError, match=r"wrap it, model=EstimatorModel\(LogisticRegression"):
        run_audit(X, Y, model=LogisticRegression(), reference_models=4)


def test_a_folder_named_as_the_mechanism_module(tmp_path, monkeypatch):
    """Ninth new-user pass #1112: a report folder given as the module was imported as a
    namespace package ("'r1' has no attribute 'f'")."""
    from pacpriv.registry import load_object

    (tmp_path / "r1").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"'r1' is a folder without an __init__.py \(a "
                       r"namespace package\), not a Python module: give 'file.py:f'"):
        load_object("r1:f", what="mechanism")

