"""Answer a batch of query rows in order, and the free post-processing of the answers.

Row ``t`` of a batch is answered by :func:`pacpriv.prediction.answer_query` under the posterior
left by row ``t − 1`` (Zhu, Sridhar & Devadas, Private Prediction via PAC Privacy,
arXiv:2601.14033, 2026, adaptive composition), with the noise of its global row index
(:func:`~pacpriv.prediction._seeds.noise_generator`), so a stream answered in any split of
batches gets the same noise.

What is released is a function of the noisy answers ``y_t = f_J(q_t) + B_t`` and of public
facts only, so it is covered by the same bound ``I(J; y_1..y_T) <= Σ_t b_t`` (data
processing). The posterior is always updated with the unprojected ``y_t``.
"""

from __future__ import annotations

import numpy as np

from pacpriv.exceptions import BudgetExceededError
from pacpriv.pac._sampling import NoiseSource
from pacpriv.pac.noise import Anisotropic
from pacpriv.prediction._noise import answer_query, answer_rows_on_grid
from pacpriv.prediction._seeds import noise_generator

__all__ = ["answer_rows", "check_budget", "check_query_rows", "project_to_simplex"]


def check_query_rows(X_queries, feature_shape: tuple[int, ...]) -> np.ndarray:
    """A batch of query rows as float64: finite, shape ``(n >= 1, *feature_shape)``.

    Raises
    ------
    TypeError, ValueError
        Naming ``X_queries``, the expected shape and what was received (never a value).
    """
    try:
        X = np.asarray(X_queries, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError("`X_queries` must be a numeric array; got "
                        f"{type(X_queries).__name__} that is not.") from err
    if X.ndim != 1 + len(feature_shape) or tuple(X.shape[1:]) != feature_shape or \
            X.shape[0] < 1:
        raise ValueError(f"`X_queries` must have shape {('n', *feature_shape)} with n >= 1; "
                         f"got {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise ValueError("`X_queries` must be finite; found NaN or inf.")
    return X


def check_budget(n: int, *, n_answered: int, max_queries: int, per_query_budget: float,
                 total_budget: float) -> None:
    """Refuse ``n`` more rows when they would take the spend over ``total_budget``.

    Raises
    ------
    BudgetExceededError
        Naming the rows, the spend before and after, the cap and the rows left.
    """
    if n_answered + n > max_queries:
        before, after = n_answered * per_query_budget, (n_answered + n) * per_query_budget
        raise BudgetExceededError(
            f"{n} query row(s) at per_query_budget={per_query_budget!r} nats would take the "
            f"spend from {before!r} to {after!r} > total_budget={total_budget!r} nats; "
            f"{max_queries - n_answered} row(s) remain. Nothing was spent.")


def answer_rows(outputs: np.ndarray, log_posterior: np.ndarray, *, secret_index: int,
                noise_entropy: int, first_index: int, mi_budget: float, rule: str,
                progress: bool = False, seeded: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Noisy answers of ``n`` rows and the posterior after them.

    Parameters
    ----------
    outputs : ndarray of shape (m, n, d)
        Every world's output on every row.
    log_posterior : ndarray of shape (m,)
        Posterior before the first row.
    secret_index : int
        ``J``.
    noise_entropy : int
        The predictor's noise entropy.
    first_index : int
        Global index of the first row (rows answered before this batch).
    mi_budget : float
        ``b`` nats per row.
    rule : str
        Noise rule (:data:`~pacpriv.prediction.NOISE_RULES`).
    progress : bool, default False
        A tqdm bar over the rows.
    seeded : bool, default True
        True: the noise of row ``t`` is drawn in floating point from the generator of its
        index (a caller-seeded predictor: "seeded, not for release"); False: the hardened
        release (OS CSPRNG, exact discrete Gaussian on a declared grid;
        :func:`~pacpriv.prediction.answer_query`).

    Returns
    -------
    answers : ndarray of shape (n, d)
        ``y_t = f_J(q_t) + B_t`` (unprojected).
    log_posterior : ndarray of shape (m,)
    """
    n = outputs.shape[1]
    answers = np.empty((n, outputs.shape[2]))
    lp = log_posterior
    rows = range(n)
    if progress:
        from tqdm.auto import tqdm

        rows = tqdm(rows, unit="query", desc="answer")
    source = None if seeded else NoiseSource(None)
    if source is not None and rule == Anisotropic.name and not progress:  # square-root rule
        return answer_rows_on_grid(outputs, log_posterior, secret_index,
                                   mi_budget=mi_budget, source=source)
    for i in rows:
        answers[i], lp, _ = answer_query(
            outputs[:, i, :], lp, secret_index, mi_budget=mi_budget, rule=rule,
            rng=noise_generator(noise_entropy, first_index + i) if seeded else None,
            source=source)
    return answers, lp


def project_to_simplex(Y) -> np.ndarray:
    """Euclidean projection of each row onto the probability simplex.

    ``argmin_p ‖p − y‖₂`` over ``{p : p_k >= 0, Σ_k p_k = 1}`` is ``p_k = max(y_k − τ, 0)``
    with ``τ`` the unique threshold making the row sum to 1, found from the sorted row (Held,
    Wolfe & Crowder, Math. Programming 1974; Wang & Carreira-Perpiñán, arXiv:1309.1541, 2013,
    Algorithm 1). A row already on the simplex is returned unchanged (up to round-off), and the
    projection keeps the order of the coordinates, so the largest stays the largest.

    Parameters
    ----------
    Y : array_like of shape (n, d)
        Rows to project (finite).

    Returns
    -------
    ndarray of shape (n, d), float64
        Non-negative rows summing to 1.
    """
    Y = np.asarray(Y, dtype=np.float64)
    d = Y.shape[1]
    u = -np.sort(-Y, axis=1)  # descending
    css = np.cumsum(u, axis=1) - 1.0
    k = np.arange(1, d + 1)
    positive = u - css / k > 0  # true for a prefix of each row (at least the first entry)
    rho = positive.sum(axis=1)
    tau = css[np.arange(Y.shape[0]), rho - 1] / rho
    P = np.maximum(Y - tau[:, None], 0.0)
    return P / P.sum(axis=1, keepdims=True)  # exact sums up to one rounding
