"""The error bar and the per-record/whole-subset noise check on the command line (issue 25,
item 5): ``pac records`` warns when a per-record target needs more noise than the whole-subset
plan (an outlier), and every PAC-report command takes ``--withhold-pool-statistics``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pacpriv.cli import build_parser, main


def _pool_csv(path, outlier: bool):
    X = np.random.default_rng(4).normal(5e4, 1e4, size=(60, 3))
    if outlier:
        X[0, 1] = 9.8e5
    np.savetxt(path, X, delimiter=",", header="a,b,c", comments="")
    return path


@pytest.mark.filterwarnings("always::pacpriv.exceptions.PacprivWarning")
@pytest.mark.parametrize("outlier", [True, False])
def test_pac_records_warns_when_per_record_needs_more_noise(tmp_path, capsys, outlier):
    csv = _pool_csv(tmp_path / "p.csv", outlier)
    code = main(["pac", "records", "--mechanism", "mean", "--dataset", str(csv),
                 "--target-accuracy", "0.6", "--trials", "200", "--records", "0-4", "--seed",
                 "0", "--no-progress", "--out", str(tmp_path / "rec")])
    err = capsys.readouterr().err
    assert code == 0, err
    warned = "the per-record plan needs more noise than the whole-subset plan" in err
    assert warned == outlier
    if outlier:  # ratios only: no absolute noise scale of a private pool on the screen
        assert "x its noise power E||B||^2" in err and "release with it (pacpriv pac run)" in err


@pytest.mark.parametrize("argv", [
    ["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1"],
    ["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--noise-std", "1"],
    ["compare"],
])
def test_every_pac_report_command_can_withhold_the_pool_statistics(argv):
    args = build_parser().parse_args([*argv, "--withhold-pool-statistics"])
    assert args.withhold_pool_statistics is True


def test_withheld_and_reported_are_exclusive(capsys):
    with pytest.raises(SystemExit) as info:
        main(["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
              "--withhold-pool-statistics", "--report-pool-statistics"])
    assert info.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_pac_records_withheld_shows_no_scale(tmp_path, capsys):
    code = main(["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--noise-std",
                 "0.5", "--trials", "20", "--records", "0-2", "--seed", "0", "--no-progress",
                 "--withhold-pool-statistics", "--json", "--out", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert code == 0
    assert "withheld" in json.dumps(json.loads(out))
