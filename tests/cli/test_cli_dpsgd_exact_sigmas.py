"""``pacpriv dpsgd exact`` with several noise multipliers (issue 13 item 3)."""

from __future__ import annotations

import json

from pacpriv.cli import main
from pacpriv.dpsgd import exact_membership_inference_accuracy


def test_exact_several_sigmas_json_matches_library(capsys):
    """Several σ: JSON lists agree with one array call of the library (certified ends)."""
    assert main(["dpsgd", "exact", "--steps-per-epoch", "10", "--epochs", "2",
                 "--noise-multiplier", "0.3", "1", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["noise_multiplier"] == [0.3, 1.0, 2.0]
    for i, s in enumerate((0.3, 1.0, 2.0)):
        one = exact_membership_inference_accuracy(s, steps_per_epoch=10, epochs=2)
        assert out["lower"][i] == one.lower and out["upper"][i] == one.upper


def test_exact_several_sigmas_table_rounds_outward(capsys):
    """The table has one row per σ; lower rounded down and upper rounded up (7 decimals),
    then ε at --delta."""
    assert main(["dpsgd", "exact", "--steps-per-epoch", "10", "--epochs", "2",
                 "--noise-multiplier", "1", "2"]) == 0
    setting, *lines = capsys.readouterr().out.strip().splitlines()
    assert setting == ("setting: M = 10 steps per epoch, E = 2 epochs, k = 1 of the M steps "
                       "per record per epoch; sigma per row")
    assert "certified" in lines[0] and len(lines) == 5 and lines[4].startswith("covers: ")
    for line, s in zip(lines[2:4], (1.0, 2.0), strict=True):
        _, lo, up, _, eps, *kind = line.split()
        assert " ".join(kind) == "(certified, PLD)"
        assert float(eps) > 0
        one = exact_membership_inference_accuracy(s, steps_per_epoch=10, epochs=2)
        assert float(lo) <= one.lower and float(up) >= one.upper
