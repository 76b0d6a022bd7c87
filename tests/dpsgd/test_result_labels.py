"""Issue 35 (sixth pass a1300–a1302): every public DP-SGD result says what its number is and
whom it covers, in ``to_dict()`` (the CLI's JSON fields) and in ``summary()``/``str()``."""

from __future__ import annotations

import json

import pytest

from pacpriv.dpsgd import (
    calibrate_noise_multiplier,
    exact_membership_inference_accuracy,
    membership_inference_accuracy_bound,
    tradeoff_curve,
)
from pacpriv.dpsgd.epsilon import epsilon_bound
from pacpriv.dpsgd.epsilon_calibration import calibrate_epsilon
from pacpriv.dpsgd.labels import COVERS, NEIGHBOURING, assumes

_FIELDS = ("bound_kind", "bound", "covers", "neighbouring", "assumes")


def _results():
    return {
        "chi-square": (membership_inference_accuracy_bound(1.0, steps_per_epoch=100, epochs=10),
                       "closed-form", "random_allocation"),
        "exact": (exact_membership_inference_accuracy(2.0, steps_per_epoch=10, epochs=3),
                  "certified", "random_allocation"),
        "epsilon": (epsilon_bound(2.0, steps_per_epoch=10, epochs=3, delta=1e-5), None,
                    "random_allocation"),
        "calibration": (calibrate_noise_multiplier(0.56, steps_per_epoch=50, epochs=2,
                                                   rtol=1e-2), "certified", "random_allocation"),
        "epsilon calibration": (calibrate_epsilon(2.0, 1e-5, steps_per_epoch=5, epochs=2), None,
                                "random_allocation"),
        "curve": (tradeoff_curve(noise_multiplier=2.0, steps_per_epoch=10, epochs=5,
                                 fpr=[0.0, 0.01]), "certified", "random_allocation"),
    }


@pytest.fixture(scope="module")
def results():
    return _results()


@pytest.mark.parametrize("name", ["chi-square", "exact", "epsilon", "calibration",
                                  "epsilon calibration", "curve"])
def test_every_result_dict_carries_the_cli_label_fields(results, name):
    r, kind, sampling = results[name]
    d = json.loads(json.dumps(r.to_dict()))
    assert all(f in d for f in _FIELDS), name
    assert d["covers"] == COVERS and d["neighbouring"] == NEIGHBOURING
    assert d["assumes"] == assumes(sampling)
    assert d["bound_kind"] in ("certified", "closed-form", "accountant")
    if kind is not None:
        assert d["bound_kind"] == kind
    if hasattr(r, "summary"):
        text = str(r)
        assert COVERS in text and assumes(sampling) in text, name


def test_labels_follow_the_bound_that_answered(results):
    eps = results["epsilon"][0]
    d = eps.to_dict()
    assert (d["bound_kind"] == "certified") == eps.source.startswith("certified PLD")
    cal = results["epsilon calibration"][0]
    assert cal.to_dict()["bound_kind"] == epsilon_bound(
        cal.noise_multiplier, steps_per_epoch=5, epochs=2, delta=1e-5).to_dict()["bound_kind"]
    # the chi-square bound is a closed form, never titled "certified"
    chi = results["chi-square"][0]
    assert "certified" not in str(chi).splitlines()[0]
    # existing keys are kept (additive)
    assert {"accuracy", "log1p_chi_square", "vacuous", "noise_multiplier"} <= set(chi.to_dict())
    assert {"lower", "upper", "width", "converged"} <= set(results["exact"][0].to_dict())


def test_poisson_curve_is_labelled_as_an_accountant_bound():
    pytest.importorskip("dp_accounting")
    c = tradeoff_curve(noise_multiplier=2.0, steps_per_epoch=10, epochs=2, fpr=[0.01],
                       sampling="poisson")
    d = c.to_dict()
    assert d["bound_kind"] == "accountant" and d["assumes"] == assumes("poisson")
    assert c.to_fdp()["covers"] == COVERS
