"""The vectorised trainer equals K sequential trainings (the reference) for the same seeds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pacpriv.ensemble import (  # noqa: E402
    SGD,
    Adam,
    Clipping,
    FullBatch,
    RandomAllocation,
    Shuffled,
    TrainingSpec,
    train_ensemble,
    train_reference,
)

from . import _helpers  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TOL = {"float32": 1e-5, "float64": 1e-10}

OPTIMIZERS = {
    "sgd": SGD(0.2),
    "sgd-momentum-wd": SGD(0.2, momentum=0.9, dampening=0.1, weight_decay=0.05),
    "sgd-nesterov": SGD(0.1, momentum=0.8, nesterov=True),
    "adam": Adam(0.05),
    "adam-wd": Adam(0.05, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.1),
}
BATCHINGS = {"full": FullBatch(), "shuffled": Shuffled(6), "allocation": RandomAllocation(4)}


def _references(model, X, y, masks, seeds, spec, **kw):
    return np.stack([_helpers.flat(train_reference(model, X, y, m, seed=s, training=spec, **kw))
                     for m, s in zip(masks, seeds, strict=True)])


# every optimiser with every batching once; both dtypes for the main settings
CASES = [(o, b, "float64") for o in sorted(OPTIMIZERS) for b in sorted(BATCHINGS)] + [
    ("sgd-momentum-wd", "shuffled", "float32"), ("adam", "allocation", "float32"),
    ("adam-wd", "full", "float32")]


@pytest.mark.parametrize(("optimizer", "batching", "dtype"), CASES)
def test_ensemble_equals_sequential_trainings(pool, masks, seeds, optimizer, batching, dtype):
    """Poisson subsets of different sizes (one empty): every model equals its reference."""
    X, y = pool
    spec = TrainingSpec(OPTIMIZERS[optimizer], epochs=3, batching=BATCHINGS[batching])
    model = _helpers.mlp()
    ens = train_ensemble(model, X, y, masks, seeds=seeds, training=spec, dtype=dtype)
    ref = _references(model, X, y, masks, seeds, spec, dtype=dtype)
    np.testing.assert_allclose(ens.flat_parameters(), ref, rtol=0, atol=TOL[dtype])
    assert ens.dtype == getattr(torch, dtype)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_sum_and_mean_reductions_match_the_reference(pool, masks, seeds, reduction):
    X, y = pool
    spec = TrainingSpec(SGD(0.01 if reduction == "sum" else 0.2, momentum=0.5), epochs=2,
                        batching=Shuffled(7), reduction=reduction)
    model = _helpers.mlp()
    ens = train_ensemble(model, X, y, masks, seeds=seeds, training=spec, dtype="float64")
    np.testing.assert_allclose(ens.flat_parameters(),
                               _references(model, X, y, masks, seeds, spec, dtype="float64"),
                               rtol=0, atol=1e-10)


def test_training_moves_the_models_and_an_empty_subset_keeps_its_start(pool, masks, seeds):
    """Seeded initialisation differs across models; the empty subset (row 3) stays put."""
    X, y = pool
    model = _helpers.mlp()
    untrained = train_ensemble(model, X, y, masks, seeds=seeds, dtype="float64",
                               training=TrainingSpec(Adam(0.1), epochs=0))
    trained = train_ensemble(model, X, y, masks, seeds=seeds, dtype="float64",
                             training=TrainingSpec(Adam(0.1), epochs=3))
    start, end = untrained.flat_parameters(), trained.flat_parameters()
    assert np.array_equal(start[3], end[3])
    assert np.all(np.abs(start[[0, 1, 2, 4]] - end[[0, 1, 2, 4]]).max(1) > 1e-3)
    assert np.unique(start.round(12), axis=0).shape[0] == 5  # one initialisation per seed


def test_shared_initialisation_starts_every_model_from_the_template(pool, masks, seeds):
    X, y = pool
    model = _helpers.mlp()
    ens = train_ensemble(model, X, y, masks, seeds=seeds, init="shared", dtype="float64",
                         training=TrainingSpec(SGD(0.1), epochs=0))
    assert np.array_equal(ens.flat_parameters(),
                          np.tile(_helpers.flat(model.double()), (5, 1)))


def test_an_ensemble_of_starting_points_initialises_each_model(pool, masks, seeds):
    """init=Ensemble: model k starts from its model k (here: modules built under torch's own
    seeding, as pacpriv's TorchMechanism does), and trains as the reference from it."""
    from pacpriv.ensemble import Ensemble

    X, y = pool
    starts = []
    for k in range(5):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(100 + k)
            starts.append(torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(),
                                              torch.nn.Linear(6, 3)).double())
    spec = TrainingSpec(Adam(0.05), epochs=2, batching=Shuffled(9))
    ens = train_ensemble(starts[0], X, y, masks, seeds=seeds, training=spec, dtype="float64",
                         init=Ensemble.from_modules(starts, dtype="float64"), chunk_size=2)
    ref = np.stack([_helpers.flat(train_reference(starts[k], X, y, masks[k], seed=seeds[k],
                                                  training=spec, init="shared",
                                                  dtype="float64")) for k in range(5)])
    np.testing.assert_allclose(ens.flat_parameters(), ref, rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match=r"`init` must be an Ensemble of 5 models"):
        train_ensemble(starts[0], X, y, masks, seeds=seeds, training=spec,
                       init=Ensemble.from_modules(starts[:2]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_results_do_not_depend_on_the_chunk_size(pool, masks, seeds, dtype):
    """Chunks of 1, 2, 3 and 5 models agree to round-off, and a repeated run is identical."""
    X, y = pool
    spec = TrainingSpec(Adam(0.05), epochs=2, batching=RandomAllocation(3),
                        clipping=Clipping(0.5, noise_multiplier=0.7))
    model = _helpers.mlp()
    runs = {c: train_ensemble(model, X, y, masks, seeds=seeds, training=spec, dtype=dtype,
                              chunk_size=c).flat_parameters() for c in (1, 2, 3, 5)}
    for c, out in runs.items():
        np.testing.assert_allclose(out, runs[5], rtol=0, atol=TOL[dtype] / 100, err_msg=str(c))
    again = train_ensemble(model, X, y, masks, seeds=seeds, training=spec, dtype=dtype,
                           chunk_size=2).flat_parameters()
    assert np.array_equal(again, runs[2])


def test_a_root_seed_gives_each_model_its_child(pool, masks):
    X, y = pool
    from pacpriv._random import trial_seed

    spec = TrainingSpec(SGD(0.1), epochs=1, batching=Shuffled(5))
    root = np.random.SeedSequence(5)
    a = train_ensemble(_helpers.mlp(), X, y, masks, seeds=root, training=spec)
    b = train_ensemble(_helpers.mlp(), X, y, masks, training=spec,
                       seeds=[trial_seed(root, k) for k in range(5)])
    assert np.array_equal(a.flat_parameters(), b.flat_parameters())


@pytest.mark.parametrize("loss", ["mse", "callable"])
@pytest.mark.parametrize("linear", [True, False])
def test_regression_and_custom_losses_match_the_reference(pool, masks, seeds, loss, linear):
    """The closed-form linear path and the torch.func path, with squared error or a callable."""
    X, _ = pool
    y = np.stack([X[:, 0] - X[:, 1], X[:, 2] * 0.5], axis=1)
    fn = "mse" if loss == "mse" else (lambda out, t: (out - t).abs().sum(1))
    model = torch.nn.Linear(4, 2) if linear else _helpers.mlp(k=2)
    spec = TrainingSpec(SGD(0.05, momentum=0.5), epochs=2, batching=RandomAllocation(3),
                        clipping=Clipping(0.8))
    ens = train_ensemble(model, X, y, masks, seeds=seeds, training=replace(spec, loss=fn),
                         dtype="float64")
    np.testing.assert_allclose(ens.flat_parameters(),
                               _references(model, X, y, masks, seeds, spec, loss=fn,
                                           dtype="float64"), rtol=0, atol=1e-10)


def test_the_linear_closed_form_equals_the_torch_func_path(pool, masks, seeds):
    """Same training through the closed form ('cross_entropy') and through torch.func (a
    callable computing the same loss)."""
    X, y = pool
    ce = torch.nn.functional.cross_entropy
    spec = TrainingSpec(Adam(0.05), epochs=2, batching=Shuffled(8), clipping=Clipping(0.3))
    model = torch.nn.Linear(4, 3)
    closed = train_ensemble(model, X, y, masks, seeds=seeds, training=spec, dtype="float64")
    func = train_ensemble(model, X, y, masks, seeds=seeds, training=replace(spec, loss=lambda out,
                                                                            t: ce(out, t,
                                                                                  reduction="none")),
                          dtype="float64")
    np.testing.assert_allclose(closed.flat_parameters(), func.flat_parameters(), rtol=0,
                               atol=1e-12)
