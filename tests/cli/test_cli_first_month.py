"""A user's first month (issue 35 follow-up): CLI flags refused in one clear line, first."""

import json

import pytest

from pacpriv.cli.main import main
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction import PrivatePredictor

DPSGD = ["--noise-multiplier", "1", "--steps-per-epoch", "100", "--epochs", "10"]


def _run(argv) -> int:
    """``main``'s exit status, whether it returns it or argparse raises ``SystemExit``."""
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


@pytest.mark.parametrize("dim", ["4611686018427387905", str(2**53 + 1), str(10**30)])
def test_huge_dim_refused_naming_the_flag_and_range(dim, capsys):
    """``pac trials --dim 2**62+1`` stopped in a scipy solver message."""
    assert _run(["pac", "trials", "--dim", dim]) == 2
    line = _one_error_line(capsys)
    assert line.startswith("pacpriv: error: --dim must be an integer in [1, 9007199254740992]")
    assert "solver" not in line


def test_largest_dim_still_answers(capsys):
    assert _run(["pac", "trials", "--dim", str(2**53), "--json"]) == 0
    assert '"n_trials"' in capsys.readouterr().out


@pytest.mark.parametrize("flag,value", [("--tolerance", "1e-300"), ("--tolerance", "0.9"),
                                        ("--steps-per-epoch", "0"), ("--epochs", "0"),
                                        ("--noise-multiplier", "-1")])
def test_exact_validates_every_flag_before_its_note(flag, value, capsys):
    """``dpsgd exact --tolerance 1e-300`` printed "this can take minutes" before refusing."""
    argv = ["dpsgd", "exact", *DPSGD, "--tolerance", "1e-6"]
    argv[argv.index(flag) + 1] = value
    assert _run(argv) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"pacpriv: error: {flag} must be"), line
    assert "note" not in line


@pytest.mark.parametrize("text,expected", [
    ("9" * 401 + ".0", "is a number too large for float64"),
    ("1e400", "is a number too large for float64"),
    ("-1e400", "is a number too large for float64"),
    ("1e-400", "underflows to 0 in float64"),
    ("0.5e-400000", "underflows to 0 in float64"),
])
@pytest.mark.parametrize("cmd", [["dpsgd", "bound", *DPSGD], ["pac", "posterior", "--prior", "0.5",
                                                              "--mi-budget", "1"]])
def test_overflow_and_underflow_report_the_typed_text(text, expected, cmd, capsys):
    """A 401-digit float was reported as "got inf", 1e-400 as "got 0.0"."""
    flag = "--noise-multiplier" if cmd[0] == "dpsgd" else "--mi-budget"
    argv = list(cmd)
    argv[argv.index(flag) + 1] = text
    assert _run(argv) == 2
    line = _one_error_line(capsys)
    assert f"argument {flag}:" in line and expected in line
    assert "got inf" not in line and "got 0.0" not in line
    assert text[:20] in line and len(line) < 250  # the typed text, cut when long


@pytest.mark.parametrize("text", ["0", "0.0", "0e-400", "-0.0"])
def test_a_true_zero_is_not_called_an_underflow(text, capsys):
    argv = ["dpsgd", "bound", *DPSGD]
    argv[argv.index("--noise-multiplier") + 1] = text
    assert _run(argv) == 2
    line = _one_error_line(capsys)
    assert "underflows" not in line and "--noise-multiplier must be" in line


@pytest.mark.parametrize("text", ["1e20", "9" * 5000, "1e400"])
def test_huge_count_text_is_refused_briefly(text, capsys):
    argv = ["dpsgd", "bound", *DPSGD]
    argv[argv.index("--steps-per-epoch") + 1] = text
    assert _run(argv) == 2
    line = _one_error_line(capsys)
    assert "argument --steps-per-epoch:" in line and len(line) < 250


@pytest.mark.parametrize("steps,epochs,k", [(10**400, 10**30, 1), (2**53 + 1, 7, 3),
                                            (10**20 + 1, 10**4, 2)])
def test_bound_json_echoes_exact_integer_counts(steps, epochs, k, capsys):
    """``dpsgd bound --json`` echoed 10**400 steps as null and 10**30 epochs as 1e+30."""
    argv = ["dpsgd", "bound", "--json", "--noise-multiplier", "1", "--steps-per-epoch",
            str(steps), "--epochs", str(epochs), "--k", str(k)]
    assert _run(argv) == 0
    out = capsys.readouterr().out
    payload = json.loads(out)
    assert payload["steps_per_epoch"] == steps and type(payload["steps_per_epoch"]) is int
    assert payload["epochs"] == epochs and type(payload["epochs"]) is int
    assert payload["k"] == k
    assert not any(key.startswith(("steps_per_epoch_", "epochs_")) for key in payload)
    assert f'"steps_per_epoch": {steps}' in out  # a JSON integer, not a string


@pytest.mark.parametrize("text,expected", [
    ("2^-400000", "underflows to 0 in float64"), ("2**-1075", "underflows to 0 in float64"),
    ("2^400000", "is a number too large for float64"), ("2^1024", "is a number too large"),
    ("2^-" + "9" * 5000, "underflows to 0 in float64"), ("1e-400", "underflows to 0"),
])
def test_power_of_two_budgets_report_the_typed_text(text, expected, capsys):
    """``--per-query-budget 2^-400000`` was "got 0.0"; ``2^400000`` an OverflowError."""
    assert _run(["predict", "fit", "--per-query-budget", text]) == 2
    line = _one_error_line(capsys)
    assert "argument --per-query-budget:" in line and expected in line
    assert text[:9] in line and len(line) < 250 and "got 0.0" not in line


def test_smallest_and_largest_powers_of_two_still_parse():
    from pacpriv.cli.predict import budget_number

    assert budget_number("2^-1074") == 5e-324 and budget_number("2**1023") == 2.0**1023


@pytest.mark.parametrize("spec", ["1e400:2", "0:1e-400", "-1e999:0,0:1"])
def test_feature_ranges_report_the_typed_text(spec, tmp_path, capsys):
    data = tmp_path / "d.csv"
    data.write_text("a,b\n1,2\n3,4\n5,6\n")
    assert _run(["pac", "run", "--mechanism", "mean", "--dataset", str(data), "--mi-budget",
                 "1", "--feature-ranges", spec, "--out", str(tmp_path / "o")]) == 2
    line = _one_error_line(capsys)
    assert "--feature-ranges" in line and repr(spec.split(",")[0]) in line
    assert "got inf" not in line and "0.0" not in line


def test_records_refuses_a_run_too_large_for_memory_before_its_estimate(tmp_path, capsys):
    """``pac records --trials 2**62`` printed a time estimate, then the memory refusal."""
    out = tmp_path / "o"
    assert _run(["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--trials",
                 str(2**62), "--noise-std", "1", "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert line.startswith("pacpriv: error: --trials = 4611686018427387904 with 150 records")
    assert "estimate" not in line and not out.exists()


@pytest.mark.parametrize("flag,value,start", [
    ("--hidden", str(2**62), "--hidden must be an integer in [1, 65536]"),
    ("--hidden", "65537", "--hidden must be an integer in [1, 65536]"),
    ("--reference-models", str(2**62), "--reference-models = 4611686018427387904 with"),
])
def test_audit_huge_counts_are_refused_before_any_training(flag, value, start, tmp_path,
                                                           capsys):
    """``audit --hidden 2**62`` trained until torch failed; a huge --reference-models was
    refused naming `n_trials` and an API argument."""
    out = tmp_path / "o"
    assert _run(["audit", "--dataset", "iris", "--noise-multiplier", "1", "--out", str(out),
                 flag, value]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"pacpriv: error: {start}"), line
    assert "n_trials" not in line and "output_path" not in line and not out.exists()

# --- counts that would run without end are capped before any work (fifth fresh pass):
# ``--retries 10**400`` retried a failing trial forever; ``predict fit --n-worlds 10**400`` was
# an ``OverflowError`` after a timing probe had already run.

HUGE = "1" + "0" * 400


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
