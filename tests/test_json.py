"""Strict JSON everywhere (issue 14, item 5): no Infinity or NaN in any JSON pacpriv emits."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pacpriv import _json
from pacpriv.cli import main


def _strict(text: str):
    def bad(name):
        raise AssertionError(f"non-strict JSON constant {name}")

    return json.loads(text, parse_constant=bad)


def test_non_finite_become_null_with_reason():
    """inf/-inf/nan (Python or numpy, nested in lists) become null with a sibling reason."""
    obj = {"a": math.inf, "b": np.float64(-np.inf), "c": [1.0, np.nan], "d": np.arange(2),
           "e": {"f": float("nan")}, "ok": 0.25}
    out = _strict(_json.dumps(obj))
    assert out["a"] is None and out["a_null_reason"] == "not finite: +inf"
    assert out["b"] is None and out["b_null_reason"] == "not finite: -inf"
    assert out["c"] == [1.0, None] and out["c_null_reason"] == "not finite: [1] nan"
    assert out["d"] == [0, 1] and "d_null_reason" not in out
    assert out["e"] == {"f": None, "f_null_reason": "not finite: nan"}
    assert out["ok"] == 0.25 and set(out) == {"a", "a_null_reason", "b", "b_null_reason", "c",
                                              "c_null_reason", "d", "e", "ok"}


def test_finite_values_round_trip_exactly():
    """Finite floats are written with repr precision (bit-exact round trip)."""
    values = [0.1, 1e-300, 2e9 + 1e-7, -5e-324]
    assert _strict(_json.dumps(values)) == values


def test_allow_nan_cannot_be_turned_on():
    """The helper has one mode: strict."""
    with pytest.raises(TypeError):
        _json.dumps({"a": 1.0}, allow_nan=True)


def test_cli_bound_at_tiny_sigma_is_strict_json(capsys):
    """`pacpriv dpsgd bound` at sigma = 1e-200 prints strict JSON (it printed Infinity)."""
    code = main(["dpsgd", "bound", "--steps-per-epoch", "10", "--epochs", "100",
                 "--noise-multiplier", "1e-200", "--json"])
    assert code == 0
    out = _strict(capsys.readouterr().out)
    assert out["accuracy"] == 1.0 and out["vacuous"] is True
    assert out["log1p_chi_square"] is None
    assert out["log1p_chi_square_null_reason"] == "not finite: +inf"


def test_no_bare_json_dumps_in_package():
    """Every JSON writer in pacpriv goes through the strict helper (or is strict itself)."""
    import pathlib
    import re

    import pacpriv

    root = pathlib.Path(pacpriv.__file__).parent
    offenders = []
    for p in root.rglob("*.py"):
        if p.name == "_json.py":
            continue
        for call in re.finditer(r"(?<![\w.])json\.dumps?\(([^()]*(\([^()]*\))?)*\)", p.read_text()):
            if "allow_nan=False" not in call.group(0):
                offenders.append(f"{p.relative_to(root)}: {call.group(0)}")
    assert offenders == []
