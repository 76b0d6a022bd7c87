"""The DP-SGD audit game is a model family of run_audit: DPSGDModel.for_accuracy calibrates σ
to a membership-inference accuracy bound (issue 33: one audit framework)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pacpriv.audit import AuditSettings, DPSGDModel, LossAttack, MLPFactory, run_audit
from pacpriv.audit._curves import curve_value
from pacpriv.dpsgd import exact_membership_inference_accuracy, noise_multiplier_for_accuracy
from pacpriv.pac.engine import ExecutionOptions


def _closed_form(sigma: float, m: int, e: int) -> float:
    """½ + ¼ sqrt((1 + (e^{1/σ²} - 1)/M)^E - 1), the RA-MIA closed form (independent oracle)."""
    return 0.5 + 0.25 * math.sqrt(math.expm1(e * math.log1p(math.expm1(sigma**-2) / m)))


def test_for_accuracy_calibrates_sigma_to_the_target():
    """σ is the exact calibration's; its certified accuracy is at most the target, while the
    chi-square closed form at that σ is above it (the closed form needs more noise)."""
    factory = MLPFactory(64, 10, ())
    family = DPSGDModel.for_accuracy(factory, 0.6, steps_per_epoch=10, epochs=10,
                                     learning_rate=0.3)
    sigma = float(noise_multiplier_for_accuracy(target_accuracy=0.6, steps_per_epoch=10,
                                                epochs=10, method="exact"))
    assert family.noise_multiplier == pytest.approx(sigma)
    assert family.target_accuracy == 0.6 and family.learning_rate == 0.3
    assert family.describe()["target_accuracy"] == 0.6
    exact = exact_membership_inference_accuracy(sigma, steps_per_epoch=10, epochs=10)
    assert exact.upper <= 0.6 + 1e-9
    assert _closed_form(sigma, 10, 10) >= 0.6
    closed = DPSGDModel.for_accuracy(factory, 0.6, steps_per_epoch=10, epochs=10,
                                     method="closed-form")
    assert closed.noise_multiplier > family.noise_multiplier
    assert _closed_form(closed.noise_multiplier, 10, 10) == pytest.approx(0.6, abs=1e-6)
    # the certified curve at FPR α stays under the accuracy curve 2·0.6 − 1 + α of the target
    (curve,) = [c for c in family.certified_curves(np.array([0.01, 0.1]))
                if "exact" in c.label]
    assert curve_value(curve, 0.1) <= 2 * 0.6 - 1 + 0.1 + 1e-9


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"target_accuracy": 0.5}, "target_accuracy"),
    ({"target_accuracy": 1.0}, "target_accuracy"),
    ({"method": "rdp"}, "method"),
    ({"steps_per_epoch": 0}, "steps_per_epoch"),
    ({"max_grad_norm": None}, "max_grad_norm"),
])
def test_for_accuracy_argument_errors(kwargs, match):
    given = {"target_accuracy": 0.6, "steps_per_epoch": 2, "epochs": 1, **kwargs}
    with pytest.raises(ValueError, match=match):
        DPSGDModel.for_accuracy(MLPFactory(4, 2, ()), given.pop("target_accuracy"), **given)


def test_calibrated_family_runs_the_audit_game():
    """run_audit plays the DP-SGD game with the calibrated family: the report carries the
    target, and the attack stays under every certified curve at each FPR."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    family = DPSGDModel.for_accuracy(MLPFactory(4, 2, ()), 0.6, steps_per_epoch=2, epochs=2)
    report = run_audit(X, y, model=family, reference_models=4, rng=1,
                       settings=AuditSettings(attacks=(LossAttack(),), fprs=(0.1,)),
                       execution=ExecutionOptions(progress=False))
    assert report.model["target_accuracy"] == 0.6
    assert report.model["noise_multiplier"] == pytest.approx(family.noise_multiplier)
    assert report.setup["reference_models"] == 4 and report.setup["candidate_records"] == 48
    assert all(not g["violations"] for g in report.gaps())
