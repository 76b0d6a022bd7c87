"""pacpriv.audit._metrics: TPR at low FPR against hand-computed ROCs, intervals, resolution."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import roc_auc_score

from pacpriv.audit import DEFAULT_FPRS, roc_metrics
from pacpriv.audit._metrics import _allowed_false_positives, roc_counts


def test_roc_counts_by_hand():
    """Members (3, 1), non-members (2, 1, 0): thresholds 3, 2, 1, 0 give these counts."""
    tp, fp = roc_counts([3.0, 1.0], [2.0, 1.0, 0.0])
    assert tp.tolist() == [0, 1, 1, 2, 2]
    assert fp.tolist() == [0, 0, 1, 2, 3]


def test_tpr_at_fpr_hand_computed_roc():
    """10 non-members 0..9, members 8.5, 7.5, 5.5, 20, 30: at FPR 10% one false positive (9)
    is allowed, so the threshold 8.5 gives TP = 3 of 5; at FPR 30% threshold 7 gives 4/5."""
    members = [8.5, 7.5, 5.5, 20.0, 30.0]
    nonmembers = np.arange(10.0)
    r = roc_metrics(members, nonmembers, fprs=(0.1, 0.3), rng=0)
    t10, t30 = r.tpr_at_fpr
    assert t10.resolved and t10.tpr == 3 / 5 and t10.false_positives == 1
    assert t30.resolved and t30.tpr == 4 / 5 and t30.false_positives == 3
    ci = stats.binomtest(3, 5).proportion_ci(0.95, method="exact")
    assert t10.ci == pytest.approx((ci.low, ci.high))
    # one-sided Clopper-Pearson upper limit of the achieved FPR 1/10
    assert t10.fpr_upper == pytest.approx(stats.beta.ppf(0.95, 2, 9))
    assert r.auc == pytest.approx(roc_auc_score(np.r_[np.ones(5), np.zeros(10)],
                                                np.r_[members, nonmembers]))


def test_ties_at_the_top_count_as_false_positives_together():
    """A tie group holding a non-member cannot be split: at FPR 0 with ties at the top the
    TPR counts only the members strictly above every non-member."""
    r = roc_metrics([5.0, 5.0, 4.0, 9.0], [5.0] + [0.0] * 9, fprs=(0.1,), rng=0)
    assert r.tpr_at_fpr[0].tpr == 4 / 4  # one false positive allowed: the tie group fits
    r = roc_metrics([5.0, 5.0, 4.0, 9.0], [5.0, 5.0] + [0.0] * 8, fprs=(0.1,), rng=0)
    assert r.tpr_at_fpr[0].tpr == 1 / 4  # two tied non-members: only 9 is above them


def test_unresolved_fpr_says_so_instead_of_zero():
    """999 non-member scores cannot resolve FPR 0.1%: tpr None, reason with the counts."""
    rng = np.random.default_rng(0)
    r = roc_metrics(rng.normal(1, size=50), rng.normal(size=999), rng=0)
    by_fpr = {t.fpr: t for t in r.tpr_at_fpr}
    assert not by_fpr[1e-3].resolved and by_fpr[1e-3].tpr is None and by_fpr[1e-3].ci is None
    assert by_fpr[1e-3].reason == ("needs at least 1000 non-member scores to resolve FPR "
                                   "0.001; have 999")
    assert not by_fpr[1e-4].resolved and by_fpr[1e-2].resolved and by_fpr[1e-1].resolved
    d = by_fpr[1e-3].to_dict()
    assert d == {"tpr": None, "ci": None, "resolved": False, "reason": by_fpr[1e-3].reason}
    r = roc_metrics(rng.normal(1, size=50), rng.normal(size=1000), rng=0)
    assert {t.fpr: t for t in r.tpr_at_fpr}[1e-3].resolved


def test_allowed_false_positives_is_exact():
    """⌊α·n⌋ from α's decimal text: 0.29·100 is 29 (the float product is 28.999...)."""
    assert 0.29 * 100 < 29
    assert _allowed_false_positives(0.29, 100) == 29
    assert _allowed_false_positives(1e-4, 9999) == 0
    assert _allowed_false_positives(1e-4, 10000) == 1


def test_gaussian_oracle_tpr_at_low_fpr():
    """N(μ,1) vs N(0,1): TPR at FPR α → Φ(μ − z_{1−α}); the interval covers it."""
    rng = np.random.default_rng(1)
    mu, n = 2.0, 200_000
    r = roc_metrics(rng.normal(mu, size=n), rng.normal(size=n), rng=1)
    for t in r.tpr_at_fpr:
        exact = stats.norm.sf(stats.norm.isf(t.fpr) - mu)
        assert t.ci[0] - 0.01 <= exact <= t.ci[1] + 0.01
        assert t.tpr == pytest.approx(exact, abs=0.02 if t.fpr < 1e-3 else 0.006)
    assert r.auc == pytest.approx(stats.norm.cdf(mu / np.sqrt(2)), abs=0.003)


@settings(max_examples=40, deadline=None)
@given(a=st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=40),
       b=st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=40))
def test_invariants_and_naive_reference(a, b):
    """TPR at α equals a naive scan over every threshold; AUC matches sklearn; monotone."""
    r = roc_metrics(a, b, fprs=(0.25, 0.5), rng=0)
    pos, neg = np.asarray(a), np.asarray(b)
    for t in r.tpr_at_fpr:
        allowed = int(np.floor(t.fpr * neg.size + 1e-12))
        if allowed < 1:
            assert not t.resolved
            continue
        best = 0.0
        for thr in np.r_[np.inf, np.unique(np.r_[pos, neg])]:
            if np.sum(neg >= thr) <= allowed:
                best = max(best, np.mean(pos >= thr))
        assert t.tpr == pytest.approx(best)
        assert t.ci[0] <= t.tpr <= t.ci[1]
    assert r.auc == pytest.approx(roc_auc_score(np.r_[np.ones(pos.size), np.zeros(neg.size)],
                                                np.r_[pos, neg]))
    assert np.all(np.diff(r.roc_tpr) >= 0) and np.all(np.diff(r.roc_fpr) >= 0)


def test_to_dict_layout():
    """The issue's keys; FPRs keyed by their shortest text."""
    rng = np.random.default_rng(2)
    d = roc_metrics(rng.normal(1, size=3000), rng.normal(size=12_000), name="x", rng=0).to_dict()
    assert list(d)[:4] == ["name", "auc", "balanced_accuracy", "tpr_at_fpr"]
    assert list(d["tpr_at_fpr"]) == ["0.0001", "0.001", "0.01", "0.1"]
    assert set(d["tpr_at_fpr"]["0.001"]) >= {"tpr", "ci", "resolved"}
    assert DEFAULT_FPRS == (1e-4, 1e-3, 1e-2, 1e-1)


@pytest.mark.parametrize(
    ("members", "nonmembers", "kw", "match"),
    [
        ([1.0], [1.0, 2.0], {}, r"`member_scores` must be a one-dimensional array of at least "
                                r"2 scores; got shape \(1,\)"),
        ([1.0, 2.0], [[1.0, 2.0]], {}, r"`nonmember_scores` .* got shape \(1, 2\)"),
        ([1.0, 2.0], [1.0, 2.0], {"fprs": (0.1, 1.0)}, r"`fprs\[1\]` must be in \(0.0, 1.0\)"),
        ([1.0, 2.0], [1.0, 2.0], {"confidence": 0.0}, "`confidence` must be in"),
    ],
)
def test_errors_name_the_argument_and_counts(members, nonmembers, kw, match):
    with pytest.raises(ValueError, match=match):
        roc_metrics(members, nonmembers, **kw)


def test_error_on_non_finite_scores_names_no_value():
    with pytest.raises(ValueError, match="`member_scores` must be finite"):
        roc_metrics([1.0, np.nan], [0.0, 1.0])
