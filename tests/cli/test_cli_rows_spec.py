"""``predict query --rows``: negative, reversed, huge or malformed ranges get one message that
says what is valid (``-5:-1`` was told "START < STOP", which it is)."""

from __future__ import annotations

import argparse

import pytest

from pacpriv.cli import predict
from pacpriv.cli._args import UsageError


@pytest.mark.parametrize("rows", ["-5:-1", "5:2", "3:3", "a:b", "1:" + "9" * 5000, ":4", "1-4"])
def test_rows_refused_with_the_valid_form(rows):
    args = argparse.Namespace(queries=None, rows=rows)
    with pytest.raises(UsageError) as info:
        predict._rows(args)
    text = str(info.value)
    assert text.startswith("--rows must be START:STOP, two non-negative integers with START < STOP")
    assert len(text) < 220
