"""The audit verdict never calls a point estimate above the certified curve "under" it."""

from pacpriv.report.audit import verdict


def _row(tpr, certified, violations=()):
    return {"fpr": 0.01, "resolved": True, "tpr": tpr, "certified_tpr": certified,
            "ci": [tpr / 2, tpr * 2], "violations": list(violations)}


def test_point_estimate_above_the_curve_is_said_not_hidden():
    said = verdict([_row(0.0372, 0.0359)])
    assert "point estimate is above the certified TPR at FPR 1%" in said
    assert "not a significant violation" in said and "stay under" not in said


def test_an_interval_reaching_above_the_curve_is_said():
    said = verdict([_row(0.03, 0.0359)])  # interval [0.015, 0.06]: reaches above 0.0359
    assert "its interval reaches above it at FPR 1%" in said and "interval stay" not in said


def test_clear_and_violating_audits():
    assert verdict([_row(0.01, 0.0359)]).endswith(
        "the best attack's TPR and interval stay under the certified TPR at every resolved FPR")
    said = verdict([_row(0.2, 0.0359, [{"attack": "LiRA", "curve": "c"}])])
    assert said.startswith("1 attack/curve pair(s) exceed") and "significant" in said
