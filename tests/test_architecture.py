"""The import directions of the package (issue 9): no cycles, leaves stay leaves.

Reads every module's source (no import), collects the ``pacpriv`` modules it imports --
at module level and inside functions, ``TYPE_CHECKING`` blocks excluded -- and checks the
rules of ARCHITECTURE.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pacpriv"

#: Modules that import no other pacpriv module.
LEAVES = (
    "pacpriv.exceptions",
    "pacpriv._validation",
    "pacpriv._files",
    "pacpriv._random",
    "pacpriv._optional",
    "pacpriv._stats",
    "pacpriv.threat_models",
    "pacpriv.cli._args",
    "pacpriv._numbers",
    "pacpriv.report.markdown",
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, modules: set[str]) -> set[str]:
    """pacpriv modules imported by the file (the most specific existing module per import)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                # ``from pkg import sub`` imports the submodule; ``from mod import name`` the module
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in child.names
                ]
            else:
                visit(child)
                continue
            for t in targets:
                if t.startswith("pacpriv.mechanisms"):  # a leaf package (its own test below)
                    continue
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t != name and t.startswith("pacpriv"):
                    found.add(t)
            visit(child)

    visit(tree)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): _imports(p, modules) for p in paths}


def test_graph_is_read(graph):
    """The walk finds the packages and their imports (a vacuous graph would pass every rule)."""
    assert {"pacpriv.pac.engine._simulate", "pacpriv.cli.main",
            "pacpriv.report.builder"} <= set(graph)
    assert "pacpriv.pac.engine._mechanism" in graph["pacpriv.pac.engine._simulate"]
    assert "pacpriv.threat_models" in graph["pacpriv.report.builder"]


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaves_import_no_pacpriv_module(graph, leaf):
    assert graph[leaf] == set(), f"{leaf} imports {sorted(graph[leaf])}"


def test_pac_and_dpsgd_never_import_each_other(graph):
    bad = [
        (m, t) for m, targets in graph.items() for t in targets
        if (m.startswith("pacpriv.pac") and t.startswith("pacpriv.dpsgd"))
        or (m.startswith("pacpriv.dpsgd") and t.startswith("pacpriv.pac"))
    ]
    assert bad == []


def test_nothing_imports_the_cli(graph):
    bad = [
        (m, t) for m, targets in graph.items() for t in targets
        if t.startswith("pacpriv.cli") and not m.startswith("pacpriv.cli")
        and m != "pacpriv.__main__"
    ]
    assert bad == []


def test_no_import_cycles(graph):
    """Tarjan's strongly connected components: every component is a single module.

    A package ``__init__`` re-exporting its submodules is an edge from the package to them;
    a submodule importing a sibling goes to the sibling, never back to the ``__init__``.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    assert cycles == []


def _pacpriv_imports_of_the_mechanisms(source: str) -> list[str]:
    """Imports that reach pacpriv from a mechanism: absolute ``pacpriv``/``mechanisms``, or a
    relative import that leaves the mechanisms folder (``from .. import``)."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if a.name.split(".")[0] in ("pacpriv", "mechanisms")]
        elif isinstance(node, ast.ImportFrom):
            if node.level > 1 or (not node.level and (node.module or "").split(".")[0] in (
                    "pacpriv", "mechanisms")):
                bad.append("." * node.level + (node.module or ""))
    return bad


def test_mechanisms_import_no_pacpriv():
    """The reference mechanisms (the package pacpriv.mechanisms) stay independent of the rest
    of pacpriv: they import only each other and third-party libraries."""
    paths = sorted((PACKAGE / "mechanisms").glob("*.py"))
    assert len(paths) > 10  # the walk finds the mechanisms
    bad = [(p.name, n) for p in paths for n in _pacpriv_imports_of_the_mechanisms(p.read_text())]
    assert bad == []
    assert _pacpriv_imports_of_the_mechanisms(
        "from ._common import x\nfrom ..pac import y\nimport pacpriv.registry\n"
    ) == ["..pac", "pacpriv.registry"]


def test_library_modules_carry_no_demo_defaults(graph):
    """pac/ and dpsgd/ import neither the datasets nor the reference mechanisms (item 5)."""
    bad = [
        (m, t) for m, targets in graph.items() for t in targets
        if m.startswith(("pacpriv.pac", "pacpriv.dpsgd")) and t.startswith("pacpriv.datasets")
    ]
    assert bad == []
    for path in sorted((PACKAGE / "pac").glob("*.py")) + sorted((PACKAGE / "dpsgd").glob("*.py")):
        assert "mechanisms import" not in path.read_text(), path.name


#: The public names of the 0.1 flat modules, importable from the same dotted paths.
OLD_PUBLIC = {
    "pacpriv.report": ["ARRAY_LIMIT", "THREAT_MODEL_PAC", "build_report", "to_markdown",
                       "write_report"],
    "pacpriv.compare": ["THREAT_MODELS", "ComparisonResult", "ComparisonRow", "compare_pac_dpsgd"],
    "pacpriv.plotting": ["COMPARISON_KEYS", "figure_to_data_uri", "plot_dpsgd_accuracy_vs_sigma",
                         "plot_pac_vs_dpsgd", "plot_posterior_curve", "plot_spectrum"],
    "pacpriv.cli": ["UsageError", "build_parser", "main", "number"],
    "pacpriv.datasets": ["BUNDLED_DATASETS", "Dataset", "DatasetInfo", "load_dataset"],
    "pacpriv.dpsgd": ["THREAT_MODEL", "DPSGDSpec"],
}


@pytest.mark.parametrize("module", sorted(OLD_PUBLIC))
def test_old_public_paths_still_import(module):
    import importlib

    mod = importlib.import_module(module)
    missing = [n for n in OLD_PUBLIC[module] if not hasattr(mod, n)]
    assert missing == []


# --- the house of rooms (issue 24) ------------------------------------------------------------


def _entries(folder: Path) -> list[str]:
    """Modules and sub-packages directly in ``folder`` (no caches, no data files)."""
    return sorted(
        p.name for p in folder.iterdir()
        if (p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").is_file())
    )


def test_top_level_has_at_most_15_modules():
    modules = [p for p in PACKAGE.glob("*.py")]
    assert len(modules) <= 15, sorted(p.name for p in modules)


def test_pac_top_level_has_at_most_12_entries():
    entries = _entries(PACKAGE / "pac")
    assert len(entries) <= 12, entries
    assert {"engine", "spectrum", "noise", "bounds", "per_record"} <= set(entries)


def _own_python_files() -> list[Path]:
    """Every Python file of the package (the mechanisms included), tests, benchmarks and
    examples."""
    return [path for top in ("pacpriv", "tests", "benchmarks", "examples")
            for path in (ROOT / top).rglob("*.py")]


def test_no_module_over_650_lines():
    long = {str(p.relative_to(ROOT)): n for p in _own_python_files()
            if (n := len(p.read_text().splitlines())) > 650}
    assert long == {}


def test_mechanisms_are_a_real_package_folder():
    """``pacpriv/mechanisms`` is a plain folder (no link, no top-level ``mechanisms``), imported
    without any hook."""
    import sys

    import pacpriv.mechanisms

    folder = PACKAGE / "mechanisms"
    assert folder.is_dir() and not folder.is_symlink() and (folder / "__init__.py").is_file()
    assert not (ROOT / "mechanisms").exists()
    assert Path(pacpriv.mechanisms.__file__).resolve().parent == folder.resolve()
    finders = [type(f).__name__ for f in sys.meta_path]
    assert not any("Mechanisms" in name for name in finders), finders


def test_tests_mirror_the_rooms():
    for room in ("pac/engine", "pac/spectrum", "pac/noise", "pac/bounds", "pac/per_record",
                 "dpsgd/exact", "audit", "cli", "compare", "report", "prediction"):
        assert any((ROOT / "tests" / room).glob("test_*.py")), room


def test_no_import_hook_and_no_moved_paths():
    """The 0.2 module paths are gone (0.4): no finder of pacpriv's on sys.meta_path, and an
    old path is a plain ModuleNotFoundError."""
    import importlib
    import sys

    import pacpriv  # noqa: F401

    assert not any(type(f).__module__.startswith("pacpriv") for f in sys.meta_path)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("pacpriv.pac.calibration")


def test_rule_names_are_special_cased_only_in_their_own_rule_module():
    """No ``if rule == "..."`` outside the rule classes: the literal name of a rule appears in
    its own module only (issue 24 item 2)."""
    import re

    names = ("algorithm1",)
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "mechanisms" in path.relative_to(PACKAGE).parts[:1]:
            continue
        text = path.read_text()
        for name in names:
            if re.search(rf"[\"']{re.escape(name)}[\"']", text) and path.name != "_algorithm1.py":
                bad.append((str(path.relative_to(ROOT)), name))
        for m in re.finditer(r"\brule\s*[!=]=\s*[\"']", text):
            bad.append((str(path.relative_to(ROOT)), m.group(0)))
    assert bad == []


def _public_functions():
    """Every public function and method of pacpriv's public modules (``__all__``), with the
    number of parameters ``inspect.signature`` shows (``self``/``cls`` excluded). Result and
    settings records (dataclasses, whose fields are their constructor) are not functions."""
    import dataclasses
    import importlib
    import inspect
    import pkgutil
    import warnings

    import pacpriv

    out = {}
    names = ["pacpriv"] + [m.name for m in pkgutil.walk_packages(pacpriv.__path__, "pacpriv.")
                           if not any(p.startswith("_") for p in m.name.split(".")[1:])]
    for name in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                mod = importlib.import_module(name)
            except ImportError:  # an optional extra that is not installed
                continue
        for attr in getattr(mod, "__all__", ()):
            obj = getattr(mod, attr, None)
            targets = []
            if inspect.isclass(obj):
                for mname, meth in vars(obj).items():
                    if mname.startswith("_") and not (mname == "__init__"
                                                      and not dataclasses.is_dataclass(obj)):
                        continue
                    func = getattr(meth, "__func__", meth)
                    if inspect.isfunction(func):
                        targets.append((f"{obj.__module__}.{obj.__qualname__}.{mname}", func))
            elif inspect.isfunction(obj):
                targets.append((f"{obj.__module__}.{obj.__qualname__}", obj))
            for qualname, func in targets:
                try:
                    params = inspect.signature(func).parameters
                except (TypeError, ValueError):
                    continue
                out[qualname] = len([p for p in params if p not in ("self", "cls")])
    return out


def test_no_public_function_takes_more_than_12_parameters():
    """Issue 24: ``run_pac`` takes at most 13 parameters and no other public function or method
    more than 12 (settings travel in spec objects)."""
    counts = _public_functions()
    assert counts["pacpriv.pac.job.run_pac"] <= 13
    assert len(counts) > 100  # the walk found the public API
    over = {k: v for k, v in counts.items() if v > 12 and not k.endswith(".run_pac")}
    assert not over, over


# --- specs answer for themselves (issue 33) ---------------------------------------------------

#: Consumers that still branch on a concrete spec type: none (a consumer asks the spec:
#: ``independent_memberships``, ``dependence``, ``trials_per_draw``). Nothing may be added here.
ISINSTANCE_PENDING: dict[str, set[str]] = {}


def _spec_classes() -> dict[str, str]:
    """Concrete spec class name -> the file that defines it (samplers, rules, attacks)."""
    import inspect

    from pacpriv.audit._suite import ATTACKS
    from pacpriv.pac.noise import RULE_CLASSES, NoiseRule
    from pacpriv.pac.samplers import SAMPLERS, Sampler

    def subclasses(base):
        out = set()
        for sub in base.__subclasses__():
            out |= {sub} | subclasses(sub)
        return out

    attacks = {getattr(f, "func", f) for f in ATTACKS.values()}
    classes = (subclasses(Sampler) | subclasses(NoiseRule) | set(SAMPLERS.values())
               | set(RULE_CLASSES.values()) | attacks)
    return {c.__name__: str(Path(inspect.getfile(c)).resolve().relative_to(ROOT))
            for c in classes if c.__module__.startswith("pacpriv")}


def _isinstance_targets(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2):
            arg = node.args[1]
            for item in (arg.elts if isinstance(arg, ast.Tuple) else [arg]):
                if isinstance(item, ast.Name):
                    names.add(item.id)
                elif isinstance(item, ast.Attribute):
                    names.add(item.attr)
    return names


def test_no_consumer_branches_on_a_concrete_spec_type():
    """``isinstance(x, ComplementaryPairsSampler)`` decides nothing outside the class's own
    module: the spec answers (``independent_rows``, ``describe``, ``to_dict``...)."""
    specs = _spec_classes()
    assert {"PoissonSampler", "ComplementaryPairsSampler", "Certified", "LiraAttack"} <= set(specs)
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if "mechanisms" in path.relative_to(PACKAGE).parts[:1]:
            continue
        used = _isinstance_targets(ast.parse(path.read_text()))
        for name in sorted(used & set(specs)):
            if specs[name] != rel and name not in ISINSTANCE_PENDING.get(rel, set()):
                bad.append((rel, name))
    assert bad == []


def test_isinstance_check_sees_a_violation():
    """The walk finds an isinstance against a spec class (a vacuous check would pass)."""
    tree = ast.parse("if isinstance(s, (Sampler, samplers.ComplementaryPairsSampler)): pass")
    assert _isinstance_targets(tree) == {"Sampler", "ComplementaryPairsSampler"}


def test_each_helper_is_written_once():
    """``torch_generator`` has one definition (pacpriv._random); the ensemble and DP-SGD
    import it (a copy could drift and break "the ensemble equals train_dpsgd")."""
    defs = [str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")
            if "def torch_generator(" in p.read_text()]
    assert defs == ["pacpriv/_random.py"]


# --- function bodies (issue 33) -----------------------------------------------------------------

#: Function bodies over 80 lines (docstring excluded) kept, each with its reason: none now.
#: Nothing may be added here.
LONG_BODIES_KEPT: set[str] = set()


def _long_bodies(limit: int = 80) -> dict[str, int]:
    """``file:function`` -> lines of its body (docstring excluded) for bodies over ``limit``."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = node.body
            if (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                body = body[1:]
            if body and (n := body[-1].end_lineno - body[0].lineno + 1) > limit:
                out[f"{path.relative_to(ROOT)}:{node.name}"] = n
    return out


def test_no_function_body_over_80_lines():
    long = _long_bodies()
    assert set(long) <= LONG_BODIES_KEPT, {k: v for k, v in long.items()
                                           if k not in LONG_BODIES_KEPT}
    assert _long_bodies(limit=60)  # the walk measures bodies (a vacuous one would pass)
