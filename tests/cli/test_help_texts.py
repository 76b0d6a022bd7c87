"""Every option of every command has a help text that says what it is; a numeric one also
names its unit or its valid range (issue 35, fix9a item 3: ``predict fit --timeout`` said only
"per-trial timeout", though a prediction fit has worlds, not trials).

The flags are read from the parsers (``cli._args.iter_commands``): a new flag is checked
without editing this file."""

from __future__ import annotations

import re

import pytest

from pacpriv.cli._args import HelpFormatter, iter_commands
from pacpriv.cli.main import build_parser

NUMERIC = {"integer", "int", "number", "float", "budget_number", "_bounds"}
RANGE = re.compile(r"in [(\[]|>=|\b\d+ to \d+\b|> ?0|\bpositive\b|\beven\b"
                   r"|\bat (least|most)\b|\(0, 1\)|\([<>]=? ?\d|[<>] ?1\b")
UNIT = re.compile(r"\b(seconds?|nats|bytes|MiB|per second|minutes|workers)\b")


def _options():
    for path, parser in iter_commands(build_parser()):
        for action in parser._actions:
            names = action.option_strings
            if names and not {"--help", "--version"} & set(names):
                yield " ".join(path), names[-1], action, parser


_ALL = list(_options())


def test_the_walk_sees_every_command():
    commands = {c for c, *_ in _ALL}
    assert {"pac run", "pac records", "dpsgd sigma", "compare", "predict fit", "serve",
            "serve keys add", "audit"} <= commands
    assert len(_ALL) > 200


@pytest.mark.parametrize("command,flag,action,parser", _ALL,
                         ids=[f"{c} {f}" for c, f, *_ in _ALL])
def test_every_option_says_what_it_is(command, flag, action, parser):
    text = " ".join(HelpFormatter(prog="x")._get_help_string(action).split())
    assert len(text.split()) >= 3, (command, flag, text)  # not "port", not "print JSON"
    if getattr(action.type, "__name__", "") in NUMERIC:
        assert RANGE.search(text) or UNIT.search(text), (command, flag, text)


@pytest.mark.parametrize("command,flag,action,parser", _ALL,
                         ids=[f"{c} {f}" for c, f, *_ in _ALL])
def test_every_limit_and_seed_states_its_default(command, flag, action, parser):
    """A limit (time, size, count) or a seed says what happens when it is not given."""
    if not re.search(r"timeout|time-limit|max-|limit|seed", flag) or action.required:
        return
    text = HelpFormatter(prog="x")._get_help_string(action)
    assert "default" in text.lower(), (command, flag, text)


def test_predict_fit_timeout_says_what_it_limits():
    parser = dict(((c, f), a) for c, f, a, _ in _ALL)
    text = parser[("predict fit", "--timeout")].help
    assert "world" in text and "seconds" in text and "default" in text
    assert "trial" not in text  # a prediction fit has worlds


def test_help_renders_for_every_command(capsys):
    for _path, parser in iter_commands(build_parser()):
        parser.format_help()  # a %-placeholder or a broken f-string would raise here
