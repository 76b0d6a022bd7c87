"""make_private: the user's module, optimizer and loop, the trainer's engine and refusals."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pacpriv.dpsgd import DPSGDSpec, noise_multiplier_for_epsilon  # noqa: E402
from pacpriv.dpsgd.private import make_private  # noqa: E402
from pacpriv.dpsgd.trainer import train_dpsgd  # noqa: E402
from pacpriv.exceptions import BudgetExceededError, SparseBatchWarning  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")
LOSS = torch.nn.CrossEntropyLoss()


def _data(n=30, shape=(4,), seed=0):
    rng = np.random.default_rng(seed)
    X = torch.as_tensor(rng.normal(size=(n, *shape)))
    y = torch.as_tensor(rng.integers(0, 3, size=n))
    return torch.utils.data.TensorDataset(X, y)


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(),
                               torch.nn.Linear(5, 3)).double()


class _Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(1, 2, 3)
        self.fc = torch.nn.Linear(2 * 3 * 3, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def _private_loop(model, ds, epochs=2, **kw):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(ds, batch_size=8)
    private = make_private(model, opt, loader, loss_fn=LOSS, max_grad_norm=1.0,
                           epochs=epochs, rng=3, **kw)
    for _ in range(epochs):
        for x, y in private.data_loader:
            private.step(x, y)
    return private


@pytest.mark.parametrize("build,shape", [(_mlp, (4,)), (lambda: _Cnn().double(), (1, 5, 5))])
def test_same_parameters_as_the_trainer(build, shape):
    """Ghost path (Linear-only) and torch.func path (CNN): bit-identical to train_dpsgd."""
    ds = _data(shape=shape)
    ref = build()
    train_dpsgd(ref, LOSS, ds, noise_multiplier=0.8, steps_per_epoch=4, epochs=2,
                max_grad_norm=1.0, rng=3, optimizer=lambda p: torch.optim.SGD(p, lr=0.1))
    model = build()
    private = _private_loop(model, ds, noise_multiplier=0.8)
    assert private.steps_per_epoch == 4  # len(DataLoader(30 records, batch_size=8))
    for a, b in zip(ref.parameters(), model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert all(p.grad is None for p in model.parameters())


def test_accountant_advances_by_epoch():
    ds = _data()
    opt_model = _mlp()
    private = make_private(opt_model, torch.optim.SGD(opt_model.parameters(), lr=0.1),
                           torch.utils.data.DataLoader(ds, batch_size=10), loss_fn=LOSS,
                           noise_multiplier=1.0, max_grad_norm=1.0, epochs=2, rng=0)
    assert private.get_epsilon(1e-5) == 0.0 and private.membership_inference_accuracy_bound() \
        == 0.5
    seen = []
    for _ in range(2):
        for x, y in private.data_loader:
            private.step(x, y)
            seen.append((private.steps_taken, private.get_epsilon(1e-5)))
    one = DPSGDSpec(1.0, 3, 1).get_epsilon(1e-5)
    two = DPSGDSpec(1.0, 3, 2).get_epsilon(1e-5)
    assert [e for _, e in seen] == [one] * 3 + [two] * 3 and one < two
    exact = DPSGDSpec(1.0, 3, 2).exact_membership_inference_accuracy().upper
    assert private.membership_inference_accuracy_bound() == exact


def test_target_epsilon_is_met():
    private = _private_loop(_mlp(), _data(), target_epsilon=2.0, delta=1e-5)
    assert private.noise_multiplier == noise_multiplier_for_epsilon(
        2.0, 1e-5, steps_per_epoch=4, epochs=2)
    assert private.get_epsilon(1e-5) <= 2.0
    assert private.targets == {"target_accuracy": None, "target_epsilon": 2.0, "delta": 1e-5}


def test_target_accuracy_is_met():
    private = _private_loop(_mlp(), _data(), target_accuracy=0.6)
    assert private.membership_inference_accuracy_bound() <= 0.6


def test_empty_batches_take_noisy_steps():
    ds = _data(n=3)
    model = _mlp()
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.warns(SparseBatchWarning, match=r"expected batch is 0\.5 record.*<= 3"):
        private = make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), ds,
                               loss_fn=LOSS, noise_multiplier=1.0, max_grad_norm=1.0, epochs=1,
                               steps_per_epoch=6, rng=1)
    sizes = []
    for x, y in private.data_loader:
        sizes.append(int(x.shape[0]))
        private.step(x, y)
    assert sum(sizes) == 3 and 0 in sizes and private.steps_taken == 6
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_budget_and_step_order_are_enforced():
    model = _mlp()
    private = make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), _data(),
                           loss_fn=LOSS, noise_multiplier=1.0, max_grad_norm=1.0, epochs=1,
                           steps_per_epoch=3, rng=1)
    with pytest.raises(RuntimeError, match="must follow one batch"):
        private.step(torch.zeros(1, 4, dtype=torch.float64), torch.zeros(1, dtype=torch.long))
    it = iter(private.data_loader)
    x, y = next(it)
    assert x.shape[0] > 0
    with pytest.raises(RuntimeError, match="rows"):
        private.step(torch.cat([x, x]), torch.cat([y, y]))
    with pytest.raises(RuntimeError, match="exactly one"):
        next(it)
    with pytest.raises(BudgetExceededError, match="1 epoch"):
        iter(private.data_loader).__next__()


@pytest.mark.parametrize("change,error,match", [
    ({"noise_multiplier": 0.0}, ValueError, "noise_multiplier"),
    ({"noise_multiplier": None}, ValueError, "exactly one"),
    ({"target_epsilon": 1.0}, ValueError, "delta"),
    ({"max_grad_norm": 0.0}, ValueError, "max_grad_norm"),
    ({"epochs": 0}, ValueError, "epochs"),
    ({"loss_fn": None}, TypeError, "loss_fn"),
    ({"optimizer": "sgd"}, TypeError, "optimizer"),
    ({"data_loader": [1, 2]}, TypeError, "data_loader"),
    ({"module": torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))},
     ValueError, "BatchNorm"),
    ({"module": torch.nn.Linear(4, 3).half()}, ValueError, "float16"),
    ({"optimizer": torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)}, TypeError,
     "not trainable parameters of `module`"),
])
def test_refusals_before_any_work(change, error, match):
    model = _mlp()
    args = {"module": model, "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
            "data_loader": _data(), "loss_fn": LOSS, "noise_multiplier": 1.0,
            "max_grad_norm": 1.0, "epochs": 1, "steps_per_epoch": 3, **change}
    if "module" in change and "optimizer" not in change:
        args["optimizer"] = torch.optim.SGD(args["module"].parameters(), lr=0.1)
    with pytest.raises(error, match=match):
        make_private(args.pop("module"), args.pop("optimizer"), args.pop("data_loader"),
                     **args)


def test_running_statistics_module_refused():
    class Running(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 3).double()
            self.register_buffer("count", torch.zeros(()))

        def forward(self, x):
            self.count += 1
            return self.fc(x)

    model = Running()
    with pytest.raises(ValueError, match="cannot train"):
        make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), _data(), loss_fn=LOSS,
                     noise_multiplier=1.0, max_grad_norm=1.0, epochs=1, steps_per_epoch=3)


def test_dataset_needs_steps_per_epoch():
    model = _mlp()
    with pytest.raises(TypeError, match="steps_per_epoch"):
        make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), _data(), loss_fn=LOSS,
                     noise_multiplier=1.0, max_grad_norm=1.0, epochs=1)


def test_an_epoch_left_early_counts_whole():
    """One step in each of two epochs: two allocations were used, so two epochs are counted
    (⌈steps/t⌉ = 1 would understate the risk)."""
    model = _mlp()
    private = make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), _data(),
                           loss_fn=LOSS, noise_multiplier=1.0, max_grad_norm=1.0, epochs=3,
                           steps_per_epoch=3, rng=2)
    for _ in range(2):
        for x, y in private.data_loader:
            private.step(x, y)
            break
    assert private.steps_taken == 2 and private.epochs_started == 2
    assert private.get_epsilon(1e-5) == DPSGDSpec(1.0, 3, 2).get_epsilon(1e-5)


@pytest.mark.parametrize("forge", [
    lambda x, y: (torch.randn_like(x) * 1e6, y),  # same shape, other values
    lambda x, y: (x, (y + 1) % 3),  # forged labels (classes 0, 1, 2)
    lambda x, y: (x.clone() + 1.0, y),
])
def test_step_refuses_tensors_not_from_the_loader(forge):
    model = _mlp()
    before = [p.detach().clone() for p in model.parameters()]
    private = make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), _data(),
                           loss_fn=LOSS, noise_multiplier=1.0, max_grad_norm=1.0, epochs=1,
                           steps_per_epoch=3, rng=1)
    x, y = next(iter(private.data_loader))
    assert x.shape[0] > 0
    fx, fy = forge(x, y)
    with pytest.raises(RuntimeError, match=r"yielded for this step") as info:
        private.step(fx, fy)
    assert len(str(info.value).splitlines()) == 1
    assert private.steps_taken == 0
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_step_accepts_the_loaders_batch_moved_or_cast():
    model = _mlp()
    private = make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), _data(),
                           loss_fn=LOSS, noise_multiplier=1.0, max_grad_norm=1.0, epochs=1,
                           steps_per_epoch=3, rng=1)
    for x, y in private.data_loader:
        private.step(x.to("cpu", copy=True), y.clone())
    assert private.steps_taken == 3


def test_accuracy_bound_methods_name_their_source():
    """make_private's default is the exact upper end; method="chi-square" equals the spec's
    closed form (an independent review found the same name giving two numbers unexplained)."""
    private = _private_loop(_mlp(), _data(), noise_multiplier=0.9)
    spec = private.spec()
    chi = private.membership_inference_accuracy_bound(method="chi-square")
    assert chi == spec.membership_inference_accuracy_bound().accuracy
    assert private.membership_inference_accuracy_bound() == \
        spec.exact_membership_inference_accuracy().upper <= chi
    with pytest.raises(ValueError, match="method"):
        private.membership_inference_accuracy_bound(method="exactly")


@pytest.mark.parametrize("n,kwargs,said", [
    (0, {}, "its dataset is empty"),
    (5, {"batch_size": 10, "drop_last": True}, "pass `steps_per_epoch`"),
])
def test_a_loader_without_batches_is_named_not_steps_per_epoch(n, kwargs, said):
    """An empty DataLoader said "`steps_per_epoch` must be an integer in [1, inf); got 0", a
    value the user never passed (seventh new-user pass, #420)."""
    from torch.utils.data import DataLoader, TensorDataset

    from pacpriv.dpsgd import make_private

    module = torch.nn.Linear(3, 2)
    data = TensorDataset(torch.zeros(n, 3), torch.zeros(n, dtype=torch.long))
    with pytest.raises(ValueError, match=r"`data_loader` has no batch \(len\(data_loader\) = 0"
                       ) as info:
        make_private(module, torch.optim.SGD(module.parameters(), lr=0.1),
                     DataLoader(data, **kwargs), loss_fn=torch.nn.functional.cross_entropy,
                     max_grad_norm=1.0, epochs=1, noise_multiplier=1.0)
    assert said in str(info.value) and "got 0" not in str(info.value)
