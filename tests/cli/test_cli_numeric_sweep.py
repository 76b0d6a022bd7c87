"""Every numeric flag of every command, at 10**400-type integers and ±1e300 floats, answers
(exit 0) or fails in one line (exit 2) -- never a traceback (new-user log #169, #170, #233,
#260: OverflowError from ``--epochs 10**400``, ``--steps-per-epoch 10**400``,
``--trials 10**400``, ``--noise-std 1e300``).

The flags are read from the parsers (not a hand list): a new numeric flag is swept without
editing this file, and a new command must give a base command below. Work past validation is
stopped at its first expensive step (trials, world fits, reference models, the server) by a
sentinel: what is tested is the check before the work, and the closed forms, which run.
"""

from __future__ import annotations

import pytest

from pacpriv.cli._args import iter_commands
from pacpriv.cli.main import build_parser, main

HUGE_INT = str(10**400)
VALUES = {"int": [HUGE_INT, "-" + HUGE_INT], "float": ["1e300", "-1e300", "1e-300"]}


_commands = iter_commands  # (path, parser) of every command


def _numeric_flags(parser) -> list[tuple[str, str]]:
    out = []
    for a in parser._actions:
        name = getattr(a.type, "__name__", "")
        if a.option_strings and name in ("integer", "int"):
            out.append((a.option_strings[0], "int"))
        elif a.option_strings and name in ("number", "float", "budget_number"):
            out.append((a.option_strings[0], "float"))
    return out


def _base(path: tuple, tmp) -> list[str] | None:
    state, out = str(tmp / "state"), str(tmp / "out")
    return {
        ("pac", "run"): ["--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.5",
                         "--out", out, "--no-progress"],
        ("pac", "posterior"): ["--mi-budget", "0.1"],
        ("pac", "budget"): ["--target-accuracy", "0.6"],
        ("pac", "records"): ["--mechanism", "mean", "--dataset", "iris", "--noise-std", "1",
                             "--out", out, "--no-progress"],
        ("pac", "trials"): ["--dim", "3"],
        ("dpsgd", "bound"): ["--steps-per-epoch", "10", "--epochs", "2",
                             "--noise-multiplier", "1"],
        ("dpsgd", "sigma"): ["--steps-per-epoch", "10", "--epochs", "2",
                             "--target-accuracy", "0.6"],
        ("dpsgd", "exact"): ["--steps-per-epoch", "10", "--epochs", "2",
                             "--noise-multiplier", "1"],
        ("dpsgd", "compare"): ["--steps-per-epoch", "10", "--epochs", "2",
                               "--noise-multiplier", "1"],
        ("compare",): ["--out", out, "--no-progress"],
        ("predict", "fit"): ["--estimator", "logistic", "--dataset", "iris", "--state", state,
                             "--per-query-budget", "0.01", "--n-worlds", "4", "--no-progress"],
        ("serve", "keys", "add"): ["--state", state, "--name", "a"],
        ("serve",): ["--state", state],
        ("audit",): ["--out", out, "--no-progress"],
    }.get(path)


class _Reached(BaseException):
    """The command got past its checks to its first expensive step."""


def _stop(*args, **kwargs):
    raise _Reached


@pytest.fixture()
def no_work(monkeypatch):
    import pacpriv.audit._run as audit_run
    import pacpriv.pac.engine._simulate as sim
    import pacpriv.prediction._app as app

    monkeypatch.setattr(sim, "run_pending", _stop)
    monkeypatch.setattr(audit_run, "train_reference_models", _stop)
    monkeypatch.setattr(app, "check_port", _stop)
    import pacpriv.compare.run as compare_run

    for name in ("run_comparison", "_run_experiment"):
        if hasattr(compare_run, name):
            monkeypatch.setattr(compare_run, name, _stop)


#: Commands not swept yet (none: ``compare`` checks its counts' upper limits before work).
NOT_YET: set[tuple[str, ...]] = set()


def _cases():
    cases = []
    for path, sp in _commands(build_parser()):
        if path in NOT_YET:
            continue
        for flag, kind in _numeric_flags(sp):
            for value in VALUES[kind]:
                cases.append(pytest.param(path, flag, value, id=f"{' '.join(path)} {flag} "
                                          f"{value[:8]}"))
    return cases


def test_every_command_with_numeric_flags_has_a_base():
    missing = sorted({" ".join(p) for p, sp in _commands(build_parser())
                      if _numeric_flags(sp) and _base(p, __import__("pathlib").Path("."))
                      is None})
    assert missing == []


# an extreme value may also warn (e.g. a confidence below ½): a printed line, not a traceback
@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.PacprivWarning")
@pytest.mark.parametrize(("path", "flag", "value"), _cases())
def test_numeric_extremes_answer_or_refuse_in_one_line(path, flag, value, tmp_path, capsys,
                                                       no_work):
    base = _base(path, tmp_path)
    argv = [*path, *base]
    if flag in argv:  # the base's own value is replaced
        i = argv.index(flag)
        del argv[i:i + 2]
    argv += [f"{flag}={value}"]
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own refusal (exit 2)
        rc = exc.code
    except _Reached:
        rc = 0
    err = capsys.readouterr().err
    assert rc in (0, 2), (argv[:4], flag, rc, err[-400:])
    assert "Traceback" not in err
    if rc == 2:
        lines = [ln for ln in err.strip().splitlines() if ln.startswith("pacpriv: error")
                 or "error:" in ln]
        assert lines, err[-400:]
