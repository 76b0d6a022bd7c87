"""Tests for pacpriv.dpsgd.trainer: per-sample gradients, clipping, noise, the DP-SGD loop."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")

from pacpriv.dpsgd.allocation import random_allocation, torch_generators  # noqa: E402
from pacpriv.dpsgd.trainer import (  # noqa: E402
    TrainingResult,
    model_losses,
    per_sample_gradients,
    privatize_gradients,
    train_dpsgd,
)
from pacpriv.exceptions import SparseBatchWarning  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _mlp(d=5, h=7, k=3, seed=0, dtype=torch.float64):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.nn.Sequential(
            torch.nn.Linear(d, h), torch.nn.Tanh(), torch.nn.Linear(h, k)
        ).to(dtype)


def _data(n=23, d=5, k=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.integers(0, k, size=n)


def _naive_per_sample(model, loss_fn, X, y):
    """One backward pass per example (the oracle)."""
    out = []
    for i in range(X.shape[0]):
        model.zero_grad()
        loss_fn(model(X[i : i + 1]), y[i : i + 1]).backward()
        out.append({k: p.grad.clone() for k, p in model.named_parameters()})
    model.zero_grad()
    return out


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_per_sample_gradients_match_naive_loop(reduction):
    """vmap/grad per-sample gradients equal a per-example backward loop, for any reduction."""
    model = _mlp()
    X, y = _data()
    X, y = torch.as_tensor(X), torch.as_tensor(y)
    loss_fn = torch.nn.CrossEntropyLoss(reduction=reduction)
    grads, losses = per_sample_gradients(model, loss_fn, X, y)
    naive = _naive_per_sample(model, torch.nn.CrossEntropyLoss(), X, y)
    for name, g in grads.items():
        assert g.shape == (X.shape[0], *dict(model.named_parameters())[name].shape)
        expected = torch.stack([row[name] for row in naive])
        torch.testing.assert_close(g, expected, rtol=1e-10, atol=1e-12)
    ref = torch.nn.functional.cross_entropy(model(X), y, reduction="none")
    torch.testing.assert_close(losses, ref.detach())


def test_per_sample_gradients_empty_batch():
    """An empty batch gives (0, *shape) gradients and no losses."""
    model = _mlp()
    grads, losses = per_sample_gradients(
        model, torch.nn.CrossEntropyLoss(), torch.zeros(0, 5, dtype=torch.float64),
        torch.zeros(0, dtype=torch.int64)
    )
    assert losses.shape == (0,)
    assert all(g.shape[0] == 0 for g in grads.values())


def test_clipping_bounds_each_norm_and_sums():
    """Clipped per-sample norms are min(norm, C); the sum is divided by the expected size."""
    rng = np.random.default_rng(0)
    scales = np.array([0.1, 0.5, 2.0, 10.0, 100.0])
    a = torch.as_tensor(rng.normal(size=(5, 3, 4)))
    b = torch.as_tensor(rng.normal(size=(5, 6)))
    norms = torch.sqrt(a.flatten(1).pow(2).sum(1) + b.pow(2).sum(1))
    factor = torch.as_tensor(scales) / norms
    per_sample = {"a": a * factor[:, None, None], "b": b * factor[:, None]}
    C = 1.0
    out, n_clipped = privatize_gradients(
        per_sample, max_grad_norm=C, noise_multiplier=0.0, expected_batch_size=2.5,
        generator=None,
    )
    assert n_clipped == 3
    clipped = np.minimum(scales, C)  # norm of each example after clipping (up to the 1e-6 eps)
    kept = torch.as_tensor(clipped / scales) * factor
    expected_a = (a * kept[:, None, None]).sum(0) / 2.5
    torch.testing.assert_close(out["a"], expected_a, rtol=1e-5, atol=0)
    torch.testing.assert_close(out["b"], (b * kept[:, None]).sum(0) / 2.5, rtol=1e-5, atol=0)
    # Each clipped example contributes a norm strictly at most C.
    single, _ = privatize_gradients(
        {"a": per_sample["a"][4:], "b": per_sample["b"][4:]}, max_grad_norm=C,
        noise_multiplier=0.0, expected_batch_size=1.0, generator=None,
    )
    total = torch.sqrt(single["a"].pow(2).sum() + single["b"].pow(2).sum())
    assert float(total) <= C
    assert float(total) == pytest.approx(C, rel=1e-6)


def test_noise_scale_is_sigma_c_over_expected_batch():
    """Noise on an empty step has std σ·C/(n/M) per coordinate (chi-square interval on variance)."""
    sigma, C, expected = 1.7, 0.3, 4.0
    size = 200_000
    per_sample = {"w": torch.zeros(0, size, dtype=torch.float64)}
    out, _ = privatize_gradients(
        per_sample, max_grad_norm=C, noise_multiplier=sigma, expected_batch_size=expected,
        generator=torch.Generator().manual_seed(0),
    )
    x = out["w"].numpy()
    target_var = (sigma * C / expected) ** 2
    stat = (size - 1) * x.var(ddof=1) / target_var
    chi2 = stats.chi2(size - 1)
    assert chi2.ppf(1e-4) < stat < chi2.ppf(1 - 1e-4)
    assert abs(x.mean()) < 5 * np.sqrt(target_var / size)
    assert stats.normaltest(x).pvalue > 1e-4


def _naive_dpsgd(model, X, y, *, sigma, C, M, E, lr, rng):
    """Reference DP-SGD: per-example backward loop, explicit clipping, same generators."""
    alloc, noise = torch_generators(rng)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = X.shape[0]
    for _ in range(E):
        for idx in random_allocation(n, steps_per_epoch=M, generator=alloc):
            total = {k: torch.zeros_like(p) for k, p in model.named_parameters()}
            for row in _naive_per_sample(model, loss_fn, X[idx], y[idx]):
                norm = torch.sqrt(sum(g.pow(2).sum() for g in row.values()))
                f = min(1.0, C / (float(norm) + 1e-6))
                for k in total:
                    total[k] += f * row[k]
            with torch.no_grad():
                for k, p in model.named_parameters():
                    z = torch.normal(0.0, sigma * C, size=p.shape, generator=noise,
                                     dtype=p.dtype)
                    p -= lr * (total[k] + z) / (n / M)


def test_trainer_matches_naive_dpsgd():
    """train_dpsgd equals a naive loop (clip, sum, N(0,σ²C²), divide by n/M) step for step."""
    X, y = _data(n=17)
    X, y = torch.as_tensor(X), torch.as_tensor(y)
    fast, slow = _mlp(seed=1), _mlp(seed=1)
    res = train_dpsgd(
        fast, torch.nn.CrossEntropyLoss(), X, y, noise_multiplier=0.8, steps_per_epoch=4,
        epochs=3, max_grad_norm=0.5, optimizer=lambda p: torch.optim.SGD(p, lr=0.3), rng=42,
    )
    _naive_dpsgd(slow, X, y, sigma=0.8, C=0.5, M=4, E=3, lr=0.3, rng=42)
    for (_, a), (_, b) in zip(fast.named_parameters(), slow.named_parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)
    assert res.n_steps == 12
    assert res.expected_batch_size == pytest.approx(17 / 4)
    assert 0.0 <= res.clipped_fraction <= 1.0


def test_non_private_path_equals_unclipped_dp_path():
    """max_grad_norm=None (batched autograd) equals per-sample path with C=∞, σ=0."""
    X, y = _data(n=40)
    a, b = _mlp(seed=2), _mlp(seed=2)
    kw = dict(noise_multiplier=0.0, steps_per_epoch=3, epochs=4, rng=7)
    ra = train_dpsgd(a, torch.nn.CrossEntropyLoss(), X, y, max_grad_norm=None, **kw)
    rb = train_dpsgd(b, torch.nn.CrossEntropyLoss(), X, y, max_grad_norm=1e12, **kw)
    for (_, p), (_, q) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-9, atol=1e-12)
    assert ra.clipped_fraction is None
    assert rb.clipped_fraction == 0.0
    np.testing.assert_allclose(ra.epoch_losses, rb.epoch_losses, rtol=1e-10)


def test_empty_steps_still_take_noisy_steps():
    """With M > n, empty steps are counted and still move the parameters (noise only)."""
    X, y = _data(n=3)
    model = _mlp(seed=3)
    before = [p.detach().clone() for p in model.parameters()]
    # (1 - 1/20)**3 = 0.857 of the steps are empty in expectation: warned, in words
    with pytest.warns(SparseBatchWarning, match=r"batch is 0\.15 record\(s\) and about 86%"):
        res = train_dpsgd(
            model, torch.nn.CrossEntropyLoss(), X, y, noise_multiplier=1.0, steps_per_epoch=20,
            epochs=1, max_grad_norm=1.0, rng=0,
        )
    assert res.n_empty_steps >= 17
    assert res.min_batch_size == 0
    assert all(not torch.equal(p, q) for p, q in zip(before, model.parameters(), strict=True))


def test_reproducible_and_seed_sensitive():
    """Same rng gives identical models; a different rng gives different ones."""
    X, y = _data()
    models = [_mlp(seed=0) for _ in range(3)]
    for m, seed in zip(models, [5, 5, 6], strict=True):
        train_dpsgd(m, torch.nn.CrossEntropyLoss(), X, y, noise_multiplier=1.0,
                    steps_per_epoch=4, epochs=2, max_grad_norm=1.0, rng=seed)
    w = [m[0].weight.detach() for m in models]
    assert torch.equal(w[0], w[1])
    assert not torch.equal(w[0], w[2])


def test_secure_noise_not_reproducible_and_global_rng_untouched():
    """secure_noise=True gives different noise under the same rng; global torch RNG untouched."""
    X, y = _data()
    state = torch.random.get_rng_state()
    models = [_mlp(seed=0) for _ in range(2)]
    for m in models:
        res = train_dpsgd(m, torch.nn.CrossEntropyLoss(), X, y, noise_multiplier=1.0,
                          steps_per_epoch=4, epochs=1, max_grad_norm=1.0, rng=5,
                          secure_noise=True)
    assert res.secure_noise
    assert not torch.equal(models[0][0].weight, models[1][0].weight)
    assert torch.equal(state, torch.random.get_rng_state())


def test_learns_breast_cancer_with_noise():
    """DP logistic regression (σ=1, C=1) on standardized breast_cancer beats 90% accuracy."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    model = _mlp(d=30, k=2, seed=0, dtype=torch.float32)
    res = train_dpsgd(model, torch.nn.CrossEntropyLoss(), X, y, noise_multiplier=1.0,
                      steps_per_epoch=10, epochs=10, max_grad_norm=1.0, rng=0,
                      optimizer=lambda p: torch.optim.SGD(p, lr=0.5))
    with torch.no_grad():
        acc = (model(torch.as_tensor(X, dtype=torch.float32)).argmax(1).numpy() == y).mean()
    assert acc > 0.9
    assert res.epoch_losses[-1] < res.epoch_losses[0]


def test_optimizer_instance_and_result_dict():
    """An optimizer instance is used as given; to_dict() is JSON-serialisable."""
    X, y = _data()
    model = _mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    res = train_dpsgd(model, torch.nn.CrossEntropyLoss(), X, y, noise_multiplier=0.5,
                      steps_per_epoch=2, epochs=2, max_grad_norm=1.0, optimizer=opt, rng=0)
    assert opt.state  # Adam has taken steps
    assert isinstance(res, TrainingResult)
    d = json.loads(json.dumps(res.to_dict()))
    assert d["n_records"] == 23 and d["n_steps"] == 4 and len(d["epoch_losses"]) == 2


def test_model_losses_match_naive_and_do_not_depend_on_chunking():
    """model_losses equals per-example cross-entropy; the chunk size is irrelevant."""
    X, y = _data(n=31)
    model = _mlp()
    a = model_losses(model, torch.nn.CrossEntropyLoss(), X, y)
    b = model_losses(model, torch.nn.CrossEntropyLoss(), X, y, batch_size=4)
    ref = [
        float(torch.nn.functional.cross_entropy(model(torch.as_tensor(X[i : i + 1])),
                                                torch.as_tensor(y[i : i + 1])).detach())
        for i in range(31)
    ]
    assert a.dtype == np.float64 and a.shape == (31,)
    np.testing.assert_allclose(a, ref, rtol=1e-12)
    np.testing.assert_allclose(a, b, rtol=1e-12)
    assert model.training  # mode restored


_GOOD = dict(noise_multiplier=1.0, steps_per_epoch=2, epochs=1, max_grad_norm=1.0)


@pytest.mark.parametrize(
    ("override", "exc", "match"),
    [
        (dict(noise_multiplier=-0.1), ValueError, "noise_multiplier"),
        (dict(steps_per_epoch=0), ValueError, "steps_per_epoch"),
        (dict(epochs=0), ValueError, "epochs"),
        (dict(max_grad_norm=0.0), ValueError, "max_grad_norm"),
        (dict(max_grad_norm=None), ValueError, "max_grad_norm` must be a positive number"),
        (dict(optimizer="sgd"), TypeError, "optimizer"),
        (dict(noise_multiplier="1"), TypeError, "noise_multiplier"),
    ],
)
def test_error_messages_for_scalars(override, exc, match):
    """Each invalid keyword raises with a message naming it."""
    X, y = _data()
    with pytest.raises(exc, match=match):
        train_dpsgd(_mlp(), torch.nn.CrossEntropyLoss(), X, y, **{**_GOOD, **override})


def test_error_model_type():
    """A non-Module model is a TypeError."""
    X, y = _data()
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        train_dpsgd(lambda x: x, torch.nn.CrossEntropyLoss(), X, y, **_GOOD)


def test_error_loss_not_callable():
    """A non-callable loss is a TypeError."""
    X, y = _data()
    with pytest.raises(TypeError, match="loss_fn"):
        train_dpsgd(_mlp(), "ce", X, y, **_GOOD)


def test_error_length_mismatch():
    """X and y of different lengths are rejected."""
    X, y = _data()
    with pytest.raises(ValueError, match="same number of records"):
        train_dpsgd(_mlp(), torch.nn.CrossEntropyLoss(), X, y[:-1], **_GOOD)


def test_error_empty_data():
    """Zero records are rejected."""
    with pytest.raises(ValueError, match="at least one record"):
        train_dpsgd(_mlp(), torch.nn.CrossEntropyLoss(), np.zeros((0, 5)),
                    np.zeros(0, dtype=int), **_GOOD)


def test_error_no_trainable_parameters():
    """A frozen model is rejected."""
    model = _mlp()
    for p in model.parameters():
        p.requires_grad_(False)
    X, y = _data()
    with pytest.raises(ValueError, match="trainable parameter"):
        train_dpsgd(model, torch.nn.CrossEntropyLoss(), X, y, **_GOOD)


def test_error_privatize_without_generator():
    """privatize_gradients refuses noise without a generator."""
    with pytest.raises(ValueError, match="noise generator"):
        privatize_gradients({"w": torch.zeros(1, 2)}, max_grad_norm=1.0, noise_multiplier=1.0,
                            expected_batch_size=1.0, generator=None)


class _Scaled(torch.nn.Module):
    """Linear model with an extra scalar (0-d) parameter."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 3).double()
        self.scale = torch.nn.Parameter(torch.tensor(1.5, dtype=torch.float64))

    def forward(self, x):
        return self.scale * self.lin(x)


def test_scalar_parameter_per_sample_and_clipping():
    """0-d parameters get (b,) per-sample gradients, match the loop, and clip on empty steps."""
    X, y = _data(n=6)
    X, y = torch.as_tensor(X), torch.as_tensor(y)
    model = _Scaled()
    grads, _ = per_sample_gradients(model, torch.nn.CrossEntropyLoss(), X, y)
    naive = _naive_per_sample(model, torch.nn.CrossEntropyLoss(), X, y)
    torch.testing.assert_close(grads["scale"], torch.stack([r["scale"] for r in naive]))
    empty = {k: v[:0] for k, v in grads.items()}
    out, k = privatize_gradients(empty, max_grad_norm=1.0, noise_multiplier=0.0,
                                 expected_batch_size=2.0, generator=None)
    assert k == 0 and float(out["scale"]) == 0.0 and out["scale"].shape == ()


def test_read_only_arrays_accepted_without_warning():
    """Read-only numpy inputs (frozen dataset pools) train and score without a torch warning."""
    X, y = _data()
    X.flags.writeable = False
    y.flags.writeable = False
    model = _mlp()
    train_dpsgd(model, torch.nn.CrossEntropyLoss(), X, y, **_GOOD, rng=0)
    assert model_losses(model, torch.nn.CrossEntropyLoss(), X, y).shape == (23,)


def test_non_finite_features_are_rejected():
    """NaN in X is a ValueError naming `X`, not a silently NaN model."""
    import torch

    X = np.zeros((20, 3))
    X[4, 1] = np.nan
    y = np.zeros(20, dtype=np.int64)
    with pytest.raises(ValueError, match="`X` must be finite"):
        train_dpsgd(torch.nn.Linear(3, 2), torch.nn.CrossEntropyLoss(), X, y,
                    noise_multiplier=1.0, steps_per_epoch=2, epochs=1, max_grad_norm=1.0)


def _ints(obj):
    """Every integer anywhere in a JSON-like object (dict values, lists), recursively."""
    if isinstance(obj, dict):
        return [i for v in obj.values() for i in _ints(v)]
    if isinstance(obj, (list, tuple)):
        return [i for v in obj for i in _ints(v)]
    return [obj] if isinstance(obj, int) and not isinstance(obj, bool) else []


def test_unseeded_result_records_nothing_that_regenerates_the_training(monkeypatch):
    """V1 review F14: with rng=None the OS-entropy seed is not returned (seed None, described
    "fresh OS entropy (not recorded)"), so the result cannot regenerate the allocation and
    noise; a caller-given rng is recorded, marked caller-seeded, and does regenerate them."""
    X, y = _data()
    drawn = []
    real = np.random.SeedSequence

    class Spy(real):  # records the OS entropy train_dpsgd draws for rng=None
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if not args and "entropy" not in kwargs:
                drawn.append(self.entropy)

    kw = dict(noise_multiplier=1.0, steps_per_epoch=4, epochs=2, max_grad_norm=1.0)
    m1 = _mlp(seed=0)
    with monkeypatch.context() as mp:
        mp.setattr(np.random, "SeedSequence", Spy)
        res = train_dpsgd(m1, torch.nn.CrossEntropyLoss(), X, y, **kw)
    assert len(drawn) == 1 and drawn[0] >= 2**64  # the root that drives allocation and noise
    d = json.loads(json.dumps(res.to_dict()))
    assert d["seed"] is None and res.seed is None
    assert d["randomness"] == "fresh OS entropy (not recorded)"
    assert drawn[0] not in _ints(d)  # no field holds the entropy
    # the entropy itself (known only to this spy) regenerates the model: it is the secret
    m2 = _mlp(seed=0)
    train_dpsgd(m2, torch.nn.CrossEntropyLoss(), X, y, rng=np.random.SeedSequence(drawn[0]),
                **kw)
    assert torch.equal(m1[0].weight, m2[0].weight)
    # a caller-given rng is the caller's choice: recorded, marked, and it regenerates
    m3, m4 = _mlp(seed=0), _mlp(seed=0)
    seeded = train_dpsgd(m3, torch.nn.CrossEntropyLoss(), X, y, rng=11, **kw)
    assert seeded.randomness == "caller-seeded (not for production)"
    assert seeded.seed == {"entropy": 11, "spawn_key": []}
    train_dpsgd(m4, torch.nn.CrossEntropyLoss(), X, y,
                rng=np.random.SeedSequence(**seeded.seed), **kw)
    assert torch.equal(m3[0].weight, m4[0].weight)
