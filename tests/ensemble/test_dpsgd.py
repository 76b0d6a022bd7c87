"""DP-SGD inside the ensemble equals pacpriv.dpsgd.trainer.train_dpsgd for the same seeds.

train_dpsgd(rng=s) draws its random allocation from child 0 of ``s`` and its noise from child
1, the ensemble's BATCH_STREAM and NOISE_STREAM; both clip jointly over the parameters with
the 1e-6 stabiliser, add N(0, σ²C²) per coordinate to the clipped sum, divide by n/M and step
on empty batches too (Abadi et al., CCS 2016, Algorithm 1, with random allocation).
"""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pacpriv.dpsgd.trainer import train_dpsgd  # noqa: E402
from pacpriv.ensemble import (  # noqa: E402
    SGD,
    Adam,
    Clipping,
    RandomAllocation,
    TanhMLP,
    TrainingSpec,
    train_ensemble,
)

from . import _helpers  # noqa: E402

pytestmark = [
    pytest.mark.usefixtures("one_torch_thread"),
    # the worlds' subsets hold a few records on purpose (steps_per_epoch above them): the
    # reference train_dpsgd calls warn about the empty steps
    pytest.mark.filterwarnings("ignore::pacpriv.exceptions.SparseBatchWarning"),
]

MODELS = {
    "linear": lambda: torch.nn.Linear(4, 3),  # train_dpsgd: ghost clipping
    "sequential": _helpers.mlp,  # train_dpsgd: ghost clipping through Tanh
    "custom": lambda: TanhMLP(4, 5, 3, public_seed=1),  # train_dpsgd: torch.func per sample
}
OPTIMIZERS = {
    "sgd-momentum": (SGD(0.3, momentum=0.9),
                     lambda ps: torch.optim.SGD(ps, lr=0.3, momentum=0.9)),
    "adam": (Adam(0.05), lambda ps: torch.optim.Adam(ps, lr=0.05)),
}


def _dpsgd(model, X, y, mask, seed, factory, *, sigma, C, M, E):
    m = copy.deepcopy(model)
    if mask.any():
        train_dpsgd(m, torch.nn.CrossEntropyLoss(), X[mask], y[mask], noise_multiplier=sigma,
                    steps_per_epoch=M, epochs=E, max_grad_norm=C, optimizer=factory, rng=seed)
    return _helpers.flat(m)


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("model", sorted(MODELS))
def test_noisy_clipped_training_equals_train_dpsgd(pool, masks, seeds, model, optimizer):
    X, y = pool
    net = MODELS[model]().double()
    ours, factory = OPTIMIZERS[optimizer]
    spec = TrainingSpec(ours, epochs=3, batching=RandomAllocation(5),
                        clipping=Clipping(0.7, noise_multiplier=1.1))
    ens = train_ensemble(net, X, y, masks, seeds=seeds, training=spec, init="shared",
                         dtype="float64")
    ref = np.stack([_dpsgd(net, X, y, m, s, factory, sigma=1.1, C=0.7, M=5, E=3)
                    for m, s in zip(masks, seeds, strict=True)])
    np.testing.assert_allclose(ens.flat_parameters(), ref, rtol=0, atol=1e-10)
    # the noise is real: a noise-free run ends elsewhere
    quiet = TrainingSpec(ours, epochs=3, batching=RandomAllocation(5), clipping=Clipping(0.7))
    other = train_ensemble(net, X, y, masks[:1], seeds=seeds[:1], training=quiet,
                           init="shared", dtype="float64")
    assert np.abs(other.flat_parameters()[0] - ref[0]).max() > 1e-3


def test_unclipped_random_allocation_equals_train_dpsgd(pool, masks, seeds):
    """max_grad_norm=None in train_dpsgd: plain gradients Σ∇ℓ_i / (n/M), empty steps too."""
    X, y = pool
    net = _helpers.mlp().double()
    spec = TrainingSpec(SGD(0.2, momentum=0.5), epochs=2, batching=RandomAllocation(6))
    ens = train_ensemble(net, X, y, masks, seeds=seeds, training=spec, init="shared",
                         dtype="float64")
    factory = lambda ps: torch.optim.SGD(ps, lr=0.2, momentum=0.5)  # noqa: E731
    ref = np.stack([_dpsgd(net, X, y, m, s, factory, sigma=0.0, C=None, M=6, E=2)
                    for m, s in zip(masks, seeds, strict=True)])
    np.testing.assert_allclose(ens.flat_parameters(), ref, rtol=0, atol=1e-10)


def test_clipping_bounds_each_examples_contribution(pool, seeds):
    """One record, a far target: with C = 0.01 and SGD(lr = 1), one step (n = M = 1) moves the
    parameters by C in norm, and the unclipped step is far longer."""
    X, _ = pool
    y = np.full((40, 1), 1e3)
    mask = np.zeros((1, 40), dtype=bool)
    mask[0, 3] = True
    net = torch.nn.Linear(4, 1).double()
    steps = {}
    for name, clip in (("clipped", Clipping(0.01)), ("plain", None)):
        spec = TrainingSpec(SGD(1.0), epochs=1, batching=RandomAllocation(1), clipping=clip)
        ens = train_ensemble(net, X, y, mask, seeds=seeds[:1], training=replace(spec, loss="mse"),
                             init="shared", dtype="float64")
        steps[name] = np.linalg.norm(ens.flat_parameters()[0] - _helpers.flat(net))
    assert 0.01 * (1 - 1e-6) < steps["clipped"] <= 0.01
    assert steps["plain"] > 100


@pytest.mark.parametrize("factory", [
    lambda ps: torch.optim.SGD(ps, lr=0.3, momentum=0.9, dampening=0.1, weight_decay=0.01),
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.5, nesterov=True),
    lambda ps: torch.optim.Adam(ps, lr=0.05, betas=(0.8, 0.99), eps=1e-7, weight_decay=0.1),
], ids=["sgd", "nesterov", "adam"])
def test_torch_settings_translate_to_the_same_training(pool, masks, seeds, factory):
    """optimizer_from_torch and loss_from_torch: train_dpsgd's factory and loss module give
    the same models as the translated ensemble spec."""
    from pacpriv.ensemble import loss_from_torch, optimizer_from_torch

    X, y = pool
    net = _helpers.mlp().double()
    loss = torch.nn.CrossEntropyLoss()
    spec = TrainingSpec(optimizer_from_torch(factory), epochs=2, batching=RandomAllocation(3),
                        clipping=Clipping(0.6, noise_multiplier=0.9))
    ens = train_ensemble(net, X, y, masks, seeds=seeds, training=replace(spec,
                                                                         loss=loss_from_torch(loss)),
                         init="shared", dtype="float64")
    ref = np.stack([_dpsgd(net, X, y, m, s, factory, sigma=0.9, C=0.6, M=3, E=2)
                    for m, s in zip(masks, seeds, strict=True)])
    np.testing.assert_allclose(ens.flat_parameters(), ref, rtol=0, atol=1e-10)


def test_untranslatable_torch_settings_are_refused():
    from pacpriv.ensemble import loss_from_torch, optimizer_from_torch

    with pytest.raises(ValueError, match=r"must be torch.optim.SGD or torch.optim.Adam; got AdamW"):
        optimizer_from_torch(lambda ps: torch.optim.AdamW(ps))
    with pytest.raises(ValueError, match=r"an option the ensemble does not reproduce"):
        optimizer_from_torch(lambda ps: torch.optim.Adam(ps, amsgrad=True))
    with pytest.raises(ValueError, match=r"`loss_fn` CrossEntropyLoss with these options"):
        loss_from_torch(torch.nn.CrossEntropyLoss(label_smoothing=0.1))
    assert loss_from_torch(torch.nn.MSELoss()) == "mse"
