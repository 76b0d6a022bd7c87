"""Certified trade-off curves: the largest TPR any membership test can have at each FPR.

A test of "record ``j`` is a member" (H1, prior ``q``) against "it is not" (H0) has a false
positive rate α and a true positive rate β. Each bound below caps β as a function of α; each
curve is computed on the safe side (rounded up).

* **Accuracy (total variation) bound.** If every test has balanced accuracy at most ``a``
  (equal priors), ``½(β + 1 − α) <= a``, i.e. ``β <= α + 2(a − ½)``: the accuracy bound is
  the total variation ``TV = 2a − 1`` between the output laws with and without the record, and
  ``β − α = P_1(S) − P_0(S) <= TV`` for the rejection region ``S``. Used for DP-SGD with the
  certified exact accuracy of random allocation, and for per-record PAC certificates.
* **Mutual-information budget** ``v`` (nats) on the PAC secret (Xiao & Devadas, CRYPTO 2023).
  The membership bit ``b`` of one record is a function of the secret subset ``X``, so for any
  decision ``D`` computed from the release ``Y`` (with any extra randomness) the data-processing
  inequality gives ``I(b; D) <= I(b; Y) <= I(X; Y) <= v``. For a binary ``D`` with rates
  ``(α, β)`` and ``b ~ Bern(q)``,

      I(b; D) = H(D) − H(D | b) = h(qβ + (1 − q)α) − q·h(β) − (1 − q)·h(α),

  ``h`` the binary entropy in nats (``q = ½``: ``h((α + β)/2) − (h(α) + h(β))/2``). The certified
  curve is the largest ``β >= α`` with ``I <= v`` at each α; the constraint is convex in
  ``(α, β)`` (mutual information is convex in the channel for a fixed input law) and ``I`` is
  increasing in ``β`` on ``[α, 1]``, so bisection finds it. It is tight for the budget alone:
  the binary channel with those rates *is* a mechanism with ``I(b; Y) = v``. At ``q = ½`` its
  best balanced accuracy is the posterior bound of PAC Privacy Thm 1 (the symmetric point
  ``α = 1 − β`` gives ``ln 2 − h(β) <= v``).
* **DP-SGD privacy-loss distribution** (f-DP, Dong, Roth & Su, JRSSB 2022): from a pessimistic
  PLD, ``β <= e^ε α + δ(ε)`` for every ε, minimised over ε; provided by
  :func:`pacpriv.dpsgd.tradeoff_curve` when it exists in this installation.

Every bound on a single record's test also bounds the pooled rates of an audit: averaging
``(α_j, β_j)`` over records and target models stays inside a convex region.

Curves are stored on a log grid of FPRs; :func:`curve_value` reads one at any α from the
grid point at or above α (a trade-off curve is non-decreasing, so this never understates it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from pacpriv._numbers import format_bound
from pacpriv._validation import check_array_real, check_real

__all__ = [
    "TradeoffCurve",
    "accuracy_curve",
    "binary_test_information",
    "curve_grid",
    "curve_value",
    "mi_curve",
    "trivial_curve",
]

#: FPR grid of the stored curves: 1e-6 .. 1, 40 points per decade, plus the reported FPRs.
_GRID_DECADES = (-6.0, 0.0)
_GRID_PER_DECADE = 40


@dataclass(frozen=True)
class TradeoffCurve:
    """An upper bound on the TPR of every membership test, as a function of its FPR.

    Attributes
    ----------
    label : str
        What the curve is, beginning with ``"certified"`` (and its ``1−γ`` when the bound
        holds with that probability over a simulation) or ``"estimated"``.
    certified : bool
        Whether it is a proven bound (possibly at confidence ``confidence``).
    confidence : float or None
        ``1−γ`` of a statistically certified bound; None for an analytic one (probability 1)
        or an estimate.
    scope : str
        For whom it holds: ``"every record"`` or the named sample.
    fpr, tpr : ndarray of shape (n_points,)
        The curve on an increasing FPR grid in (0, 1]; ``tpr`` non-decreasing, in [0, 1].
    """

    label: str
    certified: bool
    confidence: float | None
    scope: str
    fpr: np.ndarray = field(repr=False)
    tpr: np.ndarray = field(repr=False)

    def to_dict(self) -> dict:
        """``{"label", "fpr", "tpr", ...}`` (the issue's layout plus kind and scope)."""
        return {"label": self.label, "fpr": self.fpr.tolist(), "tpr": self.tpr.tolist(),
                "certified": self.certified, "confidence": self.confidence,
                "scope": self.scope}


def curve_grid(fprs: Sequence[float] = ()) -> np.ndarray:
    """The FPR grid of stored curves: log-spaced from 1e-6 to 1 plus ``fprs``."""
    lo, hi = _GRID_DECADES
    base = np.logspace(lo, hi, int((hi - lo) * _GRID_PER_DECADE) + 1)
    extra = check_array_real(np.asarray(list(fprs), dtype=float), "fprs", low=0.0, high=1.0,
                             low_inclusive=False)
    return np.unique(np.r_[base, extra])


def curve_value(curve: TradeoffCurve, alpha: float) -> float:
    """The curve's TPR bound at FPR ``alpha``: its value at the first grid point ``>= alpha``."""
    alpha = check_real(alpha, "alpha", low=0.0, high=1.0)
    k = int(np.searchsorted(curve.fpr, alpha, side="left"))
    return float(curve.tpr[min(k, curve.tpr.size - 1)])


def trivial_curve(fpr, *, reason: str) -> TradeoffCurve:
    """``TPR <= 1``: no bound (e.g. non-private training); labelled with ``reason``."""
    grid = np.asarray(fpr, dtype=float)
    return TradeoffCurve(label=f"certified (trivial: {reason}; TPR <= 1)", certified=True,
                         confidence=None, scope="every record", fpr=grid,
                         tpr=np.ones_like(grid))


def accuracy_curve(accuracy: float, fpr, *, label: str, certified: bool = True,
                   confidence: float | None = None,
                   scope: str = "every record") -> TradeoffCurve:
    """``TPR <= min(1, FPR + 2(a − ½))`` from a balanced-accuracy (total variation) bound ``a``.

    Parameters
    ----------
    accuracy : float
        Accuracy bound ``a`` in [½, 1] (equal priors).
    fpr : array-like
        FPR grid.
    label, certified, confidence, scope
        As in :class:`TradeoffCurve` (``label`` is prefixed by the kind).
    """
    a = check_real(accuracy, "accuracy", low=0.5, high=1.0)
    grid = np.asarray(fpr, dtype=float)
    kind = _kind(certified, confidence)
    return TradeoffCurve(
        label=f"{kind}: {label}, TPR <= FPR + 2(a − ½) with a = {format_bound(a, 6)}",
        certified=certified, confidence=confidence, scope=scope, fpr=grid,
        tpr=np.minimum(1.0, grid + 2.0 * (a - 0.5)))


def _kind(certified: bool, confidence: float | None) -> str:
    if not certified:
        return "estimated"
    if confidence is None:
        return "certified"
    return f"certified (1−γ = {format_bound(confidence, 4, side='down')})"


def _entropy(p: np.ndarray) -> np.ndarray:
    """Binary entropy in nats."""
    return special.entr(p) + special.entr(1.0 - p)


def binary_test_information(fpr, tpr, *, prior: float = 0.5) -> np.ndarray:
    """``I(b; D)`` in nats for a test with rates ``(fpr, tpr)`` and ``b ~ Bern(prior)``.

    ``h(q·tpr + (1 − q)·fpr) − q·h(tpr) − (1 − q)·h(fpr)``, ``h`` the binary entropy (nats).
    """
    a = np.asarray(fpr, dtype=float)
    b = np.asarray(tpr, dtype=float)
    q = check_real(prior, "prior", low=0.0, high=1.0, low_inclusive=False,
                   high_inclusive=False)
    return _entropy(q * b + (1 - q) * a) - q * _entropy(b) - (1 - q) * _entropy(a)


#: Absolute slack (nats) above the float round-off of ``binary_test_information``: three
#: entropies of at most ``ln 2`` each, a few ulps apiece (~1e-15); 3e-14 leaves a margin.
_INFO_ROUNDOFF = 3e-14


def mi_curve(mi_budget: float, fpr, *, prior: float = 0.5, label: str, certified: bool,
             confidence: float | None, scope: str = "every record") -> TradeoffCurve:
    """Largest TPR at each FPR for any test of a membership bit under ``I(b; Y) <= mi_budget``.

    Parameters
    ----------
    mi_budget : float
        ``v >= 0`` in nats.
    fpr : array-like
        FPR grid in [0, 1].
    prior : float, default 0.5
        Membership prior ``q`` in (0, 1).
    label, certified, confidence, scope
        As in :class:`TradeoffCurve`.

    Returns
    -------
    TradeoffCurve
        ``tpr`` is the upper end of a 200-step bisection bracket on ``I <= v + 3e-14`` nats.
        The slack exceeds the float round-off of :func:`binary_test_information` (a few ulps
        of ``ln 2``), so each stored ``tpr`` has a true information above ``v`` and is never
        below the exact curve, not even by round-off; it is above it by at most about
        ``1e-10`` for ``v >= 1e-6`` and ``2e-6`` at ``v = 0`` (absolute).

    Raises
    ------
    ValueError
        If ``mi_budget`` is negative or not finite, or ``prior`` is outside (0, 1).

    Notes
    -----
    The curve is the boundary of the region of (FPR, TPR) pairs allowed by the data
    processing inequality for mutual information, as used by Xiao & Devadas (CRYPTO 2023,
    PAC Privacy, Thm. 1) for the posterior success rate.
    """
    v = check_real(mi_budget, "mi_budget", low=0.0)
    grid = np.asarray(fpr, dtype=float)
    lo, hi = grid.copy(), np.ones_like(grid)
    # bisect on I <= v + slack: an ``hi`` that fails it has true I > v, hence is above the root
    cap = v + _INFO_ROUNDOFF
    full = binary_test_information(grid, hi, prior=prior) <= cap
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        ok = binary_test_information(grid, mid, prior=prior) <= cap
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    tpr = np.where(full, 1.0, hi)
    kind = _kind(certified, confidence)
    return TradeoffCurve(
        label=f"{kind}: {label}, I(b; decision) <= v = {format_bound(v, 6)} nats",
        certified=certified, confidence=confidence, scope=scope, fpr=grid,
        tpr=np.maximum.accumulate(tpr))
