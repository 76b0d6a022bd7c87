"""DPSGDSpec is accepted wherever (σ, M, E) are (issue 9 item 4)."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.dpsgd import DPSGDSpec, compare_accountants
from pacpriv.dpsgd.spec import spec_arguments

SPEC = DPSGDSpec(noise_multiplier=2.0, steps_per_epoch=10, epochs=3)


def test_spec_arguments_returns_the_spec_fields():
    got = spec_arguments(SPEC, noise_multiplier=None, steps_per_epoch=None, epochs=None)
    assert got == {"noise_multiplier": 2.0, "steps_per_epoch": 10, "epochs": 3}
    assert spec_arguments(None, epochs=4) == {"epochs": 4}


def test_spec_and_keywords_together_are_rejected():
    with pytest.raises(TypeError, match="epochs either in `spec` or individually"):
        spec_arguments(SPEC, epochs=3)
    with pytest.raises(TypeError, match="DPSGDSpec"):
        spec_arguments({"epochs": 3}, epochs=None)


def test_compare_accountants_takes_a_spec():
    a = compare_accountants(spec=SPEC, methods=("chi-square", "ckp"))
    b = compare_accountants(noise_multiplier=2.0, steps_per_epoch=10, epochs=3,
                            methods=("chi-square", "ckp"))
    assert [r.accuracy for r in a.rows] == [r.accuracy for r in b.rows]
    assert a.rows[0].accuracy == pytest.approx(SPEC.membership_inference_accuracy_bound().accuracy)


def test_trainer_takes_a_spec():
    torch = pytest.importorskip("torch")
    from pacpriv.dpsgd.trainer import train_dpsgd

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    params = []
    for kwargs in ({"spec": SPEC},
                   {"noise_multiplier": 2.0, "steps_per_epoch": 10, "epochs": 3}):
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2)
        train_dpsgd(model, torch.nn.CrossEntropyLoss(), X, y, max_grad_norm=1.0, rng=1,
                    **kwargs)
        params.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    assert torch.equal(params[0], params[1])
