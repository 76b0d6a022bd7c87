"""Outputs mean what they say (issue 25 item 4): labels, probabilities on the simplex, the
scikit-learn estimator protocol, and every call spending budget -- for several siblings."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.linear_model import Ridge
from sklearn.model_selection import cross_val_score
from sklearn.naive_bayes import GaussianNB

from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction import PrivatePredictor

from ._helpers import cancer, logreg

B = 2.0**-32  # huge noise: the "probabilities" of 4.99 and −3.99
QUIET = ExecutionOptions(progress=False)


def _pp(fit=None, output="proba", *, pool=True, n_worlds=4, total=1.0, **kw):
    X, y = cancer()
    return PrivatePredictor(fit if fit is not None else logreg(), (X, y) if pool else None,
                            n_worlds=n_worlds, per_query_budget=B, total_budget=total,
                            output=output, rng=7, secret_rng=8, **kw)


@pytest.mark.parametrize("make", [logreg, GaussianNB], ids=["logistic", "naive_bayes"])
def test_proba_is_projected_onto_the_simplex(make):
    X, _ = cancer()
    pp = _pp(make()).fit(execution=QUIET)
    raw_world = pp.world_outputs(X[:40])
    assert np.any(raw_world.std(axis=0) > 0)  # the worlds disagree: the answers carry noise
    proba = pp.predict_proba(X[:40])
    assert proba.shape == (40, 2)
    assert np.all(proba >= 0) and np.allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert pp.n_answered == 40 and pp.spent == 40 * B
    # the same predictor (same secret seed) answered raw: the projection of those answers
    twin = _pp(make()).fit(execution=QUIET)
    from pacpriv.prediction._answers import answer_rows, project_to_simplex

    raw, _ = answer_rows(twin.world_outputs(X[:40]), np.zeros(4), secret_index=twin._secret_index,
                         noise_entropy=twin._noise_entropy, first_index=0, mi_budget=B,
                         rule="anisotropic")
    assert raw.min() < -1 and raw.max() > 2  # without the projection: not probabilities
    np.testing.assert_allclose(proba, project_to_simplex(raw), rtol=0, atol=1e-9)


@pytest.mark.parametrize("output", ["proba", "logits", "label"])
def test_predict_gives_labels_for_every_classifier_output(output):
    X, _ = cancer()
    a = _pp(output=output).fit(execution=QUIET)
    b = _pp(output=output).fit(execution=QUIET)  # same secret seed: the same answers
    labels = a.predict(X[:30])
    assert labels.shape == (30,) and set(labels.tolist()) <= {0, 1}
    np.testing.assert_array_equal(a.classes_, [0, 1])
    answers = b.answer(X[:30])
    want = (answers[:, 0] > 0).astype(int) if answers.shape[1] == 1 else answers.argmax(axis=1)
    np.testing.assert_array_equal(labels, want)
    assert hasattr(a, "predict_proba") is (output == "proba")
    assert is_classifier(a) and not is_regressor(a)


def test_regressor_value_output():
    X, _ = cancer()
    t = X @ np.array([1.0, -2.0, 0.5, 0.0])
    pp = PrivatePredictor(Ridge(), (X, t), n_worlds=4, per_query_budget=0.05, total_budget=10.0,
                          output="value", rng=1, secret_rng=2).fit(execution=QUIET)
    values = pp.predict(X[:20])
    assert values.shape == (20,)
    assert is_regressor(pp) and not hasattr(pp, "classes_") and not hasattr(pp, "predict_proba")
    r2 = pp.score(X[20:60], t[20:60])
    assert 0.9 < r2 <= 1.0  # small noise at b = 0.05 on a near-exact linear target
    assert pp.n_answered == 60  # predict and score both spent


def test_torch_sibling_predicts_labels():
    pytest.importorskip("torch")
    from ._helpers import torch_fit

    X, y = cancer()
    pp = _pp(torch_fit()).fit(execution=QUIET)
    labels = pp.predict(X[:50])
    assert labels.dtype.kind == "i" and set(labels.tolist()) <= {0, 1}
    score = pp.score(X[:50], y[:50])
    assert pp.n_answered == 100
    twin = _pp(torch_fit()).fit(execution=QUIET)  # same seeds: the same answers in order
    twin.answer(X[:50])
    assert score == np.mean(twin.predict(X[:50]) == y[:50])
    assert np.allclose(pp.predict_proba(X[:3]).sum(axis=1), 1.0)


def test_get_params_clone_and_set_params():
    pp = _pp(pool=False)
    params = pp.get_params()
    assert params["n_worlds"] == 4 and params["pool"] is None and "fit__C" in params
    copy = clone(pp)
    assert copy is not pp and not copy.is_fitted and copy.get_params(deep=False).keys() == \
        pp.get_params(deep=False).keys()
    copy.set_params(n_worlds=6, fit__C=0.5)
    assert copy.n_worlds == 6 and copy.get_params()["fit__C"] == 0.5
    with pytest.raises(ValueError, match="n_worlds"):
        copy.set_params(n_worlds=5)  # validated again: complementary pairs need an even m
    with pytest.raises(ValueError, match="invalid parameter 'worlds'"):
        copy.set_params(worlds=2)
    fitted = _pp().fit(execution=QUIET)
    with pytest.raises(RuntimeError, match="fitted"):
        fitted.set_params(total_budget=2.0)


def test_cross_val_score_spends_each_folds_budget():
    """Each fold's clone is fitted on its training part and spends on its test rows."""
    X, y = cancer()
    template = _pp(pool=False, total=len(X) * B)
    scores = cross_val_score(template, X, y, cv=3)
    assert scores.shape == (3,) and np.all((scores >= 0) & (scores <= 1))
    assert not template.is_fitted and template.n_answered == 0  # the template spends nothing
    tiny = _pp(pool=False, total=10 * B)  # 10 rows of budget, folds of 190 test rows
    with pytest.raises(Exception, match="Nothing was spent"):
        cross_val_score(tiny, X, y, cv=3, error_score="raise")


def test_fit_takes_the_pool_like_scikit_learn():
    X, y = cancer()
    given = _pp().fit(execution=QUIET)
    late = _pp(pool=False).fit(X, y, execution=QUIET)
    np.testing.assert_array_equal(given.answer(X[:5]), late.answer(X[:5]))
    late.fit(X, y)  # the same pool again: a no-op
    with pytest.raises(ValueError, match="another pool"):
        late.fit(X[:-1], y[:-1])
    with pytest.raises(RuntimeError, match="no private pool"):
        _pp(pool=False).fit()


def test_unfitted_predictors_pickle_fitted_ones_do_not():
    pp = _pp()
    again = pickle.loads(pickle.dumps(pp))
    assert again.get_params(deep=False).keys() == pp.get_params(deep=False).keys()
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(pp.fit(execution=QUIET))


def test_one_construction_path(tmp_path, monkeypatch):
    """__init__ and load both go through _initialise, and set the same attributes."""
    seen = []
    original = PrivatePredictor._initialise

    def spy(self, *args, **kwargs):
        seen.append(type(self).__name__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(PrivatePredictor, "_initialise", spy)
    built = _pp(state=tmp_path / "s").fit(execution=QUIET)
    loaded = PrivatePredictor.load(tmp_path / "s")
    assert seen == ["PrivatePredictor", "PrivatePredictor"]
    assert set(vars(built)) == set(vars(loaded))
    assert loaded.to_dict()["release"] == built.to_dict()["release"]


def test_exact_bound_is_worded_exact_not_one_minus_gamma(tmp_path, capsys):
    X, _ = cancer()
    pp = _pp().fit(execution=QUIET)
    pp.answer(X[:2])
    text = json.dumps(pp.to_dict()) + pp.report_section()["markdown"]
    assert "exact (no estimation)" in text
    assert "1−γ = 1" not in text and "1-γ = 1" not in text
    assert "projected onto the probability simplex" in pp.to_dict()["release"]


def test_deprecated_predict_with_budget_is_answer_with_budget():
    X, _ = cancer()
    pp = _pp().fit(execution=QUIET)
    with pytest.warns(DeprecationWarning, match="answer_with_budget"):
        out, budget = pp.predict_with_budget(X[:2])
    assert out.shape == (2, 2) and budget["n_answered"] == 2


def test_class_mismatch_message_holds_no_labels():
    from sklearn.linear_model import LogisticRegression

    from pacpriv.prediction._evaluate import Worlds

    X, _ = cancer()
    a = LogisticRegression().fit(X, np.where(X[:, 0] > 0, "secret-a", "secret-b"))
    b = LogisticRegression().fit(X, np.where(X[:, 0] > 0, "secret-a", "secret-c"))
    with pytest.raises(ValueError, match="every world must see every class") as info:
        Worlds([a, b], "proba").check_consistent()
    assert "secret" not in str(info.value)
