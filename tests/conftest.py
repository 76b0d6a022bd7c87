"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

#: ``../shared/reference`` beside the repository (reference values computed independently).
REFERENCE_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "reference"


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    """Directory of the reference CSVs; skips the test when it is not available."""
    if not REFERENCE_DIR.is_dir():
        pytest.skip(f"reference values not found at {REFERENCE_DIR}")
    return REFERENCE_DIR
