"""Declared ranges that clip (nearly) the whole pool warn, coarsely, on screen only."""

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from pacpriv import ClippingWarning, PacprivWarning
from pacpriv._stats import clipping_problem
from pacpriv.cli.main import main
from pacpriv.datasets import load_dataset
from pacpriv.mechanisms.histogram import feature_histogram, make_feature_histogram
from pacpriv.mechanisms.mean import clipped_mean, make_clipped_mean
from pacpriv.mechanisms.median import make_clipped_median
from pacpriv.pac import run_pac

AGE = np.array([31.0, 47.0, 52.0, 29.0, 63.0, 38.0, 44.0, 57.0, 35.0, 41.0] * 4)


@pytest.fixture
def csv(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "pool.csv"
    rows = [f"{a:g},{b:g}" for a, b in zip(AGE, rng.integers(2, 14, AGE.size), strict=True)]
    path.write_text("age,visits\n" + "\n".join(rows) + "\n")
    return path


def _clipping(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, ClippingWarning)]


def test_the_warning_is_a_pacpriv_user_warning():
    assert issubclass(ClippingWarning, PacprivWarning)
    assert issubclass(ClippingWarning, UserWarning)


@pytest.mark.parametrize("low,high,expect", [
    (0.0, 0.5, "every value of columns 'age', 'visits'"),     # the whole pool outside
    (100.0, 200.0, "every value of columns 'age', 'visits'"),  # above, not below
    ([0.0, 0.0], [1.0, 20.0], "every value of column 'age' lies outside"),
    ([30.0, 0.0], [31.0, 2.0], "more than half of the pool's values"),
    ([0.0, 0.0], [100.0, 20.0], None),
])
def test_clipping_problem_flags_columns_and_majorities(low, high, expect):
    X = np.column_stack([AGE, np.arange(AGE.size) % 13 + 1.0])
    text = clipping_problem(X, low, high, what="the ranges", names=("age", "visits"))
    if expect is None:
        assert text is None
    else:
        assert expect in text and "little information" in text
        assert not any(ch.isdigit() for ch in text)  # no count, no value


def test_a_third_clipped_is_not_flagged():
    X = np.arange(30.0).reshape(-1, 1)
    assert clipping_problem(X, 0.0, 19.0, what="r") is None   # 10 of 30 clipped
    assert clipping_problem(X, 0.0, 13.0, what="r") is not None  # 16 of 30 clipped


def test_load_dataset_with_ranges_that_miss_every_value_warns(csv):
    with pytest.warns(ClippingWarning, match="every value of columns 'age', 'visits'"):
        load_dataset(str(csv), feature_ranges="0:1")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ClippingWarning)
        load_dataset(str(csv), feature_ranges="0:100")  # a fitting range is quiet


@pytest.mark.parametrize("mechanism", [
    make_clipped_mean(low=0.0, high=1.0), make_clipped_median(low=0.0, high=1.0),
    make_feature_histogram(edges=[0.0, 0.5, 1.0]), clipped_mean, feature_histogram,
])
def test_run_pac_warns_for_every_clipping_mechanism(mechanism):
    pool = np.column_stack([AGE, AGE / 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_pac(mechanism, pool, mi_budget=0.5, n_trials=20, rng=0, release=False)
    texts = _clipping(caught)
    assert len(texts) == 1 and "mechanism's clipping range" in texts[0]
    assert "31" not in texts[0]  # no record value


def test_run_pac_quiet_when_the_range_fits():
    pool = np.column_stack([AGE, AGE / 2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_pac(make_clipped_mean(low=0.0, high=100.0), pool, mi_budget=0.5, n_trials=20,
                rng=0, release=False)
    assert _clipping(caught) == []


@pytest.mark.filterwarnings("always")
def test_cli_warns_on_screen_and_never_in_the_report(csv, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["pac", "run", "--mechanism", "mean", "--dataset", str(csv), "--feature-ranges",
                 "0:1", "--mi-budget", "0.5", "--trials", "40", "--seed", "0", "--no-progress",
                 "--format", "json,md", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "pacpriv: warning: every value of columns 'age', 'visits' lies outside" in err
    # the declared ranges and the built-in mean's bounds clip the same pool: one line
    assert err.count("little information") == 1 and "(and 1 more like it)" in err
    for name in ("report.json", "report.md"):
        assert "little information" not in (out / name).read_text()
    json.loads((out / "report.json").read_text())


# -- a malformed feature ranges file: the file, the line, and the README's forms ------------

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.parametrize("lines,line_no", [
    (["# ranges", "0,120", "", "0;14"], 4), (["0,120", "1,2,3"], 2), (["0,120", "5,1"], 2),
    (["abc"], 1), (["0,inf"], 1),
])
def test_a_bad_ranges_file_names_the_file_and_line(lines, line_no, csv, tmp_path):
    path = tmp_path / "ranges.txt"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"^feature ranges file 'ranges.txt', line {line_no}:"):
        load_dataset(str(csv), feature_ranges=str(path))


def test_the_ranges_error_shows_the_readme_forms(csv):
    readme = README.read_text()
    with pytest.raises(ValueError) as err:
        load_dataset(str(csv), feature_ranges="0:1,x")
    forms = re.findall(r"'([^']*)'", str(err.value))[:-1]  # the last quote is the input
    assert forms == ["low:high", "l1:h1,l2:h2,...", "low,high"]
    for form in forms:
        assert re.search(rf"`[^`]*{re.escape(form)}`", readme), form  # as the README writes it


def test_a_ranges_file_that_is_not_utf8_names_the_line(csv, tmp_path):
    path = tmp_path / "ranges.txt"
    path.write_bytes(b"\xef\xbb\xbf0,120\n\xff\xfe,2\n")  # a BOM is fine; line 2 is not UTF-8
    with pytest.raises(ValueError, match=r"^feature ranges file 'ranges.txt', line 2: not UTF-8"):
        load_dataset(str(csv), feature_ranges=str(path))
    path.write_bytes(b"\xef\xbb\xbf0,120\r\n0,20\r\n")  # BOM and CRLF lines parse
    assert load_dataset(str(csv), feature_ranges=str(path)).feature_high == (120.0, 20.0)
