"""Fixtures shared by the noise tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture
def benchmark_module():
    """Load a script of ``benchmarks/`` as a module: ``benchmark_module("certificate")``."""

    def load(name: str):
        spec = importlib.util.spec_from_file_location(f"{name}_bench", _BENCHMARKS / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses resolve annotations through sys.modules
        spec.loader.exec_module(mod)
        return mod

    return load
