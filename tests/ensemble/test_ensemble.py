"""Evaluating K stacked models in one call; memory-bounded chunks; input checks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pacpriv.ensemble import (  # noqa: E402
    SGD,
    Clipping,
    Ensemble,
    MemoryEstimate,
    RandomAllocation,
    Shuffled,
    TanhMLP,
    TrainingSpec,
    choose_chunk_size,
    estimate_memory,
    train_ensemble,
)

from . import _helpers  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SPEC = TrainingSpec(SGD(0.2, momentum=0.5), epochs=1, batching=Shuffled(8))


@pytest.fixture
def ensemble(pool, masks, seeds):
    X, y = pool
    return train_ensemble(_helpers.mlp(), X, y, masks, seeds=seeds, training=SPEC,
                          dtype="float64")


class _Custom(torch.nn.Module):
    """No stacked forward: evaluated through vmap(functional_call)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.sin(self.lin(x)) * 2


TEMPLATES = {
    "sequential": lambda: _helpers.mlp(),
    "linear": lambda: torch.nn.Linear(4, 3),
    "tanh-mlp": lambda: TanhMLP(4, 6, 3),
    "sequential-nobias": lambda: torch.nn.Sequential(torch.nn.Linear(4, 5, bias=False),
                                                     torch.nn.GELU(), torch.nn.Linear(5, 3)),
    "custom": _Custom,
}


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_forward_evaluates_every_model_on_every_row(pool, template):
    """The stacked fast paths and the vmap fallback equal each model's own forward."""
    X, _ = pool
    tmpl = TEMPLATES[template]()
    d = sum(p.numel() for p in tmpl.parameters())
    ens = Ensemble.from_flat(tmpl, np.random.default_rng(1).normal(size=(5, d)),
                             dtype="float64")
    out = ens.evaluate(X[:7])
    assert out.shape == (5, 7, 3) and out.dtype == np.float64
    for k in range(5):
        with torch.no_grad():
            expected = ens.module(k)(torch.as_tensor(X[:7])).numpy()
        np.testing.assert_allclose(out[k], expected, rtol=0, atol=1e-13)
    assert np.abs(out[0] - out[1]).max() > 1e-3


def test_flat_parameters_round_trip(ensemble):
    flat = ensemble.flat_parameters()
    assert flat.shape == (5, ensemble.n_parameters) == (5, 4 * 6 + 6 + 6 * 3 + 3)
    again = Ensemble.from_flat(_helpers.mlp(), flat, dtype="float64")
    assert np.array_equal(again.flat_parameters(), flat)
    assert again.to_dict()["n_models"] == 5 and "parameters" not in again.to_dict()
    with pytest.raises(ValueError, match=r"`flat` must have shape \(K >= 1, 51\)"):
        Ensemble.from_flat(_helpers.mlp(), flat[:, :-1])
    with pytest.raises(ValueError, match=r"`k` must be an integer in \[0, 4\]"):
        ensemble.module(5)


def test_from_modules_stacks_trained_modules(ensemble):
    modules = [ensemble.module(k) for k in range(5)]
    again = Ensemble.from_modules(modules, dtype="float64")
    assert np.array_equal(again.flat_parameters(), ensemble.flat_parameters())
    with pytest.raises(ValueError, match=r"module 1 has other parameter names or shapes"):
        Ensemble.from_modules([modules[0], torch.nn.Linear(4, 3)])
    with pytest.raises(ValueError, match=r"`modules` must hold at least one"):
        Ensemble.from_modules([])


def test_the_chunk_comes_from_the_memory_limit(pool, masks, seeds):
    """A limit of 3.5 models' estimate trains 3 at a time; below one model is an error."""
    X, y = pool
    spec = TrainingSpec(SGD(0.1), epochs=1, batching=RandomAllocation(2),
                        clipping=Clipping(1.0, noise_multiplier=0.5))
    template = _helpers.mlp().double()
    est = estimate_memory(template, torch.as_tensor(X), training=spec,
                          largest_subset=int(masks.sum(1).max()))
    assert est.n_parameters == 51 and est.bytes_per_model > 51 * 8 * 5
    ens = train_ensemble(template, X, y, masks, seeds=seeds, training=spec, dtype="float64",
                         memory_limit=3.5 * est.bytes_per_model)
    assert ens.chunk_size == 3
    full = train_ensemble(template, X, y, masks, seeds=seeds, training=spec, dtype="float64")
    assert full.chunk_size == 5  # the default limit (a quarter of free RAM) holds them all
    np.testing.assert_allclose(ens.flat_parameters(), full.flat_parameters(), rtol=0,
                               atol=1e-12)
    with pytest.raises(ValueError, match=r"one model needs about .* MiB .* `memory_limit` is"):
        train_ensemble(template, X, y, masks, seeds=seeds, training=spec,
                       memory_limit=est.bytes_per_model // 2)


def test_choose_chunk_size_and_the_estimate():
    est = MemoryEstimate.of(n_parameters=100, n_state=2, batch_length=10, input_numel=4,
                            activation_numel=20, itemsize=8, per_example_gradients=True)
    # 8·[(5 + 2)·100 + 10·(4 + 60 + 1) + 2·10·100] + 16·10
    assert est.bytes_per_model == 8 * (700 + 650 + 2000) + 160
    assert choose_chunk_size(est, memory_limit=10 * est.bytes_per_model + 1, n_models=7) == 7
    assert choose_chunk_size(est, memory_limit=4 * est.bytes_per_model, n_models=7) == 4


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"masks": np.zeros((2, 39), bool)}, ValueError,
     r"`masks` must have shape \(n_models >= 1, n_records=40\); got \(2, 39\)"),
    ({"masks": np.full((2, 40), 0.5)}, ValueError, r"`masks` must hold booleans or the numbers"),
    ({"seeds": [np.random.SeedSequence(1)]}, ValueError,
     r"`seeds` must hold one SeedSequence per model \(2\); got 1"),
    ({"seeds": [1, 2]}, TypeError, r"`seeds` must hold numpy SeedSequences; got int"),
    ({"seeds": None}, TypeError, r"`seeds` is required"),
    ({"dtype": "float16"}, ValueError, r"`dtype` must be 'float32' or 'float64'; got 'float16'"),
    ({"device": "tpu"}, ValueError, r"`device` must be 'cpu' or 'cuda\[:index\]'; got 'tpu'"),
    ({"init": "random"}, ValueError, r"`init` must be one of \('seeded', 'shared'\)"),
    ({"training": replace(SPEC, loss="hinge")}, ValueError,
     r"`loss` must be one of \['cross_entropy', 'mse'\]"),
    ({"training": replace(SPEC, loss=torch.nn.CrossEntropyLoss())}, TypeError,
     r"`loss` must return one loss per"),
    ({"memory_limit": 0}, ValueError, r"`memory_limit` must be in \[1.0, inf\); got 0"),
    ({"chunk_size": 0}, ValueError, r"`chunk_size` must be an integer in \[1, inf\)"),
    ({"training": "sgd"}, TypeError, r"`training` must be a pacpriv.ensemble.TrainingSpec"),
    ({"y": np.zeros(39, int)}, ValueError,
     r"`X` and `y` must have the same number of records; got 40 and 39"),
    ({"X": np.full((40, 4), np.nan)}, ValueError, r"`X` must be finite; it contains NaN"),
    ({"model": torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))},
     ValueError, r"BatchNorm1d at '1': batch normalisation mixes examples"),
    ({"model": torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Dropout(0.5))},
     ValueError, r"Dropout\(p=0.5\) at '1': dropout draws"),
    ({"model": "mlp"}, TypeError, r"`model` must be a torch.nn.Module; got str"),
])
def test_bad_input_is_refused_before_training(pool, kwargs, error, match):
    X, y = pool
    args = {"model": _helpers.mlp(), "X": X, "y": y, "masks": np.ones((2, 40), bool),
            "seeds": np.random.SeedSequence(0), "training": SPEC, **kwargs}
    with pytest.raises(error, match=match):
        train_ensemble(args.pop("model"), args.pop("X"), args.pop("y"), args.pop("masks"),
                       **args)


def test_a_loss_returning_a_scalar_is_refused(pool):
    X, y = pool
    with pytest.raises(ValueError, match=r"`loss` must return one value per example"):
        train_ensemble(_helpers.mlp(), X, y, np.ones((1, 40), bool), seeds=0, training=replace(
                       SPEC, loss=lambda out, t: torch.nn.functional.cross_entropy(out, t)))


@pytest.mark.parametrize(("build", "match"), [
    (lambda: SGD(0.0), r"`learning_rate` must be in \(0.0, inf\); got 0.0"),
    (lambda: SGD(0.1, momentum=1.0), r"`momentum` must be in \[0.0, 1.0\); got 1.0"),
    (lambda: SGD(0.1, nesterov=True), r"`nesterov=True` needs momentum > 0"),
    (lambda: TrainingSpec(SGD(0.1), epochs=-1), r"`epochs` must be an integer in \[0, inf\)"),
    (lambda: TrainingSpec(SGD(0.1), epochs=1, reduction="max"), r"`reduction` must be 'mean'"),
    (lambda: TrainingSpec(SGD(0.1), epochs=1, batching=RandomAllocation(2), reduction="sum"),
     r"`reduction` must be 'mean' with RandomAllocation"),
    (lambda: TrainingSpec(SGD(0.1), epochs=1, clipping=Clipping(1.0, 1.0)),
     r"noise_multiplier > 0 needs batching=RandomAllocation"),
    (lambda: Clipping(0.0), r"`max_grad_norm` must be in \(0.0, inf\); got 0.0"),
    (lambda: Shuffled(0), r"`batch_size` must be an integer in \[1, inf\); got 0"),
])
def test_bad_settings_are_refused(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_spec_to_dict_names_every_part():
    spec = TrainingSpec(SGD(0.1, momentum=0.9), epochs=2, batching=RandomAllocation(4),
                        clipping=Clipping(1.0, 0.5))
    assert spec.to_dict() == {
        "epochs": 2, "reduction": "mean", "loss": "cross_entropy",
        "optimizer": {"type": "SGD", "learning_rate": 0.1, "momentum": 0.9, "dampening": 0.0,
                      "weight_decay": 0.0, "nesterov": False},
        "batching": {"type": "RandomAllocation", "steps_per_epoch": 4},
        "clipping": {"type": "Clipping", "max_grad_norm": 1.0, "noise_multiplier": 0.5}}
