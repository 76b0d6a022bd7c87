"""A run under ``-W error::RuntimeWarning`` (new-user pass 6, c6001/m1): no raw numpy warning
anywhere in a run on outputs 200 orders of magnitude apart, on constant or rank-1 outputs; a
pacpriv warning that the user's filter turns into an error ends in one line, not a traceback.
"""

from __future__ import annotations

import json
import warnings

import pytest

from pacpriv.cli.main import main
from pacpriv.exceptions import PacprivWarning

MODULE = '''
import numpy as np
def _X(d): return d[0] if isinstance(d, tuple) else d
def scalesep(d):
    m = np.asarray(_X(d), float).mean(axis=0)
    return np.array([m[0] * 1e100, m[1], m[2] * 1e-100])
def rank1(d):
    m = float(np.asarray(_X(d), float).mean())
    return np.array([m, 2.0 * m, -m])
def const(d):
    return np.array([1.0, 2.0, 3.0])
'''


def _run(tmp_path, fn, rule):
    (tmp_path / "mods.py").write_text(MODULE)
    return main(["pac", "run", "--no-progress", "--trials", "40", "--seed", "0",
                 "--mechanism", f"{tmp_path / 'mods.py'}:{fn}", "--dataset", "iris",
                 "--mi-budget", "0.1", "--rule", rule, "--out", str(tmp_path / "r"),
                 "--format", "json", "--report-pool-statistics"])


@pytest.mark.parametrize(("fn", "rule"), [("scalesep", "anisotropic"), ("scalesep", "certified"),
                                          ("rank1", "anisotropic"), ("rank1", "exact-mi")])
def test_no_raw_numpy_warning_in_a_run(fn, rule, tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("ignore", PacprivWarning)  # pacpriv's own, said in words
        rc = _run(tmp_path, fn, rule)
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "encountered in" not in err and "Traceback" not in err
    rank = json.loads((tmp_path / "r" / "report.json").read_text())["spectrum"]
    if rule != "certified":
        assert rank["effective_rank"] == pytest.approx(1.0, abs=1e-6)


def test_a_warning_made_an_error_ends_in_one_line(tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        rc = _run(tmp_path, "const", "anisotropic")
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert err[-1].startswith("pacpriv: error: the outputs did not vary across trials")
    assert err[-1].endswith("(ConstantOutputWarning, raised as an error by the Python warning "
                            "filter -W / PYTHONWARNINGS)")
    assert not any("Traceback" in line for line in err)
