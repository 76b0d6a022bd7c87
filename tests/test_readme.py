"""The README's Python snippets run as written (keeps the API tour true)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def _dedent(block: str) -> str:
    lines = block.splitlines()
    indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
    return "\n".join(x[indent:] for x in lines)


def test_readme_has_python_snippets():
    """The API tour exists (a README without snippets would make the next test vacuous)."""
    assert len(BLOCKS) >= 4


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.DegenerateOutputWarning")
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_snippet_runs(index, tmp_path, monkeypatch):
    """Each ```python block of the README runs in a fresh namespace (cluster snippets skipped)."""
    code = _dedent(BLOCKS[index])
    if "Client(" in code or "scheduler:8786" in code:
        pytest.skip("needs an existing Dask cluster")
    if "torch" in code:
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README.md[python block {index}]", "exec"), {"__name__": "__readme__"})
