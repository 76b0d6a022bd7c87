"""Every integer parameter of the DP-SGD public API, given a huge Python int (10**400) or a
numpy integer: a one-line ValueError naming the parameter and its range before any work,
or (the closed forms, which take any count) an answer; never an OverflowError, a NaN cast
or a hang (twelfth new-user pass, W5)."""

from __future__ import annotations

import inspect
import re
import warnings

import numpy as np
import pytest

import pacpriv
import pacpriv.dpsgd as d

HUGE = 10**400
INT_PARAMS = {"steps_per_epoch", "epochs", "k", "dataset_size", "max_refinements"}
BASE = dict(steps_per_epoch=10, epochs=2)

#: name -> (call with overrides, its integer parameters, cheap enough for the numpy-int check)
CALLS = {
    "DPSGDSpec": (lambda **kw: d.DPSGDSpec(**{"noise_multiplier": 1.0, **BASE,
                                              "dataset_size": 100, **kw}),
                  ("steps_per_epoch", "epochs", "k", "dataset_size"), True),
    "RandomAllocation": (lambda **kw: d.RandomAllocation(**kw), ("k",), True),
    "closed_form_noise_multiplier": (
        lambda **kw: d.closed_form_noise_multiplier(0.6, **{**BASE, **kw}),
        ("steps_per_epoch", "epochs", "k"), True),
    "log1p_chi_square": (lambda **kw: d.log1p_chi_square(1.0, **{**BASE, **kw}),
                         ("steps_per_epoch", "epochs", "k"), True),
    "membership_inference_accuracy_bound": (
        lambda **kw: d.membership_inference_accuracy_bound(1.0, **{**BASE, **kw}),
        ("steps_per_epoch", "epochs", "k"), True),
    "exact_membership_inference_accuracy": (
        lambda **kw: d.exact_membership_inference_accuracy(2.0, progress=False,
                                                           **{**BASE, **kw}),
        ("steps_per_epoch", "epochs", "k", "max_refinements"), False),
    "calibrate_noise_multiplier": (
        lambda **kw: d.calibrate_noise_multiplier(0.6, **{**BASE, **kw}),
        ("steps_per_epoch", "epochs", "k"), False),
    "noise_multiplier_for_accuracy": (
        lambda **kw: d.noise_multiplier_for_accuracy(0.6, **{**BASE, **kw}),
        ("steps_per_epoch", "epochs", "k"), True),
    "noise_multiplier_for_accuracy(method='exact')": (
        lambda **kw: d.noise_multiplier_for_accuracy(0.6, method="exact", **{**BASE, **kw}),
        ("steps_per_epoch", "epochs", "k"), False),
    "calibrate_epsilon": (lambda **kw: d.calibrate_epsilon(3.0, 1e-5, **{**BASE, **kw}),
                          ("steps_per_epoch", "epochs", "k"), False),
    "epsilon_of": (lambda **kw: d.epsilon_of(1.0, 1e-5, **{**BASE, **kw}),
                   ("steps_per_epoch", "epochs", "k"), False),
    "noise_multiplier_for_epsilon": (
        lambda **kw: d.noise_multiplier_for_epsilon(3.0, 1e-5, **{**BASE, **kw}),
        ("steps_per_epoch", "epochs", "k"), False),
    "epsilon_bound": (lambda **kw: d.epsilon_bound(1.0, delta=1e-5, **{**BASE, **kw}),
                      ("steps_per_epoch", "epochs", "k"), False),
    "tradeoff_curve": (lambda **kw: d.tradeoff_curve(noise_multiplier=1.0, **{**BASE, **kw}),
                       ("steps_per_epoch", "epochs", "k"), False),
    "compare_accountants": (
        lambda **kw: d.compare_accountants(noise_multiplier=1.0, methods=("chi-square",),
                                           progress=False, timeout=5, **{**BASE, **kw}),
        ("steps_per_epoch", "epochs", "k"), False),
}
#: Result containers (validated by the functions that fill them) and torch (tested below).
NOT_CALLED = {"AccountantRow", "AccuracyBound", "ComparisonTable", "EpsilonBound",
              "EpsilonCalibration", "ExactAccuracy", "NoiseCalibration", "TradeoffCurve",
              "PoissonSampling", "PrivateTraining", "make_private"}


def _public():
    names = set(d.__all__) | {n for n in pacpriv.__all__ if hasattr(d, n)}
    return sorted(n for n in names if callable(getattr(d, n)))


def test_the_sweep_covers_every_public_function_with_an_integer_parameter():
    for name in _public():
        params = set(inspect.signature(getattr(d, name)).parameters) & INT_PARAMS
        if not params or name in NOT_CALLED:
            continue
        assert name in CALLS, f"{name} has integer parameters {params}: add it to CALLS"
        assert params <= set(CALLS[name][1]), name


CASES = [(name, p, v) for name, (_, params, _) in CALLS.items() for p in params
         for v in ("huge", "-huge", "uint64 max", "2**63")]


def _value(tag):
    return {"huge": HUGE, "-huge": -HUGE, "uint64 max": np.uint64(2**64 - 1),
            "2**63": 2**63}[tag]


def _one_line_naming(err: BaseException, param: str) -> None:
    text = str(err)
    assert "\n" not in text and len(text) < 400, text
    assert f"`{param}`" in text or f"`{param}`/k" in text, text
    assert re.search(r"\d{40}", text) is None, text  # never the huge number in full


@pytest.mark.parametrize(("name", "param", "tag"), CASES)
def test_huge_integers_are_refused_in_words_or_answered(name, param, tag):
    call = CALLS[name][0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = call(**{param: _value(tag)})
        except ValueError as err:
            _one_line_naming(err, param)
            return
    # answered: only the closed forms (any count), the containers, and a finite number
    assert name in {"DPSGDSpec", "RandomAllocation", "closed_form_noise_multiplier",
                    "log1p_chi_square", "membership_inference_accuracy_bound",
                    "noise_multiplier_for_accuracy", "epsilon_bound", "epsilon_of",
                    "compare_accountants"}, (name, param, tag)
    if isinstance(out, float):
        assert not np.isnan(out)


@pytest.mark.parametrize("name", [n for n, c in CALLS.items() if c[2]])
def test_numpy_integers_act_as_python_integers(name):
    call, params, _ = CALLS[name]
    for p in params:
        plain = {"k": 2, "dataset_size": 50}.get(p, 3)
        a, b = call(**{p: np.int64(plain)}), call(**{p: plain})
        assert repr(a) == repr(b), (name, p)


def test_make_private_names_a_huge_epochs_before_any_work():
    torch = pytest.importorskip("torch")
    from pacpriv.dpsgd import make_private

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    model = torch.nn.Linear(4, 2)
    before = [p.detach().clone() for p in model.parameters()]
    for kw in (dict(epochs=HUGE), dict(epochs=1, steps_per_epoch=HUGE),
               dict(epochs=np.uint64(2**64 - 1))):
        with pytest.raises(ValueError) as info:
            make_private(model, torch.optim.SGD(model.parameters(), lr=0.1),
                         torch.utils.data.DataLoader(data, batch_size=8),
                         loss_fn=torch.nn.CrossEntropyLoss(), target_epsilon=3, delta=1e-5,
                         max_grad_norm=1.0, **kw)
        _one_line_naming(info.value, next(k for k in kw if k != "epochs") if len(kw) > 1
                         else "epochs")
        assert "[1, 9007199254740992]" in str(info.value)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
