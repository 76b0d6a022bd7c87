"""``pacpriv._torch_models``: the one definition of the small torch classifiers that the
comparison, the ensemble and the audit share (same θ₀, same layout, same threads)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pacpriv._torch_models import (  # noqa: E402
    MLPFactory,
    linear_initial_parameters,
    linear_module,
    one_torch_thread,
    public_stream_int,
)
from pacpriv.compare.models import LogisticRegressionMechanism  # noqa: E402
from pacpriv.ensemble import EnsembleLogisticRegression  # noqa: E402


def test_public_initialisation_is_the_documented_stream():
    """θ₀ = U(±1/√p) from 63 bits of SeedSequence(seed, spawn_key=(0,)), computed here."""
    state = np.random.SeedSequence(7, spawn_key=(0,)).generate_state(1, dtype=np.uint64)[0]
    assert public_stream_int(7, 0) == int(state) >> 1 < 2**63
    expected = np.random.default_rng(int(state) >> 1).uniform(-0.5, 0.5, size=3 * 5)
    np.testing.assert_array_equal(linear_initial_parameters(4, 3, 7), expected)
    assert public_stream_int(7, 0) != public_stream_int(7, 1)


def test_compare_and_ensemble_start_from_the_same_model():
    mech = LogisticRegressionMechanism(4, 3, steps_per_epoch=2, epochs=1, learning_rate=0.1,
                                       public_seed=7)
    ens = EnsembleLogisticRegression.from_compare(mech)
    np.testing.assert_array_equal(mech.initial_parameters(), ens.initial_parameters())
    theta = np.arange(15, dtype=np.float64) / 10
    model = linear_module(theta, 4, 3)
    assert model.weight.dtype == torch.float64 and model.weight.shape == (3, 4)
    np.testing.assert_array_equal(mech.parameters_of(model), theta)  # the layout round-trips
    x = np.ones((1, 4))
    np.testing.assert_allclose(model(torch.from_numpy(x)).detach().numpy()[0],
                               theta[:12].reshape(3, 4).sum(1) + theta[12:])


def test_one_torch_thread_restores_the_count():
    before = torch.get_num_threads()
    with one_torch_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


@pytest.mark.parametrize(("hidden", "n_params", "text"), [
    ((), 4 * 3 + 3, "logistic regression (4 features, 3 classes)"),
    ((5,), 4 * 5 + 5 + 5 * 3 + 3, "MLP 4-5-3 (tanh)"),
])
def test_mlp_factory(hidden, n_params, text):
    f = MLPFactory(4, 3, hidden)
    assert sum(p.numel() for p in f().parameters()) == n_params
    assert f.describe() == text
    with pytest.raises(ValueError, match="hidden"):
        MLPFactory(4, 3, (0,))
