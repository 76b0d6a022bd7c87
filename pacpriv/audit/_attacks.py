"""Membership-inference attacks and their honest evaluation (numpy / scipy / scikit-learn).

Everything here works on *scores*: one real number per record, higher meaning "more likely
a member". That makes the same evaluation usable on trained models (per-example losses,
LiRA statistics) and on PAC Privacy releases (any statistic of a simulated output).

* :func:`evaluate_attack` -- balanced accuracy at a threshold chosen on a held-out half,
  with an exact (Clopper-Pearson) confidence interval, plus AUC and TPR at 1% FPR.
* :func:`loss_threshold_attack` -- Yeom et al. [1]_: members have smaller loss.
* :func:`logit_scaled_confidence` turns cross-entropy losses into the statistic of LiRA
  (Carlini et al. [2]_; the one implementation, online and offline, is
  :func:`pacpriv.audit.lira_scores`).

Membership priors are equal (½): accuracy is the *balanced* accuracy ½(TPR + TNR), which is
what the bounds of ``pacpriv.dpsgd`` and ``pacpriv.pac`` control.

References
----------
.. [1] S. Yeom, I. Giacomelli, M. Fredrikson, S. Jha, Privacy Risk in Machine Learning:
   Analyzing the Connection to Overfitting, CSF 2018 (loss-threshold attack).
.. [2] N. Carlini, S. Chien, M. Nasr, S. Song, A. Terzis, F. Tramèr, Membership Inference
   Attacks From First Principles, IEEE S&P 2022, Sec. IV (LiRA, offline variant, Eq. 4,
   logit scaling of the confidence, fixed variance for few shadow models).
.. [3] C. J. Clopper, E. S. Pearson, The use of confidence or fiducial limits illustrated in
   the case of the binomial, Biometrika 1934.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from pacpriv._random import RNGLike, as_generator
from pacpriv._stats import clopper_pearson
from pacpriv._validation import check_real
from pacpriv.audit._checks import real_array

__all__ = [
    "AttackResult",
    "evaluate_attack",
    "logit_scaled_confidence",
    "loss_threshold_attack",
]


@dataclass(frozen=True)
class AttackResult:
    """Evaluation of one membership-inference attack (equal membership priors).

    Attributes
    ----------
    accuracy : float
        Balanced accuracy ½(TPR + TNR) on the *evaluation half*, at the threshold chosen on
        the disjoint *selection half*; an unbiased estimate of the accuracy of that
        threshold rule.
    ci_low, ci_high : float
        Two-sided confidence interval for ``accuracy`` at level ``confidence``:
        Clopper-Pearson on the correct count when the evaluation half has as many members
        as non-members, otherwise Clopper-Pearson intervals for TPR and TNR at level
        1 - (1 - confidence)/2 each, averaged (Bonferroni; conservative).
    auc : float
        Area under the ROC curve on all records (threshold-free, no selection bias).
    tpr_at_1pct_fpr : float
        Largest TPR at FPR <= 1% on all records (the literature's in-sample convention; with
        fewer than 100 non-members it is the TPR at FPR = 0).
    n_members, n_nonmembers : int
        Number of member and non-member scores given.
    confidence : float
        Level of the interval.
    threshold : float
        Decision rule "member iff score >= threshold" chosen on the selection half
        (``inf``: predict non-member always).
    n_evaluated : int
        Records in the evaluation half (the binomial sample size behind the interval).
    realized_fpr_at_1pct : float or None
        The FPR that the threshold behind ``tpr_at_1pct_fpr`` actually has (at most 1%; tied
        scores can force it far below): read the TPR against it.
    threshold_at_1pct : float or None
        That threshold ("member iff score >= threshold"; ``inf``: no positive).
    """

    accuracy: float
    ci_low: float
    ci_high: float
    auc: float
    tpr_at_1pct_fpr: float
    n_members: int
    n_nonmembers: int
    confidence: float
    threshold: float
    n_evaluated: int
    realized_fpr_at_1pct: float | None = None
    threshold_at_1pct: float | None = None

    def to_dict(self) -> dict:
        """JSON-serialisable dictionary of every field but the thresholds (each is one record's
        score: it stays on the object and out of reports)."""
        out = asdict(self)
        del out["threshold"], out["threshold_at_1pct"]
        return out


def _scores_iv(scores, name: str) -> np.ndarray:
    arr = real_array(scores, name)
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be one-dimensional; got shape {arr.shape}.")
    if arr.size < 2:
        raise ValueError(f"`{name}` must contain at least 2 scores; got {arr.size}.")
    return arr


def _best_threshold(members: np.ndarray, nonmembers: np.ndarray) -> float:
    """Threshold maximising balanced accuracy on (members, nonmembers); midpoint rule."""
    from sklearn.metrics import roc_curve  # lazy: keeps `import pacpriv` light

    labels = np.r_[np.ones(members.size), np.zeros(nonmembers.size)]
    fpr, tpr, thr = roc_curve(labels, np.r_[members, nonmembers], drop_intermediate=False)
    k = int(np.argmax(tpr - fpr))  # first (highest) threshold among ties
    if k == 0 or k == thr.size - 1:
        return float(thr[k])
    return float(0.5 * (thr[k] + thr[k + 1]))  # same split of this half, wider margin


def evaluate_attack(
    member_scores, nonmember_scores, *, confidence: float = 0.95, rng: RNGLike = None
) -> AttackResult:
    """Accuracy (with CI), AUC and TPR at 1% FPR of the rule "member iff score is high".

    Parameters
    ----------
    member_scores : array-like of shape (n_members,)
        Attack scores of records that were used (higher = more likely a member).
    nonmember_scores : array-like of shape (n_nonmembers,)
        Attack scores of records that were not used. Both need at least 2 finite values.
    confidence : float, default 0.95
        Level of the two-sided interval, in (0, 1).
    rng : None, int, SeedSequence or Generator
        Seed of the random split into selection and evaluation halves (SPEC 7; ``None`` =
        OS entropy). AUC and TPR do not depend on it.

    Returns
    -------
    AttackResult

    Raises
    ------
    ValueError
        If a score array is not one-dimensional, has fewer than 2 entries or non-finite
        values, or ``confidence`` is outside (0, 1).
    TypeError
        If scores are not numeric.

    Notes
    -----
    The accuracy "at the best threshold" computed on the same data that chose the
    threshold is optimistically biased (with identical score distributions it exceeds ½ on
    average). Here each class is split at random into two halves; the threshold is chosen
    on the first (selection) half and the accuracy is counted on the second (evaluation)
    half, where, given the threshold, the number of correct decisions is binomial: the
    Clopper-Pearson interval [3]_ is exact for equal class sizes. The price is that only
    half of the records inform the interval.
    """
    members = _scores_iv(member_scores, "member_scores")
    nonmembers = _scores_iv(nonmember_scores, "nonmember_scores")
    confidence = check_real(
        confidence, "confidence", low=0.0, high=1.0, low_inclusive=False, high_inclusive=False
    )
    labels = np.r_[np.ones(members.size), np.zeros(nonmembers.size)]
    scores = np.r_[members, nonmembers]
    from sklearn.metrics import roc_auc_score, roc_curve  # lazy: keeps `import pacpriv` light

    auc = float(roc_auc_score(labels, scores))
    fpr, tpr, thr = roc_curve(labels, scores, drop_intermediate=False)
    low = np.flatnonzero(fpr <= 0.01)
    at = int(low[np.argmax(tpr[low])])  # the first (strictest) threshold of the largest TPR
    tpr_low_fpr = float(tpr[at])

    gen = as_generator(rng)
    m_perm, n_perm = gen.permutation(members), gen.permutation(nonmembers)
    m_sel, m_eval = m_perm[: members.size // 2], m_perm[members.size // 2 :]
    n_sel, n_eval = n_perm[: nonmembers.size // 2], n_perm[nonmembers.size // 2 :]
    threshold = _best_threshold(m_sel, n_sel)
    tp = int(np.sum(m_eval >= threshold))
    tn = int(np.sum(n_eval < threshold))
    accuracy = 0.5 * (tp / m_eval.size + tn / n_eval.size)
    if m_eval.size == n_eval.size:
        ci_low, ci_high = clopper_pearson(tp + tn, 2 * m_eval.size, confidence)
    else:
        each = 1.0 - (1.0 - confidence) / 2.0
        tpr_lo, tpr_hi = clopper_pearson(tp, m_eval.size, each)
        tnr_lo, tnr_hi = clopper_pearson(tn, n_eval.size, each)
        ci_low, ci_high = 0.5 * (tpr_lo + tnr_lo), 0.5 * (tpr_hi + tnr_hi)
    return AttackResult(
        accuracy=float(accuracy),
        ci_low=ci_low,
        ci_high=ci_high,
        auc=auc,
        tpr_at_1pct_fpr=tpr_low_fpr,
        n_members=int(members.size),
        n_nonmembers=int(nonmembers.size),
        confidence=confidence,
        threshold=threshold,
        n_evaluated=int(m_eval.size + n_eval.size),
        realized_fpr_at_1pct=float(fpr[at]),
        threshold_at_1pct=float(thr[at]),
    )


def loss_threshold_attack(
    member_losses, nonmember_losses, *, confidence: float = 0.95, rng: RNGLike = None
) -> AttackResult:
    """Loss-threshold attack [1]_: predict "member" when the loss is small.

    Parameters
    ----------
    member_losses, nonmember_losses : array-like of shape (n_members,), (n_nonmembers,)
        Per-record losses of the released model (e.g. from
        :func:`pacpriv.dpsgd.trainer.model_losses`) or any per-record loss of a release.
    confidence : float, default 0.95
    rng : None, int, SeedSequence or Generator
        As in :func:`evaluate_attack`.

    Returns
    -------
    AttackResult
        Evaluation of the scores ``-loss`` (``threshold`` is on that scale).
    """
    members = _scores_iv(member_losses, "member_losses")
    nonmembers = _scores_iv(nonmember_losses, "nonmember_losses")
    return evaluate_attack(-members, -nonmembers, confidence=confidence, rng=rng)


def logit_scaled_confidence(losses) -> np.ndarray:
    """LiRA's statistic φ = log(p / (1 - p)) from cross-entropy losses ℓ = -log p.

    Parameters
    ----------
    losses : array-like
        Non-negative per-example losses ``-log p(y | x)`` (cross-entropy or logistic).

    Returns
    -------
    numpy.ndarray, float64
        φ = -ℓ - log(1 - e^{-ℓ}), computed with ``expm1``; ℓ = 0 maps to the value at the
        smallest positive float (about 708) rather than infinity.
    """
    ell = real_array(losses, "losses")
    if np.any(ell < 0):
        raise ValueError(f"`losses` must be >= 0 (a loss -log p); {int(np.sum(ell < 0))} of "
                         f"{ell.size} are negative.")
    ell = np.maximum(ell, np.finfo(np.float64).tiny)
    return -ell - np.log(-np.expm1(-ell))
