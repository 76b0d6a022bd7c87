"""Advice names only flags the running command has (sixth new-user pass, m14 and m18).

``dpsgd sigma`` was told to "lower `tolerance`" (it had no --tolerance) and ``audit``, with a
hanging fit, to "pass timeout= (--timeout SECONDS)" (it had no --timeout). The library words
advice in API terms; the command line names the running command's flag, or, where it has
none, leaves the flag out (Ctrl-C for a stall)."""

from __future__ import annotations

import argparse
import re

import pytest

from pacpriv.cli.main import _cli_advice, _flags_of, build_parser, main
from pacpriv.exceptions import PROBE_TIME_ADVICE, TIMEOUT_ADVICE

_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _leaves(parser: argparse.ArgumentParser, path=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(path), parser
        return
    for name, sub in subs[0].choices.items():
        yield from _leaves(sub, (*path, name))


_COMMANDS = dict(_leaves(build_parser()))


def test_every_command_is_listed():
    assert {"audit", "pac run", "pac records", "dpsgd sigma", "predict fit"} <= set(_COMMANDS)


@pytest.mark.parametrize("command", sorted(_COMMANDS))
@pytest.mark.parametrize("advice", [TIMEOUT_ADVICE, PROBE_TIME_ADVICE])
def test_time_limit_advice_names_only_the_commands_flags(command, advice):
    flags = _flags_of(_COMMANDS[command])
    text = (f"no trial has finished for 60 s (0 finished in this round so far); a trial may "
            f"hang: {advice}, or press Ctrl-C to stop.")
    said = _cli_advice(text, flags)
    assert set(_FLAG.findall(said)) <= flags, (command, said)
    assert "=" not in said and "`" not in said  # no API keyword left
    assert said.endswith("press Ctrl-C to stop.")
    limit_flags = ({"--timeout"} if advice == TIMEOUT_ADVICE
                   else {"--timeout", "--max-minutes", "--time-limit"}) & flags
    assert bool(limit_flags) == bool(set(_FLAG.findall(said))), (command, said)


@pytest.mark.parametrize("command", ["audit", "compare", "pac run", "pac records",
                                     "predict fit"])
def test_commands_that_train_or_run_trials_have_a_per_trial_limit(command):
    """Only a per-trial limit stops a trial that hangs; the stall line advises it."""
    assert "--timeout" in _flags_of(_COMMANDS[command])
    said = _cli_advice(f"a trial may hang: {TIMEOUT_ADVICE}, or press Ctrl-C to stop.",
                       _flags_of(_COMMANDS[command]))
    assert said == ("a trial may hang: pass --timeout SECONDS to bound each trial, or press "
                    "Ctrl-C to stop.")


_HANG = '''
import time
from sklearn.base import BaseEstimator, ClassifierMixin
_END = time.monotonic() + 20.0  # gives up on its own: a regression fails, never hangs


class Hang(BaseEstimator, ClassifierMixin):
    def fit(self, X, y):
        while time.monotonic() < _END:
            time.sleep(0.02)
        raise RuntimeError("gave up")

    def predict_proba(self, X):  # a classifier the attacks could score (issue 35 #14)
        raise NotImplementedError
'''


def test_audit_timeout_stops_a_hanging_fit(tmp_path, capsys):
    module = tmp_path / "hang_est.py"
    module.write_text(_HANG)
    rc = main(["audit", "--dataset", "iris", "--model", f"{module}:Hang", "--non-private",
               "--reference-models", "4", "--no-progress", "--seed", "0", "--timeout", "0.5",
               "--out", str(tmp_path / "rep")])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "exceeded --timeout 0.5 s" in err and "trial 0" in err  # the flag (fix9a item 2)
    assert not (tmp_path / "rep" / "report.json").exists()


@pytest.mark.parametrize("argv", [
    # m14: Poisson's PLD cannot certify this target; the advice names sigma's own flags
    ["dpsgd", "sigma", "--steps-per-epoch", "100", "--epochs", "5", "--target-epsilon", "1",
     "--delta", "1e-20", "--sampling", "poisson"],
    ["dpsgd", "sigma", "--steps-per-epoch", "100", "--epochs", "5", "--target-epsilon", "1",
     "--delta", "1e-5", "--sampling", "poisson", "--tolerance", "1e-9"],
    ["dpsgd", "sigma", "--steps-per-epoch", "100", "--epochs", "5", "--target-accuracy", "0.6",
     "--tolerance", "1e-3"],
    ["dpsgd", "sigma", "--steps-per-epoch", "100", "--epochs", "5", "--target-epsilon", "1",
     "--rtol", "0.5"],
    ["dpsgd", "bound", "--steps-per-epoch", "0", "--epochs", "5", "--noise-multiplier", "1"],
    ["dpsgd", "exact", "--steps-per-epoch", "100", "--epochs", "5", "--noise-multiplier", "1",
     "--tolerance", "1"],
    ["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "-1",
     "--trials", "60", "--no-progress"],
    ["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
     "--trials", "1", "--no-progress"],
    ["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--noise-std", "1",
     "--records", "0-4", "--trials", "60", "--time-limit", "-1", "--no-progress"],
    ["compare", "--dataset", "wine", "--no-progress", "--seed", "0", "--timeout", "-1"],
    # masks beyond memory: the disk-backed way out only where the command has it
    ["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
     "--trials", "1000000000000", "--no-progress"],
    ["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--noise-std", "1",
     "--trials", "1000000000000", "--no-progress"],
    ["audit", "--dataset", "iris", "--non-private", "--reference-models", "1000000000000"],
    ["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--noise-std", "1",
     "--records", "0-4", "--trials", "60", "--timeout", "0", "--no-progress"],
    ["predict", "fit", "--estimator", "logistic", "--dataset", "iris", "--n-worlds", "4",
     "--per-query-budget", "2^-10", "--total-budget", "0.01", "--timeout", "-2",
     "--no-progress"],
    ["audit", "--dataset", "iris", "--non-private", "--reference-models", "4", "--seed", "0",
     "--timeout", "0"],
])
def test_failing_calls_name_only_their_commands_flags(argv, capsys, tmp_path):
    command = " ".join(argv[:2]) if argv[0] in ("pac", "dpsgd", "predict") else argv[0]
    extra = (["--out", str(tmp_path / "r")] if command in ("pac run", "pac records", "compare",
                                                          "audit")
             else ["--state", str(tmp_path / "st")] if command == "predict fit" else [])
    rc = main([*argv, *extra])
    err = capsys.readouterr().err
    assert rc in (1, 2), err
    flags = _flags_of(_COMMANDS[command])
    named = set(_FLAG.findall(err))
    assert named and named <= flags, (named - flags, err)
    assert "`" not in err, err  # an API name the command has no flag for
    assert not re.search(r"\b[a-z][a-z0-9_]*=", err), err  # nor an API keyword argument


def test_the_api_advises_its_own_tolerance_keyword(monkeypatch):
    from pacpriv.dpsgd import epsilon_calibration as mod

    monkeypatch.setattr(mod, "_poisson_epsilon", lambda *a: 1e-3)
    with pytest.raises(ValueError, match="lower `tolerance`"):
        mod.calibrate_epsilon(1e-4, 1e-5, steps_per_epoch=100, epochs=5, sampling="poisson")
