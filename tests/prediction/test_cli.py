"""``pacpriv predict fit|query|status`` and the ``serve`` parser."""

from __future__ import annotations

import json

import pytest

from pacpriv.cli import build_parser, main
from pacpriv.cli.predict import budget_number
from pacpriv.pac.posterior import mi_budget_for_accuracy, posterior_success_rate


def test_budget_number_accepts_powers_of_two():
    assert budget_number("2^-16") == 2.0**-16
    assert budget_number("2**-8") == 2.0**-8
    assert budget_number("0.25") == 0.25


def test_fit_query_status_report(tmp_path, capsys):
    state = tmp_path / "s"
    args = ["predict", "fit", "--estimator", "naive_bayes", "--dataset", "iris", "--state",
            str(state), "--n-worlds", "4", "--per-query-budget", "2^-10",
            "--target-accuracy", "0.55", "--seed", "0", "--no-progress"]
    assert main(args) == 0
    total = float(mi_budget_for_accuracy(0.55, prior=0.5))
    assert f"0 of {int(total / 2**-10)}" in capsys.readouterr().out
    assert main(["predict", "query", "--state", str(state), "--dataset", "iris", "--rows",
                 "0:3", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert len(body["outputs"]) == 3 and len(body["outputs"][0]) == 3
    assert body["spent"] == 3 * 2**-10
    assert main(["predict", "status", "--state", str(state), "--out", str(tmp_path / "r")]) == 0
    md = (tmp_path / "r" / "report.md").read_text()
    want = posterior_success_rate(3 * 2**-10, prior=0.5)
    assert "| queries answered | 3 |" in md and "certified" in md
    shown = float(md.split("above **")[1].split("%")[0])
    assert want * 100 <= shown <= want * 100 + 1e-4  # rounded up, never down
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert "secret_index" not in json.dumps(report)


def test_errors_exit_with_one_line(tmp_path, capsys):
    base = ["predict", "fit", "--estimator", "naive_bayes", "--dataset", "iris", "--state",
            str(tmp_path / "s"), "--per-query-budget", "2^-10", "--total-budget", "2^-9",
            "--no-progress", "--seed", "1"]
    assert main([*base, "--n-worlds", "3"]) == 2
    assert "--n-worlds must be an even integer" in capsys.readouterr().err
    assert main([*base, "--n-worlds", "4"]) == 0
    capsys.readouterr()
    assert main(["predict", "query", "--state", str(tmp_path / "s"), "--dataset", "iris",
                 "--rows", "0:3"]) == 1  # 3 rows > 2 allowed: refused, nothing spent
    assert "Nothing was spent" in capsys.readouterr().err
    assert main(["predict", "status", "--state", str(tmp_path / "s"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_answered"] == 0
    assert main(["predict", "status", "--state", str(tmp_path / "missing")]) == 2


def test_per_query_budget_above_the_total_names_the_flags_the_user_gave(tmp_path, capsys):
    base = ["predict", "fit", "--estimator", "naive_bayes", "--dataset", "iris", "--state",
            str(tmp_path / "s"), "--per-query-budget", "0.5", "--no-progress"]
    assert main([*base, "--target-accuracy", "0.55"]) == 2
    err = capsys.readouterr().err
    assert "--target-accuracy 0.55 allows" in err and "--total-budget" not in err
    assert main([*base, "--total-budget", "0.01"]) == 2
    assert "exceeds --total-budget 0.01" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()  # refused before anything was created


def test_serve_parser():
    args = build_parser().parse_args(["serve", "--state", "d", "--port", "9001"])
    assert (args.state, args.host, args.port) == ("d", "127.0.0.1", 9001)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve"])  # --state is required
