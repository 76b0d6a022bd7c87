"""k-out-of-t random allocation: the chi-square bound, its inverse and the certified interval.

Each record is used at ``k`` distinct steps of each epoch of ``t`` steps, the ``k``-subset
``A`` uniform and independent of everything else. Its one-record dominating pair per epoch
(in units of the clipping norm) is

    P = N(0, σ² I_t),    Q = C(t, k)⁻¹ Σ_{|A| = k} N(1_A, σ² I_t)

(proof: docs/math.rst, "k out of t", Theorem 1; any neighbouring datasets, per-step clipped
gradients of norm ≤ C in arbitrary, adaptively chosen directions). With
``W_j = exp(y_j/σ² − 1/(2σ²))`` the likelihood ratio is ``dQ/dP = e_k(W)/C(t, k)`` (an
elementary symmetric polynomial) and

    1 + χ²(Q‖P) = E_{A,A'} e^{|A ∩ A'|/σ²} = Σ_h P(H = h) e^{h/σ²},   H ~ Hypergeometric(t, k, k),

which tensorises over epochs: ``accuracy ≤ ½ + ¼·sqrt((1 + χ²)^E − 1)`` (``k = 1``: the
closed form of :mod:`pacpriv.dpsgd.bounds`).

The exact accuracy ``½ + ½·TV(P^⊗E, Q^⊗E)`` is bracketed by

* above (deterministic): the smallest of the chi-square bound, the certified exact upper
  bound of one-of-``⌊t/k⌋`` allocation over ``k·E`` epochs (Theorem 2 there: the k-of-t pair
  is a garbling of that one, a uniformly random relabelling of the steps) and, for
  ``k ≤ CHAIN_MAX_K`` within :data:`CHAIN_WORK_BUDGET`, the upper k-of-t chain
  (:mod:`pacpriv.dpsgd._exact.koft_chain`: convex-order splits of the coordinates and of the
  ``k``-dimensional states of ``e_1..e_k``); for larger ``k``, within the same budget, the
  pruned upper k-of-t chain (its states of least Q-mass sent to ``T ∈ {0, +∞}``) and the
  product of the upper chains of a partial stratification into blocks "``k_j`` of ``t_j``",
  ``k_j ≤ CHAIN_MAX_K`` (:mod:`pacpriv.dpsgd._exact.koft_split`; the same relabelling
  argument as Theorem 2);
* below: the lower k-of-t chain (a garbling; deterministic; for ``k > CHAIN_MAX_K`` pruned:
  its states of least P-mass merged into their mean) where it runs and is at most
  ``max(tolerance, 1e-3)`` wide; else also (larger one kept; confidence ``1 − γ``) a
  Monte-Carlo estimate of ``TV = E_Q[(1 − e^{−L})_+]``, an expectation of a ``[0, 1]``
  variable, lowered by the empirical-Bernstein deviation of Maurer & Pontil (2009, Thm 4).

References
----------
.. [1] V. Feldman, M. Shenfeld, Privacy Amplification by Random Allocation, 2025 (k out of t;
   the reduction to k compositions of one-of-⌊t/k⌋ is the one their accounting uses).
.. [2] A. Maurer, M. Pontil, Empirical Bernstein Bounds and Sample-Variance Penalization,
   COLT 2009.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from pacpriv._random import RNGLike, as_generator
from pacpriv._validation import check_int, check_real
from pacpriv.dpsgd._exact_accuracy import ExactAccuracy
from pacpriv.dpsgd._hypergeom import (
    k_of_t_accuracy,
    k_of_t_log1p_chi_square,
    k_of_t_noise_multiplier,
)

__all__ = [
    "k_of_t_accuracy",
    "k_of_t_interval",
    "k_of_t_log1p_chi_square",
    "k_of_t_noise_multiplier",
    "monte_carlo_total_variation",
]

_EPS = float(np.finfo(np.float64).eps)
_U = 2.0**-53


def _log_elementary_symmetric(logw: np.ndarray, k: int) -> np.ndarray:
    """``ln e_k(w)`` per row of ``w = exp(logw)`` (shape (n, t)), by the prefix recurrence
    ``e_j(w_0..w_i) = e_j(w_0..w_{i−1}) + w_i e_{j−1}(w_0..w_{i−1})`` as k cumulative sums of
    non-negative terms, rescaled at every level (no overflow; relative error ≤ k·t·u)."""
    m = logw.max(axis=1, keepdims=True)
    w = np.exp(logw - m)
    n, t = w.shape
    prev = np.ones((n, t))
    log_scale = np.zeros(n)
    shifted = np.empty((n, t))
    for j in range(1, k + 1):
        shifted[:, 0] = 1.0 if j == 1 else 0.0
        shifted[:, 1:] = prev[:, :-1]
        prev = np.cumsum(w * shifted, axis=1)
        last = prev[:, -1].copy()
        prev /= last[:, None]
        log_scale += np.log(last)
    return log_scale + k * m[:, 0]


def _epoch_log_lr(rng: np.random.Generator, n: int, sigma: float, t: int, k: int,
                  member: bool) -> np.ndarray:
    """``ln T = ln(e_k(W)/C(t, k))`` of one epoch for ``n`` draws under Q (member) or P."""
    y = sigma * rng.standard_normal((n, t))
    if member:
        subset = np.argpartition(rng.random((n, t)), k - 1, axis=1)[:, :k]
        np.put_along_axis(y, subset, np.take_along_axis(y, subset, axis=1) + 1.0, axis=1)
    logw = (y - 0.5) / (sigma * sigma)
    log_c = special.gammaln(t + 1.0) - special.gammaln(k + 1.0) - special.gammaln(t - k + 1.0)
    return _log_elementary_symmetric(logw, k) - log_c


def monte_carlo_total_variation(
    noise_multiplier: float, *, steps_per_epoch: int, epochs: int, k: int,
    n_samples: int, confidence: float = 0.999, member: bool = True, rng: RNGLike = None,
) -> dict:
    """Monte-Carlo estimate of ``TV(P^⊗E, Q^⊗E)`` for k-of-t allocation, with a certified
    lower bound at ``confidence``.

    ``member=True`` samples under Q: ``TV = E_Q[(1 − e^{−L})_+]``, a ``[0, 1]`` variable, so
    the empirical-Bernstein bound of Maurer & Pontil (2009, Thm 4) applies:
    ``TV ≥ mean − sqrt(2 V ln(2/γ)/n) − 7 ln(2/γ)/(3(n − 1))`` with probability ≥ 1 − γ
    (V the sample variance), lowered further by the round-off of ``L``. ``member=False``
    samples under P (``TV = E_P[(e^L − 1)_+]``, unbounded): an independent estimate only.

    Returns
    -------
    dict
        ``mean``, ``standard_error``, ``lower`` (None under P), ``n_samples``,
        ``confidence``, ``estimator``.
    """
    sigma = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)
    t = check_int(steps_per_epoch, "steps_per_epoch", low=1)
    e = check_int(epochs, "epochs", low=1)
    k = check_int(k, "k", low=1, high=t)
    n = check_int(n_samples, "n_samples", low=2)
    conf = check_real(confidence, "confidence", low=0.5, high=1.0, high_inclusive=False)
    gen = as_generator(rng)
    chunk = max(1, min(n, 2_000_000 // t))
    total, total_sq, done = 0.0, 0.0, 0
    while done < n:
        b = min(chunk, n - done)
        log_lr = np.zeros(b)
        for _ in range(e):
            log_lr += _epoch_log_lr(gen, b, sigma, t, k, member)
        if member:
            g = -np.expm1(-np.maximum(log_lr, 0.0))
        else:
            g = np.expm1(np.maximum(np.minimum(log_lr, 700.0), 0.0))
        total += float(g.sum())
        total_sq += float(np.dot(g, g))
        done += b
    mean = total / n
    var = max(total_sq / n - mean * mean, 0.0) * n / (n - 1)
    out = {"mean": mean, "standard_error": math.sqrt(var / n), "n_samples": n,
           "confidence": conf, "lower": None,
           "estimator": "E_Q[(1 - exp(-L))_+]" if member else "E_P[(exp(L) - 1)_+]"}
    if member:
        log_g = math.log(2.0 / (1.0 - conf))
        roundoff = e * (k * t + 16.0) * _U * 2.0 + 1e-15  # |ΔL| of the recurrence and logs
        dev = math.sqrt(2.0 * var * log_g / n) + 7.0 * log_g / (3.0 * (n - 1))
        out["lower"] = max(0.0, mean - dev - roundoff)
    return out


#: Monte-Carlo work budget of one interval (draws × E × t × (k + 4) elementary steps, ~1–3 s)
MC_WORK_BUDGET = 1e8
#: Confidence of the Monte-Carlo lower end of the k-of-t interval
MC_CONFIDENCE = 0.999
#: Largest k for which the deterministic k-of-t chains run without pruning (their states
#: are k-dimensional; beyond it the pruned chains run, and the split's blocks hold ≤ it)
CHAIN_MAX_K = 2
#: Work budget of one k-of-t chain (state atoms × coordinate nodes × 2^k summed over the
#: steps, ~2–5 s on one core); beyond it the Monte-Carlo lower end is used
CHAIN_WORK_BUDGET = 1.5e8
#: Width (accuracy units) up to which the chains' deterministic lower end is kept without
#: Monte Carlo; a wider chain interval also runs the Monte-Carlo lower end (larger one kept)
CHAIN_WIDTH = 1e-3


def _chain_settings(sigma: float, epochs: int, tol: float):
    """Resolution of the k-of-t chains (:mod:`pacpriv.dpsgd._exact.koft_chain`): finer for
    more epochs (the per-epoch error composes), coarse for a loose tolerance; state cells
    scale with the spread ``1/σ`` of a coordinate's log-likelihood ratio when ``σ > 1``."""
    from pacpriv.dpsgd._exact.koft_chain import ChainSettings

    scale = min(1.0, 1.0 / sigma)
    if tol >= 5e-3:
        return ChainSettings(n_w=60, dln=0.1 * scale)
    grow = float(epochs) ** 0.2
    return ChainSettings(n_w=int(min(150, round(90 * grow))),
                         dln=max(0.05, 0.07 / grow**0.5) * scale)


#: Resolution of the pruned k-of-t chains for k > CHAIN_MAX_K (3- and 4-dimensional states):
#: (coordinate nodes, cell width in ln units, pruning budget of one epoch) of the upper and
#: the lower chain, and the coarse ones for a tolerance ≥ 5e-3
HIGH_K_UPPER, HIGH_K_LOWER, HIGH_K_COARSE = (70, 0.055, 1e-5), (60, 0.04, 1e-4), (40, 0.08, 1e-5)
#: Cap on one step's candidate atoms × split corners of those chains (memory: about 16 bytes
#: per candidate and axis at a step's peak; the work budget bounds it further: measured peak
#: of a whole interval 0.9 GB at the docs' k = 3 points)
HIGH_K_MAX_ATOMS = 120_000_000
#: Work budget of the pruned lower chain when the upper one did not fit its budget: the interval
#: then keeps a stratified upper end and cannot reach ``CHAIN_WIDTH``, so the lower chain only
#: narrows it, and a smaller budget keeps the call near its earlier cost (measured: the lower
#: chain alone at (σ, t, k, E) = (0.7, 12, 3, 2) is 1.0e8 units, ~7.6 s of CPU, for 5e-4; at
#: (2, 100, 4, 10) and (2, 20, 4, 10) 7.04e7 and 4.9e7)
LOWER_ALONE_WORK_BUDGET = 7.2e7


def _high_k_chains(sigma: float, steps: int, k: int, epochs: int, tol: float) -> dict | None:
    """The pruned upper and lower k-of-t chains for ``k > CHAIN_MAX_K``, each within
    :data:`CHAIN_WORK_BUDGET` (:mod:`pacpriv.dpsgd._exact.koft_chain`: states of least mass
    are sent to ``T ∈ {0, +∞}`` on the upper chain, with their Q-mass, and merged into their
    mean on the lower one). Returns the keys of the chains that ran, or None."""
    from pacpriv.dpsgd._exact.koft_chain import ChainSettings, koft_chain_tv

    out: dict = {"work": 0.0}
    for upper, (n_w, dln, prune) in ((True, HIGH_K_UPPER), (False, HIGH_K_LOWER)):
        if tol >= 5e-3:
            n_w, dln, prune = HIGH_K_COARSE
        # the upper chain's pruned Q-mass adds up to E·prune to the TV: at most 1e-4 in all
        prune = min(prune, 1e-4 / epochs) if upper else prune
        budget = (CHAIN_WORK_BUDGET if upper or "tv_upper" in out
                  else min(LOWER_ALONE_WORK_BUDGET, CHAIN_WORK_BUDGET))
        try:
            r = koft_chain_tv(sigma, steps, k, epochs,
                              ChainSettings(n_w=n_w, dln=dln, prune=prune,
                                            max_atoms=HIGH_K_MAX_ATOMS),
                              work_budget=budget, ends=(upper,))
        except ValueError:  # composition window above its memory cap
            r = None
        if r is not None:
            out["work"] += r.pop("work")
            end = "upper" if upper else "lower"
            out.update({f"{key}_{end}" if key in ("n_w", "dln") else key: v
                        for key, v in r.items()})
            out[f"prune_{end}"] = prune
    return out if ("tv_upper" in out or "tv_lower" in out) else None


def _split_upper(sigma: float, steps: int, k: int, epochs: int, tol: float) -> dict | None:
    """Upper end by partial stratification (:mod:`pacpriv.dpsgd._exact.koft_split`): the
    k-of-t pair is a garbling of the product of the blocks' pairs ``k_j`` of ``t_j``
    (``k_j ≤ CHAIN_MAX_K``), each bounded by its upper chain; None when the chains exceed
    :data:`CHAIN_WORK_BUDGET` (or cell labels would overflow)."""
    from pacpriv.dpsgd._exact.koft_split import split_blocks, split_upper_tv

    blocks = split_blocks(steps, k, CHAIN_MAX_K)
    if all(kj == 1 for _, kj in blocks):  # the full stratification, already evaluated
        return None
    try:
        r = split_upper_tv(sigma, blocks, epochs, _chain_settings(sigma, epochs, tol),
                           work_budget=CHAIN_WORK_BUDGET)
    except ValueError:  # composition window above its memory cap: keep the other bounds
        return None
    if r is None:
        return None
    return {**r, "blocks": [list(b) for b in blocks],
            "accuracy_upper": 0.5 + 0.5 * r["tv_upper"]}


def k_of_t_interval(sigma: float, steps: int, epochs: int, k: int, tol: float,
                    exact_k1=None) -> dict:
    """Certified interval for the k-of-t exact accuracy (see the module docstring).

    First the deterministic k-of-t chains (:func:`pacpriv.dpsgd._exact.koft_chain.
    koft_chain_tv`; pruned for ``k > CHAIN_MAX_K``, each chain on its own), when their work
    fits :data:`CHAIN_WORK_BUDGET`: then the lower end is theirs (deterministic) and the upper
    end the smallest of theirs, the chi-square bound and the stratified one. For
    ``k > CHAIN_MAX_K`` the upper end is also at most the partially stratified one (when it
    fits the same budget; ``details["split"]``). When the chains' interval is wider than
    ``max(tol, CHAIN_WIDTH)`` or the lower chain does not run, the Monte-Carlo lower end
    also runs (the larger lower end is kept): its draws
    are seeded from ``(σ, t, E, k)`` (repeated calls agree) and their number is
    ``8 ln(2/γ)/(4 tol²)`` capped by :data:`MC_WORK_BUDGET` (at least 2000). ``exact_k1`` is
    :func:`pacpriv.dpsgd.exact_membership_inference_accuracy` (passed in by it: this module
    does not import it).
    """
    m_red, e_red = steps // k, k * epochs
    red = exact_k1(sigma, steps_per_epoch=m_red, epochs=e_red, tolerance=max(tol, 1e-6))
    chi2 = k_of_t_accuracy(sigma, steps_per_epoch=steps, epochs=epochs, k=k)[0]
    upper = min(float(red.upper), chi2)
    details: dict[str, Any] = {
        "k": k, "reduced_steps_per_epoch": m_red, "reduced_epochs": e_red,
        "upper_stratified": float(red.upper), "lower_stratified": float(red.lower),
        "chi_square_accuracy": chi2,
        "upper_source": "chi-square" if chi2 < red.upper else "stratified exact",
    }
    split = _split_upper(sigma, steps, k, epochs, tol) if k > CHAIN_MAX_K else None
    if split is not None:
        details["split"] = split
        if split["accuracy_upper"] < upper:
            upper, details["upper_source"] = split["accuracy_upper"], "split k-of-t chains"
    if k <= CHAIN_MAX_K:
        from pacpriv.dpsgd._exact.koft_chain import koft_chain_tv

        chain = koft_chain_tv(sigma, steps, k, epochs, _chain_settings(sigma, epochs, tol),
                              work_budget=CHAIN_WORK_BUDGET)
    else:
        chain = _high_k_chains(sigma, steps, k, epochs, tol)
    if chain is not None and "tv_upper" in chain:
        chain_upper = 0.5 + 0.5 * chain["tv_upper"]
        if chain_upper < upper:
            upper, details["upper_source"] = chain_upper, "k-of-t chain"
        details["chain"] = {**chain, "accuracy_upper": chain_upper}
    if chain is not None and "tv_lower" in chain:
        lower = min(0.5 + 0.5 * chain["tv_lower"], upper)
        details["chain"] = {**details.get("chain", chain),
                            "accuracy_lower": 0.5 + 0.5 * chain["tv_lower"]}
        details["lower_source"] = "k-of-t chain"
        if upper - lower <= max(tol, CHAIN_WIDTH):
            return {"lower": lower, "upper": upper, "estimate": 0.5 * (lower + upper),
                    "details": details, "lower_confidence": 1.0}
    else:
        chain = None
    need = 2.0 * math.log(2.0 / (1.0 - MC_CONFIDENCE)) / (tol * tol)
    cap = MC_WORK_BUDGET / (epochs * steps * (k + 4.0))
    n = int(max(2000.0, min(need, cap)))
    seed = np.random.SeedSequence([steps, epochs, k, int(np.float64(sigma).view(np.int64))])
    mc = monte_carlo_total_variation(sigma, steps_per_epoch=steps, epochs=epochs, k=k,
                                     n_samples=n, confidence=MC_CONFIDENCE, rng=seed)
    mc_lower = min(0.5 + 0.5 * float(mc["lower"]), upper)
    details["monte_carlo"] = {**mc, "accuracy_mean": 0.5 + 0.5 * mc["mean"]}
    if chain is not None and lower >= mc_lower:  # the deterministic end is kept
        estimate = min(max(0.5 + 0.5 * mc["mean"], lower), upper)
        return {"lower": lower, "upper": upper, "estimate": estimate, "details": details,
                "lower_confidence": 1.0}
    lower = mc_lower
    estimate = min(max(0.5 + 0.5 * mc["mean"], lower), upper)
    details["lower_source"] = "Monte Carlo"
    return {"lower": lower, "upper": upper, "estimate": estimate, "details": details,
            "lower_confidence": MC_CONFIDENCE}


def exact_result(sigma, steps, epochs, k: int, tol: float, exact_k1) -> ExactAccuracy:
    """The :class:`~pacpriv.dpsgd.ExactAccuracy` of :func:`k_of_t_interval` (scalars only)."""
    import warnings

    from pacpriv.exceptions import PacprivWarning

    if sigma.ndim or steps.ndim or epochs.ndim:
        raise TypeError("for k > 1 pass scalar noise_multiplier, steps_per_epoch and epochs.")
    t = check_int(int(steps), "steps_per_epoch", low=k)
    r = k_of_t_interval(float(sigma), t, int(epochs), k, tol, exact_k1)
    width = r["upper"] - r["lower"]
    chain = r["details"]["lower_source"] == "k-of-t chain"
    if width > tol:
        cause = "grids of the k-of-t chains" if chain else "Monte-Carlo lower end"
        warnings.warn(f"exact accuracy interval width {width:.3g} exceeds tolerance {tol:g} "
                      f"(k = {k}: {cause}); the interval is still certified",
                      PacprivWarning, stacklevel=3)
    ran = ", upper k-of-t chain" if "accuracy_upper" in r["details"].get("chain", {}) else ""
    if "split" in r["details"]:
        blocks = " x ".join(f"{kj}-of-{tj}" for tj, kj in r["details"]["split"]["blocks"])
        ran += f", upper chains of the partial stratification {blocks}"
    lower = ("lower k-of-t chain (a garbling) [deterministic]" if chain else
             f"Monte Carlo under Q, empirical Bernstein [certified with confidence "
             f"{MC_CONFIDENCE}]")
    method = ("k of t: upper = min(chi-square, certified exact upper of one-of-floor(t/k) "
              f"over k*E epochs{ran}) [deterministic]; lower = {lower}")
    return ExactAccuracy(
        lower=r["lower"], upper=r["upper"], estimate=r["estimate"], tolerance=tol,
        converged=width <= tol, noise_multiplier=float(sigma), steps_per_epoch=t,
        epochs=int(epochs), direction="add", details=r["details"], k=k,
        lower_confidence=r["lower_confidence"], method=method)
