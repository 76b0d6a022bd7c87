"""Small pools, masks and seeds shared by the ensemble tests."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv._random import trial_seed


@pytest.fixture
def pool():
    """40 records, 4 features, 3 classes; float64."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(40, 4))
    y = rng.integers(0, 3, size=40)
    return X, y


@pytest.fixture
def masks():
    """Five Poisson subsets of different sizes: about ½, about ⅛, one record, empty, all."""
    rng = np.random.default_rng(11)
    m = np.zeros((5, 40), dtype=bool)
    m[0] = rng.random(40) < 0.5
    m[1] = rng.random(40) < 0.125
    m[2, 17] = True
    m[4] = True
    return m


@pytest.fixture
def seeds():
    root = np.random.SeedSequence(2024)
    return [trial_seed(root, k) for k in range(5)]
