"""pacpriv.audit._attacks: score-level evaluation, loss-threshold attack and offline LiRA."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pacpriv.audit._attacks import (
    AttackResult,
    _best_threshold,
    evaluate_attack,
    logit_scaled_confidence,
    loss_threshold_attack,
)
from pacpriv.audit._lira import lira_scores

pytestmark = pytest.mark.usefixtures("one_native_thread")


def test_perfectly_separable_scores():
    """Members all above non-members: AUC 1, TPR@1%FPR 1, accuracy 1 with CI above ½."""
    r = evaluate_attack(np.linspace(10, 20, 50), np.linspace(0, 9, 50), rng=0)
    assert r.auc == 1.0
    assert r.tpr_at_1pct_fpr == 1.0
    assert r.accuracy == 1.0
    assert r.ci_high == 1.0
    # Clopper-Pearson lower limit for 50/50 successes at 95%: (0.025)^(1/50).
    assert r.ci_low == pytest.approx(0.025 ** (1 / 50), rel=1e-9)
    assert r.n_evaluated == 50


def test_reversed_polarity_scores_give_auc_zero():
    """Scores with the wrong polarity give AUC 0 and no accuracy above ½ (rule is one-sided)."""
    r = evaluate_attack(np.linspace(0, 9, 50), np.linspace(10, 20, 50), rng=0)
    assert r.auc == 0.0
    assert r.accuracy == pytest.approx(0.5)


def test_identical_distributions_no_spurious_advantage():
    """Same score law: held-out accuracy averages ½ and its CI covers ½ at >= the nominal rate,
    whereas the in-sample best-threshold accuracy is biased upwards (why we split)."""
    rng = np.random.default_rng(2024)
    reps, n = 400, 60
    held_out, in_sample, covered = [], [], 0
    for _ in range(reps):
        a, b = rng.normal(size=n), rng.normal(size=n)
        r = evaluate_attack(a, b, rng=rng)
        held_out.append(r.accuracy)
        covered += r.ci_low <= 0.5 <= r.ci_high
        t = _best_threshold(a, b)
        in_sample.append(0.5 * (np.mean(a >= t) + np.mean(b < t)))
    se = np.std(held_out) / np.sqrt(reps)
    assert abs(np.mean(held_out) - 0.5) < 4 * se
    assert np.mean(in_sample) > 0.55  # the optimism the split removes
    assert stats.binomtest(covered, reps, 0.95, alternative="less").pvalue > 1e-3


def test_gaussian_shift_oracle():
    """N(μ,1) vs N(0,1): accuracy → Φ(μ/2), AUC → Φ(μ/√2), TPR@1%FPR → Φ(μ - z_0.99)."""
    mu, n = 1.0, 40_000
    rng = np.random.default_rng(1)
    r = evaluate_attack(rng.normal(mu, size=n), rng.normal(size=n), rng=1)
    assert r.ci_low <= stats.norm.cdf(mu / 2) + 0.003
    assert r.ci_high >= stats.norm.cdf(mu / 2) - 0.003
    assert r.accuracy == pytest.approx(stats.norm.cdf(mu / 2), abs=0.01)
    assert r.auc == pytest.approx(stats.norm.cdf(mu / np.sqrt(2)), abs=0.005)
    assert r.tpr_at_1pct_fpr == pytest.approx(stats.norm.sf(stats.norm.ppf(0.99) - mu), abs=0.01)


def test_unequal_class_sizes_use_bonferroni_interval():
    """Unequal evaluation halves: CI averages TPR/TNR Clopper-Pearson limits at 1-α/2 each."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(1, size=101), rng.normal(size=60)
    r = evaluate_attack(a, b, rng=4)
    assert r.n_members == 101 and r.n_nonmembers == 60 and r.n_evaluated == 51 + 30
    gen = np.random.default_rng(4)
    pa, pb = gen.permutation(a), gen.permutation(b)
    t = _best_threshold(pa[:50], pb[:30])
    tp, tn = int(np.sum(pa[50:] >= t)), int(np.sum(pb[30:] < t))
    assert r.accuracy == pytest.approx(0.5 * (tp / 51 + tn / 30))
    ci_p = stats.binomtest(tp, 51).proportion_ci(0.975, method="exact")
    ci_n = stats.binomtest(tn, 30).proportion_ci(0.975, method="exact")
    assert r.ci_low == pytest.approx(0.5 * (ci_p.low + ci_n.low))
    assert r.ci_high == pytest.approx(0.5 * (ci_p.high + ci_n.high))


def test_threshold_and_accuracy_recomputed_by_hand():
    """The reported accuracy is the evaluation-half balanced accuracy at the selected threshold."""
    rng = np.random.default_rng(5)
    a, b = rng.normal(0.7, size=80), rng.normal(size=80)
    r = evaluate_attack(a, b, rng=11)
    gen = np.random.default_rng(11)
    pa, pb = gen.permutation(a), gen.permutation(b)
    t = _best_threshold(pa[:40], pb[:40])
    assert r.threshold == t
    acc = 0.5 * (np.mean(pa[40:] >= t) + np.mean(pb[40:] < t))
    assert r.accuracy == pytest.approx(acc)
    k = int(np.sum(pa[40:] >= t) + np.sum(pb[40:] < t))
    ci = stats.binomtest(k, 80).proportion_ci(0.95, method="exact")
    assert (r.ci_low, r.ci_high) == pytest.approx((ci.low, ci.high))


@settings(max_examples=40, deadline=None)
@given(
    a=st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=30),
    b=st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=30),
    seed=st.integers(0, 2**32),
)
def test_invariants(a, b, seed):
    """Any scores: values in [0,1], ci_low <= accuracy <= ci_high; AUC/TPR rank-invariant."""
    r = evaluate_attack(a, b, rng=seed)
    assert 0.0 <= r.ci_low <= r.accuracy <= r.ci_high <= 1.0
    assert 0.0 <= r.auc <= 1.0 and 0.0 <= r.tpr_at_1pct_fpr <= 1.0
    ranks = stats.rankdata(np.r_[a, b])  # an exact monotone transform (ties preserved)
    s = evaluate_attack(ranks[: len(a)], ranks[len(a) :], rng=seed)
    assert s.auc == pytest.approx(r.auc)
    assert s.tpr_at_1pct_fpr == pytest.approx(r.tpr_at_1pct_fpr)
    json.dumps(r.to_dict())


def test_to_dict_infinite_threshold():
    """The thresholds (records' scores) stay out of the JSON, an infinite one included."""
    r = evaluate_attack([0.0, 0.0], [1.0, 1.0], rng=0)
    assert r.threshold == np.inf
    d = json.loads(json.dumps(r.to_dict()))
    assert set(d) == set(AttackResult.__dataclass_fields__) - {"threshold", "threshold_at_1pct"}


def test_loss_threshold_attack_is_negated_scores():
    """Loss attack = evaluate_attack on -loss: small member losses give AUC 1."""
    r = loss_threshold_attack(np.full(10, 0.01) + np.arange(10) * 1e-3, np.linspace(1, 2, 10),
                              rng=0)
    assert r.auc == 1.0 and r.threshold < 0
    q = evaluate_attack(-np.arange(5.0), -np.arange(5.0) - 0.5, rng=3)
    assert loss_threshold_attack(np.arange(5.0), np.arange(5.0) + 0.5, rng=3) == q


def test_logit_scaled_confidence_matches_direct_formula():
    """φ(ℓ) = log(p/(1-p)) with p = e^{-ℓ}; finite at ℓ = 0; decreasing."""
    ell = np.array([1e-8, 0.1, 0.6931471805599453, 3.0, 50.0])
    p = np.exp(-ell)
    np.testing.assert_allclose(logit_scaled_confidence(ell)[1:], np.log(p / (1 - p))[1:],
                               rtol=1e-12)
    assert logit_scaled_confidence([1e-8])[0] == pytest.approx(-np.log(1e-8), rel=1e-6)
    assert logit_scaled_confidence([0.6931471805599453])[0] == pytest.approx(0.0, abs=1e-12)
    assert np.isfinite(logit_scaled_confidence([0.0])[0])
    assert np.all(np.diff(logit_scaled_confidence(ell)) < 0)


def test_lira_offline_by_hand():
    """z-scores use OUT entries only: per-record mean and pooled (or own) variance."""
    shadow = np.array([[1.0, 10.0, 5.0], [3.0, 99.0, 7.0], [2.0, 12.0, 9.0]])
    inside = np.array([[False, False, False], [False, True, False], [True, False, False]])
    target = np.array([4.0, 14.0, 7.0])
    mu = np.array([2.0, 11.0, 7.0])
    resid = [(1 - 2) ** 2 + (3 - 2) ** 2, (10 - 11) ** 2 + (12 - 11) ** 2, 4 + 0 + 4]
    pooled = sum(resid) / (7 - 3)
    np.testing.assert_allclose(lira_scores(target, shadow, inside, online=False),
                               (target - mu) / np.sqrt(pooled))
    own = np.array(resid) / (np.array([2, 2, 3]) - 1)
    np.testing.assert_allclose(
        lira_scores(target, shadow, inside, online=False, fixed_variance=False),
        (target - mu) / np.sqrt(own),
    )


def test_lira_detects_planted_members():
    """Synthetic LiRA: members' target statistic is shifted up; the attack finds them."""
    rng = np.random.default_rng(8)
    n, s = 400, 16
    base = rng.normal(size=n) * 3  # per-record difficulty, shared by all models
    member = rng.permutation(n) < n // 2
    inside = np.zeros((s, n), dtype=bool)
    for k in range(0, s, 2):
        inside[k] = rng.permutation(n) < n // 2
        inside[k + 1] = ~inside[k]
    shadow = base + rng.normal(size=(s, n)) * 0.5 + 1.0 * inside
    target = base + rng.normal(size=n) * 0.5 + 1.0 * member
    scores = lira_scores(target, shadow, inside, online=False)
    r = evaluate_attack(scores[member], scores[~member], rng=0)
    loss_only = evaluate_attack(target[member], target[~member], rng=0)
    assert r.auc > 0.8 and r.ci_low > 0.6
    assert r.auc > loss_only.auc + 0.15  # calibrating per-record difficulty is what helps


@pytest.mark.parametrize(
    ("members", "nonmembers", "kw", "exc", "match"),
    [
        ([1.0], [1.0, 2.0], {}, ValueError, "member_scores` must contain at least 2"),
        ([1.0, 2.0], [[1.0, 2.0]], {}, ValueError, "nonmember_scores` must be one-dimensional"),
        ([1.0, np.nan], [1.0, 2.0], {}, ValueError, "member_scores` must be finite"),
        (["a", "b"], [1.0, 2.0], {}, TypeError, "member_scores` must be numeric"),
        ([1.0, 2.0], [1.0, 2.0], {"confidence": 1.0}, ValueError, "confidence"),
    ],
)
def test_evaluate_attack_errors(members, nonmembers, kw, exc, match):
    """Each invalid input raises with a message naming the argument."""
    with pytest.raises(exc, match=match):
        evaluate_attack(members, nonmembers, rng=0, **kw)


def test_loss_attack_error_names_losses():
    """loss_threshold_attack names its own arguments in errors."""
    with pytest.raises(ValueError, match="member_losses"):
        loss_threshold_attack([1.0], [1.0, 2.0])


def test_logit_confidence_negative_loss():
    """Negative losses are not -log p and are rejected."""
    with pytest.raises(ValueError, match="losses"):
        logit_scaled_confidence([-0.1])


@pytest.mark.parametrize(
    ("shapes", "fixed", "exc", "match"),
    [
        (((3,), (2, 4), (2, 4)), True, ValueError, "n_reference, n_records"),
        (((3,), (2, 3), (2, 4)), True, ValueError, "reference_membership` must have shape"),
        (((3,), (2, 3), "all_in"), True, ValueError, "at least 1 OUT"),
        (((3,), (2, 3), "one_out"), False, ValueError, "at least 2 OUT"),
        (((3,), (2, 3), "int"), True, TypeError, "boolean"),
    ],
)
def test_lira_errors(shapes, fixed, exc, match):
    """LiRA input errors: shapes, membership dtype, too few OUT shadows."""
    t_shape, s_shape, m = shapes
    if m == "all_in":
        inside = np.ones(s_shape, dtype=bool)
    elif m == "one_out":
        inside = np.array([[True, True, True], [False, False, False]])
    elif m == "int":
        inside = np.zeros(s_shape, dtype=int)
    else:
        inside = np.zeros(m, dtype=bool)
    with pytest.raises(exc, match=match):
        lira_scores(np.zeros(t_shape), np.zeros(s_shape), inside, online=False,
                    fixed_variance=fixed)


def test_import_does_not_pull_torch():
    """Importing pacpriv and pacpriv.audit (attacks, the model families) leaves torch
    unimported."""
    import subprocess
    import sys

    code = (
        "import sys, pacpriv, pacpriv.audit._attacks, pacpriv.audit._families; "
        "bad = [m for m in ('torch', 'opacus', 'matplotlib') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
