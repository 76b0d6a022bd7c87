"""The membership prior behind a posterior bound: declared by the sampler, or bounded from masks.

Thm 1 of [1]_ bounds an adversary's posterior success rate ``p`` through
``KL(Bern(p) || Bern(p0)) <= MI``, where ``p0`` is *that adversary's* blind-guess success
rate. For membership of one record included with probability ``q``, the best blind guess is
``max(q, 1 − q)``; the bound over all adversaries (and all records) uses the largest such rate.
Nothing here assumes ½:

* a sampler that **declares** its inclusion probability ``q`` (``PoissonSampler``,
  ``FixedSizeSampler``, ``ComplementaryPairsSampler``, or a ``CallableSampler`` given
  ``inclusion_probability=``) gets ``p0 = max(q, 1 − q)``; the declaration is checked against
  the simulated masks (each record's count is ``Bin(T, q)``; the most extreme one is tested,
  union-bounded over records) and refused when clearly wrong;
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
#: A declared inclusion probability is refused when a two-sided binomial test on the simulated
#: masks rejects it at this level (a false refusal is this unlikely).
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
    k = np.asarray(m, dtype=bool).sum(axis=0)
    alpha = (1.0 - conf) / (2.0 * n)
    # the extreme counts give the largest max(upper(q), upper(1 - q)); CP upper limit of a
    # count x out of t is Beta(1 - alpha; x + 1, t - x), and 1 at x = t
    extreme = int(max(k.max(), t - k.min()))
    return clopper_pearson(extreme, t, 1.0 - alpha, alternative="less")[1]


def _declared_prior_pvalue(masks: np.ndarray, q: float) -> float:
    """Union-bounded p-value of the most extreme record count under ``k_j ~ Bin(T, q)``.

    Trials are independent, so each record's count is binomial whatever the dependence between
    records within a mask.
    """
    t, n = masks.shape
    k = masks.sum(axis=0)
    p_hi = float(stats.binom.sf(int(k.max()) - 1, t, q))  # P[K >= k_max]
    p_lo = float(stats.binom.cdf(int(k.min()), t, q))  # P[K <= k_min]
    return min(1.0, 2.0 * n * min(p_hi, p_lo))


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
        test on the most extreme record count, union-bounded, below 1e-9), or no prior is
        declared and some record was included in every simulated trial or in none (the blind
        guess cannot be bounded below 1).
    """
    m = np.asarray(masks, dtype=bool)
    q = sampler.membership_prior(n_records)
    name = type(sampler).__name__
    if q is not None:
        q = float(q)
        if m.size:
            pvalue = _declared_prior_pvalue(m, q)
            if pvalue < DECLARED_PRIOR_TEST_LEVEL:
                raise ValueError(
                    f"{name} declares inclusion probability {q:.6g}, but in its {m.shape[0]} "
                    f"simulated masks some record's inclusion count is incompatible with it "
                    f"(binomial test, p = {pvalue:.2g} after a union bound over records; "
                    f"overall rate {m.mean():.6g}); fix the sampler's `inclusion_probability`."
                )
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
