"""What the comparison derives from a target bound is checked before any work (new-user
pass 6, c6008: ``pacpriv compare --target-accuracy 0.5000000000000001`` trained for 33 s, then
failed with "`mi_budget` must be in (0.0, inf); got 0.0", a parameter the user never passed).
"""

from __future__ import annotations

import math
import os

import pytest

import pacpriv.compare.run as run
from pacpriv.cli.main import main
from pacpriv.compare import compare_pac_dpsgd, compare_table
from pacpriv.pac.bounds import mi_budget_for_accuracy

NEAR_HALF = [math.nextafter(0.5, 1.0), 0.5000000000000002]


@pytest.fixture
def no_work(monkeypatch):
    def _refuse(*a, **k):
        raise AssertionError("work started before the target was checked")
    monkeypatch.setattr(run, "_results", _refuse)


@pytest.mark.parametrize("a", NEAR_HALF)
def test_the_derived_budget_is_zero_there(a):
    assert mi_budget_for_accuracy(a, prior=0.5) < 1e-300  # why the check is needed


@pytest.mark.parametrize("a", NEAR_HALF)
def test_api_refuses_before_work(a, no_work):
    with pytest.raises(ValueError, match=r"^`target_accuracy` 0\.50+[12] .*MI budget 0 nats is "
                                         r"outside \[1e-300, 100\]"):
        compare_pac_dpsgd("breast_cancer", target_accuracy=a)
    with pytest.raises(ValueError, match=r"^`target_accuracies` 0\.50+[12] "):
        compare_table(["breast_cancer"], target_accuracies=[0.6, a])


def test_valid_targets_pass():
    run.check_derived([0.51, 0.6, 0.99, 1 - 1e-12], steps_per_epoch=10, epochs=3)


def test_a_non_finite_noise_multiplier_is_refused(monkeypatch):
    import pacpriv.dpsgd.bounds as bounds
    monkeypatch.setattr(bounds, "closed_form_noise_multiplier", lambda *a, **k: math.inf)
    with pytest.raises(ValueError, match=r"^--target-accuracy 0\.6: the DP-SGD noise "
                                         r"multiplier .* is inf"):
        run.check_derived([0.6], steps_per_epoch=10, epochs=3, what="--target-accuracy")


@pytest.mark.parametrize("value", ["0.5000000000000001", "0.6,0.5000000000000002"])
def test_cli_names_its_flag_and_takes_no_folder(value, tmp_path, monkeypatch, capsys, no_work):
    monkeypatch.chdir(tmp_path)
    rc = main(["compare", "--dataset", "breast_cancer", "--target-accuracy", value,
               "--out", "rep", "--no-progress"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("pacpriv: error: --target-accuracy 0.50000000000000")
    assert "too close to the blind-guess rate 0.5" in err
    assert os.listdir(tmp_path) == []


def test_cli_curve_bounds_are_checked_too(tmp_path, monkeypatch, capsys, no_work):
    monkeypatch.chdir(tmp_path)
    rc = main(["compare", "--dataset", "breast_cancer", "--curve", "0.6,0.5000000000000001",
               "--out", "rep", "--no-progress"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pacpriv: error: --curve 0.50000000000000"), err
    assert os.listdir(tmp_path) == []


def test_predict_fit_target_a_step_above_half_is_named(tmp_path, monkeypatch, capsys):
    # sibling: the total budget predict fit derives from --target-accuracy was 0 nats
    monkeypatch.chdir(tmp_path)
    rc = main(["predict", "fit", "--no-progress", "--estimator", "logistic", "--dataset", "iris",
               "--n-worlds", "8", "--seed", "0", "--state", "st", "--per-query-budget", "0.001",
               "--target-accuracy", "0.5000000000000001"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err == ("pacpriv: error: --target-accuracy 0.5000000000000001 is too close to the "
                   "blind-guess rate 0.5: it allows a total budget of 0 nats; give a larger one")
    assert os.listdir(tmp_path) == []


def test_an_unlabelled_pool_says_it_has_no_labels(tmp_path):
    """'pool' has classes None said nothing (eighth new-user pass)."""
    import numpy as np

    from pacpriv.compare import compare_pac_dpsgd

    np.save(tmp_path / "pool.npy", np.random.default_rng(0).normal(size=(50, 3)))
    with pytest.raises(ValueError, match=r"'pool' has no labels: compare trains a classifier"):
        compare_pac_dpsgd(str(tmp_path / "pool.npy"), target_accuracy=0.6)
