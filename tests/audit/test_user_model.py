"""`pacpriv audit --model module:factory` and user_model_family (issue 36 item 5): the user's
own scikit-learn estimator or torch model factory trained as target and reference models."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pacpriv.audit import (
    DPSGDModel,
    EstimatorModel,
    SizedFactory,
    run_audit,
    user_model_family,
)
from pacpriv.cli import main

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("one_torch_thread")

USER_CODE = '''
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB

def tiny_net(n_features, n_classes):
    return torch.nn.Sequential(torch.nn.Linear(n_features, 8), torch.nn.ReLU(),
                               torch.nn.Linear(8, n_classes))

def fixed_net():
    return torch.nn.Linear(4, 3)

def make_logistic():
    return LogisticRegression(C=0.5, max_iter=200)

nb = GaussianNB()

def not_a_model():
    return 42

def crash(n_features, n_classes):
    raise RuntimeError("secret 98765")

def seven_logits(n_features, n_classes):
    return torch.nn.Linear(n_features, 7)

def images_only(n_features, n_classes):
    return torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten(),
                               torch.nn.LazyLinear(n_classes))
'''


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "mymodels.py"
    path.write_text(USER_CODE)
    return path


def test_families_from_each_kind_of_user_model():
    from sklearn.linear_model import LogisticRegression

    for model in (LogisticRegression, LogisticRegression(C=2.0),
                  lambda: LogisticRegression()):
        fam = user_model_family(model, n_features=4, n_classes=3)
        assert isinstance(fam, EstimatorModel)
        assert fam.describe()["architecture"] == "LogisticRegression"
    assert user_model_family(LogisticRegression(C=2.0), n_features=4,
                             n_classes=3).estimator.C == 2.0

    def net(n_features, n_classes):
        return torch.nn.Linear(n_features, n_classes)

    fam = user_model_family(net, n_features=5, n_classes=2, noise_multiplier=1.5,
                            steps_per_epoch=2, epochs=1)
    assert isinstance(fam, DPSGDModel) and fam.noise_multiplier == 1.5
    assert isinstance(fam.model_factory, SizedFactory)
    assert fam.model_factory().weight.shape == (2, 5)
    twin = user_model_family(net, n_features=5, n_classes=2, noise_multiplier=0,
                             steps_per_epoch=2, epochs=1)
    assert twin.max_grad_norm is None and twin.describe()["training"].startswith("non-private")


@pytest.mark.parametrize(("model", "kwargs", "error", "match"), [
    ("sk", {"noise_multiplier": 1.0}, ValueError, "trained non-privately"),
    ("net", {}, ValueError, "needs `noise_multiplier`"),
    ("three", {}, TypeError, r"no argument or \(n_features, n_classes\); three requires 3"),
    ("int", {}, TypeError, "returned int"),
    (3, {}, TypeError, "got int"),
])
def test_bad_user_models_are_refused(model, kwargs, error, match):
    from sklearn.linear_model import LogisticRegression

    def three(a, b, c):
        return None

    obj = {"sk": LogisticRegression(), "net": lambda: torch.nn.Linear(2, 2), "three": three,
           "int": lambda: 42}.get(model, model)
    with pytest.raises(error, match=match):
        user_model_family(obj, n_features=2, n_classes=2, **kwargs)


def test_api_audit_of_a_user_torch_model_matches_the_builtin_logistic():
    """A user factory building the same architecture as the built-in logistic family gives
    the same audit, score for score (same seeds, same training)."""
    from sklearn.datasets import load_iris

    from pacpriv.audit import AuditSettings, LossAttack, MLPFactory

    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)

    def logistic(n_features, n_classes):
        return torch.nn.Sequential(torch.nn.Linear(n_features, n_classes))

    kw = dict(noise_multiplier=1.0, steps_per_epoch=2, epochs=1)
    user = user_model_family(logistic, n_features=4, n_classes=3, **kw)
    builtin = DPSGDModel(MLPFactory(4, 3, ()), **kw)
    settings = AuditSettings(attacks=(LossAttack(),))
    a, b = (run_audit(X, y, model=m, reference_models=4, settings=settings, rng=5)
            for m in (user, builtin))
    assert a.compact_dict()["attacks"] == b.compact_dict()["attacks"]


SMALL = ["--dataset", "iris", "--reference-models", "4", "--epochs", "1",
         "--steps-per-epoch", "2", "--seed", "3", "--n-jobs", "1", "--no-progress",
         "--format", "json"]


def test_cli_audits_a_user_torch_factory_and_sklearn_estimator(user_file, tmp_path, capsys):
    out = tmp_path / "a"
    assert main(["audit", "--model", f"{user_file}:tiny_net", "--noise-multiplier", "1.0",
                 "--out", str(out), *SMALL]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["model"]["architecture"] == "tiny_net (user model)"
    assert report["model"]["training"] == "DP-SGD with random allocation"
    for spec in ("make_logistic", "nb"):
        out = tmp_path / spec
        assert main(["audit", "--model", f"{user_file}:{spec}", "--non-private",
                     "--out", str(out), *SMALL]) == 0
        report = json.loads((out / "report.json").read_text())
        assert report["model"]["training"] == "non-private scikit-learn fit"
    capsys.readouterr()


@pytest.mark.parametrize(("spec", "flags", "match"), [
    ("make_logistic", ["--noise-multiplier", "1"], "is a scikit-learn estimator, trained "
     "non-privately: pass --non-private"),
    ("not_a_model", ["--non-private"], "must return a torch.nn.Module or a scikit-learn "
     "estimator; it returned int"),
    ("missing_attr", ["--non-private"], "--model"),
    ("crash", ["--noise-multiplier", "1"], "the model factory raised RuntimeError (its "
     "message is withheld"),
    ("seven_logits", ["--noise-multiplier", "1"], "must return logits of shape (n, 3) for "
     "the 3 classes; a batch of 2 rows gave shape (2, 7)"),
    ("images_only", ["--noise-multiplier", "1"], "does not accept rows of 4 features"),
])
def test_cli_refuses_bad_user_models_in_one_line(user_file, tmp_path, capsys, spec, flags,
                                                 match):
    rc = main(["audit", "--model", f"{user_file}:{spec}", *flags, "--out",
               str(tmp_path / "x"), *SMALL])
    assert rc == (1 if spec == "crash" else 2)  # 1: the user's code failed, as for mechanisms
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pacpriv: error: ") and match in err
    assert "98765" not in err  # the user's exception message may quote data: withheld


def test_cli_refuses_an_unknown_model_name(tmp_path, capsys):
    assert main(["audit", "--model", "forest", "--non-private", "--out", str(tmp_path / "x"),
                 *SMALL]) == 2
    assert "--model must be logistic, mlp, module:attr or file.py:attr; got 'forest'" in \
        capsys.readouterr().err


def test_scores_are_finite_for_a_user_model(user_file):
    from pacpriv.registry import load_object

    fam = user_model_family(load_object(f"{user_file}:tiny_net"), n_features=4, n_classes=3,
                            noise_multiplier=1.0, steps_per_epoch=2, epochs=1)
    X = np.random.default_rng(0).standard_normal((20, 4))
    y = np.arange(20) % 3
    model = fam.fit(X, y, rng=np.random.default_rng(1))
    assert np.all(np.isfinite(fam.statistics(model, X, y)))


def test_hard_zero_probabilities_give_finite_scores():
    """A forest predicts exact 0 and 1: φ stays finite and keeps the order of p(y|x)."""
    from sklearn.datasets import load_iris
    from sklearn.ensemble import RandomForestClassifier

    X, y = load_iris(return_X_y=True)
    fam = user_model_family(RandomForestClassifier(n_estimators=5, max_depth=2),
                            n_features=4, n_classes=3)
    model = fam.fit(X, y, rng=np.random.default_rng(0))
    proba = model.predict_proba(X)[np.arange(len(y)), y]
    assert np.any(proba == 0) or np.any(proba == 1)
    phi = fam.statistics(model, X, y)
    assert np.all(np.isfinite(phi))
    order = np.argsort(proba, kind="stable")
    assert np.all(np.diff(phi[order]) >= -1e-9)  # monotone in p(y|x)
