"""Columns on different scales (issue 35 item 7): the per-coordinate noise/spread ratio, a
warning when the coordinates differ by orders of magnitude, and --standardize as the fix."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pacpriv.cli import main
from pacpriv.report.pool import noise_to_spread, spread_orders

pytestmark = pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")

WARNING = "Warning: the coordinates of f are on different scales"


@pytest.fixture(scope="module")
def raw_csv(tmp_path_factory):
    """Age (tens), income (tens of thousands), height (about 1.7 m): a mean of raw columns."""
    rng = np.random.default_rng(0)
    rows = ["age,income,height"] + [
        f"{rng.integers(20, 80)},{rng.normal(50000, 15000):.1f},{rng.normal(1.7, 0.1):.3f}"
        for _ in range(200)]
    path = tmp_path_factory.mktemp("scales") / "raw.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def _run(path, out, *extra):
    assert main(["pac", "run", "--mechanism", "mean", "--dataset", str(path), "--mi-budget",
                 "0.1", "--trials", "120", "--seed", "0", "--no-progress", "--out", str(out),
                 "--format", "json,md", *extra]) == 0
    return json.loads((out / "report.json").read_text()), (out / "report.md").read_text()


def test_per_coordinate_ratio_shown_and_warned(raw_csv, tmp_path, capsys):
    report, md = _run(raw_csv, tmp_path / "all", "--report-pool-statistics")
    noise, spectrum = report["noise"], report["spectrum"]
    # an independent computation from the report's own per-coordinate numbers
    expected = [s / math.sqrt(v) for s, v in zip(noise["noise_std_per_coordinate"],
                                                 spectrum["coordinate_variances"], strict=True)]
    np.testing.assert_allclose(noise_to_spread(spectrum, noise), expected)
    assert max(expected) / min(expected) > 100  # the income column sets the noise
    assert spread_orders(spectrum, noise) == math.floor(math.log10(max(expected) /
                                                                  min(expected)))
    assert "noise / spread per coordinate" in md and WARNING in md and "--standardize" in md
    printed = capsys.readouterr().out
    assert "per coordinate from" in printed and WARNING in printed


def test_hidden_view_warns_with_a_power_of_ten_only(raw_csv, tmp_path):
    report, md = _run(raw_csv, tmp_path / "hidden")
    assert report["noise"]["noise_to_spread_orders"] >= 2
    assert "coordinate_variances" not in report["spectrum"]
    assert "noise / spread per coordinate" not in md  # per-column ratios stay hidden
    assert WARNING in md and "at least 10^" in md


def test_standardize_puts_columns_on_one_scale(raw_csv, tmp_path):
    report, md = _run(raw_csv, tmp_path / "std", "--standardize", "--report-pool-statistics")
    ratios = noise_to_spread(report["spectrum"], report["noise"])
    assert len(ratios) == 3 and max(ratios) / min(ratios) < 10
    assert WARNING not in md
    assert "standardized" in report["dataset"]["preprocessing"]


@pytest.mark.parametrize(("variances", "stds", "orders"), [
    ([1.0, 1.0], [1.0, 1.0], 0),
    ([1.0, 1e-4], [1.0, 1.0], 2),   # ratios 1 and 100
    ([1.0, 0.0, 1e-6], [1.0, 1.0, 1.0], 3),  # a constant coordinate is left out
    ([4.0], [1.0], 0),  # one coordinate: nothing to compare
])
def test_spread_orders(variances, stds, orders):
    spectrum = {"coordinate_variances": variances}
    noise = {"noise_std_per_coordinate": stds}
    assert spread_orders(spectrum, noise) == orders
