"""Attack metrics: orientation, ties, realized FPR, synthetic nulls (issue 35, F3, F4, F5)."""

import math

import numpy as np
import pytest

from pacpriv.audit import evaluate_attack
from pacpriv.audit._metrics import roc_metrics
from pacpriv.audit._onerun import OneRunSpec, best_guess, one_run_epsilon


def _finite(d):
    if isinstance(d, dict):
        return all(_finite(v) for v in d.values())
    if isinstance(d, (list, tuple)):
        return all(_finite(v) for v in d)
    return not isinstance(d, float) or math.isfinite(d)


@pytest.mark.parametrize("fn", ["roc", "evaluate"])
def test_auc_orientation_perfect_inverted_tied(fn):
    pos, neg = np.arange(100.0, 200.0), np.arange(0.0, 100.0)
    auc = (lambda a, b: roc_metrics(a, b, rng=0).auc) if fn == "roc" else (
        lambda a, b: evaluate_attack(a, b, rng=0).auc)
    assert auc(pos, neg) == 1.0
    assert auc(neg, pos) == 0.0
    assert auc(np.zeros(50), np.zeros(70)) == 0.5


def test_tied_scores_give_tpr_equal_realized_fpr_never_nan():
    m = roc_metrics(np.ones(300), np.ones(2000), fprs=(1e-3, 1e-2, 0.1, 0.5), rng=0)
    for t in m.tpr_at_fpr:
        assert t.resolved and t.tpr is not None and not math.isnan(t.tpr)
        assert t.tpr == t.realized_fpr == 0.0 and t.threshold == math.inf
        assert "threshold" not in t.to_dict()  # a record's score stays out of reports
    assert m.auc == 0.5 and _finite(m.to_dict())
    r = evaluate_attack(np.ones(300), np.ones(2000), rng=0)
    assert r.tpr_at_1pct_fpr == r.realized_fpr_at_1pct == 0.0 and r.accuracy == 0.5
    assert _finite({k: v for k, v in r.to_dict().items() if not isinstance(v, str)})


def test_tpr_at_fpr_reports_the_realized_fpr_and_threshold():
    rng = np.random.default_rng(1)
    pos, neg = rng.normal(1.0, 1.0, 4000), rng.normal(0.0, 1.0, 5000)
    resolved = [t for t in roc_metrics(pos, neg, rng=0).tpr_at_fpr if t.resolved]
    assert len(resolved) == 3  # 1e-4 needs 10000 non-members
    for t in resolved:
        assert t.realized_fpr <= t.fpr and t.realized_fpr == t.false_positives / 5000
        assert np.mean(neg >= t.threshold) == t.realized_fpr
        assert np.mean(pos >= t.threshold) == t.tpr
        assert "realized_fpr" in t.to_dict() and "threshold" not in t.to_dict()
    r = evaluate_attack(pos, neg, rng=0)
    assert np.mean(neg >= r.threshold_at_1pct) == r.realized_fpr_at_1pct <= 0.01
    assert np.mean(pos >= r.threshold_at_1pct) == r.tpr_at_1pct_fpr


def test_synthetic_null_tpr_at_low_fpr_per_sample():
    """F5: no members (both sets from one law): TPR at 0.1% ≈ 0.1% on *each* sample, not only
    pooled over samples — every sample's interval holds 0.1% (6 samples at 95%: a miss is
    rare, at most 2 of 6 allowed), and the pooled mean is within its standard error."""
    tprs, misses = [], 0
    for seed in range(6):
        rng = np.random.default_rng(seed)
        t = roc_metrics(rng.normal(size=20000), rng.normal(size=20000), fprs=(1e-3,),
                        rng=seed).tpr_at_fpr[0]
        assert t.realized_fpr <= 1e-3
        tprs.append(t.tpr)
        misses += not (t.ci[0] <= 1e-3 <= t.ci[1])
    assert misses <= 2
    assert abs(np.mean(tprs) - 1e-3) < 4 * math.sqrt(1e-3 / 20000 / 6)


def test_empirical_epsilon_is_zero_for_inverted_or_equal_scores():
    """F3: a one-run audit whose scores put members last, or tie everything, certifies ε = 0."""
    spec = OneRunSpec(canaries=1000)
    rng = np.random.default_rng(0)
    included = rng.random(1000) < 0.5
    inverted = np.where(included, -1.0, 1.0) + rng.normal(0, 0.01, 1000)
    assert best_guess(inverted, included, spec)[0] == 0.0
    assert best_guess(np.zeros(1000), included, spec)[0] == 0.0
    # the same scores in the right order give a large positive ε
    assert best_guess(-inverted, included, spec)[0] > 1.0
    # no correct guess at all, and exactly chance: ε = 0
    assert one_run_epsilon(1000, 100, 0, delta=1e-5, confidence=0.95) == 0.0
    assert one_run_epsilon(1000, 100, 50, delta=1e-5, confidence=0.95) == 0.0
