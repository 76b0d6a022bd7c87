"""The DP-SGD trainer refuses, before training, what it cannot do right (issue 25, item 6).

Each kind of fault is tried with several siblings (other activations, modules, dtypes).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from pacpriv.dpsgd.trainer import privatize_gradients, train_dpsgd  # noqa: E402
from pacpriv.dpsgd.validate import probe_model  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _data(n=12, d=4, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)).astype(dtype), rng.integers(0, 2, size=n)


def _train(model, **kw):
    X, y = _data(dtype=kw.pop("np_dtype", np.float64))
    args = dict(noise_multiplier=1.0, steps_per_epoch=3, epochs=1, max_grad_norm=1.0, rng=0)
    args.update(kw)
    return train_dpsgd(model, nn.CrossEntropyLoss(), X, y, **args)


def _params(model):
    return [p.detach().clone() for p in model.parameters()]


def _unchanged(model, before):
    return all(torch.equal(a, b) for a, b in zip(before, _params(model), strict=True))


# --- in-place activations on the single-backward (ghost clipping) path ---------------------


@pytest.mark.parametrize("act", [
    nn.ReLU(inplace=True), nn.LeakyReLU(0.1, inplace=True), nn.Hardtanh(inplace=True),
    nn.ELU(inplace=True), nn.ReLU6(inplace=True), nn.Dropout(0.1, inplace=True),
    nn.SELU(inplace=True), nn.Threshold(0.1, 0.0, inplace=True),
])
def test_inplace_activation_on_the_linear_path_is_refused(act):
    """Sequential(Linear, <act>(inplace=True), Linear): refused, naming the module and the fix
    (the first layer's gradient came out 94% off before)."""
    model = nn.Sequential(nn.Linear(4, 6), act, nn.Linear(6, 2)).double()
    before = _params(model)
    with pytest.raises(ValueError, match=r"1 \(" + type(act).__name__ + r"\).*inplace=False"):
        _train(model)
    assert _unchanged(model, before)


def test_inplace_modules_off_the_linear_path_train_correctly():
    """Off the single-backward path (torch.func), in-place activations give the autograd
    per-example gradients: accepted, and the result equals the out-of-place model's."""
    def net(inplace):
        torch.manual_seed(3)
        return nn.Sequential(nn.Conv1d(1, 2, 3), nn.ReLU(inplace=inplace), nn.Flatten(),
                             nn.Linear(8, 2)).double()
    X, y = _data(n=10, d=6)
    X = X[:, None, :]
    kw = dict(noise_multiplier=0.5, steps_per_epoch=2, epochs=2, max_grad_norm=0.7, rng=4)
    a, b = net(True), net(False)
    train_dpsgd(a, nn.CrossEntropyLoss(), X, y, **kw)
    train_dpsgd(b, nn.CrossEntropyLoss(), X, y, **kw)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-14)


class _AddInPlace(nn.Module):
    def forward(self, x):
        x.add_(1.0)  # overwrites the previous module's output
        return x


def test_probe_finds_outputs_overwritten_by_any_inplace_op():
    """Generic detection (not by module type): a custom in-place op after a Linear."""
    model = nn.Sequential(nn.Linear(4, 3), _AddInPlace(), nn.Linear(3, 2)).double()
    report = probe_model(model, torch.zeros(2, 4, dtype=torch.float64))
    assert [p.name for p in report.overwritten] == ["0"]
    assert report.state == []
    clean = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2)).double()
    assert probe_model(clean, torch.zeros(2, 4, dtype=torch.float64)).overwritten == []


# --- modules that change buffers or parameters in forward ----------------------------------


class _RunningMean(nn.Module):
    """A hand-written running-mean layer (in-place buffer update)."""

    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, 2)
        self.register_buffer("mean", torch.zeros(d))

    def forward(self, x):
        with torch.no_grad():
            self.mean.mul_(0.9).add_(0.1 * x.mean(0))
        return self.lin(x - self.mean)


class _Rebind(nn.Module):
    """A counter buffer re-bound (not in place) in forward."""

    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, 2)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count = self.count + x.shape[0]
        return self.lin(x)


class _ClampWeight(nn.Module):
    """A parameter rewritten in forward (a max-norm constraint done by hand)."""

    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, 2)

    def forward(self, x):
        with torch.no_grad():
            self.lin.weight.clamp_(-0.5, 0.5)
        return self.lin(x)


@pytest.mark.parametrize(("module", "name"), [
    (_RunningMean(4), "mean"), (_Rebind(4), "count"), (_ClampWeight(4), "lin.weight"),
])
def test_forward_that_changes_state_is_refused(module, name):
    """Buffer or parameter changes in forward, in place or by re-binding: refused before
    training (one step used to leave a batched tensor with un-noised rows in the model)."""
    model = module.double()
    before = _params(model)
    buffers = [b.clone() for b in model.buffers()]
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        _train(model)
    assert _unchanged(model, before)
    assert all(torch.equal(a, b) for a, b in zip(buffers, model.buffers(), strict=True))


class _Tokens(nn.Module):
    def __init__(self, emb):
        super().__init__()
        self.emb = emb
        self.out = nn.Linear(3, 2)

    def forward(self, x):
        e = self.emb(x[:, :2].long().abs() % 5)
        return self.out(e if e.ndim == 2 else e.mean(1))


@pytest.mark.parametrize("emb", [nn.Embedding(5, 3, max_norm=1.0),
                                 nn.EmbeddingBag(5, 3, max_norm=0.5, mode="mean")])
def test_embedding_max_norm_is_refused_with_its_name(emb):
    model = _Tokens(emb).double()
    with pytest.raises(ValueError, match=r"emb \(Embedding(Bag)?\).*max_norm=None"):
        _train(model)


def test_embedding_without_max_norm_trains():
    model = _Tokens(nn.Embedding(5, 3)).double()
    result = _train(model)
    assert result.n_steps == 3


# --- noise scale overflow, non-finite updates ----------------------------------------------


@pytest.mark.parametrize(("dtype", "np_dtype", "kw"), [
    (torch.float64, np.float64, {"max_grad_norm": 1e300}),
    (torch.float32, np.float32, {"max_grad_norm": 1e37}),
    (torch.float64, np.float64, {"noise_multiplier": 1e300}),
])
def test_noise_that_overflows_the_dtype_is_refused(dtype, np_dtype, kw):
    """max_grad_norm=1e300 used to return a model of NaNs: refused before any step."""
    model = nn.Sequential(nn.Linear(4, 2)).to(dtype)
    before = _params(model)
    with pytest.raises(ValueError, match="overflows"):
        _train(model, np_dtype=np_dtype, **kw)
    assert _unchanged(model, before)


class _NaNLoss(nn.Module):
    def forward(self, out, target):
        return (out.sum() * torch.tensor(float("nan"), dtype=out.dtype))


@pytest.mark.parametrize("layers", [[nn.Linear(4, 2)], [nn.Linear(4, 3), nn.Tanh(),
                                                       nn.Linear(3, 2)]])
def test_non_finite_update_is_never_applied(layers):
    model = nn.Sequential(*layers).double()
    before = _params(model)
    X, y = _data()
    with pytest.raises(FloatingPointError, match="step 0"):
        train_dpsgd(model, _NaNLoss(), X, y, noise_multiplier=1.0, steps_per_epoch=2,
                    epochs=1, max_grad_norm=1.0, rng=0)
    assert _unchanged(model, before)


# --- floating-point noise ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_refused_unless_opted_in(dtype):
    model = nn.Sequential(nn.Linear(4, 2)).to(dtype)
    with pytest.raises(ValueError, match="allow_low_precision"):
        _train(model, np_dtype=np.float32)
    result = _train(model, np_dtype=np.float32, allow_low_precision=True)
    assert str(dtype).removeprefix("torch.") in result.arithmetic
    assert all(p.dtype == dtype and bool(torch.isfinite(p).all()) for p in model.parameters())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_noise_is_generated_and_added_in_float64(dtype):
    """The noisy average equals (sum + float64 noise)/(n/M) rounded once to the dtype: the
    float64 draws of the same generator, not draws in the parameter dtype."""
    total = torch.full((1000,), 2.0**-25, dtype=dtype)
    per_sample = {"w": total[None, :]}
    out, _ = privatize_gradients(per_sample, max_grad_norm=1.0, noise_multiplier=0.3,
                                 expected_batch_size=1.0,
                                 generator=torch.Generator().manual_seed(5))
    noise = torch.normal(0.0, 0.3, size=(1000,), generator=torch.Generator().manual_seed(5),
                         dtype=torch.float64)
    clipped = total.to(torch.float64) * min(1.0, 1.0 / (float(total.double().norm()) + 1e-6))
    assert out["w"].dtype == dtype
    torch.testing.assert_close(out["w"], (clipped + noise).to(dtype), rtol=0, atol=0)


def test_result_states_the_arithmetic():
    result = _train(nn.Sequential(nn.Linear(4, 2)).float(), np_dtype=np.float32)
    assert result.arithmetic.startswith("gradients in float32")
    assert "float64" in result.arithmetic and "Mironov" in result.arithmetic


# --- map-style datasets --------------------------------------------------------------------


class _Pairs(torch.utils.data.Dataset):
    def __init__(self, X, y):
        self.X, self.y = torch.as_tensor(X), torch.as_tensor(y)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.X[i], self.y[i]


def _net():
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2)).double()


@pytest.mark.parametrize("make", [
    lambda X, y: torch.utils.data.TensorDataset(torch.as_tensor(X), torch.as_tensor(y)),
    _Pairs,
])
def test_map_style_dataset_equals_arrays(make):
    """Same rng: a Dataset gives the same allocation, noise and model as the arrays."""
    X, y = _data(n=15)
    kw = dict(noise_multiplier=0.8, steps_per_epoch=4, epochs=2, max_grad_norm=0.5, rng=11)
    a, b = _net(), _net()
    ra = train_dpsgd(a, nn.CrossEntropyLoss(), X, y, **kw)
    rb = train_dpsgd(b, nn.CrossEntropyLoss(), make(X, y), **kw)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    assert ra.n_records == rb.n_records == 15 and ra.epoch_losses == rb.epoch_losses


def test_dataset_argument_errors():
    X, y = _data()
    ds = _Pairs(X, y)
    with pytest.raises(TypeError, match="inside the Dataset"):
        train_dpsgd(_net(), nn.CrossEntropyLoss(), ds, y, noise_multiplier=1.0,
                    steps_per_epoch=2, epochs=1, max_grad_norm=1.0)
    with pytest.raises(TypeError, match="`y` is required"):
        train_dpsgd(_net(), nn.CrossEntropyLoss(), X, noise_multiplier=1.0,
                    steps_per_epoch=2, epochs=1, max_grad_norm=1.0)
