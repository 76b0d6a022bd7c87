"""The README's and the docs' Python snippets run as written (keeps the API tour true).

A docs snippet preceded by ``.. not-run: <reason>`` (reStructuredText) or
``<!-- not-run: <reason> -->`` (Markdown) is a fragment or too slow to run here: it is
compiled, never skipped silently. Prose mentions of ``result.<attribute>`` must name
attributes that exist (issue 35: the README said ``result.reproducible``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("one_native_thread")

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
DOCS = sorted([*(ROOT / "docs").rglob("*.rst"), *(ROOT / "docs").rglob("*.md")])

#: Faster stand-ins for the docs snippets' trial counts (the snippet's logic is unchanged).
SUBSTITUTIONS = {"n_trials=1000": "n_trials=200"}

#: Guide pages whose blocks build on each other: run page by page, in order, by
#: tests/test_guide_examples.py (here they are compiled only).
RUN_AS_PAGES = {"sklearn.md", "tables.md", "audit_own_model.md"}


def _dedent(block: str) -> str:
    lines = block.splitlines()
    indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
    return "\n".join(x[indent:] for x in lines)


def _doc_blocks() -> list[tuple[str, str, bool]]:
    """``(id, code, runnable)`` for every Python snippet under docs/."""
    out = []
    for path in DOCS:
        text = path.read_text()
        if path.suffix == ".md":
            pattern = r"(<!-- not-run:[^>]*-->\s*)?```python\n(.*?)```"
        else:
            pattern = (r"(\.\. not-run:[^\n]*\n(?:[ \t]+[^\n]*\n)*\s*)?"
                       r"\.\. code-block:: python\n\n((?:[ \t]+[^\n]*\n|\n)+)")
        for i, m in enumerate(re.finditer(pattern, text, flags=re.S)):
            code = _dedent(m.group(2))
            for old, new in SUBSTITUTIONS.items():
                code = code.replace(old, new)
            runnable = m.group(1) is None and path.name not in RUN_AS_PAGES
            out.append((f"{path.relative_to(ROOT)}[{i}]", code, runnable))
    return out


DOC_BLOCKS = _doc_blocks()

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


def test_docs_snippets_are_found_and_compile():
    """Every docs snippet is found (the patterns are not vacuous) and is valid Python."""
    assert len(DOC_BLOCKS) >= 5 and sum(run for _, _, run in DOC_BLOCKS) >= 3
    for name, code, _ in DOC_BLOCKS:
        compile(code, name, "exec")


def test_readme_result_attributes_exist():
    """``result.a.b`` in the README's prose names a real attribute of a result (the README
    said ``result.reproducible``; it is ``result.simulation.reproducible``)."""
    import dataclasses
    import typing

    from pacpriv.compare import ComparisonResult
    from pacpriv.pac import PacResult, SimulationResult

    text = "\n".join([README.read_text(), *(p.read_text() for p in DOCS)])
    mentions = set(re.findall(r"`result((?:\.[A-Za-z_]\w*)+)", text))
    assert ".simulation.reproducible" in mentions

    def resolves(cls, path: list[str]) -> bool:
        for name in path:
            hints = typing.get_type_hints(cls) if dataclasses.is_dataclass(cls) else {}
            if name in hints:
                cls = hints[name]
                args = [a for a in typing.get_args(cls) if a is not type(None)]
                cls = args[0] if args else cls
            elif hasattr(cls, name):
                cls = getattr(cls, name)
            else:
                return False
        return True

    for m in sorted(mentions):
        path = m.lstrip(".").split(".")
        assert any(resolves(c, path) for c in (PacResult, SimulationResult, ComparisonResult)), (
            f"README/docs mention `result{m}`, which no result type has")


#: ``print(...)  # 0.5882`` or ``# about 0.88``: the value the README says the line prints.
_PRINTED_CLAIM = re.compile(r"^\s*print\(.*\)\s*#\s*(?:about\s+)?(-?\d+\.(\d+))\b", re.M)


def _check_printed_claims(code: str, out: str, where: str) -> None:
    """Every value a snippet's comment says a print shows is printed, to its last digit (the
    README said "about 0.92" where its seeded example printed 0.877: seventh new-user pass)."""
    printed = [float(x) for x in re.findall(r"-?\d+\.\d+(?:[eE][-+]?\d+)?", out)]
    for value, decimals in _PRINTED_CLAIM.findall(code):
        tol = 0.5 * 10.0 ** -len(decimals) + 1e-12
        assert any(abs(v - float(value)) <= tol for v in printed), (
            f"{where}: a comment says {value}; printed {out.strip()!r}")


def test_printed_claims_are_found_and_checked():
    """The claim pattern finds the README's and fails a wrong one."""
    assert ("0.88", "88") in _PRINTED_CLAIM.findall("print(x.mean())   # about 0.88 (of 3)")
    _check_printed_claims("print(a)  # 0.5882 (prior 1/2)", "0.5882352941176471\n", "t")
    with pytest.raises(AssertionError, match=r"a comment says 0\.92"):
        _check_printed_claims("print(a)  # about 0.92", "0.8771187227327578\n", "t")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.DegenerateOutputWarning")
@pytest.mark.parametrize("index", RUNNABLE)
def test_readme_snippet_runs(index, tmp_path, monkeypatch, capsys):
    """Each ```python block of the README runs in a fresh namespace (cluster snippets: compiled),
    and prints what its comments say."""
    code = _dedent(BLOCKS[index])
    if "torch" in code:
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README.md[python block {index}]", "exec"), {"__name__": "__readme__"})
    _check_printed_claims(code, capsys.readouterr().out, f"README.md[python block {index}]")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.DegenerateOutputWarning")
@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
@pytest.mark.parametrize("name,code", [(n, c) for n, c, run in DOC_BLOCKS if run],
                         ids=[n for n, _, run in DOC_BLOCKS if run])
def test_docs_snippet_runs(name, code, tmp_path, monkeypatch):
    """Each runnable docs snippet runs in a fresh namespace (trial counts substituted)."""
    if "torch" in code:
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, name, "exec"), {"__name__": "__docs__"})


def _shown(value: float, text: str) -> bool:
    """``value`` rounds to ``text`` at the digits ``text`` shows."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(value - float(text)) <= 0.5 * 10.0 ** -decimals + 1e-12


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_readme_guarantee_table_matches_its_commands(tmp_path, monkeypatch):
    """The table of "Both guarantees on one bundled dataset" quotes the output of the two
    commands above it: rerun them and compare every number it states (twelfth new-user pass,
    M10/M11: the table still showed the numbers of an earlier certificate)."""
    import json

    from pacpriv.cli import main

    text = README.read_text()
    start = text.index("Both guarantees on one bundled dataset")
    block = text[start:text.index("`pacpriv pac records` writes the report section", start)]
    commands = re.findall(r"^pacpriv (pac (?:run|records) .*)$", block, re.M)
    assert len(commands) == 2
    monkeypatch.chdir(tmp_path)
    reports = {}
    for i, command in enumerate(commands):
        argv = [*command.split(), "--no-progress", "--out", f"r{i}"]
        assert main(argv) == 0
        reports[argv[1]] = json.loads((tmp_path / f"r{i}" / "report.json").read_text())
    assert main([*commands[0].split(), "--no-progress", "--out", "plug", "--rule",
                 "anisotropic"]) == 0
    plug = json.loads((tmp_path / "plug" / "report.json").read_text())
    whole = reports["run"]["noise"]["expected_noise_power"]
    per = reports["records"]["sections"][0]["per_record"]
    per_power = per["noise"]["expected_noise_power"]
    plug_power = plug["noise"]["expected_noise_power"]
    row_whole = re.search(r"^\| whole subset .*?\| ([\d.]+) \|", block, re.M)
    row_per = re.search(r"^\| per record .*?\| ([\d.]+) \|", block, re.M)
    assert row_whole and _shown(whole, row_whole.group(1))
    assert row_per and _shown(per_power, row_per.group(1))
    said = re.search(r"noise is (\d+)× smaller in power.*?would give ([\d.]+) for the whole "
                     r"subset; the certificate costs ([\d.]+)× that.*?whole-subset MI is "
                     r"([\d.]+) nats", block, re.S)
    assert said, "the README's sentence on the two noise powers changed shape"
    assert _shown(whole / per_power, said.group(1))
    assert _shown(plug_power, said.group(2))
    assert _shown(whole / plug_power, said.group(3))
    assert _shown(per["whole_subset_mi"], said.group(4))
