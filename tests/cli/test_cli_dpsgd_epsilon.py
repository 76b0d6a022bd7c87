"""``pacpriv dpsgd sigma --target-epsilon E --delta D``."""

from __future__ import annotations

import json

import pytest

from pacpriv.cli import main
from pacpriv.dpsgd import epsilon_of, noise_multiplier_for_epsilon

BASE = ["dpsgd", "sigma", "--steps-per-epoch", "10", "--epochs", "3"]


@pytest.mark.parametrize("sampling", ["random_allocation", "poisson"])
def test_sigma_for_target_epsilon_json(capsys, sampling):
    assert main([*BASE, "--target-epsilon", "2", "--delta", "1e-6", "--sampling", sampling,
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = noise_multiplier_for_epsilon(2.0, 1e-6, steps_per_epoch=10, epochs=3,
                                       sampling=sampling)
    assert out["noise_multiplier"] == pytest.approx(ref, rel=1e-12)
    assert out["epsilon"] <= 2.0 and out["delta"] == 1e-6
    assert out["epsilon"] == pytest.approx(epsilon_of(ref, 1e-6, steps_per_epoch=10, epochs=3,
                                                      sampling=sampling), rel=1e-12)
    assert out["certified"] is (sampling == "random_allocation")


def test_sigma_for_target_epsilon_table_rounds_sigma_up(capsys):
    assert main([*BASE, "--target-epsilon", "1"]) == 0
    out = capsys.readouterr().out
    ref = noise_multiplier_for_epsilon(1.0, 1e-5, steps_per_epoch=10, epochs=3)
    line = next(row for row in out.splitlines() if row.startswith("noise multiplier"))
    assert float(line.split()[-1]) >= ref and "certified" in line


@pytest.mark.parametrize("flags,match", [
    (["--target-epsilon", "0"], "--target-epsilon must be in"),
    (["--target-epsilon", "nan"], "--target-epsilon"),
    (["--target-epsilon", "60"], "--target-epsilon must be in"),
    (["--target-epsilon", "1", "--delta", "1"], "--delta must be in"),
    (["--target-epsilon", "1", "--rtol", "1"], "--rtol must be in"),
    (["--target-epsilon", "1", "--target-accuracy", "0.6"], "not allowed with"),
    (["--target-accuracy", "0.6", "--sampling", "poisson"], "--target-epsilon only"),
    ([], "one of the arguments --target-accuracy --target-epsilon is required"),
])
def test_bad_flags_one_line_exit_2(capsys, flags, match):
    try:
        code = main([*BASE, *flags])
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


ACC = ["--target-accuracy", "0.6"]


@pytest.mark.parametrize("flags,match", [
    # an invalid --rtol is refused whatever the method or target
    ([*ACC, "--rtol", "0"], "--rtol must be in [1e-6, 0.1]; got 0.0"),
    ([*ACC, "--rtol", "-1"], "--rtol must be in [1e-6, 0.1]; got -1.0"),
    ([*ACC, "--rtol", "nan"], "--rtol must be in"),
    ([*ACC, "--method", "exact", "--rtol", "0"], "--rtol must be in"),
    (["--target-epsilon", "3", "--rtol", "-1"], "--rtol must be in"),
    # a valid --rtol where there is no search is said, not ignored
    ([*ACC, "--rtol", "0.01"], "--rtol applies to --method exact and --target-epsilon only"),
    ([*ACC, "--method", "closed-form", "--rtol", "0.01"], "--rtol applies to"),
    # --method with --target-epsilon
    (["--target-epsilon", "3", "--method", "exact"], "--method applies to --target-accuracy"),
    (["--target-epsilon", "3", "--method", "closed-form"], "--method applies to"),
])
def test_sigma_refuses_flags_that_would_be_ignored(capsys, flags, match):
    assert main([*BASE, *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pacpriv: error:") and match in err[0]


def test_sigma_rtol_still_applies_where_it_searches(capsys):
    assert main([*BASE, *ACC, "--method", "exact", "--rtol", "0.01", "--json"]) == 0
    exact = json.loads(capsys.readouterr().out)
    assert main([*BASE, *ACC, "--json"]) == 0
    closed = json.loads(capsys.readouterr().out)
    assert exact["noise_multiplier"] <= closed["noise_multiplier"]
    assert main([*BASE, "--target-epsilon", "3", "--rtol", "0.01", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["epsilon"] <= 3.0
