"""The trade-off picture: privacy_utility_curve, its figure and ``pacpriv compare --curve``."""

from __future__ import annotations

import json

import pytest

from pacpriv import _json
from pacpriv.cli import main
from pacpriv.compare import ComparisonSettings, compare_pac_dpsgd, privacy_utility_curve
from pacpriv.compare.curve import curve_from_table
from pacpriv.pac.engine import ExecutionOptions

QUIET = ExecutionOptions(n_jobs=1, progress=False)
SMALL = ComparisonSettings(n_trials=60, n_repeats=2, per_record_trials=120,
                           per_record_records=8, epochs=3, steps_per_epoch=3)
TARGETS = (0.6, 0.75)


@pytest.fixture(scope="module")
def curve():
    pytest.importorskip("torch")
    return privacy_utility_curve("iris", targets=TARGETS, settings=SMALL, rng=0,
                                 execution=QUIET)


def test_three_methods_at_every_target(curve):
    assert curve.methods() == ["PAC, per record", "PAC, whole subset", "DP-SGD, exact sigma"]
    assert [p.target_accuracy for p in curve.points] == list(TARGETS) * 3
    for p in curve.points:
        assert 0.5 < p.accuracy_bound <= p.target_accuracy  # certified to the target
        assert 0.0 <= p.test_accuracy <= 1.0 and p.test_accuracy_std >= 0.0
        assert p.n_repeats == 2
    per_record = [p for p in curve.points if p.method == "PAC, per record"]
    assert all("SAMPLE of 8 of 150" in p.bound_label for p in per_record)
    assert curve.majority_accuracy is not None and curve.majority_accuracy < 0.5


@pytest.mark.slow
def test_point_equals_the_single_comparison(curve):
    """Documented: the point at a equals compare_pac_dpsgd(dataset, a, rng)'s rows."""
    one = compare_pac_dpsgd("iris", target_accuracy=0.6, settings=SMALL, rng=0,
                            execution=QUIET)
    dp = one.row("dpsgd", exact=True)
    point = next(p for p in curve.points
                 if p.method == "DP-SGD, exact sigma" and p.target_accuracy == 0.6)
    assert (point.test_accuracy, point.test_accuracy_std) == (dp.test_accuracy,
                                                              dp.test_accuracy_std)


def test_json_and_report_section(curve, tmp_path):
    data = json.loads(_json.dumps(curve.to_dict()))
    assert len(data["points"]) == 6 and data["dataset"] == "iris"
    section = curve.report_section()
    assert list(section["privacy_utility_curve"]["targets"]) == list(TARGETS)
    pytest.importorskip("matplotlib")
    assert section["figures"][0].startswith("data:image/png;base64,")
    from pacpriv.report import write_report

    paths = write_report(curve, tmp_path, formats=("html", "json"))
    assert "data:image/png;base64," in paths["html"].read_text()


def test_figure_draws_each_method_with_error_bars(curve):
    pytest.importorskip("matplotlib")
    fig = curve.figure()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "DP-SGD, exact sigma" in labels and "PAC, whole subset" in labels
    assert "PAC, per record (SAMPLE of records)" in labels
    bars = ax.containers  # one ErrorbarContainer per method: x at the certified bounds
    assert len(bars) == 3
    for c in bars:
        assert tuple(c.lines[0].get_xdata()) == pytest.approx(TARGETS)
        assert c.has_yerr


def test_plot_refuses_bad_points():
    pytest.importorskip("matplotlib")
    from pacpriv.plotting import plot_privacy_utility_curve

    with pytest.raises(ValueError, match="non-empty"):
        plot_privacy_utility_curve([])
    with pytest.raises(ValueError, match="keys"):
        plot_privacy_utility_curve([{"method": "x", "accuracy_bound": 0.6}])
    with pytest.raises(ValueError, match="finite"):
        plot_privacy_utility_curve([{"method": "x", "accuracy_bound": float("nan"),
                                     "test_accuracy": 0.5, "test_accuracy_std": 0.0}])


@pytest.mark.parametrize("targets,error,match", [
    ((0.6,), ValueError, "at least two"),
    ((0.6, 0.6), ValueError, "at least two"),
    ((0.6, 1.0), ValueError, "target_accuracies"),
    ("0.6,0.7", TypeError, "targets"),
])
def test_api_refusals_before_work(targets, error, match):
    with pytest.raises(error, match=match):
        privacy_utility_curve("iris", targets=targets, settings=SMALL)


def test_curve_from_table_needs_one_dataset():
    from pacpriv.compare.results import ComparisonTable

    with pytest.raises(ValueError, match="one dataset"):
        curve_from_table(ComparisonTable(results=(), elapsed_s=0.0))


@pytest.mark.parametrize("flags,match", [
    (["--curve", "0.6"], "at least two distinct"),
    (["--curve", "0.6,1"], "--curve bounds must be in (0.5, 1)"),
    (["--curve", "--dataset", "iris,wine"], "--curve draws one dataset"),
    (["--curve", "--effects"], "--effects applies to the table"),
])
def test_cli_refusals_exit_2(capsys, tmp_path, flags, match):
    assert main(["compare", "--dataset", "iris", "--out", str(tmp_path / "o"), *flags]) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


@pytest.mark.slow
def test_cli_curve_writes_report_json_and_png(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "c"
    assert main(["compare", "--dataset", "iris", "--curve", "0.6,0.75", "--trials", "60",
                 "--repeats", "2", "--per-record-trials", "120", "--per-record-records", "8",
                 "--epochs", "3", "--steps-per-epoch", "3", "--seed", "0", "--no-progress",
                 "--n-jobs", "1", "--out", str(out)]) == 0
    data = json.loads((out / "curve.json").read_text())
    assert len(data["points"]) == 6
    if (out / "report.html").exists():
        assert "data:image/png;base64," in (out / "report.html").read_text()
        assert (out / "curve.png").stat().st_size > 1000
