"""pacpriv.audit._lira, _rmia and the leave-one-pair-out suite: by hand and on planted signals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from pacpriv.audit import (
    LiraAttack,
    LossAttack,
    RmiaAttack,
    lira_scores,
    rmia_scores,
)
from pacpriv.audit._suite import evaluate_attacks, leave_one_pair_out


def _pairs(rng, K, n):
    masks = np.zeros((K, n), dtype=bool)
    for k in range(0, K, 2):
        masks[k] = rng.random(n) < 0.5
        masks[k + 1] = ~masks[k]
    return masks


def test_lira_online_by_hand_per_record_variance():
    """Two records, four references: log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²)."""
    ref = np.array([[1.0, 4.0], [3.0, 6.0], [0.0, 1.0], [-2.0, 2.0]])
    inside = np.array([[True, True], [True, True], [False, False], [False, False]])
    target = np.array([2.5, 3.0])
    got = lira_scores(target, ref, inside, online=True, fixed_variance=False)
    mu_in, mu_out = np.array([2.0, 5.0]), np.array([-1.0, 1.5])
    var_in, var_out = np.array([2.0, 2.0]), np.array([2.0, 0.5])
    want = (stats.norm.logpdf(target, mu_in, np.sqrt(var_in))
            - stats.norm.logpdf(target, mu_out, np.sqrt(var_out)))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_lira_fixed_variance_pools_over_records():
    ref = np.array([[1.0, 4.0], [3.0, 6.0], [0.0, 1.0], [-2.0, 2.0]])
    inside = np.array([[True, True], [True, True], [False, False], [False, False]])
    target = np.array([2.5, 3.0])
    var_in = (1.0 + 1.0 + 1.0 + 1.0) / (4 - 2)  # squared residuals over 4 values − 2 means
    var_out = (1.0 + 1.0 + 0.25 + 0.25) / (4 - 2)
    want = (stats.norm.logpdf(target, [2.0, 5.0], np.sqrt(var_in))
            - stats.norm.logpdf(target, [-1.0, 1.5], np.sqrt(var_out)))
    np.testing.assert_allclose(lira_scores(target, ref, inside), want, rtol=1e-12)


def test_lira_multi_query_averages_per_query_scores():
    rng = np.random.default_rng(1)
    ref, target = rng.normal(size=(6, 20, 3)), rng.normal(size=(20, 3))
    inside = _pairs(rng, 6, 20)
    per_query = [lira_scores(target[:, a], ref[:, :, a], inside) for a in range(3)]
    np.testing.assert_allclose(lira_scores(target, ref, inside), np.mean(per_query, axis=0))


def test_lira_errors_give_counts_not_values():
    ref, inside = np.zeros((2, 3)), np.array([[True, True, False], [True, True, False]])
    with pytest.raises(ValueError, match=r"at least 1 OUT reference model\(s\); 2 record\(s\) "
                                         r"have fewer \(minimum 0\)"):
        lira_scores(np.zeros(3), ref, inside)
    with pytest.raises(ValueError, match=r"`target_statistics` must be finite; 1 of 3 entries "
                                         r"are NaN or infinite \(first at position 1\)"):
        lira_scores([0.0, np.inf, 1.0], ref, inside)
    with pytest.raises(TypeError, match="`reference_membership` must be boolean"):
        lira_scores(np.zeros(3), ref, inside.astype(int))
    with pytest.raises(ValueError, match=r"must have shape \(n_reference, n_records"):
        lira_scores(np.zeros(4), ref, inside)


def _naive_rmia(t, r, inside, tz, rz, a, gamma):
    """RMIA with plain probabilities (Zarifzadeh et al., Eq. 3-4), one query."""
    p, pr, pz, prz = (special.expit(v) for v in (t, r, tz, rz))
    if a is None:
        px, pzz = pr.mean(axis=0), prz.mean(axis=0)
    else:
        out = np.where(~inside, pr, np.nan)
        px = 0.5 * ((1 + a) * np.nanmean(out, axis=0) + (1 - a))
        pzz = 0.5 * ((1 + a) * prz.mean(axis=0) + (1 - a))
    ratio_x, ratio_z = p / px, pz / pzz
    return np.array([np.sum(rx / ratio_z >= gamma * (1 - 1e-12)) for rx in ratio_x])


@pytest.mark.parametrize("a", [None, 0.0, 0.3, 1.0])
@pytest.mark.parametrize("gamma", [1.0, 2.0])
def test_rmia_counts_match_the_naive_formula(a, gamma):
    """floor(score·(n_z + 1)) is the number of z with LR(x, z) >= γ; ties broken by LR."""
    rng = np.random.default_rng(2)
    K, n, nz = 6, 40, 25
    r, rz = rng.normal(1, 2, size=(K, n)), rng.normal(1, 2, size=(K, nz))
    t, tz = rng.normal(1, 2, size=n), rng.normal(1, 2, size=nz)
    inside = _pairs(rng, K, n)
    got = rmia_scores(t, r, inside, tz, rz, offline_a=a, gamma=gamma)
    counts = _naive_rmia(t, r, inside, tz, rz, a, gamma)
    np.testing.assert_array_equal(np.floor(got * (nz + 1)).astype(int), counts)
    # within the target, the score orders records exactly as the likelihood ratio p/Pr(x)
    p = special.expit(t)
    px = special.expit(r).mean(axis=0) if a is None else 0.5 * (
        (1 + a) * np.nanmean(np.where(~inside, special.expit(r), np.nan), axis=0) + 1 - a)
    order = np.argsort(p / px)
    assert np.all(np.diff(got[order]) > 0)


def test_rmia_keeps_differences_of_confident_predictions():
    """φ = 40 and 41 (p within 1e-17 of 1) still rank apart: log-space probabilities."""
    r = np.full((4, 2), 38.0)
    inside = np.array([[True, False], [False, True], [True, False], [False, True]])
    s = rmia_scores(np.array([40.0, 41.0]), r, inside, np.array([39.0]), np.full((4, 1), 38.0))
    assert s[1] > s[0]


def test_rmia_errors():
    r, inside = np.zeros((2, 3)), np.array([[True, True, False], [True, True, False]])
    with pytest.raises(ValueError, match=r"at least 1 OUT reference model; 2 record\(s\) have"):
        rmia_scores(np.zeros(3), r, inside, np.zeros(2), np.zeros((2, 2)), offline_a=0.3)
    with pytest.raises(ValueError, match=r"`offline_a` must be in \[0.0, 1.0\]"):
        rmia_scores(np.zeros(3), r, ~inside, np.zeros(2), np.zeros((2, 2)), offline_a=1.5)
    with pytest.raises(ValueError, match="reference models"):
        rmia_scores(np.zeros(3), r, inside, np.zeros(2), np.zeros((3, 2)))


def test_leave_one_pair_out_balances_the_references():
    """Each target sees K−2 references with exactly (K−2)/2 IN per record, members or not."""
    rng = np.random.default_rng(3)
    K, n = 8, 50
    masks = _pairs(rng, K, n)
    seen = []

    class Probe:
        name = "probe"

        def scores(self, view):
            seen.append(view.membership.sum(axis=0))
            return np.zeros(n)

    stats_ = np.zeros((K, n, 1))
    pooled = leave_one_pair_out(stats_, np.zeros((K, 3, 1)), masks, [Probe()])
    assert len(seen) == K and all(np.all(s == (K - 2) // 2) for s in seen)
    member, nonmember = pooled["probe"]
    assert member.size == masks.sum() and nonmember.size == (~masks).sum()
    assert member.size + nonmember.size == K * n


def test_leave_one_pair_out_rejects_bad_batches():
    rng = np.random.default_rng(4)
    masks = _pairs(rng, 6, 10)
    with pytest.raises(ValueError, match="even number >= 4"):
        leave_one_pair_out(np.zeros((5, 10, 1)), np.zeros((5, 2, 1)), masks[:5])
    broken = masks.copy()
    broken[3, 0] = ~broken[3, 0]
    with pytest.raises(ValueError, match=r"pair\(s\) \[1\] are not"):
        leave_one_pair_out(np.zeros((6, 10, 1)), np.zeros((6, 2, 1)), broken)
    with pytest.raises(ValueError, match="distinct attacks; got 2 with 1"):
        leave_one_pair_out(np.zeros((6, 10, 1)), np.zeros((6, 2, 1)), masks,
                           [LossAttack(), LossAttack()])


def test_planted_signal_lira_beats_loss_at_low_fpr():
    """Per-record difficulty shared by all models plus a membership shift: the loss attack is
    confounded by difficulty, LiRA and RMIA calibrate it away (Carlini et al., Fig. 4)."""
    rng = np.random.default_rng(5)
    K, n, nz = 16, 600, 100
    masks = _pairs(rng, K, n)
    difficulty = rng.normal(0, 3, size=n + nz)
    noise = rng.normal(0, 0.5, size=(K, n + nz))
    phi = difficulty + noise
    phi[:, :n] += 1.5 * masks
    res = {r.name: r for r in evaluate_attacks(phi[:, :n, None], phi[:, n:, None], masks,
                                               rng=0)}
    at = {name: {t.fpr: t for t in r.tpr_at_fpr} for name, r in res.items()}
    assert at["LiRA (online)"][1e-3].ci[0] > at["LOSS"][1e-3].ci[1]
    assert at["RMIA (online)"][1e-2].ci[0] > at["LOSS"][1e-2].ci[1]
    assert res["LiRA (online)"].auc > res["LOSS"].auc + 0.2
    assert [r.name for r in res.values()] == [a.name for a in (
        LiraAttack(), RmiaAttack(), LiraAttack(online=False), RmiaAttack(offline_a=0.3),
        LossAttack())]
