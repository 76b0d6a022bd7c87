"""Every flag that takes a value, of every command, reads ``-inf``, ``-nan``, ``-1e5``, ``-.5``
as that value, so the flag's own validation answers (new-user pass 6, c1006:
``pac posterior --mi-budget -inf`` got argparse's "expected at least one argument").

The flags are read from the parsers (not a hand list), so a new flag is swept without editing
this file. Only parsing is tested here: what must not appear is argparse reading the value as
an option.
"""

from __future__ import annotations

import argparse

import pytest

from pacpriv.cli._args import NEGATIVE_VALUE, iter_commands
from pacpriv.cli.main import build_parser, main

VALUES = ["-inf", "-nan", "-1e5", "-.5", "-Infinity", "-NaN", "-INF", "-0", "-1e-300"]


_commands = iter_commands  # (path, parser) of every command


def _value_flags(parser):
    return [a.option_strings[-1] for a in parser._actions
            if a.option_strings and a.nargs != 0 and not isinstance(
                a, (argparse._HelpAction, argparse._VersionAction))]


PARSER = build_parser()
CASES = [(path, flag) for path, p in _commands(PARSER) for flag in _value_flags(p)]


def test_the_sweep_is_not_empty():
    assert len(CASES) > 50
    assert (("pac", "posterior"), "--mi-budget") in CASES


@pytest.mark.parametrize("value", VALUES)
def test_matcher_reads_values_not_options(value):
    assert NEGATIVE_VALUE.match(value)


@pytest.mark.parametrize("word", ["-h", "--help", "-information", "-nano", "--inf", "-x"])
def test_matcher_leaves_options_alone(word):
    assert not NEGATIVE_VALUE.match(word)


@pytest.mark.parametrize(("path", "flag"), CASES, ids=[" ".join(p) + " " + f for p, f in CASES])
def test_negative_words_are_values_of_every_flag(path, flag, capsys):
    parser = PARSER
    for value in VALUES:
        try:
            parser.parse_args([*path, flag, value])
        except SystemExit:
            pass
        err = capsys.readouterr().err
        assert "expected one argument" not in err, (flag, value, err)
        assert "expected at least one argument" not in err, (flag, value, err)
        assert "unrecognized arguments" not in err, (flag, value, err)


@pytest.mark.parametrize("value", ["-inf", "-nan", "-.5", "-1e5"])
def test_posterior_budget_is_answered_by_its_own_check(value, capsys):
    assert main(["pac", "posterior", "--mi-budget", value]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pacpriv: error: --mi-budget must be")
    assert len(err.splitlines()) == 1
