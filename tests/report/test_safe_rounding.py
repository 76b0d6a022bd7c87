"""Every printed risk number is rounded on the safe side (issue 24 item 4).

For each command, the exact values come from its JSON; every number printed in its terminal
output, Markdown and HTML that is a rendering of one of those values (within one unit of its
last printed digit, with at least three significant digits) must not be below an upper
bound's value, nor above a lower bound's. Which side a JSON field is on is decided by its name,
as the report layout does (:func:`pacpriv.report.layout.side_of`).
"""

from __future__ import annotations

import html
import json
import math
import re
from decimal import Decimal
from pathlib import Path

import pytest

from pacpriv.cli import main
from pacpriv.report.layout import side_of

# (not a prefix of a longer number or of a version string such as "scipy 1.17.1")
NUMBER = re.compile(
    r"(?:(?<![\w.\-])|(?<=[x×]))(-?\d+\.\d+(?:e[+-]?\d+)?|-?\d+e[+-]?\d+)(?!\d|\.\d)(%?)")


def _values(obj, key: str = "") -> list[tuple[str, float, str]]:
    """``(key, value, side)`` of every finite float in the JSON with a directed side."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _values(v, k)
    elif isinstance(obj, list):
        for v in obj:
            out += _values(v, key)
    elif isinstance(obj, float) and math.isfinite(obj) and obj != 0.0:
        side = side_of(key)
        if side != "nearest":
            out.append((key, obj, side))
    return out


def _shown(text: str) -> list[tuple[Decimal, Decimal, str]]:
    """``(value, unit of the last digit, text)`` of every decimal number in ``text``."""
    out = []
    for m in NUMBER.finditer(text):
        num, pct = m.group(1), m.group(2)
        mant, _, exp = num.partition("e")
        decimals = len(mant.split(".")[1]) if "." in mant else 0
        unit = Decimal(1).scaleb(-decimals + (int(exp) if exp else 0))
        value = Decimal(num)
        if pct:
            value, unit = value.scaleb(-2), unit.scaleb(-2)
        out.append((value, unit, m.group(0)))
    return out


def _violations(text: str, values) -> list[str]:
    """Shown numbers that render some value on the unsafe side and no value on the safe one
    (two values within one printed unit of each other cannot be told apart)."""
    bad = []
    for shown, unit, raw in _shown(text):
        wrong, right = [], False
        for key, x, side in values:
            exact = Decimal(repr(x))
            if abs(shown - exact) >= unit or unit > abs(exact) * Decimal("0.01"):
                continue  # not a rendering of x (or too coarse to tell)
            if (side == "up" and shown < exact) or (side == "down" and shown > exact):
                wrong.append(f"{key}={x!r} shown as {raw!r} (side {side})")
            else:
                right = True
        if wrong and not right:
            bad.extend(wrong)
    return sorted(set(bad))


def _html_text(page: str) -> str:
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    page = re.sub(r"data:image/[^\"']+", " ", page)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def _run(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out + "\n" + err


@pytest.fixture()
def user(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "myf.py").write_text(
        "import numpy as np\n\ndef f(X):\n    return np.clip(X, -3, 3).mean(axis=0)\n")
    rows = ["a,b,c"] + [f"{0.37 * i % 1.9:.6f},{-0.11 * i:.6f},{(i * i) % 7 / 3:.6f}"
                        for i in range(60)]
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


PAC_RUNS = [
    ("bundled, certified", ["--mechanism", "mean", "--dataset", "iris", "--target-accuracy",
                            "0.6", "--trials", "200"]),
    ("private pool, plug-in", ["--mechanism", "myf.py:f", "--dataset", "data.csv",
                               "--mi-budget", "0.037", "--trials", "60", "--rule",
                               "anisotropic"]),
    ("private pool, certified", ["--mechanism", "myf.py:f", "--dataset", "data.csv",
                                 "--mi-budget", "0.011", "--trials", "80"]),
]


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
@pytest.mark.parametrize(("name", "argv"), PAC_RUNS, ids=[r[0] for r in PAC_RUNS])
def test_pac_run_prints_every_risk_number_on_the_safe_side(user, capsys, name, argv):
    code, screen = _run(capsys, "pac", "run", *argv, "--seed", "3", "--no-progress",
                        "--out", "rep")
    assert code == 0, screen
    report = json.loads(Path("rep/report.json").read_text())
    values = _values(report)
    assert any(k == "posterior_success_bound" for k, _, _ in values)  # the check has teeth
    texts = {"terminal": screen, "markdown": Path("rep/report.md").read_text(),
             "html": _html_text(Path("rep/report.html").read_text())}
    found = {where: _violations(text, values) for where, text in texts.items()}
    assert found == {"terminal": [], "markdown": [], "html": []}


@pytest.mark.parametrize("argv", [
    ["bound", "--steps-per-epoch", "100", "--epochs", "10", "--noise-multiplier", "0.7"],
    ["sigma", "--steps-per-epoch", "100", "--epochs", "10", "--target-accuracy", "0.61"],
    ["exact", "--steps-per-epoch", "50", "--epochs", "4", "--noise-multiplier", "0.9"],
])
def test_dpsgd_commands_print_risk_numbers_on_the_safe_side(capsys, argv):
    code, screen = _run(capsys, "dpsgd", *argv)
    assert code == 0, screen
    code, raw = _run(capsys, "dpsgd", *argv, "--json")
    assert code == 0, raw
    values = _values(json.loads(raw[: raw.rindex("}") + 1]))
    assert values
    assert _violations(screen, values) == []


def test_the_checker_catches_a_bound_rounded_to_nearest():
    """A bound 0.5881573 printed as 0.58815 (nearest, below) is a violation; 0.58816 is not."""
    values = [("posterior_success_bound", 0.5881573838, "up"), ("ci_low", 0.412345, "down")]
    assert _violations("accuracy 0.58815", values)
    assert _violations("accuracy 0.58816 and 41.23%", values) == []
    assert _violations("lower end 0.41235", values) and _violations("41.24%", values)
