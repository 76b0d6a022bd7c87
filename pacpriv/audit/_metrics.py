"""Low-FPR metrics of a membership-inference attack: TPR at fixed FPR with exact intervals.

An attack is a score per (record, target model) pair, higher meaning "more likely a member";
the rule "member iff score >= t" has, on the ``n_neg`` non-member and ``n_pos`` member scores,
``fp(t)`` false and ``tp(t)`` true positives. At a target false-positive rate α the reported
TPR is that of the most permissive threshold whose empirical FPR is at most α (Carlini et al.,
S&P 2022, Sec. III-B, "TPR at low FPR"; no interpolation between thresholds), i.e. with at most
``⌊α·n_neg⌋`` false positives. Its interval is the exact Clopper–Pearson interval of
``tp`` out of ``n_pos`` [1]_, and the one-sided Clopper–Pearson upper limit of the achieved FPR
is kept beside it, so that a comparison with a certified curve can allow for the FPR's own
sampling error.

An FPR is **resolved** only when ``α·n_neg >= 1``: with fewer non-member scores the threshold
may admit no false positive at all, the "TPR at α" would be the TPR at FPR 0, and printing it
(or 0) would misstate what was measured. Unresolved entries carry ``tpr = None`` and a reason
naming the counts.

References
----------
.. [1] C. J. Clopper, E. S. Pearson. The use of confidence or fiducial limits illustrated in
   the case of the binomial. Biometrika 26(4), 1934.
.. [2] N. Carlini, S. Chien, M. Nasr, S. Song, A. Terzis, F. Tramèr. Membership Inference
   Attacks From First Principles. IEEE S&P 2022, Sec. III-B.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from pacpriv._random import RNGLike
from pacpriv._stats import clopper_pearson
from pacpriv._validation import check_real
from pacpriv.audit._attacks import evaluate_attack
from pacpriv.audit._checks import real_array

__all__ = ["DEFAULT_FPRS", "RocMetrics", "TprAtFpr", "roc_counts", "roc_metrics"]

#: The false-positive rates every audit reports (0.01%, 0.1%, 1%, 10%).
DEFAULT_FPRS = (1e-4, 1e-3, 1e-2, 1e-1)

#: Points of the (log-spaced) ROC kept for the figure.
ROC_POINTS = 160


@dataclass(frozen=True)
class TprAtFpr:
    """TPR of one attack at one target FPR.

    Attributes
    ----------
    fpr : float
        Target false-positive rate α in (0, 1).
    resolved : bool
        Whether ``α·n_nonmembers >= 1`` (see the module docstring).
    tpr : float or None
        Largest empirical TPR among thresholds with at most ``⌊α·n_nonmembers⌋`` false
        positives (None when unresolved).
    ci : tuple of float or None
        Two-sided Clopper–Pearson interval of ``tpr`` at ``confidence``.
    false_positives : int or None
        False positives at that threshold.
    fpr_upper : float or None
        One-sided Clopper–Pearson upper limit (at ``confidence``) of the threshold's FPR.
    reason : str
        Why the FPR is unresolved ("" when resolved).
    realized_fpr : float or None
        The FPR the chosen threshold actually has on the non-member scores
        (``false_positives / n_nonmembers``, at most ``fpr``): a TPR is read against it, not
        against the target. Tied scores cannot be split, so it may lie well below the target.
    threshold : float or None
        The rule "member iff score >= threshold" behind ``tpr`` (``inf``: no positive at all).
    """

    fpr: float
    resolved: bool
    tpr: float | None
    ci: tuple[float, float] | None
    false_positives: int | None
    fpr_upper: float | None
    reason: str = ""
    realized_fpr: float | None = None
    threshold: float | None = None

    def to_dict(self) -> dict:
        """``{"tpr", "ci", "resolved", ...}``: the issue's layout plus the FPR's own facts (not
        ``threshold``: it is a record's score, so it stays on the object and out of reports)."""
        out: dict = {"tpr": self.tpr, "ci": None if self.ci is None else list(self.ci),
                     "resolved": self.resolved}
        if self.resolved:
            # The threshold is one record's score: it stays on the object, never in a report.
            out.update(false_positives=self.false_positives, fpr_upper=self.fpr_upper,
                       realized_fpr=self.realized_fpr)
        else:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class RocMetrics:
    """Threshold-free and low-FPR metrics of one attack (equal membership priors).

    Attributes
    ----------
    name : str
        Attack name.
    auc : float
        Area under the ROC curve (ties count ½).
    balanced_accuracy : float
        Held-out balanced accuracy ½(TPR + TNR): threshold chosen on a random half of the
        scores, counted on the other half (:func:`pacpriv.audit.evaluate_attack`).
    balanced_accuracy_ci : tuple of float
        Its interval at ``confidence``.
    tpr_at_fpr : tuple of TprAtFpr
        One entry per target FPR.
    n_members, n_nonmembers : int
        Member and non-member scores (pairs of record and target model).
    confidence : float
        Level of every interval.
    roc_fpr, roc_tpr : ndarray
        The empirical ROC at :data:`ROC_POINTS` log-spaced FPRs from ``1/n_nonmembers`` to 1
        (aggregate rates only; never a score).
    """

    name: str
    auc: float
    balanced_accuracy: float
    balanced_accuracy_ci: tuple[float, float]
    tpr_at_fpr: tuple[TprAtFpr, ...]
    n_members: int
    n_nonmembers: int
    confidence: float
    roc_fpr: np.ndarray = field(repr=False)
    roc_tpr: np.ndarray = field(repr=False)

    def to_dict(self) -> dict:
        """The issue's layout (name, auc, balanced_accuracy, tpr_at_fpr keyed by FPR text)
        plus the counts, the interval of the balanced accuracy and the sampled ROC."""
        return {
            "name": self.name,
            "auc": self.auc,
            "balanced_accuracy": self.balanced_accuracy,
            "tpr_at_fpr": {repr(float(t.fpr)): t.to_dict() for t in self.tpr_at_fpr},
            "balanced_accuracy_ci": list(self.balanced_accuracy_ci),
            "n_members": self.n_members,
            "n_nonmembers": self.n_nonmembers,
            "confidence": self.confidence,
            "roc": {"fpr": self.roc_fpr.tolist(), "tpr": self.roc_tpr.tolist()},
        }


def _scores_iv(scores, name: str) -> np.ndarray:
    arr = real_array(scores, name)
    if arr.ndim != 1 or arr.size < 2:
        raise ValueError(
            f"`{name}` must be a one-dimensional array of at least 2 scores; got shape "
            f"{arr.shape}."
        )
    return arr


def roc_counts(member_scores, nonmember_scores) -> tuple[np.ndarray, np.ndarray]:
    """``(tp, fp)``: true and false positives of "member iff score >= t" at every distinct
    threshold, from the strictest (no positive) to the most permissive (all positive).

    Parameters
    ----------
    member_scores, nonmember_scores : array-like of shape (n_pos,), (n_neg,)
        Finite scores.

    Returns
    -------
    tp, fp : ndarray of int64, shape (n_thresholds + 1,)
        Non-decreasing counts starting at 0 and ending at ``n_pos`` and ``n_neg``.
    """
    pos = np.asarray(member_scores, dtype=np.float64)
    neg = np.asarray(nonmember_scores, dtype=np.float64)
    scores = np.r_[pos, neg]
    labels = np.r_[np.ones(pos.size, dtype=bool), np.zeros(neg.size, dtype=bool)]
    order = np.argsort(-scores, kind="stable")
    s, lab = scores[order], labels[order]
    last = np.r_[np.flatnonzero(np.diff(s) != 0), s.size - 1]  # end of each tie group
    tp = np.cumsum(lab, dtype=np.int64)[last]
    fp = np.cumsum(~lab, dtype=np.int64)[last]
    return np.r_[0, tp], np.r_[0, fp]


def _thresholds(member_scores, nonmember_scores) -> np.ndarray:
    """The threshold of each entry of :func:`roc_counts` (``inf`` first: no positive)."""
    s = np.sort(np.r_[np.asarray(member_scores, dtype=np.float64),
                      np.asarray(nonmember_scores, dtype=np.float64)])[::-1]
    last = np.r_[np.flatnonzero(np.diff(s) != 0), s.size - 1]
    return np.r_[np.inf, s[last]]


def _allowed_false_positives(alpha: float, n_neg: int) -> int:
    """``⌊α·n_neg⌋`` computed exactly from α's decimal text (no float round-off)."""
    return math.floor(Decimal(repr(float(alpha))) * n_neg)


def _tpr_at(alpha: float, tp: np.ndarray, fp: np.ndarray, confidence: float,
            thresholds: np.ndarray | None = None) -> TprAtFpr:
    n_pos, n_neg = int(tp[-1]), int(fp[-1])
    allowed = _allowed_false_positives(alpha, n_neg)
    if allowed < 1:
        need = math.ceil(Decimal(1) / Decimal(repr(float(alpha))))
        return TprAtFpr(
            fpr=alpha, resolved=False, tpr=None, ci=None, false_positives=None, fpr_upper=None,
            reason=(f"needs at least {need} non-member scores to resolve FPR {alpha:g}; "
                    f"have {n_neg}"),
        )
    k = int(np.searchsorted(fp, allowed, side="right")) - 1  # last threshold with fp <= allowed
    hits, false = int(tp[k]), int(fp[k])
    lo, hi = clopper_pearson(hits, n_pos, confidence)
    _, fpr_hi = clopper_pearson(false, n_neg, confidence, alternative="less")
    thr = None if thresholds is None else float(thresholds[k])
    return TprAtFpr(fpr=alpha, resolved=True, tpr=hits / n_pos, ci=(lo, hi),
                    false_positives=false, fpr_upper=fpr_hi, realized_fpr=false / n_neg,
                    threshold=thr)


def _sampled_roc(tp: np.ndarray, fp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n_pos, n_neg = int(tp[-1]), int(fp[-1])
    grid = np.unique(np.r_[np.logspace(np.log10(1.0 / n_neg), 0.0, ROC_POINTS), 1.0])
    allowed = np.floor(grid * n_neg + 1e-9).astype(np.int64)
    k = np.searchsorted(fp, allowed, side="right") - 1
    return fp[k] / n_neg, tp[k] / n_pos


def _auc(tp: np.ndarray, fp: np.ndarray) -> float:
    """Trapezoid area of the ROC through every threshold (ties count ½), in counts."""
    return float(np.sum((fp[1:] - fp[:-1]) * (tp[1:] + tp[:-1])) / (2.0 * tp[-1] * fp[-1]))


def roc_metrics(
    member_scores,
    nonmember_scores,
    *,
    name: str = "attack",
    fprs=DEFAULT_FPRS,
    confidence: float = 0.95,
    rng: RNGLike = None,
) -> RocMetrics:
    """AUC, held-out balanced accuracy and TPR at each target FPR with exact intervals.

    Parameters
    ----------
    member_scores : array-like of shape (n_pos,)
        Scores of (record, model) pairs where the record was in the model's training set.
    nonmember_scores : array-like of shape (n_neg,)
        Scores of pairs where it was not. Both need at least 2 finite values.
    name : str, default "attack"
        Label of the attack.
    fprs : sequence of float, default (1e-4, 1e-3, 1e-2, 1e-1)
        Target false-positive rates, each in (0, 1).
    confidence : float, default 0.95
        Level of the two-sided Clopper–Pearson intervals [1]_, in (0, 1).
    rng : None, int, SeedSequence or Generator
        Seed of the split behind the held-out balanced accuracy (nothing else is random).

    Returns
    -------
    RocMetrics

    Raises
    ------
    ValueError
        If a score array is not 1-D with at least 2 finite values, a target FPR is outside
        (0, 1), or ``confidence`` is outside (0, 1). Messages name counts and positions only.
    TypeError
        If the scores are not numeric.

    Notes
    -----
    When the scores of different records (or of one record under different target models)
    are dependent -- as they are when every model of a batch serves as target in turn -- the
    intervals are nominal: they treat the pairs as independent draws.
    """
    pos = _scores_iv(member_scores, "member_scores")
    neg = _scores_iv(nonmember_scores, "nonmember_scores")
    confidence = check_real(confidence, "confidence", low=0.0, high=1.0, low_inclusive=False,
                            high_inclusive=False)
    alphas = [check_real(a, f"fprs[{i}]", low=0.0, high=1.0, low_inclusive=False,
                         high_inclusive=False) for i, a in enumerate(fprs)]
    tp, fp = roc_counts(pos, neg)
    thresholds = _thresholds(pos, neg)
    held_out = evaluate_attack(pos, neg, confidence=confidence, rng=rng)
    roc_fpr, roc_tpr = _sampled_roc(tp, fp)
    return RocMetrics(
        name=str(name),
        auc=_auc(tp, fp),
        balanced_accuracy=held_out.accuracy,
        balanced_accuracy_ci=(held_out.ci_low, held_out.ci_high),
        tpr_at_fpr=tuple(_tpr_at(a, tp, fp, confidence, thresholds) for a in alphas),
        n_members=int(pos.size),
        n_nonmembers=int(neg.size),
        confidence=confidence,
        roc_fpr=roc_fpr,
        roc_tpr=roc_tpr,
    )
