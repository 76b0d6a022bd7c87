"""The docs/guide pages of issue 36 run as written: every ```python block (in order, one
namespace per page) and every ``pacpriv ...`` line of the ```bash blocks (through the CLI's
``main``, in a temporary directory)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide"
#: page -> marks (the trade-off picture trains a few dozen small models: slow)
PAGES = {
    "epsilon.md": (),
    "make_private.md": (),
    "tradeoff_picture.md": (pytest.mark.slow,),
}


def _blocks(page: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (GUIDE / page).read_text(), flags=re.S)


@pytest.mark.parametrize("page", [pytest.param(p, marks=m) for p, m in PAGES.items()])
def test_guide_page_runs(page, tmp_path, monkeypatch, capsys):
    blocks = _blocks(page, "python")
    commands = [line for b in _blocks(page, "bash") for line in b.splitlines()
                if line.startswith("pacpriv ")]
    assert blocks, f"{page} has no python example"
    if any("torch" in b for b in blocks):
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict = {"__name__": "__guide__"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{page}[python block {i}]", "exec"), namespace)
    from pacpriv.cli import main

    for line in commands:
        assert main(shlex.split(line)[1:]) == 0, line
    assert "Traceback" not in capsys.readouterr().err
