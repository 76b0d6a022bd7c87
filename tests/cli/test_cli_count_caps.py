"""Counts that would run without end are capped before any work (fifth fresh pass):
``--retries 10**400`` retried a failing trial forever; ``predict fit --n-worlds 10**400`` was
an ``OverflowError`` after a timing probe had already run."""

from __future__ import annotations

import pytest

from pacpriv.cli.main import main
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction import PrivatePredictor

HUGE = "1" + "0" * 400


def _run(argv) -> int:
    try:
        return main(argv)
    except SystemExit as stop:
        return int(stop.code or 0)


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in captured.err + captured.out
    return err[0]


@pytest.mark.parametrize("value,got", [(HUGE, "an integer of 401 digits"), ("1001", "1001")])
def test_retries_capped_before_any_trial(value, got, tmp_path, capsys):
    out = tmp_path / "o"
    assert _run(["pac", "run", "--no-progress", "--mi-budget", "0.1", "--trials", "20",
                 "--mechanism", "mean", "--dataset", "iris", "--retries", value,
                 "--out", str(out)]) == 2
    assert _one_error_line(capsys) == (
        f"pacpriv: error: --retries must be an integer in [0, 1000]; got {got}")
    assert not out.exists()


def test_retries_cap_in_the_api():
    with pytest.raises(ValueError, match=r"`retries` must be an integer in \[0, 1000\]"):
        ExecutionOptions(retries=1001)
    assert ExecutionOptions(retries=1000).retries == 1000


@pytest.mark.parametrize("value,got", [(HUGE, "an integer of 401 digits"),
                                       ("1000002", "1000002"), ("3", "3")])
def test_n_worlds_capped_before_any_work(value, got, tmp_path, capsys):
    state = tmp_path / "st"
    assert _run(["predict", "fit", "--estimator", "logistic", "--dataset", "breast_cancer",
                 "--state", str(state), "--n-worlds", value, "--per-query-budget", "2^-16",
                 "--total-budget", "0.01", "--no-progress"]) == 2
    line = _one_error_line(capsys)
    assert line == ("pacpriv: error: --n-worlds must be an even integer in [2, 1000000]; "
                    f"got {got}")
    assert "estimate" not in line and not state.exists()


def test_n_worlds_cap_in_the_api():
    with pytest.raises(ValueError, match=r"`n_worlds` must be an integer in \[2, 1000000\]"):
        PrivatePredictor(lambda X, y: None, n_worlds=10**6 + 2, per_query_budget=0.01,
                         total_budget=0.1)
