"""Per-record report section and ``--records`` parsing: public facts only, safe-side rounding."""

from __future__ import annotations

import json
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacpriv.cli import UsageError
from pacpriv.cli.pac_records import parse_records
from pacpriv.pac import calibrate_per_record, record_exposure
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.per_record._report import per_record_section, round_up

POOL = np.array([[0.1137], [0.2219], [7.3125], [0.3391], [0.1573], [0.2647]])


def sum_mech(subset):
    return subset.sum(axis=0)


def test_round_up_is_safe_side():
    assert round_up(0.123401) == 0.1235
    assert round_up(0.1234) == 0.1234
    assert round_up(0.99999999) == 1.0
    assert round_up(float("inf")) == float("inf")
    # no slack that rounds a value just above a grid point down (it used to subtract 1e-9)
    assert round_up(0.6000000000001) == 0.6001
    assert round_up(1e-6 + 1e-16, 6) == 2e-6


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=0.0, max_value=1.0), st.integers(1, 8))
def test_round_up_never_below_its_input(x, digits):
    assert Decimal(repr(round_up(x, digits))) >= Decimal(repr(x))


def test_section_holds_aggregates_and_no_record_index():
    """Public facts only: the quantiles of the per-record bounds and counts above thresholds,
    never a record's index with its bound (0.4 printed "#2 (≤ x%)"); the ranked list is the
    private :meth:`RecordExposure.ranked`."""
    res = record_exposure(sum_mech, POOL, noise_cov=4.0, n_trials=40, rng=0,
                          execution=ExecutionOptions(progress=False))
    sec = per_record_section(res, target_accuracy=0.9)
    d = sec["per_record"]
    assert "most_exposed" not in d and "#" not in sec["markdown"].split("###")[0]
    ranked = res.ranked()
    assert ranked[0]["record"] == 2  # the outlier, in the private list only
    assert [e["record"] for e in ranked[:10]] == list(res.most_exposed())
    ups = np.sort(res.accuracy_upper)
    q = d["accuracy_upper_quantiles"]
    assert q["max"] == ups[-1] and q["p50"] >= np.quantile(ups, 0.5)  # never below
    assert q["p50"] in ups and q["p90"] in ups  # order statistics, not interpolated
    for c in d["n_above"]:
        assert c["count"] == int(np.sum(ups > c["accuracy"])) and c["accuracy"] > res.baseline
    assert d["n_above_target"] == int(np.sum(ups > 0.9))
    text = json.dumps(sec)
    for value in POOL.ravel():  # no record value appears anywhere
        assert f"{value}" not in text
    for e in ranked:  # no record's own bound appears either (bar the maximum, an aggregate)
        if e["accuracy_upper"] not in (q["max"], q["p50"], q["p90"], q["p99"]):
            assert repr(e["accuracy_upper"]) not in text
    assert "no record is named" in sec["markdown"]
    assert "certified (1−γ = 0.95)" in sec["markdown"]
    assert "← target" in sec["markdown"]
    assert sum(d["histogram_accuracy_upper"]["counts"]) == 6
    assert d["max_accuracy_upper"] == pytest.approx(res.max_accuracy_upper)
    # displayed maximum is rounded up
    shown = f"{100 * round_up(res.max_accuracy_upper):.2f}%"
    assert shown in sec["markdown"] and round_up(res.max_accuracy_upper) >= res.max_accuracy_upper
    assert "Whole subset" in sec["threat_model"] and "informed adversary" in sec["threat_model"]


def test_plan_section_shows_target_and_plan_bound():
    rng = np.random.default_rng(3)
    plan = calibrate_per_record(sum_mech, rng.normal(size=(8, 2)), target_accuracy=0.75,
                                n_trials=80, rng=1, execution=ExecutionOptions(progress=False))
    sec = plan.report_section()
    assert "calibrated plan" in sec["markdown"]
    assert sec["plot"]["target_accuracy"] == 0.75
    assert sec["per_record"]["max_accuracy_upper"] <= plan.max_accuracy_upper <= 0.75


@pytest.mark.parametrize("spec, expected", [
    ("all", None), (None, None), ("0-2,5", [0, 1, 2, 5]), ("7", [7]),
])
def test_parse_records(spec, expected):
    got = parse_records(spec, 10)
    if expected is None:
        assert got is None
    else:
        np.testing.assert_array_equal(got, expected)


def test_parse_records_sample_is_public_and_sorted():
    a, b = parse_records("sample:4", 50), parse_records("sample:4", 50)
    np.testing.assert_array_equal(a, b)
    assert a.size == 4 and np.all(np.diff(a) > 0)


@pytest.mark.parametrize("spec", ["0-20", "x", "3-1", "1,1", "sample:0", "sample:x", "-1"])
def test_parse_records_rejects(spec):
    with pytest.raises(UsageError, match="--records"):
        parse_records(spec, 10)


_BIG = "1" + "0" * 400


@pytest.mark.parametrize("spec", [
    "9223372036854775808", _BIG, f"1,{_BIG}", f"0-{_BIG}", "0-9999999999999", "-5",
])
def test_parse_records_refuses_huge_indices_in_range_words(spec):
    """Indices past the pool, of any size, get the range error before any range is expanded
    (``0-10**400`` was an OverflowError traceback; ``0-10**13`` would have built the list)."""
    with pytest.raises(UsageError) as info:
        parse_records(spec, 10)
    text = str(info.value)
    assert text.startswith("--records indices must be in [0, 9]; got '")
    assert len(text) < 140
