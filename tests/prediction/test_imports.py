"""Import hygiene of pacpriv.prediction: FastAPI, uvicorn and torch stay lazy."""

from __future__ import annotations

import subprocess
import sys

import pacpriv
import pacpriv.prediction


def test_prediction_does_not_import_serving_or_torch():
    code = (
        "import sys, pacpriv, pacpriv.prediction, pacpriv.cli; "
        "print([m for m in ('fastapi', 'uvicorn', 'starlette', 'torch') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_public_names_exist():
    missing = [n for n in pacpriv.prediction.__all__ if not hasattr(pacpriv.prediction, n)]
    assert missing == []
    assert pacpriv.PrivatePredictor is pacpriv.prediction.PrivatePredictor
