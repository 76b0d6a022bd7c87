"""The single-backward path for convolutional models equals per-sample clipping by torch.func.

Reference: ``per_sample_gradients`` (``vmap`` of ``grad``, one example at a time, no hooks, no
channels-last pooling), clipped and summed in float64 here; and the per-example backward loop.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pacpriv.dpsgd.trainer as trainer  # noqa: E402
from pacpriv.dpsgd._ghost import LinearTape, linear_layers  # noqa: E402
from pacpriv.dpsgd._layer_clip import patches  # noqa: E402
from pacpriv.dpsgd.trainer import train_dpsgd  # noqa: E402

nn = torch.nn
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _mnist_cnn(side: int = 12):
    """opacus' MNIST example CNN, scaled to ``side`` × ``side`` inputs."""
    inner = ((side // 2 - 1) - 4) // 2 + 1 - 1
    return nn.Sequential(
        nn.Conv2d(1, 16, 8, 2, padding=3), nn.ReLU(), nn.MaxPool2d(2, 1),
        nn.Conv2d(16, 32, 4, 2), nn.ReLU(), nn.MaxPool2d(2, 1), nn.Flatten(),
        nn.Linear(32 * inner * inner, 32), nn.ReLU(), nn.Linear(32, 10))


def _models():
    torch.manual_seed(0)
    frozen = nn.Sequential(nn.Conv2d(2, 3, 3, bias=False), nn.Tanh(), nn.AvgPool2d(2),
                           nn.Flatten(), nn.Linear(12, 4))
    frozen[0].weight.requires_grad_(False)
    return {  # name -> (model, input shape, classes)
        "mnist-cnn": (_mnist_cnn(16), (1, 16, 16), 10),
        "dilated-strided": (nn.Sequential(
            nn.Conv2d(3, 4, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2)), nn.GELU(),
            nn.MaxPool2d(2), nn.Conv2d(4, 5, 2), nn.SiLU(), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(), nn.Linear(5, 3)), (3, 9, 8), 3),
        "conv1d": (nn.Sequential(
            nn.Conv1d(2, 4, 3, stride=2, padding=1), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(4, 3, 2, bias=False), nn.Flatten(), nn.Linear(6, 3)), (2, 12), 3),
        "frozen-conv": (frozen, (2, 6, 6), 4),
        "mlp": (nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 5)), (20,), 5),
    }


def _vmap_clipped_sum(model, X, y, C):
    """Σ_i clip_C(∇ℓ_i) from torch.func's per-sample gradients; also the number clipped."""
    per, _ = trainer.per_sample_gradients(model, nn.CrossEntropyLoss(), X, y)
    flat = torch.cat([g.reshape(X.shape[0], -1).double() for g in per.values()], 1)
    norms = torch.linalg.vector_norm(flat, dim=1)
    f = (C / (norms + 1e-6)).clamp(max=1.0)
    sums = {k: torch.einsum("i,i...->...", f, g.double()) for k, g in per.items()}
    return sums, int((norms > C).sum()), norms


def _tape_clipped_sum(model, X, y, C):
    layers = linear_layers(model)
    assert layers is not None, "the model should take the single-backward path"
    with LinearTape(layers, model) as tape:
        found = trainer._linear_step(model, nn.CrossEntropyLoss(), X, y, tape, C)
    assert found is not None
    return found[0], found[1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["mnist-cnn", "dilated-strided", "conv1d", "frozen-conv",
                                  "mlp"])
def test_clipped_sums_equal_torch_func(name, dtype):
    """Clip norms drawn at random below, inside and above the per-example norms: sums and
    clip counts equal torch.func's (1e-5 relative in float32, 1e-11 in float64)."""
    model, shape, k = _models()[name]
    model = model.to(dtype)
    rng = np.random.default_rng(len(name))
    b = 13
    X = torch.as_tensor(rng.normal(size=(b, *shape)) * 2, dtype=dtype)
    y = torch.as_tensor(rng.integers(0, k, size=b))
    _, _, norms = _vmap_clipped_sum(model, X, y, 1.0)
    lo, hi = float(norms.min()), float(norms.max())
    clip_norms = [lo * rng.uniform(0.01, 0.9), rng.uniform(lo, hi), hi * rng.uniform(1.1, 100)]
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-11,
                                                                         atol=1e-13)
    for C in clip_norms:
        want, k_want, _ = _vmap_clipped_sum(model, X, y, C)
        got, k_got = _tape_clipped_sum(model, X, y, C)
        assert k_got == k_want
        assert set(got) == set(want)
        for key, value in want.items():
            assert got[key].dtype == torch.float64
            scale = float(value.abs().max())
            torch.testing.assert_close(got[key] / scale, value / scale, **tol)
    assert _tape_clipped_sum(model, X, y, clip_norms[0])[1] == b  # every example clipped
    assert _tape_clipped_sum(model, X, y, clip_norms[2])[1] == 0  # none clipped


def test_patches_equal_unfold_in_both_memory_formats():
    """Strided-window patches equal F.unfold's columns, NCHW and channels-last (k₁, k₂, in)."""
    conv = nn.Conv2d(3, 2, (3, 2), stride=(2, 1), padding=(1, 1)).double()
    a = torch.randn(4, 3, 7, 6, dtype=torch.float64)
    cols = torch.nn.functional.unfold(a, (3, 2), padding=(1, 1), stride=(2, 1)).transpose(1, 2)
    u, hwc = patches(conv, a)
    assert not hwc and torch.equal(u, cols)
    u, hwc = patches(conv, a.contiguous(memory_format=torch.channels_last))
    assert hwc
    want = cols.reshape(4, -1, 3, 3, 2).permute(0, 1, 3, 4, 2).reshape(4, -1, 18)
    assert torch.equal(u, want)


def test_channels_last_pooling_keeps_ties_and_gradients():
    """Integer inputs and weights make many tied maxima: the tape path (channels-last max
    pooling) still equals the per-example backward loop without it, bit for bit in float64."""
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(2, 3, 2), nn.MaxPool2d(2, 1), nn.Flatten(),
                          nn.Linear(3 * 4 * 4, 3)).double()
    with torch.no_grad():
        model[0].weight.copy_(torch.randint(-1, 2, model[0].weight.shape))
        model[0].bias.zero_()
    X = torch.randint(0, 2, (6, 2, 6, 6)).double()
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    ties = torch.nn.functional.unfold(model[0](X), 2, stride=1).reshape(6, 3, 4, -1)
    assert bool((ties.max(2).values == ties.sort(2).values[:, :, -2]).any())  # ties exist
    got, k_got = _tape_clipped_sum(model, X, y, 0.5)
    want, k_want, _ = _vmap_clipped_sum(model, X, y, 0.5)
    assert k_got == k_want
    for key, value in want.items():
        torch.testing.assert_close(got[key], value, rtol=1e-12, atol=1e-13)


class _Scale(nn.Module):
    def forward(self, x):
        return 2.0 * x


@pytest.mark.parametrize("build", [
    lambda: nn.Conv2d(2, 2, 3, groups=2),
    lambda: nn.Conv2d(2, 3, 3, padding="same"),
    lambda: nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"),
    lambda: nn.ConvTranspose2d(2, 3, 3),
    lambda: nn.Sequential(nn.Conv2d(2, 3, 3), _Scale()),
    lambda: nn.Conv3d(2, 3, 1),
], ids=["groups", "same", "reflect", "transposed", "custom-module", "conv3d"])
def test_unsupported_layers_fall_back_to_torch_func(build):
    """Grouped, 'same'-padded, reflect-padded, transposed and 3-D convolutions and custom
    modules take the torch.func path, which clips exactly."""
    torch.manual_seed(2)
    layer = build()
    model = nn.Sequential(layer, nn.Flatten(), nn.LazyLinear(3)).double()
    shape = (4, 2, 5, 5, 1) if isinstance(layer, nn.Conv3d) else (4, 2, 5, 5)
    X = torch.randn(*shape, dtype=torch.float64)
    model(X)  # materialise the lazy layer
    assert linear_layers(model) is None
    y = torch.tensor([0, 1, 2, 0])
    grads, k, _ = trainer._private_step(model, nn.CrossEntropyLoss(), X, y, None, C=0.3,
                                        sigma=0.0, expected=1.0, generator=None)
    want, k_want, _ = _vmap_clipped_sum(model, X, y, 0.3)
    assert k == k_want > 0
    for key, value in want.items():
        torch.testing.assert_close(grads[key], value.to(grads[key].dtype), rtol=1e-12,
                                   atol=1e-13)


def test_pooling_with_indices_and_inplace_activations_take_torch_func():
    """A MaxPool2d returning indices is not a per-example module the tape knows; an in-place
    activation would overwrite a convolution output the tape reads (torch.func handles it,
    tests/dpsgd/test_trainer_refusals.py checks that it trains exactly)."""
    model = nn.Sequential(nn.Conv2d(1, 1, 1), nn.MaxPool2d(2, return_indices=True))
    assert linear_layers(model) is None
    for act in (nn.ReLU(inplace=True), nn.Dropout(0.1, inplace=True)):
        model = nn.Sequential(nn.Conv2d(1, 2, 3), act, nn.Flatten(), nn.Linear(8, 2))
        assert linear_layers(model) is None
        act.inplace = False
        assert linear_layers(model) is not None


def test_unbatched_convolution_input_disables_the_tape():
    """A Conv1d given a 2-D (unbatched) input mixes the rows as channels: the tape declines
    (None) and removes its hooks, so later steps use torch.func."""
    model = nn.Sequential(nn.Conv1d(4, 2, 3), nn.Linear(4, 3)).double()
    X = torch.randn(4, 6, dtype=torch.float64)
    with LinearTape(linear_layers(model), model) as tape:
        out = model(X)
        assert tape.clipped_sums(out.sum(), max_grad_norm=1.0, eps=1e-6) is None
        assert tape.disabled and not tape.handles


def test_trainer_uses_single_backward_for_the_cnn(monkeypatch):
    """train_dpsgd on the MNIST CNN never calls torch.func, equals the torch.func path
    (same seed: same allocation and noise) and is reproducible bit for bit."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(48, 1, 16, 16))
    y = rng.integers(0, 10, size=48)

    def build():
        torch.manual_seed(3)
        return _mnist_cnn(16).double()

    kw = dict(noise_multiplier=0.7, steps_per_epoch=4, epochs=2, max_grad_norm=0.05, rng=11)
    reference = build()
    with monkeypatch.context() as m:
        m.setattr(trainer, "linear_layers", lambda model: None)  # force torch.func
        ref = train_dpsgd(reference, nn.CrossEntropyLoss(), X, y, **kw)

    def forbidden(*a, **k):
        raise AssertionError("torch.func path used")

    monkeypatch.setattr(trainer, "per_sample_gradients", forbidden)
    fast, again = build(), build()
    res = train_dpsgd(fast, nn.CrossEntropyLoss(), X, y, **kw)
    train_dpsgd(again, nn.CrossEntropyLoss(), X, y, **kw)
    for p, q, r in zip(fast.parameters(), reference.parameters(), again.parameters(),
                       strict=True):
        torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)
        assert torch.equal(p, r)
    assert res.clipped_fraction == ref.clipped_fraction > 0
    np.testing.assert_allclose(res.epoch_losses, ref.epoch_losses, rtol=1e-10)


@pytest.mark.parametrize("budget", [1, 3000, 7 * 16 * 64 + 100])
def test_large_layers_use_gram_norms_or_chunks_exactly(monkeypatch, budget):
    """Per-example gradients too large to form at once: the Gram ("ghost") norm where it is
    cheaper (the CNN's second convolution, T = 4) and chunks of examples otherwise (the first,
    T = 64); clipped sums by one contraction. The budget is shared by the layers of a step
    (the last case forms the first convolution's and not the second's). Equal to
    torch.func's at binding clip norms."""
    from pacpriv.dpsgd import _layer_clip

    monkeypatch.setattr(_layer_clip, "MATERIALISE_ELEMENTS", budget)
    model, shape, k = _models()["mnist-cnn"]
    model = model.double()
    rng = np.random.default_rng(9)
    X = torch.as_tensor(rng.normal(size=(7, *shape)))
    y = torch.as_tensor(rng.integers(0, k, size=7))
    for C in (1e-3, 0.05):
        want, k_want, _ = _vmap_clipped_sum(model, X, y, C)
        got, k_got = _tape_clipped_sum(model, X, y, C)
        assert k_got == k_want > 0
        for key, value in want.items():
            torch.testing.assert_close(got[key], value, rtol=1e-11, atol=1e-13)
