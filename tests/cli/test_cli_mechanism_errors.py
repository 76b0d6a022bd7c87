"""A failing mechanism's own exception message is withheld (V1 review F11).

The message may quote record values, and pacpriv writes no record value anywhere: stderr
names the mechanism, the exception type and the trial, says that the message was withheld
and how to see it (``--show-errors``, ``PACPRIV_SHOW_ERRORS=1``, or ``__cause__`` in Python).
"""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.cli import main
from pacpriv.exceptions import MechanismError
from pacpriv.pac import run_pac
from pacpriv.pac.engine import ExecutionOptions

SENTINEL = "987654.321123"  # planted in the mechanism's message, as a leaked record would be

FUNCS = f'''
import numpy as np

def leaky(data):
    raise ValueError("record out of range: [{SENTINEL}, -0.46]")

def leaky_fit(data):
    raise ValueError("bad record [{SENTINEL}]")
'''


@pytest.fixture()
def user(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 2))
    y = (X[:, 0] > 0).astype(int)
    rows = ["a,b,label"] + [f"{float(r[0])!r},{float(r[1])!r},{c}"
                            for r, c in zip(X, y, strict=True)]
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "myfuncs.py").write_text(FUNCS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PACPRIV_SHOW_ERRORS", raising=False)
    return tmp_path


COMMANDS = {
    "pac run": ["pac", "run", "--mechanism", "myfuncs.py:leaky", "--dataset", "data.csv",
                "--label-column", "label", "--mi-budget", "0.1", "--trials", "12", "--seed",
                "3", "--no-progress", "--out", "rep"],
    "pac records": ["pac", "records", "--mechanism", "myfuncs.py:leaky", "--dataset",
                    "data.csv", "--label-column", "label", "--noise-std", "0.1", "--trials",
                    "20", "--records", "0-2", "--seed", "3", "--n-jobs", "1", "--no-progress",
                    "--out", "rep"],
    "predict fit": ["predict", "fit", "--estimator", "myfuncs.py:leaky_fit", "--dataset",
                    "data.csv", "--label-column", "label", "--state", "st", "--n-worlds", "4",
                    "--per-query-budget", "2^-10", "--total-budget", "2^-9", "--seed", "1",
                    "--no-progress"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_message_withheld_by_default(user, capsys, command):
    code = main(COMMANDS[command])
    err = capsys.readouterr().err
    assert code == 1, err
    assert SENTINEL not in err
    assert err.count("\n") == 1
    if command == "predict fit":  # a plain function as --estimator is probed before any world
        assert err.startswith("pacpriv: error: --estimator myfuncs.py:leaky_fit ")
        assert "raised ValueError when called on (X, y), before any world was fitted" in err
    else:
        assert err.startswith("pacpriv: error: Mechanism ")
        assert "raised ValueError" in err and "in trial " in err
    assert "withheld because it may quote record values" in err
    assert "--show-errors" in err and "PACPRIV_SHOW_ERRORS=1" in err
    if command == "pac run":  # records and predict wrap f in their own trial function (F4)
        assert "Mechanism myfuncs.py:leaky raised ValueError in trial 0" in err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_show_errors_flag_prints_the_message(user, capsys, command):
    code = main([*COMMANDS[command], "--show-errors"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert "(caused by ValueError: " in err and SENTINEL in err


def test_show_errors_environment_variable(user, capsys, monkeypatch):
    monkeypatch.setenv("PACPRIV_SHOW_ERRORS", "1")
    assert main(COMMANDS["pac run"]) == 1
    assert SENTINEL in capsys.readouterr().err
    monkeypatch.setenv("PACPRIV_SHOW_ERRORS", "0")
    assert main(COMMANDS["pac run"]) == 1
    assert SENTINEL not in capsys.readouterr().err


def test_python_api_keeps_the_original_as_cause():
    """In Python the message withholds too; the original exception is ``__cause__``."""
    def leaky(X):
        if len(X) > 3:
            raise KeyError(f"record {SENTINEL}")
        return X.mean(axis=0)

    with pytest.raises(MechanismError) as info:
        run_pac(leaky, np.ones((30, 1)), mi_budget=0.1, n_trials=10,
                execution=ExecutionOptions(progress=False))
    assert SENTINEL not in str(info.value) and "raised KeyError in trial" in str(info.value)
    assert isinstance(info.value.__cause__, KeyError) and SENTINEL in str(info.value.__cause__)


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
# the release is on the whole pool on purpose (a fixed secret subset); that warning is expected
@pytest.mark.filterwarnings("ignore:this release is on the whole pool")
def test_release_failure_is_withheld_and_shows_no_seed():
    """f failing only on the release's secret subset: MechanismError without the release seed."""
    def fails_on_release(X):  # the release below runs on all 30 records, a trial (almost) never
        if len(X) == 30:
            raise ValueError(f"record {SENTINEL}")
        return np.array([float(len(X))])

    with pytest.raises(MechanismError) as info:
        run_pac(fails_on_release, np.ones((30, 1)), mi_budget=0.1, n_trials=10,
                execution=ExecutionOptions(progress=False),
                release_rng=12345, secret_mask=np.ones(30, dtype=bool))
    err = info.value
    assert err.trial_index == -1 and err.seed == {}
    assert "release's secret subset" in str(err) and "raised ValueError" in str(err)
    assert SENTINEL not in str(err) and "12345" not in str(err)
    assert SENTINEL in str(err.__cause__)
