"""``dpsgd compare`` checks every argument before any accountant runs (issue 35: a 1e300
timeout or ``--steps-per-epoch 2**64`` hung)."""

from __future__ import annotations

import pytest

import pacpriv.cli.dpsgd as cli_dpsgd
from pacpriv.cli.main import main

BASE = ["dpsgd", "compare", "--steps-per-epoch", "10", "--epochs", "2",
        "--noise-multiplier", "1"]


def _no_work(*args, **kwargs):
    raise AssertionError("an accountant ran before the arguments were checked")


@pytest.mark.parametrize(("flag", "value"), [
    ("--steps-per-epoch", str(2**64)), ("--steps-per-epoch", str(10**400)),
    ("--epochs", str(10**400)), ("--epochs", str(10**8 + 1)),
    ("--comparator-timeout", "1e300"), ("--comparator-timeout", "inf"),
    ("--comparator-timeout", "nan"), ("--comparator-timeout", "0"),
])
def test_refused_in_one_line_before_work(flag, value, capsys, monkeypatch):
    monkeypatch.setattr(cli_dpsgd, "compare_accountants", _no_work)
    argv = list(BASE)
    if flag in argv:
        i = argv.index(flag)
        del argv[i:i + 2]
    rc = main([*argv, f"{flag}={value}"])
    err = capsys.readouterr().err
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and "Traceback" not in err
    assert len(lines[0]) < 300  # a 400-digit count is described, not echoed
