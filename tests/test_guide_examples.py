"""The guide pages of issue 36 (scikit-learn, real tables, auditing your own model, ε targets,
make_private, the trade-off picture) run as written: their ```python blocks and the
`pacpriv ...` lines of their ```bash blocks, in order, in one folder (a page's later blocks
read what its earlier ones wrote)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pacpriv.cli import main

pytestmark = pytest.mark.usefixtures("one_native_thread")

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide"
PAGES = ("sklearn.md", "tables.md", "audit_own_model.md", "epsilon.md", "make_private.md",
         pytest.param("tradeoff_picture.md", marks=pytest.mark.slow))  # trains ~30 models
#: pages whose examples train torch models without saying "torch" (pacpriv compare)
TORCH_PAGES = ("tradeoff_picture.md",)
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
    if "torch" in (GUIDE / page).read_text() or page in TORCH_PAGES:
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict = {"__name__": "__guide__"}
    for kind, code in _blocks(page):
        if kind == "python":
            exec(compile(code, f"{page}[python]", "exec"), namespace)
            continue
        for line in code.splitlines():
            if line.startswith("pacpriv "):
                assert main(shlex.split(line)[1:]) == 0, line
    capsys.readouterr()


README = GUIDE.parent.parent / "README.md"
#: README sections of issue 36 that must work end to end from their instructions.
README_SECTIONS = ("### A scikit-learn Pipeline under cross_val_score",
                   "### A CSV with categorical columns and missing values",
                   "### Your own torch model and training loop")


def _section(heading: str) -> str:
    text = README.read_text()
    start = text.index(heading)
    end = text.find("\n### ", start + len(heading))
    return text[start:end if end > 0 else len(text)]


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
@pytest.mark.parametrize("heading", README_SECTIONS)
def test_readme_section_runs_end_to_end(heading, tmp_path, monkeypatch, capsys):
    """The README's Pipeline, CSV and own-torch-loop sections: python blocks, then the
    `pacpriv` commands."""
    if "torch" in heading:
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__readme__"}
    blocks = BLOCK.findall(_section(heading))
    assert any(k == "python" for k, _ in blocks)
    for kind, code in blocks:
        if kind == "python":
            exec(compile(code, f"README {heading}", "exec"), namespace)
        else:
            for line in code.splitlines():
                if line.startswith("pacpriv "):
                    assert main(shlex.split(line)[1:]) == 0, line
    out = capsys.readouterr().out
    if "torch" in heading:
        epsilon, bound = map(float, out.splitlines()[-1].split())
        assert 0.0 < epsilon <= 4.0 and 0.5 < bound < 1.0
    elif "CSV" in heading:
        assert "('age', 'income', 'city[0]', 'city[1]', 'city[2]')" in out
        report = (tmp_path / "people-report" / "report.md").read_text()
        assert "one-hot encoded" in report and "imputed with the pool's median" in report
    else:
        assert float(out.splitlines()[0]) > 0.8
