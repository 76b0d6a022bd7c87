"""The robust membership-inference attack (RMIA) of Zarifzadeh, Liu & Shokri (ICML 2024).

For a target model θ, a candidate ``x`` and population samples ``z`` (records that no model
was trained on, known to the attacker), RMIA compares likelihood ratios ([1]_, Sec. 3, Eq. 3-4)

    LR_θ(x, z) = [Pr(x | θ) / Pr(x)] / [Pr(z | θ) / Pr(z)],
    Score(x; θ) = Pr_z( LR_θ(x, z) >= γ ),

with ``Pr(x | θ)`` the model's probability of the record's label and ``Pr(x)`` its average
over reference models. **Online**, the reference models include models trained with ``x``
(half of them here): ``Pr(x) = mean over all reference models``. **Offline** only OUT models are
used and ``Pr(x) ≈ ½((1 + a)·Pr_OUT(x) + (1 − a))`` ([1]_, Sec. 3.2 and App. B.2.2: the IN mean
is approximated linearly from the OUT mean, ``a`` in [0, 1]); the same formula is applied to
each ``z`` (OUT for every model). With several queries per record (augmentations) the ratio
``Pr(x | θ)/Pr(x)`` is averaged over the queries.

Within one target model ``Score`` is a non-decreasing function of ``Pr(x | θ)/Pr(x)``; the
``z`` sample calibrates it across target models. With ``n_z`` population samples ``Score`` takes
only ``n_z + 1`` values, and ties at the top would blur the lowest FPRs, so ties of the
count are broken by the ratio itself: the returned score is
``(count + expit(log ratio_x)) / (n_z + 1)``, which orders records by the count first and,
within equal counts, by the ratio -- the order RMIA's test gives within one target model.

Probabilities are handled in log space (``log_expit`` of the logit-scaled confidence, means via
``logsumexp`` or ``log1p`` of the complementary mass), so confident predictions (``p`` within
1e-16 of 1) keep their differences.

References
----------
.. [1] S. Zarifzadeh, P. Liu, R. Shokri. Low-Cost High-Power Membership Inference Attacks.
   ICML 2024, PMLR 235, Sec. 3 (Eqs. 3-4) and App. B.2.2 (offline ``a``).
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats

from pacpriv._validation import check_real
from pacpriv.audit._lira import _inputs

__all__ = ["rmia_scores"]


def _log_mean_prob(phi: np.ndarray, weight: np.ndarray, c: float) -> np.ndarray:
    """``log((1 − c) + c·p̄)`` with ``p̄`` the ``weight``-average of ``p = expit(φ)`` over axis 0.

    ``c = 1`` gives ``log p̄``. Computed as ``log1p(−c·q̄)`` (``q̄ = 1 − p̄`` from ``log_expit(−φ)``)
    when ``c·q̄ <= ½`` and directly otherwise, so neither ``p̄ → 1`` nor ``p̄ → 0`` loses digits.
    """
    count = weight.sum(axis=0)[..., None]  # (n, 1)
    with np.errstate(divide="ignore"):
        logw = np.log(weight)[..., None]  # -inf where excluded
        log_p = special.logsumexp(special.log_expit(phi) + logw, axis=0) - np.log(count)
        log_q = special.logsumexp(special.log_expit(-phi) + logw, axis=0) - np.log(count)
    cq = c * np.exp(log_q)
    direct = np.log((1.0 - c) + c * np.exp(log_p))
    return np.where(cq <= 0.5, np.log1p(-np.minimum(cq, 0.5)), direct)


def _log_ratio(target: np.ndarray, reference: np.ndarray, weight: np.ndarray,
               c: float) -> np.ndarray:
    """``log mean_queries [Pr(x | θ) / Pr(x)]`` per record, shape ``(n,)``."""
    per_query = special.log_expit(target) - _log_mean_prob(reference, weight, c)
    return special.logsumexp(per_query, axis=1) - np.log(per_query.shape[1])


def rmia_scores(
    target_statistics,
    reference_statistics,
    reference_membership,
    target_population,
    reference_population,
    *,
    offline_a: float | None = None,
    gamma: float = 1.0,
) -> np.ndarray:
    """RMIA membership scores [1]_ of every record against one target model.

    Parameters
    ----------
    target_statistics : array-like of shape (n_records,) or (n_records, n_queries)
        Logit-scaled confidence ``φ = log(p/(1 − p))`` of each record under the target.
    reference_statistics : array-like of shape (n_reference, n_records[, n_queries])
        The same under each reference model.
    reference_membership : array-like of bool, shape (n_reference, n_records)
        True where the record was in that reference model's training set.
    target_population, reference_population : array-like
        φ of the population samples ``z`` under the target, shape (n_z[, n_queries]), and under
        each reference model, shape (n_reference, n_z[, n_queries]); no model was trained on
        them. ``n_z >= 1``.
    offline_a : float or None, default None
        None: online RMIA (all reference models). A value in [0, 1]: offline RMIA with that
        ``a`` (OUT models only).
    gamma : float, default 1.0
        Threshold γ > 0 of the pairwise likelihood ratio.

    Returns
    -------
    numpy.ndarray of shape (n_records,)
        Scores in [0, 1]; higher means more likely a member (see the module docstring for the
        tie-breaking).

    Raises
    ------
    TypeError, ValueError
        On shape mismatches, non-finite statistics, ``offline_a`` outside [0, 1], ``gamma``
        not positive, or a record with no reference model to average over (offline: no OUT
        model); messages give counts, never values.
    """
    t, r, inside = _inputs(target_statistics, reference_statistics, reference_membership)
    tz, rz, _ = _inputs(target_population, reference_population,
                        np.zeros(np.shape(reference_population)[:2], dtype=bool))
    if tz.shape[1] != t.shape[1] or rz.shape[0] != r.shape[0]:
        raise ValueError(
            "the population statistics must have the records' number of queries "
            f"({t.shape[1]}) and reference models ({r.shape[0]}); got {tz.shape[1]} and "
            f"{rz.shape[0]}."
        )
    gamma = check_real(gamma, "gamma", low=0.0, low_inclusive=False)
    if offline_a is None:
        c, weight = 1.0, np.ones(inside.shape)
    else:
        a = check_real(offline_a, "offline_a", low=0.0, high=1.0)
        c, weight = 0.5 * (1.0 + a), (~inside).astype(np.float64)
    short = weight.sum(axis=0) < 1
    if np.any(short):
        raise ValueError(
            f"every record needs at least 1 {'OUT ' if offline_a is not None else ''}reference "
            f"model; {int(short.sum())} record(s) have none."
        )
    log_ratio_x = _log_ratio(t, r, weight, c)
    log_ratio_z = np.sort(_log_ratio(tz, rz, np.ones(rz.shape[:2]), c))
    count = np.searchsorted(log_ratio_z, log_ratio_x - np.log(gamma), side="right")
    within = stats.rankdata(log_ratio_x) / (log_ratio_x.size + 1)  # in (0, 1), exact order
    return (count + within) / (log_ratio_z.size + 1)
