"""Small data and fit functions shared by the prediction tests."""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression


def cancer(n_features: int = 4):
    """Standardised breast-cancer features (first ``n_features``) and labels."""
    X, y = load_breast_cancer(return_X_y=True)
    X = X[:, :n_features]
    return (X - X.mean(0)) / X.std(0), y


def logreg():
    return LogisticRegression(max_iter=200)


def ridge_fit(subset):
    """Generic fit function: least squares on (X, t) returning coefficients (a plain array)."""
    X, t = subset
    A = np.c_[X, np.ones(len(X))]
    return np.linalg.lstsq(A.T @ A + 1e-3 * np.eye(A.shape[1]), A.T @ t, rcond=None)[0]


def ridge_value(coef, X):
    """Output transform for ``ridge_fit``'s model: predictions of shape (n, 1)."""
    return (np.c_[X, np.ones(len(X))] @ coef)[:, None]


def torch_linear():
    """Model factory for the torch path: a 4 → 2 linear classifier."""
    import torch

    return torch.nn.Linear(4, 2)


def torch_train(model, subset):
    """A few full-batch gradient steps of cross-entropy (deterministic given the init)."""
    import torch

    X, y = subset
    X = torch.as_tensor(X, dtype=torch.float32)
    y = torch.as_tensor(y, dtype=torch.long)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(20):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(X), y).backward()
        opt.step()
    return model


def torch_mlp():
    """Model factory: a 4 → 6 → 2 tanh network (stacked forward in the ensemble)."""
    import torch

    return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2))


def torch_fit(factory=None, training=None, **kwargs):
    """A small declarative torch world spec (default: SGD with momentum, minibatches,
    float64)."""
    from pacpriv.ensemble import SGD, Shuffled, TrainingSpec
    from pacpriv.prediction import TorchFit

    training = training or TrainingSpec(SGD(0.2, momentum=0.5), epochs=3, batching=Shuffled(64))
    return TorchFit(factory or torch_linear, training, **{"dtype": "float64", **kwargs})


def copy_state(src, dst):
    """A fresh copy of a fitted state folder for one test, re-homed: its own ledger records
    ``dst`` as the folder it serves (a plain copy beside the original is refused as a
    duplicate of the same secret world; see ``StateDir._check_copy``)."""
    import json
    import shutil
    from pathlib import Path

    from pacpriv.storage import open_store

    shutil.copytree(src, dst)
    scope = json.loads((Path(dst) / "config.json").read_text())["ledger_scope"]
    if (Path(dst) / "ledger.db").exists():
        with open_store(Path(dst) / "ledger.db").transaction(scope) as tx:
            tx.put_state("state_path", str(Path(dst).resolve()).encode())
    return Path(dst)


def fitted_state_fixtures(fit_args: list[str], name: str):
    """``(fitted, state)`` pytest fixtures: a prediction state fitted once per module by the
    CLI with ``fit_args``, and a fresh copy of it for each test (assign both at module level)."""
    import pytest

    from pacpriv.cli import main

    @pytest.fixture(scope="module")
    def fitted(tmp_path_factory):
        state = tmp_path_factory.mktemp(name) / "s"
        assert main([*fit_args, "--state", str(state)]) == 0
        return state

    @pytest.fixture
    def state(fitted, tmp_path):
        return copy_state(fitted, tmp_path / "s")

    return fitted, state
