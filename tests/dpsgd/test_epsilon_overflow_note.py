"""ε where the PLD cannot be built at huge counts says why, and never labels an ∞ as a
certified PLD value (seventh new-user pass #487: ``dpsgd bound --epochs 10**400`` printed
"inf (PLD unavailable: ValueError)" labelled "certified, PLD")."""

from __future__ import annotations

import math

import pytest

from pacpriv.cli.main import main
from pacpriv.dpsgd.epsilon import epsilon_bound

HUGE = 10**400


def test_no_finite_bound_is_labelled_as_a_closed_form_with_the_reason():
    b = epsilon_bound(1.0, steps_per_epoch=100, epochs=HUGE, delta=1e-5)
    assert math.isinf(b.epsilon) and "PLD" not in b.source
    assert "float64" in b.pld_note and "no finite bound" in b.pld_note
    assert "ValueError" not in b.pld_note


@pytest.mark.parametrize("sigma", [1e190, 1e200, 1e250])
def test_a_finite_closed_form_still_answers(sigma):
    b = epsilon_bound(sigma, steps_per_epoch=100, epochs=HUGE, delta=1e-5)
    assert math.isfinite(b.epsilon) and "closed form" in b.source
    assert "ValueError" not in b.pld_note and "no finite bound" not in b.pld_note
    # monotone in σ: more noise never raises ε
    assert epsilon_bound(sigma * 10, steps_per_epoch=100, epochs=HUGE,
                         delta=1e-5).epsilon <= b.epsilon


def test_cli_row_says_why(capsys):
    assert main(["dpsgd", "bound", "--steps-per-epoch", "100", "--epochs", str(HUGE),
                 "--noise-multiplier", "1"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("epsilon"))
    assert "certified, PLD" not in row and "ValueError" not in row
    assert "no finite bound" in row
