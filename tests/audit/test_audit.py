"""pacpriv.audit._dpsgd: attacks on DP-SGD models trained on a real dataset vs the bound."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pacpriv.audit._dpsgd import AuditResult, audit_dpsgd  # noqa: E402
from pacpriv.exceptions import VacuousBoundWarning  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _closed_form(sigma: float, m: int, e: int) -> float:
    """½ + ¼ sqrt((1 + (e^{1/σ²} - 1)/M)^E - 1), MATH.md §3 (independent oracle)."""
    return 0.5 + 0.25 * math.sqrt(math.expm1(e * math.log1p(math.expm1(sigma**-2) / m)))


def _digits(n: int | None = None, seed: int = 0):
    from sklearn.datasets import load_digits
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(seed).permutation(len(X))[: n or len(X) - 1]  # even pool
    return StandardScaler().fit_transform(X[idx]).astype(np.float32), y[idx]


def _logistic():
    return torch.nn.Linear(64, 10)


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))


def test_attacks_stay_below_calibrated_bound():
    """σ calibrated (exact) to accuracy 0.6 on digits: both attacks' upper CI limits stay below."""
    from pacpriv.dpsgd.calibration import noise_multiplier_for_accuracy

    X, y = _digits()
    res = audit_dpsgd(
        X, y, model_factory=_logistic, loss_fn=torch.nn.CrossEntropyLoss(), target_accuracy=0.6,
        calibration_method="exact", steps_per_epoch=10, epochs=10, max_grad_norm=1.0,
        optimizer=lambda p: torch.optim.SGD(p, lr=0.5), n_shadow_models=8, rng=0,
    )
    sigma = noise_multiplier_for_accuracy(
        target_accuracy=0.6, steps_per_epoch=10, epochs=10, method="exact"
    )
    assert res.noise_multiplier == pytest.approx(float(sigma))
    assert res.accuracy_bound == 0.6
    # The exact calibration needs less noise than the chi-square closed form, whose bound at
    # that σ is therefore above the target.
    assert res.chi_square_bound == pytest.approx(_closed_form(res.noise_multiplier, 10, 10))
    assert res.chi_square_bound >= 0.6
    for attack in (res.loss_attack, res.lira_attack):
        assert attack.ci_high < res.accuracy_bound
        assert attack.n_members == 898 and attack.n_nonmembers == 898
    assert not res.bound_violated
    assert res.test_accuracy > 0.8  # the private model is still useful


@pytest.mark.slow
def test_attacks_have_teeth_on_overfit_model():
    """Tiny σ, many epochs, small pool, MLP: both attacks beat ½ (lower CI limit > 0.5)."""
    X, y = _digits(400)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", VacuousBoundWarning)
        res = audit_dpsgd(
            X, y, model_factory=_mlp, loss_fn=torch.nn.CrossEntropyLoss(),
            noise_multiplier=1e-3, steps_per_epoch=2, epochs=150, max_grad_norm=10.0,
            optimizer=lambda p: torch.optim.SGD(p, lr=0.3), n_shadow_models=8, rng=0,
        )
    assert res.loss_attack.ci_low > 0.5
    assert res.lira_attack.ci_low > 0.5
    assert res.lira_attack.auc > res.loss_attack.auc  # shadow calibration helps
    assert res.accuracy_bound == pytest.approx(1.0)  # σ = 1e-3 certifies nothing
    assert res.train_accuracy == 1.0 and res.test_accuracy < 1.0


def test_non_private_audit_reproducible_and_serialisable():
    """σ = 0 without clipping: bound 1; same rng gives the same result; to_dict is JSON."""
    X, y = _digits(40)
    kw = dict(model_factory=_logistic, loss_fn=torch.nn.CrossEntropyLoss(), noise_multiplier=0.0,
              steps_per_epoch=2, epochs=3, max_grad_norm=None, n_shadow_models=2, rng=5)
    state = torch.random.get_rng_state()
    a, b = audit_dpsgd(X, y, **kw), audit_dpsgd(X, y, **kw)
    assert torch.equal(state, torch.random.get_rng_state())  # inits under fork_rng
    assert isinstance(a, AuditResult)
    assert a.to_dict() == b.to_dict()
    assert a.accuracy_bound == 1.0 and a.chi_square_bound == 1.0 and a.calibration_method is None
    d = json.loads(json.dumps(a.to_dict()))
    assert d["lira_attack"]["n_members"] == 20 and d["n_shadow_models"] == 2
    c = audit_dpsgd(X, y, **{**kw, "n_shadow_models": 0, "rng": 6})
    assert c.lira_attack is None and c.to_dict()["lira_attack"] is None


_KW = dict(loss_fn=torch.nn.CrossEntropyLoss(), steps_per_epoch=2, epochs=1, max_grad_norm=1.0)


@pytest.mark.parametrize(
    ("override", "exc", "match"),
    [
        ({}, ValueError, "exactly one of"),
        ({"noise_multiplier": 1.0, "target_accuracy": 0.6}, ValueError, "exactly one of"),
        ({"noise_multiplier": 1.0, "n_shadow_models": 3}, ValueError, "must be even"),
        ({"noise_multiplier": 1.0, "n_shadow_models": -2}, ValueError, "n_shadow_models"),
        ({"target_accuracy": 0.5}, ValueError, "target_accuracy"),
        ({"target_accuracy": 0.6, "calibration_method": "rdp"}, ValueError,
         "calibration_method"),
        ({"noise_multiplier": -1.0}, ValueError, "noise_multiplier"),
        ({"noise_multiplier": 1.0, "steps_per_epoch": 0}, ValueError, "steps_per_epoch"),
    ],
)
def test_audit_argument_errors(override, exc, match):
    """Each invalid keyword raises with a message naming it."""
    X, y = _digits(20)
    with pytest.raises(exc, match=match):
        audit_dpsgd(X, y, model_factory=_logistic, **{**_KW, **override})


def test_audit_too_few_records():
    """A pool of fewer than 8 records is rejected."""
    X, y = _digits(6)
    with pytest.raises(ValueError, match=">= 8"):
        audit_dpsgd(X, y, model_factory=_logistic, noise_multiplier=0.0,
                    **{**_KW, "max_grad_norm": None})


def test_audit_factory_must_return_module():
    """model_factory returning something else is a TypeError."""
    X, y = _digits(20)
    with pytest.raises(TypeError, match="model_factory"):
        audit_dpsgd(X, y, model_factory=lambda: "model", noise_multiplier=0.0,
                    **{**_KW, "max_grad_norm": None})
