"""Import hygiene: ``import pacpriv`` stays light and the public surface is importable."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "matplotlib", "dp_accounting", "dask", "distributed", "opacus", "ray")


def test_import_pacpriv_does_not_import_heavy_dependencies():
    """A fresh interpreter that imports pacpriv (and its CLI) loads none of the heavy extras."""
    code = (
        "import sys, pacpriv, pacpriv.pac, pacpriv.dpsgd, pacpriv.cli; "
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_sequential_run_pac_imports_no_heavy_dependency():
    """A sequential ``run_pac`` (certified rule, release, report) loads none of the heavy
    extras either: no Dask/distributed to know its crash types, no torch for a plain function.
    """
    code = (
        "import sys, warnings; warnings.simplefilter('ignore'); import numpy as np; "
        "from pacpriv.pac import run_pac; from pacpriv.pac.engine import ExecutionOptions; "
        "r = run_pac(np.mean, np.arange(40.0), mi_budget=0.5, n_trials=16, rng=0, "
        "execution=ExecutionOptions(progress=False)); "
        "assert r.release is not None; "
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("module", ["pacpriv", "pacpriv.pac", "pacpriv.dpsgd"])
def test_public_names_exist(module):
    """Every name in ``__all__`` is importable (no stale exports)."""
    mod = __import__(module, fromlist=["__all__"])
    missing = [name for name in mod.__all__ if not hasattr(mod, name)]
    assert missing == []


def test_python_dash_m_runs_cli():
    """``python -m pacpriv --version`` prints the version through the same CLI."""
    out = subprocess.run([sys.executable, "-m", "pacpriv", "--version"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.startswith("pacpriv ")


@pytest.mark.parametrize(("module", "feature", "extra", "message"), [
    ("uvicorn", "serving", "serve", "serving needs uvicorn: pip install 'pacpriv[serve]'"),
    ("dask.distributed", "--scheduler", "dask",
     "--scheduler needs dask: pip install 'pacpriv[dask]'"),
])
def test_missing_optional_dependency_names_the_extra(hide_modules, module, feature, extra,
                                                     message):
    """One message for every optional extra: what needs it, the package and the pip command."""
    from pacpriv._optional import import_optional

    hide_modules(module.partition(".")[0])
    with pytest.raises(ImportError) as info:
        import_optional(module, feature, extra=extra)
    assert str(info.value) == message
    assert isinstance(info.value.__cause__, ImportError)


def test_missing_torch_names_the_cpu_build(hide_modules):
    from pacpriv._optional import import_torch

    hide_modules("torch")
    with pytest.raises(ImportError, match=r"^the torch adapter needs torch: pip install "
                                          r"torch==2\.13\.0 \(CPU build\), then pip install "
                                          r"'pacpriv\[torch\]'$"):
        import_torch("the torch adapter")
