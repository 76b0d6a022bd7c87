"""Comparators run under a time limit, in their own process, and never report impossible values.

Issue 14, items 3 and 5: a third-party accountant that runs unbounded is stopped at the limit
and its row says so while the other rows still print; every accuracy lies in [1/2, 1].
"""

from __future__ import annotations

import json
import math
import multiprocessing
import time

import pytest

from pacpriv.cli import main
from pacpriv.dpsgd import _limited, comparators
from pacpriv.dpsgd.comparators import compare_accountants


def _strict(text: str):
    def bad(name):
        raise AssertionError(f"non-strict JSON constant {name}")

    return json.loads(text, parse_constant=bad)


def _fake(monkeypatch, key: str, fn) -> None:
    label, _, search, note = comparators._PUBLISHED[key]
    monkeypatch.setitem(comparators._PUBLISHED, key, (label, fn, search, note))


def _slow(sigma, steps, epochs, k=1):  # module level: also runs under spawn
    time.sleep(60)
    return 0.6


def test_slow_comparator_is_stopped_and_other_rows_print(monkeypatch):
    """A comparator sleeping 60 s is killed at 0.5 s; its row says 'timed out'."""
    _fake(monkeypatch, "fs-pld", _slow)
    before = {p.pid for p in multiprocessing.active_children()}  # e.g. loky workers
    tic = time.perf_counter()
    t = compare_accountants(steps_per_epoch=10, epochs=2, noise_multiplier=2.0,
                            methods=("chi-square", "fs-pld", "ckp"), timeout=0.5,
                            progress=False)
    elapsed = time.perf_counter() - tic
    assert elapsed < 30  # far below the 60 s sleep, with room for a loaded machine
    rows = {r.method.split()[0]: r for r in t.rows}
    slow = rows["random"]
    assert slow.status == "timed out" and slow.accuracy is None
    assert "timed out after 0.5 s" in slow.note
    assert 0.5 <= slow.wall_time_s < 30
    assert rows["chi-square"].status == "ok" and 0.5 < rows["chi-square"].accuracy <= 1
    assert rows["CKP"].status == "ok" and 0.5 < rows["CKP"].accuracy <= 1
    left = [p for p in multiprocessing.active_children() if p.pid not in before]
    assert left == []  # the stuck process was killed
    assert "timed out" in t.to_markdown()


def test_failing_comparator_keeps_other_rows(monkeypatch):
    """An exception in the comparator's process becomes a 'failed' row with the message."""
    def boom(sigma, steps, epochs, k=1):
        raise RuntimeError("accountant exploded")

    _fake(monkeypatch, "random-allocation", boom)
    t = compare_accountants(steps_per_epoch=10, epochs=2, noise_multiplier=2.0,
                            methods=("random-allocation", "gdp-clt"), timeout=30,
                            progress=False)
    bad, good = t.rows
    assert bad.status == "failed" and "RuntimeError: accountant exploded" in bad.note
    assert good.status == "ok" and good.accuracy > 0.5


@pytest.mark.parametrize(
    ("value", "expected", "note"),
    [
        (1.00000031, 1.0, "clipped from 1.00000031 to 1"),
        (0.3, 0.5, "clipped from 0.3 to 0.5"),
        (math.inf, None, "returned inf"),
        (math.nan, None, "returned nan"),
        (0.75, 0.75, None),
    ],
)
@pytest.mark.parametrize("timeout", [None, 30.0])
def test_values_clipped_to_possible_range(monkeypatch, value, expected, note, timeout):
    """Every accuracy is clipped to [1/2, 1] (or None) and the clip is noted in the row."""
    _fake(monkeypatch, "poisson-pld", lambda s, m, e, k=1: value)
    t = compare_accountants(steps_per_epoch=10, epochs=2, noise_multiplier=2.0,
                            methods=("poisson-pld",), timeout=timeout, progress=False)
    (row,) = t.rows
    assert row.accuracy == expected
    if note is None:
        assert "clipped" not in row.note
    else:
        assert note in row.note
    _strict(json.dumps(t.to_dict(), allow_nan=False))


def test_timeout_validated():
    """A non-positive time limit is refused before any work, naming the argument."""
    with pytest.raises(ValueError, match="timeout"):
        compare_accountants(steps_per_epoch=10, epochs=2, noise_multiplier=2.0, timeout=0)


def test_cli_comparator_timeout_flag(monkeypatch, capsys):
    """`--comparator-timeout` reaches every row; timed-out rows are marked, JSON is strict.

    Only the rows made slow on purpose (a 60 s sleep) run under the flag's 0.5 s limit; the
    real rows, whose limit is checked to be 0.5 s too, then run under a generous one, so a
    loaded machine cannot time out a real row (V1 review F6).
    """
    for key in ("poisson-pld", "fs-pld", "random-allocation"):
        _fake(monkeypatch, key, _slow)
    real_run = comparators._run_limited
    limits: list[tuple[bool, float | None]] = []

    def run_limited(fn, args, timeout):
        on_purpose = fn is comparators._published_value and args[0] is _slow
        limits.append((on_purpose, timeout))
        return real_run(fn, args, timeout if on_purpose else 120.0)

    monkeypatch.setattr(comparators, "_run_limited", run_limited)
    code = main(["dpsgd", "compare", "--steps-per-epoch", "10", "--epochs", "2",
                 "--noise-multiplier", "2", "--comparator-timeout", "0.5", "--json"])
    assert code == 0
    assert sorted(limits, key=str) == [(False, 0.5)] + [(True, 0.5)] * 3  # exact + 3 slow
    out = _strict(capsys.readouterr().out)
    status = {r["method"]: r["status"] for r in out["rows"]}
    assert sum(s == "timed out" for s in status.values()) == 3
    assert status["exact, certified (pacpriv)"] == "ok"
    assert all(0.5 <= r["accuracy"] <= 1 for r in out["rows"] if r["status"] == "ok")
    assert all("timed out after 0.5 s" in r["note"]
               for r in out["rows"] if r["status"] == "timed out")


def test_cli_bad_comparator_timeout(capsys):
    """A bad `--comparator-timeout` gives one line and exit status 2."""
    code = main(["dpsgd", "compare", "--steps-per-epoch", "10", "--epochs", "2",
                 "--noise-multiplier", "2", "--comparator-timeout", "-1"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("pacpriv: error:") and err.count("\n") == 1
    assert "timeout" in err


@pytest.mark.parametrize("sigma", [1e-200, 1e-5, 1e5, 1e200])
def test_closed_forms_at_extreme_sigma(sigma):
    """Valid extreme sigma: no exception, no numpy warning (the suite errors on warnings)."""
    t = compare_accountants(steps_per_epoch=10, epochs=100, noise_multiplier=sigma,
                            target_accuracy=0.6, methods=("chi-square", "ckp", "gdp-clt"),
                            timeout=None, progress=False)
    accs = [r.accuracy for r in t.rows]
    assert all(0.5 <= a <= 1.0 for a in accs)
    if sigma < 1:
        assert accs == [1.0, 1.0, 1.0]
    if sigma > 1e4:
        assert all(a < 0.5 + 1e-3 for a in accs)
    _strict(json.dumps(t.to_dict(), allow_nan=False))


def _allocate(n_bytes):
    import numpy as np

    return float(np.ones(n_bytes // 8).sum())


def test_a_comparator_row_is_stopped_at_its_memory_limit(monkeypatch):
    """dp-accounting's PLD grew to 10 GB within its time limit at (M, E) = (1e6, 1e4): the
    row's process now has a memory limit (a quarter of the machine; here 1 %) and fails."""
    import os

    from pacpriv.dpsgd import comparators

    phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    monkeypatch.setattr(_limited, "_MEMORY_FRACTION", 0.01)
    status, note, _ = comparators._run_limited(_allocate, (int(0.05 * phys),), 60.0)
    assert status == "failed" and "memory limit" in note
    status, value, _ = comparators._run_limited(_allocate, (int(0.002 * phys),), 60.0)
    assert status == "ok" and value > 0
