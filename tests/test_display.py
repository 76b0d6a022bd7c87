"""Notebook and terminal display of the main result objects (issue 16 item 4)."""

from __future__ import annotations

import html.parser

import numpy as np
import pytest

from pacpriv._display import Summary, format_value, shown
from pacpriv.dpsgd import (
    exact_membership_inference_accuracy,
    membership_inference_accuracy_bound,
)
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.noise import Certified

pytestmark = pytest.mark.usefixtures("one_native_thread")

QUIET = ExecutionOptions(progress=False)
NO_CHECK = Certified(target_inflation=None)  # no trial-count check


class _Cells(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.cells: list[str] = []
        self._in = False

    def handle_starttag(self, tag, attrs):
        self._in = tag in ("td", "th")

    def handle_data(self, data):
        if self._in:
            self.cells.append(data)


def _cells(markup: str) -> list[str]:
    p = _Cells()
    p.feed(markup)
    return p.cells


@pytest.mark.parametrize("x, digits, up, expected", [
    (0.6077444, 6, True, "0.607745"),
    (0.6077444, 6, False, "0.607744"),
    (0.5999981, 4, True, "0.6"),
    (0.5999981, 4, False, "0.5999"),
    (1.0, 6, True, "1"),
    (123456789.0, 3, True, "1.24e+08"),
])
def test_bounds_round_on_the_safe_side(x, digits, up, expected):
    assert format_value(x, "risk" if up else "lower", digits) == expected
    shown_value = float(expected)
    assert (shown_value >= x) if up else (shown_value <= x)


def test_percent_risk_rounds_up():
    assert format_value(0.588157383847506, "percent-risk") == "58.82%"
    assert format_value(0.58815, "percent-risk") == "58.82%"
    assert format_value(0.5881, "percent-risk") == "58.81%"
    assert format_value(0.58810001, "percent-risk") == "58.82%"


def test_text_and_html_show_the_same_rows():
    s = Summary("T <x>", [("a & b", 0.6077444, "risk"), ("n", 3, "plain")])
    text = s.to_text()
    assert "0.607745" in text and "a & b" in text
    cells = _cells(s.to_html())
    assert cells == ["a & b", "0.607745", "n", "3"]
    assert "&lt;x&gt;" in s.to_html()  # escaped


def test_chi_square_bound_display_matches_the_value():
    b = membership_inference_accuracy_bound(1.0, steps_per_epoch=100, epochs=10)
    text = str(b)
    # labelled as the CLI labels it (issue 35, a1301): a closed-form bound, and for whom
    assert "chi-square" in text and "closed-form upper bound" in text
    assert "every record, worst case over neighbouring datasets" in text
    assert format_value(b.accuracy, "risk") in text
    assert float(format_value(b.accuracy, "risk")) >= b.accuracy
    assert format_value(b.accuracy, "risk") in _cells(b._repr_html_())


def test_exact_interval_display_lower_down_upper_up():
    e = exact_membership_inference_accuracy(np.array([1.0, 2.0]), steps_per_epoch=100,
                                            epochs=10)
    text = str(e)
    lo, up = shown(e.lower, up=False), shown(e.upper, up=True)
    assert lo in text and up in text
    shown_lo = [float(v) for v in lo.strip("[]").split(", ")]
    shown_up = [float(v) for v in up.strip("[]").split(", ")]
    assert np.all(np.array(shown_lo) <= e.lower) and np.all(np.array(shown_up) >= e.upper)


def test_pac_result_and_plan_display(tmp_path):
    import pacpriv
    from pacpriv.mechanisms import make_kmeans

    data = pacpriv.load_dataset("iris")
    res = pacpriv.run_pac(make_kmeans(n_clusters=3), data.X, mi_budget=1 / 64, n_trials=60,
                          rng=0, execution=QUIET, rule=NO_CHECK)
    text = str(res)
    assert format_value(res.posterior_success_bound, "percent-risk") in text
    assert res.label in text
    cells = _cells(res._repr_html_())
    assert format_value(res.posterior_success_bound, "percent-risk") in cells
    plan_text = str(res.plan)
    assert format_value(res.plan.mi_bound, "risk") in plan_text
    assert float(format_value(res.plan.mi_bound, "risk")) >= res.plan.mi_bound


def test_calibration_display_reports_the_certified_upper_end():
    from pacpriv.dpsgd import calibrate_noise_multiplier

    cal = calibrate_noise_multiplier(0.6, steps_per_epoch=100, epochs=10)
    text = str(cal)
    assert format_value(cal.accuracy.upper, "risk") in text
    assert float(format_value(cal.accuracy.upper, "risk")) >= cal.accuracy.upper
    assert cal.accuracy.upper <= 0.6


# -- attack results: certified bounds beside measured accuracies (estimates with intervals) ----

def _rows(result) -> dict[str, str]:
    """``label -> value`` of ``str(result)`` (two or more spaces separate them)."""
    lines = str(result).splitlines()[1:]
    return dict(line.strip().split("  ", 1) for line in lines)


def test_empirical_attack_result_summary_has_estimates_and_no_record_index():
    from pacpriv.audit._empirical import EmpiricalAttackResult

    res = EmpiricalAttackResult(
        accuracy=0.55123, ci_low=0.53001, ci_high=0.57249, confidence=0.95,
        ci_method="student-t", baseline=0.5012, posterior_success_bound=0.65712345,
        noise_applied=True, n_trials_used=2000, n_train=1000, n_holdout=1000, n_targets=8,
        max_target=7, max_accuracy=0.6021, max_ci_low=0.55011, max_ci_high=0.65123,
        per_target={}, targets=np.arange(8), target_accuracies=np.full(8, 0.55))
    rows = {k: v.strip() for k, v in _rows(res).items()}
    assert rows["mean accuracy over 8 targets (student-t)"] == (
        "estimated 0.5512 (95% CI 0.53–0.5725)")
    assert rows["best target's accuracy (Bonferroni Clopper–Pearson)"] == (
        "estimated 0.6021 (95% CI 0.5501–0.6513)")
    assert rows["posterior success bound at the measured prior (estimated)"] == "0.657124"
    assert rows["trials: training / held out"] == "1000 / 1000"
    assert "max_target" not in str(res) and " 7" not in str(res)


def test_informed_attack_result_summary_rounds_the_upper_limit_up():
    from pacpriv.pac.per_record._attack import InformedAttackResult

    res = InformedAttackResult(
        accuracy=0.5712, ci_low=0.55555, ci_high=0.58888, max_record_accuracy=0.6234,
        max_record_ci_high=0.6712341, confidence=0.9, baseline=0.5, noise_applied=False,
        n_trials=400, n_audited=12, record_accuracy=np.full(12, 0.57))
    rows = {k: v.strip() for k, v in _rows(res).items()}
    assert rows["pooled accuracy (Student-t)"] == "estimated 0.5712 (90% CI 0.5555–0.5889)"
    assert rows["best record's accuracy (estimated)"] == "0.6234"
    assert rows["its upper 90% limit (Clopper–Pearson, Bonferroni)"] == "0.671235"
    assert rows["noise applied"] == "False"
    assert rows["trials / audited records"] == "400 / 12"
