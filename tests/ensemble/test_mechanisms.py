"""Ensemble mechanisms: the old mechanisms' outputs for the same subsets, any block size."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pacpriv.compare.models import LogisticRegressionMechanism  # noqa: E402
from pacpriv.ensemble import (  # noqa: E402
    SGD,
    Clipping,
    EnsembleLogisticRegression,
    EnsembleMechanism,
    EnsembleMLP,
    Shuffled,
    TrainingSpec,
    train_reference,
)
from pacpriv.mechanisms.mlp import MLPParameters  # noqa: E402

from . import _helpers  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def block_masks():
    rng = np.random.default_rng(3)
    m = rng.random((6, 40)) < 0.5
    m[2] = False
    m[4] = rng.random(40) < 0.1
    return m


def test_logistic_regression_reproduces_the_compare_mechanism(pool, block_masks):
    """Same θ₀, same public allocation, same SGD: equal to 1e-12 on every subset."""
    X, y = pool
    old = LogisticRegressionMechanism(n_features=4, n_classes=3, steps_per_epoch=3, epochs=4,
                                      learning_rate=0.5, public_seed=9)
    new = EnsembleLogisticRegression.from_compare(old)
    out = new.run_block((X, y), block_masks, seeds=None)
    ref = np.stack([old((X[m], y[m])) for m in block_masks])
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    assert out.shape == (6, new.dim) and new.dim == old.dim
    np.testing.assert_array_equal(out[2], old.initial_parameters())  # the empty subset


def test_full_batch_logistic_regression_with_l2_and_clipping(pool, block_masks):
    """Full-batch GD on the mean loss, L2 through SGD(weight_decay), per-example clipping
    without noise: equal to the sequential reference from the same θ₀."""
    X, y = pool
    new = EnsembleLogisticRegression(n_features=4, n_classes=3, epochs=5, learning_rate=0.3,
                                     weight_decay=0.1, max_grad_norm=0.2, public_seed=4)
    out = new.run_block((X, y), block_masks)
    spec = TrainingSpec(SGD(0.3, weight_decay=0.1), epochs=5, clipping=Clipping(0.2))
    seed = np.random.SeedSequence(0)  # unused by full batches without noise
    ref = np.stack([_helpers.flat(train_reference(new.model(), X, y, m, seed=seed,
                                                  training=spec, init="shared",
                                                  dtype="float64")) for m in block_masks])
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    unclipped = EnsembleLogisticRegression(n_features=4, n_classes=3, epochs=5,
                                           learning_rate=0.3, weight_decay=0.1, public_seed=4)
    assert np.abs(unclipped.run_block((X, y), block_masks[:1]) - out[:1]).max() > 1e-3


def test_mlp_reproduces_the_mlp_mechanism(pool, block_masks):
    X, y = pool
    old = MLPParameters(classes=(0, 1, 2), hidden_units=5, epochs=12, learning_rate=0.05,
                        weight_decay=1e-3, public_seed=3, center=0.1, scale=(1, 2, 1, 2))
    new = EnsembleMLP.from_mlp(old)
    out = new.run_block((X, y), block_masks)
    ref = np.stack([old((X[m], y[m])) for m in block_masks])
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    assert out.shape == (6, old.output_dim(4)) == (6, new.output_dim(4))


@pytest.mark.parametrize("mechanism", ["logistic", "mlp"])
def test_outputs_do_not_depend_on_the_block_size(pool, block_masks, mechanism):
    """Blocks of 1, 2, 4 and 6 subsets and the one-trial call agree to round-off."""
    X, y = pool
    mech = (EnsembleLogisticRegression(n_features=4, n_classes=3, epochs=3, learning_rate=0.5,
                                       steps_per_epoch=4) if mechanism == "logistic"
            else EnsembleMLP(classes=(0, 1, 2), hidden_units=4, epochs=6))
    whole = mech.run_block((X, y), block_masks)
    for size in (1, 2, 4):
        parts = np.concatenate([mech.run_block((X, y), block_masks[i:i + size])
                                for i in range(0, 6, size)])
        np.testing.assert_allclose(parts, whole, rtol=0, atol=1e-13, err_msg=str(size))
    np.testing.assert_allclose(mech((X[block_masks[0]], y[block_masks[0]])), whole[0],
                               rtol=0, atol=1e-13)


def test_generic_mechanism_uses_the_trial_seeds(pool, block_masks, seeds):
    """Seeded initialisation and shuffling: a trial's row depends on its seed, and equals the
    reference trained with that seed."""
    X, y = pool
    spec = TrainingSpec(SGD(0.2, momentum=0.5), epochs=2, batching=Shuffled(6))
    mech = EnsembleMechanism(_helpers.mlp(), spec, dtype="float64")
    out = mech.run_block((X, y), block_masks[:5], seeds=seeds)
    ref = np.stack([_helpers.flat(train_reference(_helpers.mlp(), X, y, m, seed=s,
                                                  training=spec, dtype="float64"))
                    for m, s in zip(block_masks[:5], seeds, strict=True)])
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-10)
    swapped = mech.run_block((X, y), block_masks[:2], seeds=[seeds[1], seeds[0]])
    assert np.abs(swapped[0] - out[0]).max() > 1e-3
    subset = (X[block_masks[1]], y[block_masks[1]])
    np.testing.assert_allclose(mech(subset, rng=seeds[1]), out[1], rtol=0, atol=1e-12)
    # the engine's one-trial path passes numpy.random.default_rng(seed): the same seed
    engine_rng = np.random.default_rng(seeds[1])
    engine_rng.random(3)
    np.testing.assert_allclose(mech(subset, rng=engine_rng), out[1], rtol=0, atol=1e-12)


def test_mechanisms_pickle_for_process_workers():
    for mech in (EnsembleLogisticRegression(n_features=2, n_classes=2, epochs=1,
                                            learning_rate=0.1),
                 EnsembleMLP(classes=("a", "b"), hidden_units=2, epochs=1)):
        assert pickle.loads(pickle.dumps(mech)) == mech


def test_mechanism_inputs_are_checked(pool, block_masks):
    X, y = pool
    lr = EnsembleLogisticRegression(n_features=4, n_classes=2, epochs=1, learning_rate=0.1)
    with pytest.raises(ValueError, match=r"label outside the public class list of 2"):
        lr.run_block((X, y), block_masks)
    with pytest.raises(ValueError, match=r"the pool has 4 features; .* n_features=3"):
        EnsembleLogisticRegression(n_features=3, n_classes=3, epochs=1,
                                   learning_rate=0.1).run_block((X, y), block_masks)
    with pytest.raises(ValueError, match=r"the pool must be a tuple \(X, y\)"):
        lr.run_block(X, block_masks)
    with pytest.raises(ValueError, match=r"`classes` must list at least 2 distinct"):
        EnsembleMLP(classes=(1, 1))
    with pytest.raises(ValueError, match=r"`scale` must be finite and > 0"):
        EnsembleMLP(scale=(1.0, 0.0))
    with pytest.raises(ValueError, match=r"`learning_rate` must be in \(0.0, inf\)"):
        EnsembleMLP(learning_rate=0.0)
    with pytest.raises(ValueError, match=r"`n_classes` must be an integer in \[2, inf\)"):
        EnsembleLogisticRegression(n_features=2, n_classes=1, epochs=1, learning_rate=0.1)
