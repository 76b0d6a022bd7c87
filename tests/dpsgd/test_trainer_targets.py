"""train_dpsgd with a target instead of σ: target_accuracy or target_epsilon + delta."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pacpriv.dpsgd import (  # noqa: E402
    calibrate_noise_multiplier,
    noise_multiplier_for_epsilon,
)
from pacpriv.dpsgd.targets import noise_for_target  # noqa: E402
from pacpriv.dpsgd.trainer import train_dpsgd  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _run(**kw):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3)).double()
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 4)), rng.integers(0, 3, size=30)
    return train_dpsgd(model, torch.nn.CrossEntropyLoss(), X, y, steps_per_epoch=5, epochs=2,
                       max_grad_norm=1.0, rng=1, **kw)


def test_target_epsilon_sets_sigma_and_is_met():
    r = _run(target_epsilon=2.0, delta=1e-5)
    assert r.noise_multiplier == noise_multiplier_for_epsilon(2.0, 1e-5, steps_per_epoch=5,
                                                              epochs=2)
    assert r.get_epsilon(1e-5) <= 2.0
    assert (r.target_epsilon, r.delta, r.target_accuracy) == (2.0, 1e-5, None)
    assert r.to_dict()["target_epsilon"] == 2.0


def test_target_accuracy_sets_sigma_and_is_met():
    r = _run(target_accuracy=0.6)
    ref = calibrate_noise_multiplier(0.6, steps_per_epoch=5, epochs=2)
    assert r.noise_multiplier == ref.noise_multiplier
    assert r.exact_membership_inference_accuracy().upper <= 0.6
    assert r.target_accuracy == 0.6 and r.target_epsilon is None


def test_sigma_run_records_no_target():
    r = _run(noise_multiplier=1.0)
    assert (r.target_accuracy, r.target_epsilon, r.delta) == (None, None, None)


@pytest.mark.parametrize("kw,match", [
    ({"noise_multiplier": 1.0, "target_epsilon": 1.0, "delta": 1e-5}, "exactly one"),
    ({"target_accuracy": 0.6, "target_epsilon": 1.0, "delta": 1e-5}, "exactly one"),
    ({"target_epsilon": 1.0}, "delta"),
    ({"target_accuracy": 0.6, "delta": 1e-5}, "delta"),
    ({"target_accuracy": 1.2}, "target_accuracy"),
    ({"target_epsilon": -1.0, "delta": 1e-5}, "target_epsilon"),
    ({"target_epsilon": 1.0, "delta": 2.0}, "delta"),
])
def test_refused_before_training(kw, match):
    with pytest.raises(ValueError, match=match):
        _run(**kw)


def test_no_target_at_all_is_refused():
    with pytest.raises(ValueError, match="exactly one"):
        noise_for_target(steps_per_epoch=5, epochs=2)


def test_spec_and_target_are_refused():
    from pacpriv.dpsgd import DPSGDSpec

    model = torch.nn.Linear(2, 2)
    with pytest.raises(TypeError, match="spec fixes noise_multiplier"):
        train_dpsgd(model, torch.nn.CrossEntropyLoss(), np.zeros((4, 2)), np.zeros(4, int),
                    spec=DPSGDSpec(1.0, 2, 1, max_grad_norm=1.0), target_accuracy=0.6)


def test_unfit_model_refused_before_calibration():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    with pytest.raises(ValueError, match="BatchNorm"):
        train_dpsgd(model, torch.nn.CrossEntropyLoss(), np.zeros((4, 4)), np.zeros(4, int),
                    steps_per_epoch=2, epochs=1, max_grad_norm=1.0, target_accuracy=0.6)
