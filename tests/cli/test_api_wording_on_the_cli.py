"""On the command line every piece of advice names flags; in the API the keywords (issue 35,
fix9a item 2).

The "outputs too large" refusal named ``output_dtype=float32`` / ``output_path=...`` on the
command line, and the stall watchdog's fallback line under a warnings "error" filter (written by
its thread, outside ``warnings``) named ``timeout=``. The library words advice in API terms
(`name`, ``name=value`` or the advice constants); the command line rewords all of it through
one mapping (``cli.main._cli_advice``), also for text printed outside ``warnings``
(``exceptions.in_user_terms``)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

from pacpriv.cli._args import iter_commands
from pacpriv.cli.main import _cli_advice, _flags_of, build_parser, main
from pacpriv.exceptions import (
    DISK_ADVICE,
    DTYPE_ADVICE,
    PROBE_TIME_ADVICE,
    TIMEOUT_ADVICE,
    StallWarning,
    in_user_terms,
    set_user_wording,
)
from pacpriv.pac import ExecutionOptions, simulate
from pacpriv.pac.engine import _parallel
from pacpriv.pac.engine import _storage as storage

from ._stalls import SlowFirst

_KEYWORD = re.compile(r"(?<![\w-])[a-z][a-z0-9_]*=")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _storage_refusal() -> str:
    try:
        storage._check_output_memory(10**12, 10**6, np.dtype("float64"))
    except ValueError as exc:
        return str(exc)
    raise AssertionError("not refused")


_TEXTS = [
    _storage_refusal(),
    f"no trial has finished for 60 s (0 finished); a trial may hang: {TIMEOUT_ADVICE}, or "
    "press Ctrl-C to stop.",
    "no trial has finished for 60 s; a trial may hang: each trial is bounded by timeout=5 s, "
    "or press Ctrl-C to stop.",
    f"the probe is slow: {PROBE_TIME_ADVICE}, or press Ctrl-C to stop.",
    f"masks need 9 GiB; use fewer trials, or {DISK_ADVICE}.",
    "coordinate 0 (it is stored as float32 differences from trial 0: use "
    "`output_dtype`='float64', or rescale)",
]


def _commands():
    parser = build_parser()
    return [(" ".join(path), _flags_of(p)) for path, p in iter_commands(parser) if path]


@pytest.mark.parametrize("text", _TEXTS)
def test_every_command_words_the_advice_in_its_own_flags(text):
    assert _KEYWORD.search(text) or "`" in text  # the library's own wording: API terms
    runs = [(n, f) for n, f in _commands() if "--trials" in f]  # the engine's commands
    assert {"pac run", "pac records", "compare"} <= {n for n, _ in runs}
    for name, flags in runs:
        worded = _cli_advice(text, flags)
        assert not _KEYWORD.search(worded), (name, worded)
        if "--output-dtype" in flags or "float64" not in text:
            assert "`" not in worded.replace("`n_trials`", ""), (name, worded)
        assert set(_FLAG.findall(worded)) <= flags, (name, worded)
        assert worded.strip() and not re.search(r",\s*[.,;]|\(\s*\)|\s{2}", worded), worded


def test_the_storage_refusal_names_pac_runs_flags():
    flags = dict(_commands())["pac run"]
    worded = _cli_advice(_storage_refusal(), flags)
    assert "--output-dtype float32" in worded and "--memory-map" in worded, worded


def test_the_api_keeps_its_keywords():
    text = _storage_refusal()
    assert DTYPE_ADVICE in text and DISK_ADVICE in text
    assert in_user_terms("pass timeout= (seconds)") == "pass timeout= (seconds)"


def test_pac_run_refusal_on_the_command_line(monkeypatch, capsys, tmp_path):
    data = tmp_path / "wide.npy"  # 10 records of 200 columns: outputs outgrow the masks
    np.save(data, np.random.default_rng(0).random((10, 200)))
    monkeypatch.setattr(storage, "physical_memory", lambda: 2 * 1000 * 200 * 8)
    code = main(["pac", "run", "--mechanism", "mean", "--dataset", str(data), "--mi-budget",
                 "1", "--trials", "2000", "--no-progress", "--seed", "0",
                 "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code != 0 and "outputs of dimension" in err, err
    assert "--output-dtype float32" in err and not _KEYWORD.search(err), err


@pytest.mark.parametrize("timeout", [None, 30.0])
def test_the_watchdogs_fallback_line_uses_the_installed_wording(monkeypatch, capsys, timeout):
    monkeypatch.setattr(_parallel, "STALL_WARN_S", 0.5)
    set_user_wording(lambda text: _cli_advice(text, {"--timeout"}))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", StallWarning)
            simulate(SlowFirst(2.0), np.arange(20.0).reshape(10, 2), n_trials=3, rng=0,
                     execution=ExecutionOptions(n_jobs=1, progress=False, timeout=timeout))
    finally:
        set_user_wording(None)
    err = capsys.readouterr().err
    assert "pacpriv: warning: no trial has finished for" in err
    assert "--timeout" in err and not _KEYWORD.search(err), err


def test_main_leaves_the_api_wording_in_place(capsys):
    main(["dpsgd", "bound", "--steps-per-epoch", "10", "--epochs", "1",
          "--noise-multiplier", "1"])
    capsys.readouterr()
    assert in_user_terms(TIMEOUT_ADVICE) == TIMEOUT_ADVICE
