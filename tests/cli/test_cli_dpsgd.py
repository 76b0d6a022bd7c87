"""Tests for ``pacpriv dpsgd`` CLI."""

from __future__ import annotations

import json

import pytest

from pacpriv.cli import main
from pacpriv.dpsgd import membership_inference_accuracy_bound


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
