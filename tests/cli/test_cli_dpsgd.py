"""Tests for ``pacpriv dpsgd`` CLI."""

from __future__ import annotations

import json

import pytest

from pacpriv.cli import main
from pacpriv.dpsgd import membership_inference_accuracy_bound
from pacpriv.dpsgd.labels import bound_fields


def test_bound_json(capsys):
    """`dpsgd bound --json` prints the library's numbers."""
    assert main(["dpsgd", "bound", "--steps-per-epoch", "100", "--epochs", "10",
                 "--noise-multiplier", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = membership_inference_accuracy_bound(1.0, steps_per_epoch=100, epochs=10)
    assert out["accuracy"] == pytest.approx(ref.accuracy)


def test_sigma_table(capsys):
    """`dpsgd sigma` prints a readable line with the closed-form σ = 12.0112240878...,
    rounded up (a σ shown smaller than needed would understate the noise to use)."""
    assert main(["dpsgd", "sigma", "--steps-per-epoch", "1", "--epochs", "100",
                 "--target-accuracy", "0.75"]) == 0
    assert "12.011225" in capsys.readouterr().out


def test_exact_table(capsys):
    """`dpsgd exact` prints the certified interval."""
    assert main(["dpsgd", "exact", "--steps-per-epoch", "10", "--epochs", "1",
                 "--noise-multiplier", "1"]) == 0
    out = capsys.readouterr().out
    assert "exact accuracy lower" in out and "0.5760" in out


def test_bad_input_exit_2(capsys):
    """Bad input: one-line error, exit 2."""
    assert main(["dpsgd", "bound", "--steps-per-epoch", "0", "--epochs", "1",
                 "--noise-multiplier", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pacpriv: error:")
    assert "--steps-per-epoch must be" in err[0]  # the flag the user typed, not the API name


def test_compare_needs_sigma_or_target(capsys):
    """`dpsgd compare` without σ or target exits 2."""
    assert main(["dpsgd", "compare", "--steps-per-epoch", "10", "--epochs", "1"]) == 2


def test_bound_prints_epsilon_at_delta(capsys):
    """ε at --delta from the certified PLD is printed beside the accuracy (rounded up)."""
    from pacpriv.dpsgd import tradeoff_curve

    assert main(["dpsgd", "bound", "--steps-per-epoch", "100", "--epochs", "10",
                 "--noise-multiplier", "1", "--delta", "1e-6", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = tradeoff_curve(noise_multiplier=1.0, steps_per_epoch=100, epochs=10).get_epsilon(1e-6)
    assert out["epsilon"] == {"epsilon": ref, "delta": 1e-6,
                              "source": "certified PLD, add or remove one record",
                              **bound_fields("certified", detail="PLD")}
    assert main(["dpsgd", "bound", "--steps-per-epoch", "100", "--epochs", "10",
                 "--noise-multiplier", "1"]) == 0
    assert ("epsilon at delta=1e-05 (certified, PLD; every record, worst case, add/remove one "
            "record)") in capsys.readouterr().out


@pytest.mark.parametrize("command", [
    ["bound", "--noise-multiplier", "2"],
    ["sigma", "--target-accuracy", "0.6"],
])
def test_k_of_t_commands(capsys, command):
    """--k: the k-of-t chi-square bound (hypergeometric) and its inverse."""
    assert main(["dpsgd", *command, "--steps-per-epoch", "20", "--epochs", "3", "--k", "4",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    if command[0] == "bound":
        ref = membership_inference_accuracy_bound(2.0, steps_per_epoch=20, epochs=3, k=4)
        assert out["accuracy"] == ref.accuracy and out["k"] == 4
    else:
        acc = membership_inference_accuracy_bound(out["noise_multiplier"], steps_per_epoch=20,
                                                  epochs=3, k=4).accuracy
        assert acc <= 0.6


@pytest.mark.parametrize(("k", "budget", "note"), [
    ("2", None, "exact accuracy lower (certified; every record"),  # the k-of-t chain
    ("3", None, "exact accuracy lower (certified; every record"),  # the pruned chain
    ("3", 0.0, "certified with confidence 0.999"),  # no chain fits: the Monte-Carlo end
])
def test_exact_k_of_t_says_its_confidence(capsys, monkeypatch, k, budget, note):
    if budget is not None:
        from pacpriv.dpsgd import k_of_t

        monkeypatch.setattr(k_of_t, "CHAIN_WORK_BUDGET", budget)
    assert main(["dpsgd", "exact", "--steps-per-epoch", "10", "--epochs", "1", "--k", k,
                 "--noise-multiplier", "1", "--tolerance", "0.05"]) == 0
    out = capsys.readouterr().out
    assert note in out and "epsilon at delta" in out


@pytest.mark.parametrize(("flags", "match"), [(["--k", "11"], "--k must be"),
                                              (["--delta", "0"], "--delta must be")])
def test_k_and_delta_are_checked_first(capsys, flags, match):
    assert main(["dpsgd", "bound", "--steps-per-epoch", "10", "--epochs", "1",
                 "--noise-multiplier", "1", *flags]) == 2
    assert match in capsys.readouterr().err


@pytest.mark.parametrize(("tolerance", "noted"), [("5e-5", True), ("1e-4", False)])
def test_exact_below_default_tolerance_notes_the_wait(capsys, tolerance, noted):
    """A tolerance below the default 1e-4 can run for minutes: one stderr line says so first."""
    assert main(["dpsgd", "exact", "--steps-per-epoch", "10", "--epochs", "1",
                 "--noise-multiplier", "1", "--tolerance", tolerance]) == 0
    err = capsys.readouterr().err
    assert ("this can take minutes" in err) is noted
