"""The membership prior behind a posterior bound: declared by the sampler, or bounded from masks.

Thm 1 of [1]_ bounds an adversary's posterior success rate ``p`` through
``KL(Bern(p) || Bern(p0)) <= MI``, where ``p0`` is *that adversary's* blind-guess success
rate. For membership of one record included with probability ``q``, the best blind guess is
``max(q, 1 − q)``; the bound over all adversaries (and all records) uses the largest such rate.
Nothing here assumes ½:

* a sampler that **declares** its inclusion probability ``q`` (``PoissonSampler``,
  ``FixedSizeSampler``, ``ComplementaryPairsSampler``, or a ``CallableSampler`` given
  ``inclusion_probability=``) gets ``p0 = max(q, 1 − q)``; the declaration is checked against
  the simulated masks and refused when clearly wrong: each record's count is ``Bin(T, q)``
  (the most extreme one is tested, union-bounded over records), and the pooled count of all
  ``T · N`` memberships is tested with the Chernoff bound ``exp(−T·N·KL(rate ‖ q))`` [3]_
  (valid when a mask's memberships are independent or negatively associated, as for Poisson,
  fixed-size and complementary-pairs sampling), both at level ``1e-9``;
* otherwise ``p0`` is **estimated** from the simulated masks with an upper confidence bound:
  for each record ``j`` included ``k_j`` times in ``T`` trials, one-sided Clopper–Pearson [2]_
  upper bounds on ``q_j`` and on ``1 − q_j`` at level ``γ / (2N)`` each (union bound over the
  ``N`` records and both sides), and ``p0`` is the largest of them. With probability
  ``>= 1 − γ`` over the simulation, ``p0 >= max_j max(q_j, 1 − q_j)``.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy: Automatic Privacy Measurement and Control of Data
   Processing. CRYPTO 2023, arXiv:2210.03458, Thm 1.
.. [2] C. J. Clopper, E. S. Pearson. The use of confidence or fiducial limits illustrated in the
   case of the binomial. Biometrika 26(4), 1934.
.. [3] W. Hoeffding. Probability inequalities for sums of bounded random variables. JASA 58,
   1963, Thm 1; D. Dubhashi, D. Ranjan. Balls and bins: a study in negative dependence. Random
   Structures & Algorithms 13(2), 1998, Prop. 5 (the bound under negative association).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from pacpriv._numbers import format_bound
from pacpriv._stats import clopper_pearson
from pacpriv._validation import check_real
from pacpriv.pac.samplers import Sampler

__all__ = ["PRIOR_CONFIDENCE", "MembershipPrior", "blind_guess_upper_bound",
           "resolve_membership_prior"]

#: Confidence ``1 − γ`` of an estimated prior (the union bound spends ``γ`` over all records).
PRIOR_CONFIDENCE = 0.99
#: A declared inclusion probability is refused when a test on the simulated masks (per record,
#: or pooled over every membership) rejects it at this level (a false refusal is this unlikely).
DECLARED_PRIOR_TEST_LEVEL = 1e-9


@dataclass(frozen=True)
class MembershipPrior:
    """The prior a posterior bound rests on, and why.

    Attributes
    ----------
    inclusion_probability : float
        ``q``: the declared inclusion probability, or (estimated) the overall inclusion rate of
        the simulated masks (for display only; the bound uses ``blind_guess``).
    blind_guess : float
        ``p0`` in ``[½, 1)``: the best blind-guess success rate ``max(q, 1 − q)`` (declared), or
        its ``confidence``-level upper bound (estimated). Pass it as ``prior=`` to
        :func:`pacpriv.pac.bounds.posterior_success_rate`.
    source : {"sampler", "estimated"}
        Declared by the sampler, or estimated from the masks.
    confidence : float or None
        ``1 − γ`` of the estimate (None when declared).
    explanation : str
        One line for reports, e.g. ``"best blind guess max(q, 1 − q) = 0.9 for sampling rate
        q = 0.9 (declared by the sampler)"``.
    """

    inclusion_probability: float
    blind_guess: float
    source: str
    confidence: float | None
    explanation: str

    def to_dict(self) -> dict:
        """JSON-serialisable fields (all of them, in declaration order)."""
        return asdict(self)


def blind_guess_upper_bound(masks: np.ndarray, *, confidence: float = PRIOR_CONFIDENCE) -> float:
    """Upper confidence bound on ``max_j max(q_j, 1 − q_j)`` from simulated membership masks.

    Parameters
    ----------
    masks : ndarray of bool, shape (n_trials, n_records)
        Membership masks of independent trials (``n_trials >= 1``, ``n_records >= 1``).
    confidence : float, default 0.99
        ``1 − γ`` in ``(0, 1)``.

    Returns
    -------
    float
        In ``(0, 1]``: 1 when some record was in every trial or in none (nothing to bound).

    Raises
    ------
    ValueError
        If ``masks`` is not a non-empty 2-D array or ``confidence`` is outside ``(0, 1)``.

    References
    ----------
    .. [1] Clopper & Pearson, Biometrika 1934 (exact one-sided binomial limits), with a union
       bound over the ``2 · n_records`` one-sided limits.
    """
    conf = check_real(confidence, "confidence", low=0.0, high=1.0, low_inclusive=False,
                      high_inclusive=False)
    m = np.asarray(masks)
    if m.ndim != 2 or m.shape[0] < 1 or m.shape[1] < 1:
        raise ValueError(f"`masks` must be a non-empty (n_trials, n_records) array; got "
                         f"shape {m.shape}.")
    t, n = m.shape
    k = membership_counts(np.asarray(m, dtype=bool))
    alpha = (1.0 - conf) / (2.0 * n)
    # the extreme counts give the largest max(upper(q), upper(1 - q)); CP upper limit of a
    # count x out of t is Beta(1 - alpha; x + 1, t - x), and 1 at x = t
    extreme = int(max(k.max(), t - k.min()))
    return clopper_pearson(extreme, t, 1.0 - alpha, alternative="less")[1]


#: Records per column block of :func:`membership_counts` (its int64 counts: 512 KiB).
_COUNT_BLOCK = 65_536

#: Trials summed at a time in bytes by :func:`membership_counts` (a uint8 sum cannot wrap).
_BYTE_ROWS = 255


def membership_counts(masks: np.ndarray) -> np.ndarray:
    """Each record's number of trials, ``masks.sum(axis=0)`` (int64, shape ``(n_records,)``),
    exactly: column blocks of :data:`_COUNT_BLOCK` records (the counts stay in cache while the
    trials are added), each summed as bytes over at most 255 trials at a time (no wrap-around),
    then added in int64. One pass over the masks, about 3x faster than ``sum(axis=0)``."""
    t, n = masks.shape
    data = masks.view(np.uint8) if masks.dtype == bool else masks.astype(bool).view(np.uint8)
    out = np.zeros(n, dtype=np.int64)
    for start in range(0, n, _COUNT_BLOCK):
        cols = slice(start, start + _COUNT_BLOCK)
        for row in range(0, t, _BYTE_ROWS):
            out[cols] += np.add.reduce(data[row:row + _BYTE_ROWS, cols], axis=0, dtype=np.uint8)
    return out


def _declared_prior_pvalue(masks: np.ndarray, q: float) -> float:
    """Union-bounded p-value of the most extreme record count under ``k_j ~ Bin(T, q)``.

    Trials are independent, so each record's count is binomial whatever the dependence between
    records within a mask.
    """
    return _declared_pvalue_of(membership_counts(masks), masks.shape[0], q)


def _declared_pvalue_of(k: np.ndarray, t: int, q: float) -> float:
    """:func:`_declared_prior_pvalue` from the records' counts ``k`` over ``t`` trials."""
    n = k.shape[0]
    p_hi = float(stats.binom.sf(int(k.max()) - 1, t, q))  # P[K >= k_max]
    p_lo = float(stats.binom.cdf(int(k.min()), t, q))  # P[K <= k_min]
    return min(1.0, 2.0 * n * min(p_hi, p_lo))


def _bernoulli_kl(p: float, q: float) -> float:
    """``KL(Bern(p) ‖ Bern(q))`` in nats, for ``p`` in [0, 1] and ``q`` in (0, 1)."""
    out = 0.0
    if p > 0.0:
        out += p * np.log(p / q)
    if p < 1.0:
        out += (1.0 - p) * np.log((1.0 - p) / (1.0 - q))
    return max(float(out), 0.0)


def _pooled_prior_pvalue(masks: np.ndarray, q: float) -> float:
    """Two-sided Chernoff p-value of the pooled membership count under a declared ``q``.

    ``P[|S/N − q| >= |rate − q|] <= 2·exp(−N·KL(rate ‖ q))`` for the ``N = T·n`` memberships:
    trials are independent, and within a trial the bound holds for independent or negatively
    associated memberships (Hoeffding 1963, Thm 1; Dubhashi & Ranjan 1998).
    """
    return _pooled_pvalue_of(int(np.count_nonzero(masks)), int(masks.size), q)


def _pooled_pvalue_of(count: int, total: int, q: float) -> float:
    """:func:`_pooled_prior_pvalue` from the pooled count of ``total`` memberships."""
    rate = count / total
    return min(1.0, 2.0 * float(np.exp(-total * _bernoulli_kl(rate, q))))


def _check_declared(name: str, masks: np.ndarray, q: float) -> None:
    """Refuse a declared inclusion probability that the sampler's own masks contradict."""
    t, n = masks.shape
    k = membership_counts(masks)  # one pass over the masks for both tests
    count = int(k.sum())
    rate = count / masks.size
    pooled = _pooled_pvalue_of(count, int(masks.size), q)
    if pooled < DECLARED_PRIOR_TEST_LEVEL:
        raise ValueError(
            f"{name} declares inclusion probability {q:.6g}, but its {t} simulated masks include "
            f"records at an overall rate of {rate:.6g} ({count} of {t * n} "
            f"memberships; Chernoff bound p = {pooled:.2g} < {DECLARED_PRIOR_TEST_LEVEL:g}, "
            "valid when a mask's memberships are independent or negatively associated): no bound "
            "rests on the declared value. Fix the sampler's `inclusion_probability`, or declare "
            "none (the prior is then bounded from the masks)."
        )
    pvalue = _declared_pvalue_of(k, t, q)
    if pvalue < DECLARED_PRIOR_TEST_LEVEL:
        raise ValueError(
            f"{name} declares inclusion probability {q:.6g}, but in its {t} simulated masks some "
            f"record's inclusion count is incompatible with it (binomial test, p = {pvalue:.2g} "
            f"after a union bound over records; overall rate {rate:.6g}): no bound rests on the "
            "declared value. Fix the sampler's `inclusion_probability`, or declare none (the "
            "prior is then bounded from the masks)."
        )


def resolve_membership_prior(sampler: Sampler, masks: np.ndarray, *, n_records: int,
                             confidence: float = PRIOR_CONFIDENCE) -> MembershipPrior:
    """The membership prior of a simulation: declared by ``sampler``, or bounded from ``masks``.

    Parameters
    ----------
    sampler : Sampler
        The sampler that drew ``masks``.
    masks : ndarray of bool, shape (n_trials, n_records)
        The simulated membership masks.
    n_records : int
        Pool size.
    confidence : float, default 0.99
        ``1 − γ`` of an estimated prior.

    Returns
    -------
    MembershipPrior

    Raises
    ------
    ValueError
        If the declared inclusion probability is clearly contradicted by the masks (binomial
        test on the most extreme record count, union-bounded, or Chernoff bound on the pooled
        count of all memberships, either below 1e-9), or no prior is
        declared and some record was included in every simulated trial or in none (the blind
        guess cannot be bounded below 1).
    """
    m = np.asarray(masks, dtype=bool)
    q = sampler.membership_prior(n_records)
    name = type(sampler).__name__
    if q is not None:
        func = getattr(sampler, "func", None)
        if func is not None:  # a CallableSampler: name the user's function too
            name += f"({getattr(func, '__qualname__', type(func).__name__)})"

        q = float(q)
        if m.size:
            _check_declared(name, m, q)
        blind = max(q, 1.0 - q)
        return MembershipPrior(
            inclusion_probability=q, blind_guess=blind, source="sampler", confidence=None,
            explanation=(f"best blind guess max(q, 1 - q) = {format_bound(blind)} for inclusion "
                         f"probability q = {q:.6g} (declared by {name})"),
        )
    blind = blind_guess_upper_bound(m, confidence=confidence)
    if blind >= 1.0:
        raise ValueError(
            f"{name} declares no inclusion probability and some record was included in every "
            f"one of the {m.shape[0]} simulated trials (or in none): membership may not be "
            "secret and the blind guess cannot be bounded below 1. Declare the sampler's "
            "`inclusion_probability` (in (0, 1) exclusive)."
        )
    return MembershipPrior(
        inclusion_probability=float(m.mean()), blind_guess=blind, source="estimated",
        confidence=float(confidence),
        explanation=(
            f"best blind guess estimated as {format_bound(blind)}: {name} declares no inclusion "
            f"probability, so max(q_j, 1 - q_j) is bounded from the {m.shape[0]} simulated "
            f"masks (Clopper-Pearson, {100 * confidence:g}% jointly over all {m.shape[1]} "
            "records); declare `inclusion_probability` for an exact prior"
        ),
    )
