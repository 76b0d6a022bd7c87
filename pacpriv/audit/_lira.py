"""The likelihood-ratio attack (LiRA) of Carlini et al., online and offline, multi-query.

For a target model θ and record ``x`` with label ``y`` the attack observes the logit-scaled
confidence ``φ = log(p / (1 − p))``, ``p = f_θ(x)_y`` ([1]_, Sec. IV-C), on ``A`` queries of the
record (the record itself and, for model types that have them, its augmentations -- e.g.
shifted images; tabular data has none, ``A = 1``). On reference ("shadow") models trained by
the attacker with the same algorithm, each query's φ is modelled as Gaussian, separately for
the models that were trained with ``x`` (IN) and without it (OUT):

* **online** ([1]_, Alg. 1, Eq. 3): ``Λ = N(φ; μ_in, σ_in²) / N(φ; μ_out, σ_out²)``; the score
  is ``log Λ`` averaged over the queries;
* **offline** ([1]_, Eq. 4): only OUT models; the one-sided test of φ against
  ``N(μ_out, σ_out²)``, whose score ``(φ − μ_out)/σ_out`` is a monotone transform of it for one
  query; averaged over queries.

With few reference models (fewer than about 64 in [1]_, Sec. IV-C) the variances are *fixed*:
pooled over all records, one per query and per side; otherwise per record.

References
----------
.. [1] N. Carlini, S. Chien, M. Nasr, S. Song, A. Terzis, F. Tramèr. Membership Inference
   Attacks From First Principles. IEEE S&P 2022, Sec. IV (Alg. 1, Eqs. 3-4).
"""

from __future__ import annotations

import numpy as np

from pacpriv.audit._checks import real_array

__all__ = ["lira_scores"]

_TINY_VAR = float(np.finfo(np.float64).eps)


def _inputs(target, reference, membership) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shapes ``(n, A)``, ``(R, n, A)``, ``(R, n)`` (1-D / 2-D inputs get ``A = 1``)."""
    t = real_array(target, "target_statistics")
    r = real_array(reference, "reference_statistics")
    inside = np.asarray(membership)
    if inside.dtype != bool:
        raise TypeError(f"`reference_membership` must be boolean; got dtype {inside.dtype}.")
    if t.ndim == 1:
        t = t[:, None]
    if r.ndim == 2:
        r = r[:, :, None]
    if t.ndim != 2 or r.ndim != 3 or r.shape[1:] != t.shape:
        raise ValueError(
            "`reference_statistics` must have shape (n_reference, n_records[, n_queries]) "
            f"matching `target_statistics` (n_records[, n_queries]); got {r.shape} and "
            f"{t.shape}."
        )
    if inside.shape != r.shape[:2]:
        raise ValueError(
            f"`reference_membership` must have shape {r.shape[:2]}; got {inside.shape}."
        )
    return t, r, inside


def _side(r: np.ndarray, mask: np.ndarray, fixed_variance: bool, label: str):
    """Mean ``(n, A)`` and variance ``(n, A)`` of the reference statistics where ``mask``."""
    count = mask.sum(axis=0)  # (n,)
    need = 1 if fixed_variance else 2
    short = count < need
    if np.any(short):
        raise ValueError(
            f"every record needs at least {need} {label} reference model(s); "
            f"{int(short.sum())} record(s) have fewer (minimum {int(count.min())})."
        )
    m = mask[:, :, None]
    mu = np.where(m, r, 0.0).sum(axis=0) / count[:, None]
    resid2 = np.where(m, (r - mu) ** 2, 0.0).sum(axis=0)  # (n, A)
    if fixed_variance:
        dof = max(int(count.sum()) - count.size, 1)
        var = np.broadcast_to(resid2.sum(axis=0) / dof, mu.shape)
    else:
        var = resid2 / (count[:, None] - 1)
    return mu, np.maximum(var, _TINY_VAR)


def _log_normal_pdf(x: np.ndarray, mu: np.ndarray, var: np.ndarray) -> np.ndarray:
    return -0.5 * (np.log(2.0 * np.pi * var) + (x - mu) ** 2 / var)


def lira_scores(
    target_statistics,
    reference_statistics,
    reference_membership,
    *,
    online: bool = True,
    fixed_variance: bool = True,
) -> np.ndarray:
    """LiRA membership scores [1]_ of every record against one target model.

    Parameters
    ----------
    target_statistics : array-like of shape (n_records,) or (n_records, n_queries)
        Logit-scaled confidence φ of each record (and each of its queries) under the target.
    reference_statistics : array-like of shape (n_reference, n_records[, n_queries])
        The same statistics under each reference model.
    reference_membership : array-like of bool, shape (n_reference, n_records)
        True where the record was in that reference model's training set.
    online : bool, default True
        Online attack (IN and OUT Gaussians, Eq. 3) or offline (OUT only, Eq. 4).
    fixed_variance : bool, default True
        Pool the variances over records (one per query and side), as [1]_ recommends for
        few reference models; otherwise per record (needs 2 models on each side used).

    Returns
    -------
    numpy.ndarray of shape (n_records,)
        Higher means more likely a member: the mean over queries of ``log Λ`` (online) or of
        ``(φ − μ_out)/σ_out`` (offline).

    Raises
    ------
    TypeError
        If the membership is not boolean or the statistics are not numeric.
    ValueError
        On shape mismatches, non-finite statistics, or when a record has too few IN (online)
        or OUT reference models; messages give counts, never values.
    """
    t, r, inside = _inputs(target_statistics, reference_statistics, reference_membership)
    mu_out, var_out = _side(r, ~inside, fixed_variance, "OUT")
    if not online:
        return np.mean((t - mu_out) / np.sqrt(var_out), axis=1)
    mu_in, var_in = _side(r, inside, fixed_variance, "IN")
    log_ratio = _log_normal_pdf(t, mu_in, var_in) - _log_normal_pdf(t, mu_out, var_out)
    return np.mean(log_ratio, axis=1)
