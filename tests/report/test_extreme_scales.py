"""A mechanism whose outputs differ in scale by many orders (new-user pass 6, c6001/m1/m2:
``scalesep`` = column means scaled by 1e100, 1, 1e-100) runs without a raw numpy warning, gets
a finite effective rank, and every number printed stays readable (the scale warning printed the
ratio as a 100-digit comma-grouped integer). Siblings: constant and rank-1 outputs, huge ints.
"""

from __future__ import annotations

import json
import math
import re
import warnings

import numpy as np
import pytest

import pacpriv
from pacpriv._numbers import format_bound
from pacpriv.pac.spectrum._covariance import effective_rank
from pacpriv.report.layout import spread_ratio

X = np.random.default_rng(0).normal(size=(60, 3))


def scalesep(d):
    m = np.asarray(d, float).mean(axis=0)
    return np.array([m[0] * 1e100, m[1], m[2] * 1e-100])


def const(d):
    return np.array([1.0, 2.0, 3.0])


def rank1(d):
    m = float(np.asarray(d, float).mean())
    return np.array([m, 2.0 * m, -m])


@pytest.mark.parametrize(("lam", "expected"), [
    ([1e200, 1.0, 1e-200], 1.0),           # p = (1, 1e-200, 0 after underflow): 0·ln 0 = 0
    ([1.0, 1.0, 1.0, 1.0], 4.0),
    ([1e308, 1e308], 2.0),                 # Σλ would overflow
    ([0.0, 0.0], 0.0),
    ([5e-324], 1.0),
    ([3.0, 1.0], math.exp(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))),
])
def test_effective_rank_is_defined_at_any_scale(lam, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert effective_rank(np.array(lam)) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("x", "side", "text"), [
    (10**100, "down", "1e+100"), (10**100 + 1, "up", "1.01e+100"),
    (-(10**20), "up", "-1e+20"), (2**80, "nearest", "1.21e+24"),
    (123456, "up", "123456"), (10**15 - 1, "up", "999999999999999"),
])
def test_huge_ints_print_in_scientific_notation(x, side, text):
    assert format_bound(x, 3, side=side) == text


def test_spread_ratio_never_overflows():
    assert spread_ratio([1e-300, 1e300]) == math.inf
    assert spread_ratio([2.0, 1e99]) == pytest.approx(5e98)
    assert spread_ratio([0.0, 1.0]) == math.inf


@pytest.mark.parametrize("fn", [scalesep, const, rank1])
def test_runs_raise_no_raw_numpy_warning(fn, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = pacpriv.run_pac(fn, X, mi_budget=0.1, n_trials=40, rng=0, rule="anisotropic")
        pacpriv.write_report(res, tmp_path / "r", pool_statistics=True)
        text = (tmp_path / "r" / "report.md").read_text()
        rep = json.loads((tmp_path / "r" / "report.json").read_text())
    raw = [str(w.message) for w in caught if w.category is RuntimeWarning
           or "encountered in" in str(w.message)]
    assert raw == []
    assert not any(len(tok) > 30 and tok.replace(",", "").isdigit() for tok in text.split())
    rank = rep["spectrum"]["effective_rank"]
    if fn is scalesep:
        assert rank == pytest.approx(1.0, abs=1e-6)
        assert re.search(r"differs by about \d\.\d+e\+(99|100)×", text)
    elif fn is rank1:
        assert rank == pytest.approx(1.0, abs=1e-6)
