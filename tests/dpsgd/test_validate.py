"""validate_model: modules DP-SGD cannot handle are listed up front, with their fix."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pacpriv.dpsgd.trainer import ModuleProblem, train_dpsgd, validate_model  # noqa: E402

nn = torch.nn


def _bn_model():
    return nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU(),
                         nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8)), nn.Linear(8, 3))


def test_batchnorm_listed_by_name_with_fix():
    """Every BatchNorm is listed by its dotted name; the message names GroupNorm/LayerNorm."""
    problems = validate_model(_bn_model(), strict=False)
    assert [p.name for p in problems] == ["1", "3.1"]
    assert all(isinstance(p, ModuleProblem) and p.module_type == "BatchNorm1d" for p in problems)
    assert "GroupNorm" in problems[0].fix and "LayerNorm" in problems[0].fix
    assert "track_running_stats=False" in problems[0].fix
    with pytest.raises(ValueError, match=r"2 module\(s\)") as info:
        validate_model(_bn_model())
    text = str(info.value)
    assert "1 (BatchNorm1d)" in text and "3.1 (BatchNorm1d)" in text and "GroupNorm" in text


def test_trainer_rejects_batchnorm_before_any_work():
    """train_dpsgd raises the validator's error, not torch.func's, and leaves the model as is."""
    model = _bn_model()
    before = [t.clone() for t in model.state_dict().values()]
    X, y = np.zeros((10, 5)), np.zeros(10, dtype=int)
    with pytest.raises(ValueError, match=r"3\.1 \(BatchNorm1d\).*fix: replace it with nn\.Group"):
        train_dpsgd(model, nn.CrossEntropyLoss(), X, y, noise_multiplier=1.0,
                    steps_per_epoch=2, epochs=1, max_grad_norm=1.0)
    after = list(model.state_dict().values())
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


@pytest.mark.parametrize(
    ("module", "kind"),
    [
        (nn.BatchNorm2d(4), "BatchNorm2d"),
        (nn.SyncBatchNorm(4), "SyncBatchNorm"),
        (nn.InstanceNorm1d(4, track_running_stats=True), "InstanceNorm1d"),
        (nn.GRU(4, 4), "GRU"),
        (nn.RNN(4, 4), "RNN"),
        (nn.LSTMCell(4, 4), "LSTMCell"),
    ],
)
def test_each_unsupported_kind_is_flagged(module, kind):
    """Each unsupported kind is reported with its class name."""
    (problem,) = validate_model(nn.Sequential(nn.Identity(), module), strict=False)
    assert problem.name == "1" and problem.module_type == kind and problem.fix


def test_root_module_is_checked():
    """The model itself may be the offending module (name shown as <model>)."""
    (problem,) = validate_model(nn.BatchNorm1d(3), strict=False)
    assert problem.name == "" and str(problem).startswith("<model> (BatchNorm1d)")


def test_fixed_model_passes_and_trains():
    """GroupNorm / LayerNorm / InstanceNorm without running stats pass and train exactly."""
    model = nn.Sequential(nn.Linear(5, 8), nn.GroupNorm(2, 8), nn.ReLU(), nn.Linear(8, 8),
                          nn.LayerNorm(8), nn.Unflatten(1, (2, 4)),
                          nn.InstanceNorm1d(2, track_running_stats=False), nn.Flatten(),
                          nn.Linear(8, 3)).double()
    assert validate_model(model) == []
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(12, 5)), rng.integers(0, 3, size=12)
    res = train_dpsgd(model, nn.CrossEntropyLoss(), X, y, noise_multiplier=0.5,
                      steps_per_epoch=3, epochs=1, max_grad_norm=1.0, rng=0)
    assert res.n_steps == 3 and np.isfinite(res.epoch_losses).all()


def test_validate_model_type_error():
    """A non-module is a TypeError naming `model`."""
    with pytest.raises(TypeError, match=r"`model` must be a torch\.nn\.Module"):
        validate_model(lambda x: x)


def test_per_sample_gradients_also_validates():
    """The public per-sample gradient function gives the same clear error."""
    from pacpriv.dpsgd.trainer import per_sample_gradients

    with pytest.raises(ValueError, match=r"1 \(BatchNorm1d\)"):
        per_sample_gradients(_bn_model(), nn.CrossEntropyLoss(), torch.zeros(4, 5),
                             torch.zeros(4, dtype=torch.int64))
