"""The single-backward (ghost clipping) path of the DP-SGD trainer equals the per-example loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import pacpriv.dpsgd.trainer as trainer  # noqa: E402
from pacpriv.dpsgd._ghost import LinearTape, batched_losses, linear_layers  # noqa: E402
from pacpriv.dpsgd.trainer import _single_loss, train_dpsgd  # noqa: E402

nn = torch.nn


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _naive_clipped_sum(model, loss_fn, X, y, C):
    """Σ_i clip_C(∇ℓ_i) by one backward pass per example; also the number clipped."""
    named = [(k, p) for k, p in model.named_parameters() if p.requires_grad]
    total = {k: torch.zeros_like(p) for k, p in named}
    n_clipped = 0
    for i in range(X.shape[0]):
        loss = _single_loss(loss_fn, model(X[i : i + 1]), y[i])
        grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g for (_, p), g in zip(named, grads,
                                                                               strict=True)]
        norm = float(torch.sqrt(sum(g.double().pow(2).sum() for g in grads)))
        n_clipped += norm > C
        f = min(1.0, C / (norm + 1e-6))
        for (k, _), g in zip(named, grads, strict=True):
            total[k] += f * g
    return total, n_clipped


def _fast_clipped_sum(model, loss_fn, X, y, C):
    layers = linear_layers(model)
    assert layers is not None, "the model should take the single-backward path"
    with LinearTape(layers) as tape:
        found = trainer._linear_step(model, loss_fn, X, y, tape, C)
    assert found is not None
    return found[0], found[1]


def _models(dtype):
    torch.manual_seed(0)
    frozen = nn.Sequential(nn.Linear(6, 9), nn.GELU(), nn.Linear(9, 3, bias=False))
    frozen[0].weight.requires_grad_(False)
    return {
        "logreg": nn.Linear(6, 3),
        "mlp-tanh": nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)),
        "deep": nn.Sequential(nn.Flatten(), nn.Linear(6, 8), nn.ReLU(), nn.Sequential(
            nn.Linear(8, 5), nn.SiLU()), nn.Linear(5, 3), nn.LogSoftmax(dim=1)),
        "frozen-weight-no-bias": frozen,
    }


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", ["logreg", "mlp-tanh", "deep", "frozen-weight-no-bias"])
@pytest.mark.parametrize("C", [1e-3, 0.3, 1e6])
def test_single_backward_equals_per_example_loop(dtype, name, C):
    """Clipped sums and clip counts equal the naive loop (1e-12 in float64, 1e-6 in float32)."""
    model = _models(dtype)[name].to(dtype)
    rng = np.random.default_rng(1)
    X = torch.as_tensor(rng.normal(size=(11, 6)) * 3, dtype=dtype)
    y = torch.as_tensor(rng.integers(0, 3, size=11))
    loss_fn = nn.NLLLoss() if name == "deep" else nn.CrossEntropyLoss()
    fast, k_fast = _fast_clipped_sum(model, loss_fn, X, y, C)
    slow, k_slow = _naive_clipped_sum(model, loss_fn, X, y, C)
    assert k_fast == k_slow
    assert list(fast) == list(slow)  # same parameters, same order (noise is drawn in it)
    tol = dict(rtol=1e-12, atol=1e-14) if dtype == torch.float64 else dict(rtol=1e-6, atol=1e-7)
    for key in slow:  # the clipped sums are float64 (pacpriv.dpsgd._noise)
        assert fast[key].dtype == torch.float64
        torch.testing.assert_close(fast[key].to(slow[key].dtype), slow[key], **tol)
    if C == 1e-3:
        assert k_fast == 11  # every example clipped: the clipping path is exercised


@pytest.mark.parametrize("T", [3, 6])
def test_sequence_inputs_match_the_loop(T):
    """Linear layers on (b, T, in) inputs (norm does not factorise) match the loop: T = 3 uses
    the (g·g)(a·a) Gram form where T² <= in·out and g_iᵀa_i for the 2 -> 2 layer; T = 6 forms
    g_iᵀa_i on every sequence layer."""
    model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2), nn.Linear(2, 2),
                          nn.Flatten(), nn.Linear(2 * T, 3)).double()
    rng = np.random.default_rng(2)
    X = torch.as_tensor(rng.normal(size=(7, T, 4)))
    y = torch.as_tensor(rng.integers(0, 3, size=7))
    fast, k1 = _fast_clipped_sum(model, nn.CrossEntropyLoss(), X, y, 0.5)
    slow, k2 = _naive_clipped_sum(model, nn.CrossEntropyLoss(), X, y, 0.5)
    assert k1 == k2 > 0
    for key in slow:
        torch.testing.assert_close(fast[key], slow[key], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    ("loss_fn", "target"),
    [
        (nn.CrossEntropyLoss(), "class"),
        (nn.CrossEntropyLoss(reduction="sum", label_smoothing=0.1), "class"),
        (nn.CrossEntropyLoss(), "prob"),
        (nn.MSELoss(), "real"),
        (nn.MSELoss(reduction="sum"), "real"),
        (nn.L1Loss(), "real"),
        (nn.HuberLoss(delta=0.5), "real"),
        (nn.SmoothL1Loss(reduction="none"), "real"),
        (nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)),
         "binary"),
    ],
)
def test_batched_losses_equal_single_example_losses(loss_fn, target):
    """One batched call reproduces loss_fn on each example alone, for every reduction."""
    rng = np.random.default_rng(3)
    out = torch.as_tensor(rng.normal(size=(9, 3)))
    y = {
        "class": torch.as_tensor(rng.integers(0, 3, size=9)),
        "prob": torch.softmax(torch.as_tensor(rng.normal(size=(9, 3))), 1),
        "real": torch.as_tensor(rng.normal(size=(9, 3))),
        "binary": torch.as_tensor(rng.integers(0, 2, size=(9, 3)).astype(np.float64)),
    }[target]
    got = batched_losses(loss_fn, out, y)
    want = torch.stack([_single_loss(loss_fn, out[i : i + 1], y[i]) for i in range(9)])
    torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-15)


def test_batched_losses_refuse_inexact_cases():
    """Class weights, an ignored label or broadcasting targets fall back (None)."""
    out = torch.zeros(4, 3)
    labels = torch.tensor([0, 1, 2, 1])
    assert batched_losses(nn.CrossEntropyLoss(weight=torch.ones(3)), out, labels) is None
    assert batched_losses(nn.CrossEntropyLoss(ignore_index=2), out, labels) is None
    assert batched_losses(nn.MSELoss(), out, torch.zeros(4, 1)) is None
    assert batched_losses(lambda o, t: (o - t).pow(2).mean(), out, torch.zeros(4, 3)) is None
    assert batched_losses(nn.CrossEntropyLoss(ignore_index=5), out, labels) is not None


class _Custom(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x):
        return self.lin(x - x.mean(0))  # mixes examples: must not take the fast path


def test_only_known_modules_take_the_single_backward_path():
    """Custom modules, subclasses, batch-axis softmax and extra parameters are refused."""
    assert linear_layers(nn.Sequential(nn.Linear(3, 2), nn.ReLU())) is not None
    assert linear_layers(_Custom()) is None
    assert linear_layers(nn.Sequential(nn.Linear(3, 2), nn.Softmax(dim=0))) is None
    assert linear_layers(nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2))) is None
    assert linear_layers(nn.Sequential(nn.Flatten(0), nn.Linear(3, 2))) is None

    class Sub(nn.Linear):
        pass

    assert linear_layers(Sub(3, 2)) is None
    frozen = nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2))
    frozen[1].requires_grad_(False)
    assert linear_layers(frozen) is None  # LayerNorm is not a known per-example module


def test_shared_layer_falls_back_to_torch_func():
    """A Linear used twice in one forward (weight sharing) is detected; training stays exact."""
    shared = nn.Linear(4, 4).double()
    model = nn.Sequential(shared, nn.Tanh(), shared, nn.Tanh(), nn.Linear(4, 3).double())
    rng = np.random.default_rng(4)
    X = torch.as_tensor(rng.normal(size=(6, 4)))
    y = torch.as_tensor(rng.integers(0, 3, size=6))
    with LinearTape(linear_layers(model)) as tape:
        assert trainer._linear_step(model, nn.CrossEntropyLoss(), X, y, tape, 1.0) is None
        assert tape.disabled and not tape.handles  # hooks gone: later steps go to torch.func
        grads, k, _ = trainer._private_step(model, nn.CrossEntropyLoss(), X, y, tape, C=0.2,
                                            sigma=0.0, expected=3.0, generator=None)
        assert not tape.records
    slow, k_slow = _naive_clipped_sum(model, nn.CrossEntropyLoss(), X, y, 0.2)
    assert k == k_slow
    for key in slow:
        torch.testing.assert_close(grads[key], slow[key] / 3.0, rtol=1e-12, atol=1e-14)


def test_trainer_uses_single_backward_for_linear_models(monkeypatch):
    """train_dpsgd on an MLP never calls torch.func, and equals the torch.func path exactly."""
    rng = np.random.default_rng(5)
    X, y = rng.normal(size=(40, 6)), rng.integers(0, 3, size=40)

    def build():
        torch.manual_seed(3)
        return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)).double()

    kw = dict(noise_multiplier=0.7, steps_per_epoch=5, epochs=2, max_grad_norm=0.4, rng=11)
    reference = build()
    with monkeypatch.context() as m:
        m.setattr(trainer, "linear_layers", lambda model: None)  # force torch.func
        ref = train_dpsgd(reference, nn.CrossEntropyLoss(), X, y, **kw)

    def forbidden(*a, **k):
        raise AssertionError("torch.func path used")

    fast = build()
    monkeypatch.setattr(trainer, "per_sample_gradients", forbidden)
    res = train_dpsgd(fast, nn.CrossEntropyLoss(), X, y, **kw)
    for p, q in zip(fast.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-14)
    assert res.clipped_fraction == ref.clipped_fraction > 0
    np.testing.assert_allclose(res.epoch_losses, ref.epoch_losses, rtol=1e-12)


def test_parameter_tied_across_layers_is_exact_on_both_paths():
    """A weight shared by two distinct Linear modules: fallback path, gradient sums both uses."""
    torch.manual_seed(6)
    first, second = nn.Linear(4, 4).double(), nn.Linear(4, 4).double()
    second.weight = first.weight
    model = nn.Sequential(first, nn.Tanh(), second, nn.Tanh(), nn.Linear(4, 3).double())
    assert linear_layers(model) is None
    rng = np.random.default_rng(7)
    X = torch.as_tensor(rng.normal(size=(6, 4)))
    y = torch.as_tensor(rng.integers(0, 3, size=6))
    grads, k, _ = trainer._private_step(model, nn.CrossEntropyLoss(), X, y, None, C=0.2,
                                        sigma=0.0, expected=1.0, generator=None)
    slow, k_slow = _naive_clipped_sum(model, nn.CrossEntropyLoss(), X, y, 0.2)
    assert k == k_slow and list(grads) == list(slow)
    for key in slow:
        torch.testing.assert_close(grads[key], slow[key], rtol=1e-12, atol=1e-14)
    assert isinstance(first.weight, nn.Parameter) and second.weight is first.weight


def test_torch_func_path_keeps_a_reused_module_a_parameter():
    """Regression: functional_call's weight tying left a module used twice with a plain tensor."""
    shared = nn.Linear(4, 4).double()
    model = nn.Sequential(shared, nn.Tanh(), shared)
    trainer.per_sample_gradients(model, nn.MSELoss(), torch.zeros(3, 4, dtype=torch.float64),
                                 torch.zeros(3, 4, dtype=torch.float64))
    assert isinstance(shared.weight, nn.Parameter) and isinstance(shared.bias, nn.Parameter)
    assert [k for k, _ in model.named_parameters()] == ["0.weight", "0.bias"]


_ACTIVATIONS = [nn.ReLU, nn.Tanh, nn.Sigmoid, nn.GELU, nn.SiLU, nn.Identity, nn.ELU]


@given(
    widths=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    acts=st.lists(st.integers(0, len(_ACTIVATIONS) - 1), min_size=3, max_size=3),
    b=st.integers(1, 9),
    log_c=st.floats(-3, 2),
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=15, deadline=None)
def test_random_mlps_match_the_loop(widths, acts, b, log_c, bias, seed):
    """Property: any Linear/activation stack gives the loop's clipped sum and clip count."""
    torch.manual_seed(seed)
    dims = [3, *widths, 2]
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1], bias=bias or i == 0))
        if i < len(dims) - 2:
            layers.append(_ACTIVATIONS[acts[i]]())
    model = nn.Sequential(*layers).double()
    X = torch.randn(b, 3, dtype=torch.float64) * 2
    y = torch.randint(0, 2, (b,))
    C = 10.0**log_c
    fast, k_fast = _fast_clipped_sum(model, nn.CrossEntropyLoss(), X, y, C)
    slow, k_slow = _naive_clipped_sum(model, nn.CrossEntropyLoss(), X, y, C)
    assert k_fast == k_slow
    for key in slow:
        torch.testing.assert_close(fast[key], slow[key], rtol=1e-10, atol=1e-12)
