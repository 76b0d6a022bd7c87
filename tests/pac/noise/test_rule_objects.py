"""Noise rules are objects (issue 24 item 2): parameters, validation, labels, shorthands.

Each rule owns its parameters and their validation, its label, the trials it needs and its
planning step; strings are shorthands for the defaults; the 0.2 keyword form was removed in 0.4
(a TypeError naming the rule object that takes the keyword).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pacpriv.pac import run_pac
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.noise import (
    RULE_CLASSES,
    RULES,
    SPECTRUM_RULES,
    Algorithm1,
    Anisotropic,
    AsymptoticT,
    Certified,
    ExactMI,
    Isotropic,
    NoiseRule,
    VarianceOnly,
    as_rule,
    calibrate_noise,
    rule_with,
)
from pacpriv.pac.spectrum import estimate_output_spectrum

NO_CHECK = Certified(target_inflation=None)  # no trial-count check

QUIET = ExecutionOptions(progress=False)
POOL = np.linspace(-1.0, 1.0, 60).reshape(30, 2)
OUTPUTS = np.random.default_rng(3).normal(size=(400, 3)) * [3.0, 1.0, 0.2]


def _mean(subset):
    return np.asarray(subset).sum(axis=0) / 30.0


def test_every_name_has_its_class_and_the_default_is_first():
    assert RULES == tuple(RULE_CLASSES) and RULES[0] == "certified"
    expected = {"certified": Certified, "anisotropic": Anisotropic, "isotropic": Isotropic,
                "variance-only": VarianceOnly, "exact-mi": ExactMI, "algorithm1": Algorithm1,
                "asymptotic-t": AsymptoticT}
    assert {n: RULE_CLASSES[n] for n in expected} == expected
    assert all(issubclass(c, NoiseRule) and c.name == n for n, c in RULE_CLASSES.items())
    assert set(SPECTRUM_RULES) == {"anisotropic", "isotropic", "variance-only", "exact-mi",
                                   "algorithm1"}


@pytest.mark.parametrize("name", ["certified", "anisotropic", "isotropic", "variance-only",
                                  "exact-mi", "asymptotic-t"])
def test_a_name_is_the_rule_with_its_defaults(name):
    rule = as_rule(name)
    assert rule == RULE_CLASSES[name]() and as_rule(rule) is rule
    assert rule.to_dict()["rule"] == name and str(rule) == name


def test_algorithm1_needs_its_parameters_as_an_object():
    with pytest.raises(ValueError, match=r"`rule` must be one of .*'algorithm1' needs its "
                                         r"parameters: rule=Algorithm1\(c=..."):
        as_rule("algorithm1")
    with pytest.raises(ValueError, match="rule='algorithm1' needs `beta`"):
        Algorithm1(c=1e-3, output_bound=1.0)
    with pytest.raises(ValueError, match=r"`c` must be in \(0.0, inf\)"):
        Algorithm1(c=-1.0, beta=0.1, output_bound=1.0)


@pytest.mark.parametrize(("cls", "kwargs", "match"), [
    (Certified, {"confidence": 1.0}, "confidence"),
    (Certified, {"shape_fraction": 0.0}, "shape_fraction"),
    (Certified, {"output_bound": -1.0}, "output_bound"),
    (Certified, {"clip_margin": 0.5}, "clip_margin"),
    (Certified, {"target_inflation": 1.0}, "target_inflation"),
    (AsymptoticT, {"confidence": 0.0}, "confidence"),
    (Algorithm1, {"c": 1.0, "beta": 1.0, "output_bound": 1.0, "confidence": 1.5}, "confidence"),
])
def test_parameters_are_validated_on_construction(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_rules_are_frozen_and_keyword_only():
    rule = Certified()
    with pytest.raises(AttributeError):
        rule.confidence = 0.5  # type: ignore[misc]
    with pytest.raises(TypeError):
        Certified(0.99)  # type: ignore[misc]


def test_rule_with_names_the_rules_that_take_a_parameter():
    with pytest.raises(ValueError, match=r"\['c'\] do not apply to rule='certified'.*only apply "
                                         r"to rule='algorithm1'"):
        rule_with("certified", c=0.1)
    with pytest.raises(TypeError, match="given twice"):
        rule_with(Certified(), confidence=0.9)
    assert rule_with("certified", confidence=0.99) == Certified(confidence=0.99)
    assert rule_with("isotropic", confidence=None) == Isotropic()  # None: not given


def test_validate_runs_before_any_trial():
    calls = []

    def counted(subset):
        calls.append(1)
        return _mean(subset)

    with pytest.raises(ValueError, match=r"`n_trials` must be an integer in \[6, "
                       r"9223372036854775807\] with rule='certified', which needs at least 6 "
                       r"trials; got 5\."):
        run_pac(counted, POOL, mi_budget=0.1, n_trials=5, rule=Certified(), execution=QUIET)
    with pytest.raises(ValueError, match=r"cannot certify confidence=0\.9"):
        run_pac(counted, POOL, mi_budget=0.1, n_trials=40, execution=QUIET,
                rule=Algorithm1(c=1e-3, beta=0.1, output_bound=10.0, confidence=0.9))
    assert calls == []


@pytest.mark.parametrize(("name", "owner"), [
    ("confidence", "Certified"), ("target_inflation", "Certified"), ("output_bound", "Certified"),
    ("c", "Algorithm1"), ("beta", "Algorithm1")])
def test_a_removed_rule_keyword_is_a_type_error_naming_the_rule_object(name, owner):
    """0.4 removed the 0.2 keywords beside a rule name: each is refused before any trial,
    naming the first registered rule that takes it, for run_pac and calibrate_noise alike."""
    from pacpriv.pac.noise._registry import rule_hints

    assert rule_hints()[name] == f"rule={owner}({name}=...)"
    assert name in RULE_CLASSES[owner.lower()].parameter_names()

    def never_called(subset):  # pragma: no cover - the test checks it is never reached
        raise AssertionError("the mechanism must not run when an argument is refused")

    hint = rf"; pass rule={owner}\({name}=\.\.\.\) \(removed in 0\.4\)\.$"
    with pytest.raises(TypeError, match=rf"^run_pac\(\) got an unexpected keyword argument "
                                        rf"'{name}'{hint}"):
        run_pac(never_called, POOL, mi_budget=0.1, execution=QUIET, **{name: 0.5})
    with pytest.raises(TypeError, match=rf"^calibrate_noise\(\) got an unexpected keyword "
                                        rf"argument '{name}'{hint}"):
        calibrate_noise(estimate_output_spectrum(OUTPUTS), mi_budget=0.2, **{name: 0.5})


def test_labels_come_from_the_rule():
    spec = estimate_output_spectrum(OUTPUTS)
    assert calibrate_noise(spec, mi_budget=0.2, rule=Isotropic()).label == "estimated (plug-in)"
    alg = calibrate_noise(spec, mi_budget=0.2,
                          rule=Algorithm1(c=0.5, beta=0.25, output_bound=20.0))
    assert alg.certified == (alg.confidence > 0)
    label = alg.label
    assert label.startswith("certified (1−γ >= ") if alg.confidence > 0 else "estimated" in label
    known_spectrum = _known()
    known = calibrate_noise(known_spectrum, mi_budget=0.2,
                            rule=Algorithm1(c=0.5, beta=0.25, output_bound=20.0))
    assert known_spectrum.n_trials is None and known.confidence == 1.0
    assert known.label == "exact (known covariance, no estimation; MI <= v + β)"


def _known():
    from pacpriv.pac.spectrum import spectrum_from_covariance

    return spectrum_from_covariance(np.diag([9.0, 1.0, 0.04]))


def test_calibrate_noise_refuses_an_outputs_rule():
    spec = estimate_output_spectrum(OUTPUTS)
    with pytest.raises(ValueError, match="needs the simulated outputs, not a spectrum"):
        calibrate_noise(spec, mi_budget=0.2, rule=Certified())


def test_trials_needed_is_the_rules_planning_step():
    assert Certified().trials_needed(dim=3) > Certified(target_inflation=2.0).trials_needed(dim=3)
    assert Anisotropic().trials_needed(dim=7) == 8  # more trials than output dimensions
    a1 = Algorithm1(c=0.1, beta=0.1, output_bound=1.0, confidence=0.95)
    from pacpriv.pac.noise import trials_for_confidence

    assert a1.trials_needed(dim=4) == trials_for_confidence(confidence=0.95, c=0.1,
                                                            output_bound=1.0, dim=4)


def test_no_warning_from_the_new_forms():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_pac(_mean, POOL, mi_budget=0.1, n_trials=60, rng=2, release=False,
                execution=QUIET, rule=NO_CHECK)
        calibrate_noise(estimate_output_spectrum(OUTPUTS), mi_budget=0.2, rule="exact-mi")


@pytest.mark.parametrize("name", RULE_CLASSES.names())
def test_every_registered_rule_round_trips_through_the_registry(name):
    """``RULE_CLASSES.from_dict(rule.to_dict())`` rebuilds the rule (a name usable alone with
    its defaults; Algorithm 1 with its parameters)."""
    from pacpriv.pac.noise._registry import shorthands

    cls = RULE_CLASSES[name]
    rule = cls() if name in shorthands() else cls(c=1e-3, beta=0.25, output_bound=2.0)
    assert rule.to_dict()["rule"] == name
    assert RULE_CLASSES.from_dict(rule.to_dict()) == rule




def test_a_confidence_below_one_half_warns_that_it_is_worse_than_a_coin_flip():
    """A new user's --confidence 1e-300 printed '71.98% certified (1−γ = 1e-300)' silently."""
    import pytest as _pytest

    from pacpriv.exceptions import VacuousBoundWarning
    from pacpriv.pac.noise import Certified

    with _pytest.warns(VacuousBoundWarning, match="coin flip"):
        Certified(confidence=1e-300)
