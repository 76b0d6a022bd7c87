"""One name for the fixed public seed of a mechanism: ``public_seed`` (old names removed)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pacpriv.mechanisms import (
    make_decision_tree,
    make_kmeans,
    make_linear_svm,
    make_mlp,
)
from pacpriv.mechanisms.decision_tree import DecisionTreeProbabilities
from pacpriv.mechanisms.kmeans import KMeansCenters
from pacpriv.mechanisms.linear_svm import LinearSVMCoefficients
from pacpriv.mechanisms.mlp import MLPParameters

pytestmark = pytest.mark.usefixtures("one_native_thread")

_RNG = np.random.default_rng(7)
X = _RNG.normal(size=(40, 2))
Y = (X[:, 0] + 0.3 * _RNG.normal(size=40) > 0).astype(int)
Q = _RNG.uniform(-2, 2, size=(5, 2))

# (factory, class, deprecated keyword, extra keywords, subset)
CASES = [
    (make_kmeans, KMeansCenters, "random_state", {"n_clusters": 3, "n_init": 1}, X),
    (make_linear_svm, LinearSVMCoefficients, "random_state", {"classes": (0, 1)}, (X, Y)),
    (
        make_decision_tree,
        DecisionTreeProbabilities,
        "random_state",
        {"edges": (-2.0, -1.0, 0.0, 1.0, 2.0), "query_points": Q, "classes": (0, 1)},
        (X, Y),
    ),
    (make_mlp, MLPParameters, "seed", {"classes": (0, 1), "epochs": 5}, (X, Y)),
]
IDS = ["kmeans", "linear_svm", "decision_tree", "mlp"]


@pytest.mark.parametrize(("factory", "cls", "old", "kw", "subset"), CASES, ids=IDS)
def test_the_old_seed_names_are_gone(factory, cls, old, kw, subset):
    """0.4: ``public_seed`` is the one name (the 0.2 aliases are removed): an old keyword is
    a TypeError, and ``to_dict`` records ``public_seed`` only."""
    new = factory(public_seed=5, **kw)
    assert new.to_dict()["public_seed"] == 5 and old not in new.to_dict()
    assert new(subset).shape == new(subset).shape  # runs
    with pytest.raises(TypeError, match=old):
        factory(**{old: 3}, **kw)
    with pytest.raises(TypeError, match=old):
        cls(**_fields(new), **{old: 5})


def test_public_seed_changes_the_output():
    """The seed is used: two k-means seeds with one restart give different centres on blobs."""
    outs = {tuple(np.round(make_kmeans(n_clusters=4, n_init=1, public_seed=s)(X), 9))
            for s in range(6)}
    assert len(outs) > 1


def _fields(obj, without: str | None = None) -> dict:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name != without}
