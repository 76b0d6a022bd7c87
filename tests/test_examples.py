"""Smoke test: every examples/*.py runs small (``--trials 50 --out DIR``) and exits 0."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.py"))
TIMEOUT_S = 120

#: Files an example must leave in its ``--out`` directory (examples not listed: none checked).
EXPECTED_OUTPUTS = {
    "pac_kmeans_iris.py": ("report.json", "report.md", "report.html"),
    "dpsgd_calibration.py": ("calibration.csv", "report.md", "report.html"),
    "make_private_cnn.py": ("summary.json",),
}


def _ids(paths):
    return [p.name for p in paths]


def test_examples_are_found():
    """The examples folder holds at least the PAC k-means example."""
    assert "pac_kmeans_iris.py" in _ids(EXAMPLES)


@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_example_has_main_and_small_run_flags(path):
    """Each example defines main(argv=None) and argparse options --trials and --out."""
    tree = ast.parse(path.read_text(), filename=str(path))
    mains = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    assert mains, f"{path.name} has no top-level main()"
    args = mains[0].args
    assert [a.arg for a in args.args] == ["argv"], f"{path.name}: main must take argv"
    assert isinstance(args.defaults[0], ast.Constant) and args.defaults[0].value is None
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert {"--trials", "--out"} <= strings, f"{path.name} lacks --trials/--out"
    assert "__main__" in strings, f"{path.name} lacks an `if __name__ == '__main__'` guard"


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT_S + 30)
@pytest.mark.parametrize("path", EXAMPLES, ids=_ids(EXAMPLES))
def test_example_runs_small(path, tmp_path):
    """``python examples/X.py --trials 50 --out DIR`` exits 0 within the time limit."""
    out = tmp_path / "out"
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    # From a checkout (pacpriv not installed) the example finds the package in the repository.
    repo = str(EXAMPLES_DIR.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, str(path), "--trials", "50", "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
    )
    log = f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, f"{path.name} failed:\n{log}"
    has_mpl = importlib.util.find_spec("matplotlib") is not None
    for name in EXPECTED_OUTPUTS.get(path.name, ()):
        if name.endswith(".html") and not has_mpl:
            continue  # the HTML report needs the `plot` extra
        assert (out / name).is_file(), f"{path.name} did not write {name}"
