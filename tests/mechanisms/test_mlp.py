"""Tests for mechanisms.mlp (skipped without torch)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.datasets import load_iris

torch = pytest.importorskip("torch")

from pacpriv.mechanisms import make_mlp  # noqa: E402

X_IRIS, Y_IRIS = load_iris(return_X_y=True)
LOW, HIGH = X_IRIS.min(0), X_IRIS.max(0)
CENTER, SCALE = (LOW + HIGH) / 2, (HIGH - LOW) / 2
F = make_mlp(classes=[0, 1, 2], hidden_units=6, epochs=60, center=CENTER, scale=SCALE)
D = 4 * 6 + 6 + 6 * 3 + 3


def _forward(params, X):
    W1, b1 = params[:24].reshape(4, 6), params[24:30]
    W2, b2 = params[30:48].reshape(6, 3), params[48:]
    return np.tanh(((X - CENTER) / SCALE) @ W1 + b1) @ W2 + b2


def test_shape_and_layout_learns_iris():
    """Output is (p*h + h + h*K + K,); a numpy forward pass with it classifies iris well."""
    out = F((X_IRIS, Y_IRIS))
    assert out.shape == (D,) and out.dtype == np.float64
    assert np.mean(np.argmax(_forward(out, X_IRIS), axis=1) == Y_IRIS) > 0.85


def test_deterministic_and_order_invariant():
    """Same subset -> identical parameters; shuffled records -> same parameters."""
    perm = np.random.default_rng(0).permutation(150)
    a = F((X_IRIS, Y_IRIS))
    np.testing.assert_array_equal(a, F((X_IRIS, Y_IRIS)))
    np.testing.assert_allclose(a, F((X_IRIS[perm], Y_IRIS[perm])), rtol=1e-9, atol=1e-12)


def test_empty_subset_returns_initial_parameters():
    """n = 0 returns the public-seed initialisation (what zero training steps give)."""
    init = make_mlp(classes=[0, 1, 2], hidden_units=6, epochs=0)((X_IRIS, Y_IRIS))
    np.testing.assert_array_equal(F((X_IRIS[:0], Y_IRIS[:0])), init)
    assert not np.array_equal(F((X_IRIS[:1], Y_IRIS[:1])), init)


def test_single_class_subset_fixed_shape():
    """A one-class subset still yields the full output layer."""
    assert F((X_IRIS[:20], Y_IRIS[:20])).shape == (D,)


def test_does_not_touch_global_torch_rng():
    """Training uses a private generator: torch's global RNG state is unchanged."""
    state = torch.random.get_rng_state()
    F((X_IRIS[:30], Y_IRIS[:30]))
    assert torch.equal(state, torch.random.get_rng_state())


def test_pickles():
    """The configured mechanism pickles and the copy gives the same output."""
    g = pickle.loads(pickle.dumps(F))
    np.testing.assert_array_equal(g((X_IRIS[:40], Y_IRIS[:40])), F((X_IRIS[:40], Y_IRIS[:40])))


def test_invalid_learning_rate():
    """learning_rate must be positive."""
    with pytest.raises(ValueError, match="`learning_rate` must be > 0"):
        make_mlp(classes=[0, 1], learning_rate=0.0)
