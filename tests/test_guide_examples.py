"""The guide pages of issue 36 (scikit-learn, real tables, auditing your own model) run as
written: their ```python blocks and the `pacpriv ...` lines of their ```bash blocks, in order,
in one folder (a page's later blocks read what its earlier ones wrote)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pacpriv.cli import main

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide"
PAGES = ("sklearn.md", "tables.md", "audit_own_model.md")
BLOCK = re.compile(r"```(python|bash)\n(.*?)```", flags=re.S)


def _blocks(page: str) -> list[tuple[str, str]]:
    return BLOCK.findall((GUIDE / page).read_text())


@pytest.mark.parametrize("page", PAGES)
def test_page_has_runnable_blocks(page):
    kinds = [k for k, _ in _blocks(page)]
    assert "python" in kinds


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
@pytest.mark.parametrize("page", PAGES)
def test_page_runs(page, tmp_path, monkeypatch, capsys):
    if "torch" in (GUIDE / page).read_text():
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__guide__"}
    for kind, code in _blocks(page):
        if kind == "python":
            exec(compile(code, f"{page}[python]", "exec"), namespace)
            continue
        for line in code.splitlines():
            if line.startswith("pacpriv "):
                assert main(shlex.split(line)[1:]) == 0, line
    capsys.readouterr()
