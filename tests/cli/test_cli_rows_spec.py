"""``predict query --rows``: negative, reversed, huge or malformed ranges get one message that
says what is valid (``-5:-1`` was told "START < STOP", which it is)."""

from __future__ import annotations

import argparse
import types

import numpy as np
import pytest

from pacpriv.cli import _predict_query as predict
from pacpriv.cli._args import UsageError


@pytest.mark.parametrize("rows", ["-5:-1", "5:2", "3:3", "a:b", "9" * 5000 + ":1", ":4", "1-4",
                                  "1" + "0" * 30 + ":5", "007:7"])
def test_rows_refused_with_the_valid_form(rows):
    args = argparse.Namespace(queries=None, rows=rows)
    with pytest.raises(UsageError) as info:
        predict.query_rows(args, None)
    text = str(info.value)
    assert text.startswith("--rows must be START:STOP, two non-negative integers with START < STOP")
    assert len(text) < 220


@pytest.mark.parametrize("rows", ["0:1" + "0" * 400, "0:" + "9" * 5000, "0:151", "149:1000"])
def test_a_stop_beyond_the_dataset_is_named(rows, monkeypatch):
    # new-user pass 6, c4047: "0:1000…0" (401 digits) was told "START < STOP", which it is
    monkeypatch.setattr(predict, "load_cli_dataset",
                        lambda args: types.SimpleNamespace(X=np.zeros((150, 2))))
    with pytest.raises(UsageError) as info:
        predict.query_rows(argparse.Namespace(queries=None, rows=rows), None)
    text = str(info.value)
    assert "STOP is beyond the 150 rows of --dataset (START:STOP must lie within 0:150)" in text
    assert len(text) < 220


@pytest.mark.parametrize(("rows", "n"), [("0:150", 150), ("0000:0003", 3), ("149:150", 1)])
def test_ranges_within_the_dataset_pass(rows, n, monkeypatch):
    monkeypatch.setattr(predict, "load_cli_dataset",
                        lambda args: types.SimpleNamespace(X=np.zeros((150, 2))))
    assert predict.query_rows(argparse.Namespace(queries=None, rows=rows), None).shape == (n, 2)
