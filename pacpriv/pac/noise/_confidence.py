"""How many simulated trials a stated confidence needs (conservative, matrix Bernstein).

Algorithm 1 of [1]_ claims ``MI <= v + β`` with probability ``>= 1 − γ`` over the simulation,
conditioned on the covariance estimate being accurate. Its exact sample-count theorem was not
recovered (docs/math.rst, Gaussian noise), so pacpriv offers a **conservative stand-in**: the
number of trials
after which the spectral-norm error ``||Σ̂ − Σ||₂ <= c`` holds with probability
``>= 1 − γ``, from the matrix Bernstein inequality of Tropp (2012) [2]_. It needs the outputs
to be bounded, ``||f(X)||₂ <= r`` almost surely. The counts are far larger than what is typical
in practice (a union bound over ``2d`` eigen-directions and worst-case variance); they are
sufficient, not necessary.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Algorithm 1.
.. [2] J. A. Tropp. User-friendly tail bounds for sums of random matrices. Foundations of
   Computational Mathematics 12(4), 2012, Thm 1.4 (matrix Bernstein, bounded case).
.. [3] W. Hoeffding. Probability inequalities for sums of bounded random variables. JASA 58,
   1963, §5 (U-statistics obey the tail bounds of an average of ⌊m/2⌋ independent terms).
"""

from __future__ import annotations

import math

from pacpriv._validation import check_int, check_real

__all__ = ["confidence_for_trials", "trials_for_confidence"]


def _iv(c, output_bound, dim, covariance_norm_bound):
    c = check_real(c, "c", low=0.0, low_inclusive=False)
    r = check_real(output_bound, "output_bound", low=0.0, low_inclusive=False)
    d = check_int(dim, "dim", low=1)
    if covariance_norm_bound is None:
        rho = r * r
    else:
        rho = check_real(covariance_norm_bound, "covariance_norm_bound", low=0.0, high=r * r)
    # per-pair term X = ½ w w^T − Σ, ||w|| <= 2r: ||X|| <= L, ||E X²|| <= sigma2
    return c, 2.0 * r * r, 2.0 * r * r * rho, d


def _exponent(n_pairs: int, c: float, bound_l: float, sigma2: float) -> float:
    return n_pairs * c * c / (2.0 * (sigma2 + bound_l * c / 3.0))


def confidence_for_trials(
    n_trials: int, *, c: float, output_bound: float, dim: int,
    covariance_norm_bound: float | None = None,
) -> float:
    """Confidence ``1 − γ`` that ``||Σ̂ − Σ||₂ <= c`` after ``n_trials`` simulated outputs.

    Parameters
    ----------
    n_trials : int
        Number ``m >= 2`` of trials used for the unbiased sample covariance ``Σ̂``.
    c : float
        Spectral-norm accuracy ``c > 0`` (variance units: output units squared).
    output_bound : float
        ``r > 0`` with ``||f(X)||₂ <= r`` almost surely (assumption, not checked).
    dim : int
        Output dimension ``d >= 1``.
    covariance_norm_bound : float, optional
        A known bound ``ρ >= ||Σ||₂`` in ``[0, r²]``; default ``r²`` (always valid).

    Returns
    -------
    float
        ``max(0, 1 − 2d · exp(−N c² / (2(σ² + L c/3))))`` with ``N = ⌊m/2⌋``, ``L = 2r²``,
        ``σ² = 2r²ρ``; conservative (the true confidence is at least this).

    Raises
    ------
    TypeError, ValueError
        If an argument has the wrong type or is out of range.

    Notes
    -----
    Write ``Σ̂`` as the U-statistic ``(1/(m(m−1))) Σ_{i≠j} ½ (y_i − y_j)(y_i − y_j)^T``. For one
    pairing into ``N = ⌊m/2⌋`` disjoint pairs the terms ``X_k = ½ w_k w_k^T − Σ`` are independent,
    mean zero, ``−r² I ⪯ X_k ⪯ 2r² I`` (so ``||X_k|| <= L = 2r²``) and
    ``E X_k² ⪯ E(½ w w^T)² ⪯ 2r² Σ`` (so ``||E X_k²|| <= σ² = 2r²ρ``). Matrix Bernstein
    (Tropp 2012, Thm 1.4) for ``±Σ_k X_k`` gives
    ``P(||(1/N) Σ_k X_k||₂ >= c) <= 2d · exp(−N c² / (2(σ² + L c/3)))``. ``Σ̂`` is the average of
    such pair estimators over all pairings; since ``A ↦ tr exp(A)`` is convex, its Laplace
    transform is no larger (Hoeffding 1963 §5), so the same bound holds for ``Σ̂``.

    References
    ----------
    .. [1] Tropp 2012, Thm 1.4; Hoeffding 1963, §5; Xiao & Devadas 2023, Algorithm 1.
    """
    m = check_int(n_trials, "n_trials", low=2)
    c, bound_l, sigma2, d = _iv(c, output_bound, dim, covariance_norm_bound)
    log_fail = math.log(2.0 * d) - _exponent(m // 2, c, bound_l, sigma2)
    return 0.0 if log_fail >= 0.0 else -math.expm1(log_fail)


def trials_for_confidence(
    *, confidence: float, c: float, output_bound: float, dim: int,
    covariance_norm_bound: float | None = None,
) -> int:
    """Smallest ``n_trials`` for which :func:`confidence_for_trials` reaches ``confidence``.

    Parameters
    ----------
    confidence : float
        Target ``1 − γ`` in ``(0, 1)``.
    c, output_bound, dim, covariance_norm_bound
        As in :func:`confidence_for_trials`.

    Returns
    -------
    int
        ``m = 2N`` with ``N = ceil(2(σ² + L c/3) · ln(2d/γ) / c²)`` (conservative: sufficient,
        not necessary).

    Raises
    ------
    TypeError, ValueError
        If an argument has the wrong type or is out of range.

    References
    ----------
    .. [1] Tropp 2012, Thm 1.4 (matrix Bernstein); see :func:`confidence_for_trials`.

    Examples
    --------
    >>> trials_for_confidence(confidence=0.95, c=0.1, output_bound=1.0, dim=10)
    4954
    """
    conf = check_real(confidence, "confidence", low=0.0, high=1.0, low_inclusive=False,
                      high_inclusive=False)
    c, bound_l, sigma2, d = _iv(c, output_bound, dim, covariance_norm_bound)
    gamma = 1.0 - conf
    n_pairs = math.ceil(2.0 * (sigma2 + bound_l * c / 3.0) * math.log(2.0 * d / gamma) / (c * c))
    m = 2 * max(n_pairs, 1)
    while confidence_for_trials(m, c=c, output_bound=output_bound, dim=d,
                                covariance_norm_bound=covariance_norm_bound) < conf:
        m += 2  # guard against rounding in the closed form (one-sided)
    return m
