"""Noise scale certified for every record of the pool at once (betting bounds, union bound).

Setting
-------
Noise ``Σ_B = s² Σ_shape`` with the shape fixed in advance; ``d_{t,i}`` is the Mahalanobis norm
``‖Δ_{t,i}‖_{Σ_shape⁻¹}`` of record ``i``'s difference in trial ``t``, so its informed-adversary
accuracy at scale ``s`` is ``Aᵢ(s) = E[acc(dᵢ/s)]`` (:func:`~pacpriv.pac.per_record._math.
bayes_accuracy`), continuous and non-increasing in ``s``. Write ``X = (acc − b₀)/(1 − b₀)`` in
``[0, 1]`` (``b₀ = max(q, 1 − q)``) and ``x* = (a* − b₀)/(1 − b₀)`` for the target ``a*``.

Procedure (:func:`certify_scale`)
---------------------------------
1. *Shape trials* (independent of the rest) fix everything data-dependent: a reference scale
   ``s_ref`` (the plug-in scale meeting the target on them), the lowest scale searched
   ``s_lo = lowest_fraction · s_ref``, each record's failure probability ``δᵢ`` (``Σ δᵢ = γ``:
   half spread evenly, half over the records most exposed on the shape trials), and the priors
   of the bets.
2. *Certification trials*: per record, betting bounds (:mod:`pacpriv.pac.per_record._betting`)
   whose bets are computed from the values at ``s_ref``. At any scale ``s`` the bound ``Uᵢ(s)``
   is a valid ``1 − δᵢ`` upper bound of ``Aᵢ(s)``, and it is non-increasing in ``s`` (the values
   fall with ``s``, the bets do not move).
3. ``ŝ`` = the smallest ``s >= s_lo`` with ``Uᵢ(s) <= a*`` for every record (bisection; each test
   is ``K_T(x*) >= 1/δᵢ``).

Proof that ``P(∃ i: Aᵢ(ŝ) > a*) <= γ``
--------------------------------------
Fix ``i`` and let ``sᵢ* = inf{s: Aᵢ(s) <= a*}``. If ``Aᵢ(ŝ) > a*`` then ``ŝ < sᵢ*``. Take fixed
scales ``s_k ↑ sᵢ*``; ``ŝ < sᵢ*`` implies ``ŝ <= s_k`` for some ``k`` and then, by monotonicity,
``Uᵢ(s_k) <= Uᵢ(ŝ) <= a* < Aᵢ(s_k)``: a miscoverage at the *fixed* scale ``s_k``. These events
increase with ``k``, so their union has probability ``lim_k P(Uᵢ(s_k) < Aᵢ(s_k)) <= δᵢ``. The
union bound over records gives ``γ``. The same holds for every scale ``>= ŝ`` (any larger noise).
(Scales below ``s_lo`` are never chosen; if ``sᵢ* <= s_lo`` the event is empty.)

Ranges
------
The betting bound pays for the a-priori range of ``X``. By default it is ``[0, 1]`` (a black
box: nothing is known about ``‖Δ‖``). A mechanism that *proves* ``‖Δᵢ‖₂ <= Dᵢ`` for every subset
(e.g. strongly convex ERM, Chaudhuri, Monteleoni & Sarwate 2011, Cor. 8) passes
``distance_bound = Dᵢ/sqrt(λ_min(Σ_shape))``; then ``X <= rᵢ = X(distance_bound/s_lo)`` for all
``s >= s_lo``, the bound runs on ``X/rᵢ`` in ``[0, 1]`` and is much tighter. The bound is an
assumption about the mechanism, checked on every simulated difference (a violation raises).

References
----------
.. [1] I. Waudby-Smith, A. Ramdas. Estimating means of bounded random variables by betting.
   J. R. Stat. Soc. B 86(1), 2024, Thm 3.
.. [2] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, §2.
.. [3] K. Chaudhuri, C. Monteleoni, A. Sarwate. Differentially private empirical risk
   minimization. JMLR 12, 2011, Cor. 8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pacpriv.pac.per_record._betting import (
    DEFAULT_CAP,
    betting_upper,
    log_capital,
    predictable_bets,
)
from pacpriv.pac.per_record._math import bayes_accuracy

__all__ = ["BETTING_METHOD", "ScaleCertificate", "UncertifiableTarget", "certify_scale",
           "check_betting_feasible", "check_scale_feasible",
           "plug_in_scale"]

#: Name of the bound in rows, reports and JSON.
BETTING_METHOD = ("betting confidence bound (Waudby-Smith & Ramdas 2024), union bound over "
                  "the audited records, uniform over noise scales >= the chosen one")
#: Share of γ spread evenly over all records (the rest goes to the most exposed ones).
EVEN_SHARE = 0.5
#: How many of the most exposed records (on the shape trials) share the rest of γ.
N_FOCUS = 16
#: ``s_lo = LOWEST_FRACTION · s_ref``.
LOWEST_FRACTION = 0.8
#: Relative width of the final bisection bracket of the scale.
SCALE_RTOL = 1e-9


@dataclass(frozen=True, eq=False)
class ScaleCertificate:
    """The certified noise scale and the per-record bounds at it (:func:`certify_scale`).

    Attributes
    ----------
    scale : float
        ``ŝ``; every record's informed-adversary accuracy is ``<= target_accuracy`` at ``ŝ`` and
        every larger scale, all at once with probability ``>= confidence`` over the simulation.
    target_accuracy : float
    accuracy_upper : ndarray of shape (n,)
        Each record's betting bound at ``ŝ`` (accuracy units, each ``<= target_accuracy``).
    delta : ndarray of shape (n,)
        Failure probability spent on each record (sums to ``1 − confidence``).
    range_upper : ndarray of shape (n,) or None
        Upper end of each record's accuracy range used by the bound (None: 1, a black box).
    reference_scale, lowest_scale : float
        ``s_ref`` and ``s_lo`` (from the shape trials).
    confidence : float
    cap : float
        Bet truncation ``c``.
    n_trials_shape, n_trials_certify : int
    smaller_scale_fails : bool
        Whether ``0.99 ŝ`` fails the test (False only when ``ŝ = s_lo``, the lowest scale
        searched).
    """

    scale: float
    target_accuracy: float
    accuracy_upper: np.ndarray = field(repr=False)
    delta: np.ndarray = field(repr=False)
    range_upper: np.ndarray | None = field(repr=False)
    reference_scale: float
    lowest_scale: float
    confidence: float
    cap: float
    n_trials_shape: int
    n_trials_certify: int
    smaller_scale_fails: bool = True

    @property
    def max_accuracy_upper(self) -> float:
        """Largest per-record bound at ``ŝ`` (``<= target_accuracy``)."""
        return float(np.max(self.accuracy_upper))

    def to_dict(self) -> dict:
        """Public summary (no per-record arrays)."""
        return {
            "method": BETTING_METHOD, "target_accuracy": self.target_accuracy,
            "confidence": self.confidence, "cap": self.cap,
            "n_trials_shape": self.n_trials_shape, "n_trials_certify": self.n_trials_certify,
            "n_records": int(self.delta.size),
            "range": "declared sensitivity bound" if self.range_upper is not None
                     else "[max(q, 1-q), 1] (black box)",
        }


def _normalised(distance: np.ndarray, scale: float, prior: float) -> np.ndarray:
    base = max(prior, 1.0 - prior)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = distance / scale if scale > 0 else np.where(distance > 0, np.inf, 0.0)
    return np.clip((bayes_accuracy(d, prior) - base) / (1.0 - base), 0.0, 1.0)


def plug_in_scale(distance: np.ndarray, target: float, prior: float) -> float:
    """Smallest scale whose plug-in mean accuracy is ``<= target`` for every column (estimate).

    ``distance`` (T, n) at unit scale; 0 if every distance is 0.
    """
    top = float(np.max(distance)) if distance.size else 0.0
    if top == 0.0:
        return 0.0

    def worst(s: float) -> float:
        return float(np.max(bayes_accuracy(distance / s, prior).mean(axis=0)))

    lo, hi = top * 1e-6, top
    while worst(hi) > target:
        hi *= 2.0
    while worst(lo) <= target and lo > top * 1e-300:
        lo *= 0.5
    while hi / lo > 1.0 + 1e-6:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if worst(mid) <= target else (mid, hi)
    return hi


def _allocation(shape_x: np.ndarray, gamma: float) -> np.ndarray:
    n = shape_x.shape[1]
    delta = np.full(n, EVEN_SHARE * gamma / n)
    k = min(N_FOCUS, n)
    focus = np.argsort(-shape_x.mean(axis=0), kind="stable")[:k]
    delta[focus] += (1.0 - EVEN_SHARE) * gamma / k
    return delta


def _declared_range_excess(x: float, prior: float) -> float:
    """The largest ``m = x*/r`` of the record with the widest declared range (``r`` its range
    on the accuracy scale at ``s_lo``), whatever the data: every shape distance is within the
    declared bound ``b``, so ``s_ref`` is at most the scale ``s_b`` at which distance ``b`` has
    the target accuracy (``b/s_b = d*``), and ``r >= X(d*/LOWEST_FRACTION)`` (a 1 % margin on
    the plug-in bisection). Returns 1 when no data-free floor exists."""
    base = max(prior, 1.0 - prior)
    target = base + (1.0 - base) * x
    lo, hi = 0.0, 1.0
    while float(bayes_accuracy(hi, prior)) < target and hi < 1e300:
        hi *= 2.0
    for _ in range(200):  # d* with acc(d*) = target (acc non-decreasing in d)
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if float(bayes_accuracy(mid, prior)) < target else (lo, mid)
    r_min = float(_normalised(np.array(lo / (LOWEST_FRACTION * 1.01)), 1.0, prior))
    return min(x / r_min, 1.0) if r_min > 0 else 1.0


def check_betting_feasible(target: float, n_certify: int, n_records: int, prior: float,
                           confidence: float, *, cap: float = DEFAULT_CAP,
                           declared_range: bool = False) -> None:
    """Raise ``ValueError`` if no noise can be certified (best-case bets), before any trial.

    Even with infinite noise (``X ≡ 0``) and saturated bets the capital is
    ``(1 + c x*/(1 − x*))^T``; it must reach ``1/δ`` for the least-funded record,
    ``δ = EVEN_SHARE · γ / n`` (``γ / n`` when ``n <= N_FOCUS``: every record is in
    focus). With a ``declared_range`` (a proven per-record bound on the
    distances) the record with the widest range bets on ``m = x*/r <= m*`` instead
    (:func:`_declared_range_excess`), with the largest share of γ any record can get; no
    refusal where ``m* = 1``.
    """
    base = max(prior, 1.0 - prior)
    x = (target - base) / (1.0 - base)
    even = EVEN_SHARE * (1.0 - confidence) / n_records  # every record's share (_allocation)
    focus = (1.0 - EVEN_SHARE) * (1.0 - confidence) / min(N_FOCUS, n_records)
    # the least-funded record: outside the focus set, or in it when every record is
    delta = even + focus if n_records <= N_FOCUS else even
    if declared_range:
        x = _declared_range_excess(x, prior)
        delta = even + focus  # the widest-range record may be in the focus set
        if x >= 1.0:
            return
    need = math.log(1.0 / delta)
    have = n_certify * math.log1p(cap * x / (1.0 - x))
    if have < need * (1.0 - 1e-12):  # round-off: refuse only what surely cannot certify
        _refuse(target, n_records, n_certify, confidence,
                math.ceil(need / math.log1p(cap * x / (1.0 - x))))


class UncertifiableTarget(ValueError):
    """No noise can certify the target with the trials given (a ``ValueError``)."""


def _refuse(target: float, n_records: int, n_certify: int, confidence: float,
            t_min: int) -> None:
    raise UncertifiableTarget(
        f"`target_accuracy` = {target!r} cannot be certified for {n_records} records with "
        f"{n_certify} certification trials at confidence {confidence!r}, whatever the "
        f"noise: the betting bound needs at least {t_min} certification trials here. "
        "Increase the trials or raise the target.")


def check_scale_feasible(shape_distance: np.ndarray, distance_bound: np.ndarray | None, *,
                         target_accuracy: float, prior: float, confidence: float,
                         n_certify: int, cap: float = DEFAULT_CAP) -> None:
    """After the shape trials, before the certification trials: refuse a target that
    :func:`certify_scale` cannot certify with ``n_certify`` trials, whatever they show.

    Each active record's capital grows by at most ``log1p(c m_i/(1 − m_i))`` per trial (every
    bet saturated, ``X ≡ 0``) and must reach ``ln(1/δ_i)``; ``m_i``, ``δ_i`` and the active set
    are :func:`certify_scale`'s, computed from the shape trials and the declared range alone.
    A necessary condition, so it never refuses a target the certificate would meet.

    Raises
    ------
    ValueError
        In :func:`check_betting_feasible`'s words, naming the certification trials needed.
    """
    sh = np.asarray(shape_distance, dtype=np.float64)
    if sh.size == 0 or float(sh.max()) == 0.0:
        return  # every output agrees: the certificate needs no trials
    n = sh.shape[1]
    base = max(prior, 1.0 - prior)
    x_target = (target_accuracy - base) / (1.0 - base)
    s_ref = plug_in_scale(sh, target_accuracy, prior)
    s_lo = LOWEST_FRACTION * s_ref
    r = (np.ones(n) if distance_bound is None else
         np.maximum(_normalised(np.asarray(distance_bound, dtype=np.float64), s_lo, prior),
                    1e-300))
    m = np.minimum(x_target / r, 1.0)
    active = m < 1.0
    if not active.any():
        return
    delta = _allocation(_normalised(sh, s_ref, prior) / r,
                        1.0 - confidence)[active]
    step = np.log1p(cap * m[active] / (1.0 - m[active]))
    t_min = int(np.max(np.ceil(np.log(1.0 / delta) / step)))
    if n_certify < t_min:
        _refuse(target_accuracy, n, n_certify, confidence, t_min)


def certify_scale(shape_distance: np.ndarray, cert_distance: np.ndarray, *,
                  target_accuracy: float, prior: float, confidence: float,
                  distance_bound: np.ndarray | None = None, cap: float = DEFAULT_CAP
                  ) -> ScaleCertificate:
    """Smallest noise scale certified for every record (module notes: procedure and proof).

    Parameters
    ----------
    shape_distance : ndarray of shape (T0, n)
        Unit-scale Mahalanobis norms of the shape trials (``T0 >= 2``).
    cert_distance : ndarray of shape (T1, n)
        The same for the certification trials (independent of the shape trials).
    target_accuracy : float
        ``a*`` in ``(max(q, 1 − q), 1)``.
    prior : float
        Membership prior ``q`` in (0, 1).
    confidence : float
        ``1 − γ`` in (0, 1).
    distance_bound : ndarray of shape (n,), optional
        A proven bound on each record's unit-scale distance for every subset (see Ranges).
    cap : float, default :data:`~pacpriv.pac.per_record._betting.DEFAULT_CAP`

    Returns
    -------
    ScaleCertificate

    Raises
    ------
    ValueError
        If a simulated distance exceeds ``distance_bound`` (the mechanism's declared
        sensitivity is wrong), or no scale can be certified with these trials.
    """
    sh = np.asarray(shape_distance, dtype=np.float64)
    ce = np.asarray(cert_distance, dtype=np.float64)
    n = ce.shape[1]
    base = max(prior, 1.0 - prior)
    gamma = 1.0 - confidence
    x_target = (target_accuracy - base) / (1.0 - base)
    if distance_bound is not None:
        bound = np.asarray(distance_bound, dtype=np.float64)
        worst = np.maximum(sh.max(axis=0), ce.max(axis=0))
        if np.any(worst > bound * (1.0 + 1e-9) + 1e-300):
            i = int(np.argmax(worst - bound))
            raise ValueError(
                "a simulated per-record difference exceeds the mechanism's declared "
                f"sensitivity bound (record {i}: ratio {float(worst[i] / bound[i]):.6g}); the "
                "declared bound is wrong, so it cannot be used as the range of the certificate."
            )
    s_ref = plug_in_scale(sh, target_accuracy, prior)
    s_lo = LOWEST_FRACTION * s_ref
    if distance_bound is None:
        r = np.ones(n)
    else:
        r = np.maximum(_normalised(bound, s_lo, prior), 1e-300)
    m = np.minimum(x_target / r, 1.0)
    active = m < 1.0          # records whose whole range lies below the target need nothing
    sh_x = _normalised(sh, s_ref, prior) / r
    delta = _allocation(sh_x, gamma)
    mu0 = sh_x.mean(axis=0)
    var0 = sh_x.var(axis=0, ddof=1) + 1e-12 if sh.shape[0] > 1 else np.full(n, 0.25)
    bets = predictable_bets(_normalised(ce, s_ref, prior) / r, delta=delta,
                            horizon=ce.shape[0], prior_mean=mu0, prior_variance=var0)
    thr = np.log(1.0 / delta)
    a_idx = np.flatnonzero(active)

    def passes(s: float) -> bool:
        if a_idx.size == 0 and s >= s_lo:
            return True
        if s < s_lo:
            return False
        x = _normalised(ce[:, a_idx], s, prior) / r[a_idx]
        return bool(np.all(log_capital(x, bets[:, a_idx], m[a_idx], cap=cap) >= thr[a_idx]))

    top = float(max(ce.max(initial=0.0), sh.max(initial=0.0)))
    if top == 0.0 or passes(s_lo):
        scale = s_lo
    else:
        hi = max(s_ref, s_lo, top * 1e-12)
        for _ in range(2000):
            if passes(hi):
                break
            hi *= 2.0
        else:
            raise ValueError(
                f"no noise scale certifies target {target_accuracy!r} for {n} records with "
                f"{ce.shape[0]} certification trials at confidence {confidence!r}; "
                "increase the trials or raise the target."
            )
        lo = max(s_lo, hi / 2.0) if hi / 2.0 >= s_lo else s_lo
        while hi / lo > 1.0 + SCALE_RTOL:
            mid = math.sqrt(lo * hi)
            lo, hi = (lo, mid) if passes(mid) else (mid, hi)
        scale = hi
    upper_x = np.zeros(n)
    if a_idx.size:
        upper_x[a_idx] = betting_upper(_normalised(ce[:, a_idx], scale, prior) / r[a_idx],
                                       bets[:, a_idx], delta[a_idx], cap=cap)
    upper_x = np.where(active, upper_x * r, r)  # inactive: the whole range is below the target
    upper = np.minimum(base + (1.0 - base) * upper_x, 1.0)
    return ScaleCertificate(
        scale=float(scale), target_accuracy=float(target_accuracy),
        accuracy_upper=np.minimum(upper, target_accuracy), delta=delta,
        range_upper=None if distance_bound is None else base + (1.0 - base) * r,
        reference_scale=float(s_ref), lowest_scale=float(s_lo), confidence=float(confidence),
        cap=float(cap), n_trials_shape=int(sh.shape[0]), n_trials_certify=int(ce.shape[0]),
        smaller_scale_fails=bool(scale == 0.0 or not passes(0.99 * scale)),
    )
