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


#: Snippets that need an existing Dask or Ray cluster: compiled (below), not run.
CLUSTER = [i for i, b in enumerate(BLOCKS)
           if "Client(" in b or "scheduler:8786" in b or 'address="auto"' in b]
RUNNABLE = [i for i in range(len(BLOCKS)) if i not in CLUSTER]


def test_cluster_snippets_compile():
    """The cluster snippets cannot run here (no scheduler) but must at least be valid Python."""
    assert CLUSTER
    for i in CLUSTER:
        compile(_dedent(BLOCKS[i]), f"README.md[python block {i}]", "exec")


def test_readme_has_python_snippets():
    """The API tour exists (a README without snippets would make the next test vacuous)."""
    assert len(BLOCKS) >= 4


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.DegenerateOutputWarning")
@pytest.mark.parametrize("index", RUNNABLE)
def test_readme_snippet_runs(index, tmp_path, monkeypatch):
    """Each ```python block of the README runs in a fresh namespace (cluster snippets: compiled)."""
    code = _dedent(BLOCKS[index])
    if "torch" in code:
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README.md[python block {index}]", "exec"), {"__name__": "__readme__"})
