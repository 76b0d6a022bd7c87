"""User modules named by ``file.py:attr``: what they print or raise at import time cannot break
``--json`` nor leak a message (new-user review of 0.3)."""

from __future__ import annotations

import json

import pytest

from pacpriv.cli.main import main

pytestmark = pytest.mark.filterwarnings("always::pacpriv.exceptions.UndersampledWarning")

ARGS = ["--dataset", "iris", "--mi-budget", "0.02", "--trials", "20", "--no-progress", "--seed",
        "0"]


def _write(tmp_path, body: str) -> str:
    path = tmp_path / "user_mech.py"
    path.write_text(body)
    return f"{path}:f"


def test_a_print_at_import_goes_to_stderr_and_json_stays_valid(tmp_path, capsys):
    spec = _write(tmp_path, "import numpy as np\nprint('HELLO AT IMPORT')\n"
                  "def f(subset):\n    X = subset[0] if isinstance(subset, tuple) else subset\n"
                  "    return np.asarray(X).mean(axis=0)\n")
    assert main(["pac", "run", "--mechanism", spec, *ARGS, "--out", str(tmp_path / "r"),
                 "--json"]) == 0
    out, err = capsys.readouterr()
    json.loads(out)
    assert "HELLO AT IMPORT" in err and "HELLO AT IMPORT" not in out


@pytest.mark.parametrize("body, words", [
    ("raise RuntimeError('secret 987654')\n", "raised RuntimeError at import time (line 1)"),
    ("import sys\nsys.exit('secret 987654')\n", "called sys.exit() with a message (withheld"),
    ("import sys\nsys.exit(4)\n", "called sys.exit(4) at import time (line 2)"),
])
def test_a_failing_import_is_one_line_without_its_message(tmp_path, capsys, body, words):
    spec = _write(tmp_path, body)
    code = main(["pac", "run", "--mechanism", spec, *ARGS, "--out", str(tmp_path / "r")])
    _, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code != 0 and len(lines) == 1 and lines[0].startswith("pacpriv: error: ")
    assert words in lines[0] and "987654" not in err


def test_show_errors_prints_the_import_time_message(tmp_path, capsys):
    spec = _write(tmp_path, "raise RuntimeError('secret 987654')\n")
    main(["pac", "run", "--mechanism", spec, *ARGS, "--out", str(tmp_path / "r"),
          "--show-errors"])
    assert "(caused by RuntimeError: secret 987654)" in capsys.readouterr().err
