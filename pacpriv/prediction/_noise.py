"""Posterior-tracked Gaussian noise for one query (Zhu, Sridhar & Devadas 2026 [1]_).

One query ``q_t`` evaluated on all ``m`` worlds gives outputs ``o_j = f_j(q_t) ∈ R^d``. Under the
current world posterior ``p`` (public: anyone who knows the worlds computes it from the
transcript) the output ``o_J`` has mean ``μ = Σ_j p_j o_j`` and covariance
``C = Σ_j p_j (o_j − μ)(o_j − μ)ᵀ``. Gaussian noise ``Σ_B`` with ``½ ln det(I + C Σ_B⁻¹) <= b_t``
bounds ``I(J; Y_t | Y_<t) <= b_t`` (Gaussian maximum entropy, [PAC] Thm 3), so by the chain rule
``I(J; Y_1..Y_T) <= Σ_t b_t`` however the queries are chosen. ``C`` is computed exactly (a
finite mixture), not estimated: the bound needs no confidence level. The posterior is updated
with ``log p_j += log N(y; o_j, Σ_B)`` and kept in log space.

Derivation ([1]_). Chain rule: ``I(J; Y_1..Y_T) = Σ_t I(J; Y_t | Y_<t)``. Fix a
transcript ``y_<t``. The query ``q_t`` is a function of ``y_<t`` and of the adversary's own
randomness (independent of ``J``), and given ``y_<t`` the index ``J`` is distributed as
``p_t`` — exactly the posterior tracked here, since the worlds, the sampler and every noise
covariance are public. So ``Y_t = o_J + B_t`` with ``Cov(o_J) = C_t`` and ``B_t`` independent:
``I(J; Y_t | y_<t) = h(Y_t | y_<t) − h(B_t) <= ½ ln det(2πe(C_t + Σ_B)) − ½ ln det(2πe Σ_B)
= ½ ln det(I + C_t Σ_B⁻¹) <= b_t`` (a Gaussian maximises entropy for a given covariance).
Averaging over ``y_<t`` and summing over ``t`` gives ``Σ_t b_t``. Any function of ``J`` — e.g.
the membership bit ``[i ∈ S_J]``, blind-guess rate ``max(q_i, 1 − q_i)`` with ``q_i`` the
fraction of worlds holding record ``i`` — then has posterior success at most
``posterior_success_rate(Σ_t b_t, prior=max(q_i, 1 − q_i))`` ([2]_, Thm 1, with data
processing). Calibrating to the uniform prior instead of ``p_t`` breaks the second step: after
the posterior concentrates, ``C_t`` can exceed the uniform-prior covariance several-fold (the
test suite shows an adaptive adversary exceeding ``Σ_t b_t`` that way).

References
----------
.. [1] Y. Zhu, M. Sridhar, S. Devadas. Private Prediction via PAC Privacy. arXiv:2601.14033,
   2026 (adaptive composition with a persistent secret index).
.. [2] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 3.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pacpriv.pac._sampling import NoiseSource, grid_overhead, grid_release
from pacpriv.pac.noise._calibration import NoisePlan, calibrate_noise
from pacpriv.pac.noise._registry import RULE_CLASSES
from pacpriv.pac.noise._rule import NoiseRule
from pacpriv.pac.noise._rules import _floor_variance, square_root_rule
from pacpriv.pac.spectrum._covariance import OutputSpectrum
from pacpriv.pac.spectrum._resolution import resolution
from pacpriv.registry import Registry

__all__ = [
    "NOISE_RULES",
    "QueryNoise",
    "answer_query",
    "answer_rows_on_grid",
    "calibrate_query",
    "normalise_log_posterior",
    "posterior_weights",
    "update_log_posterior",
]

#: Rules accepted for per-query calibration (rule classes of :data:`pacpriv.pac.noise.RULE_CLASSES`
#: without parameters: the per-query covariance is exact, so no estimation rule applies).
NOISE_RULES: Registry[type[NoiseRule]] = Registry("prediction noise rule", argument="rule",
                                                      callable_entries=True)
for _name in ("anisotropic", "exact-mi", "isotropic"):  # square root, water-filling, isotropic
    NOISE_RULES.register(_name, RULE_CLASSES.get(_name), doc=RULE_CLASSES.doc(_name))

#: Relative floor of a world's posterior weight when forming ``C`` (see :func:`posterior_weights`).
WEIGHT_FLOOR = 1e-300


def normalise_log_posterior(log_p: np.ndarray) -> np.ndarray:
    """``log p − logsumexp(log p)`` (float64, shape ``(m,)``).

    ``logsumexp`` is ``max + log Σ exp(log p − max)`` (the sum is at least 1: no underflow),
    written in numpy: scipy's general version costs more than the rest of a query.
    """
    log_p = np.asarray(log_p, dtype=np.float64)
    top = np.max(log_p)
    return log_p - (top + np.log(np.sum(np.exp(log_p - top))))


def posterior_weights(log_p: np.ndarray) -> np.ndarray:
    """World weights ``p`` from log weights, floored at ``1e-300`` relative, summing to 1.

    In exact arithmetic every world keeps a positive weight (Gaussian likelihoods never vanish);
    ``exp`` of a log weight below about −745 underflows to 0 and that world would drop out of
    ``C``, so directions in which only it differs would get no noise. The floor keeps it in:
    the covariance of the floored mixture is ``>= (1 − ε) C`` with ``ε <= m·1e-300``, so the
    noise is calibrated for at least ``(1 − ε) C`` (the budget is met up to a factor
    ``1/(1 − ε)``, far below float64 resolution).
    """
    log_p = normalise_log_posterior(log_p)
    w = np.maximum(np.exp(log_p - np.max(log_p)), WEIGHT_FLOOR)
    return w / np.sum(w)


@dataclass(frozen=True, eq=False)
class QueryNoise:
    """Noise for one query: the plan (None when all worlds agree) and the posterior moments.

    Attributes
    ----------
    plan : NoisePlan or None
        Gaussian noise with ``½ ln det(I + C Σ_B⁻¹) <= mi_budget``; None when ``C = 0`` (every
        world gives the same output: the answer is released without noise and reveals nothing
        about ``J``).
    mean : ndarray of shape (d,)
        Posterior mean ``μ``.
    total_variance : float
        ``trace(C)``.
    mi_budget : float
        The per-query budget ``b_t`` (nats).
    """

    plan: NoisePlan | None = field(repr=False)
    mean: np.ndarray = field(repr=False)
    total_variance: float
    mi_budget: float

    @property
    def mi_bound(self) -> float:
        """Certified ``½ ln det(I + C Σ_B⁻¹)`` (nats), 0 without noise."""
        return 0.0 if self.plan is None else self.plan.mi_bound


def _eigen(outputs: np.ndarray, weights: np.ndarray, mean: np.ndarray):
    """``(centred, λ, V)``: the floored eigen-decomposition of the posterior covariance."""
    centred = np.sqrt(weights)[:, None] * (outputs - mean)
    _, sing, vt = np.linalg.svd(centred, full_matrices=False)
    lam = sing**2
    # the PAC module's floor (pac.spectrum._resolution): resolution may raise an eigenvalue,
    # never lower one, so a direction rounded to a tiny variance still gets noise at the
    # resolution eps * λ_max * max(m, d) (never 1e-17...1e-73 of the largest)
    lam = np.maximum(lam, 0.0) + resolution(float(np.max(lam)), max(outputs.shape))
    keep = lam > 0
    return centred, lam[keep], np.ascontiguousarray(vt[keep].T)


def _spectrum(outputs: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, OutputSpectrum | None]:
    """Exact spectrum of ``C = Σ_j p_j (o_j − μ)(o_j − μ)ᵀ`` via the SVD of ``diag(√p)(O − μ)``."""
    mean = weights @ outputs
    if np.all(outputs == outputs[0]):  # every world agrees: C = 0 exactly (not round-off)
        return outputs[0].copy(), None
    centred, lam, vecs = _eigen(outputs, weights, mean)
    variances = np.einsum("md,md->d", centred, centred)
    total = float(np.sum(variances))
    d = outputs.shape[1]
    for a in (mean, lam, vecs, variances):
        a.setflags(write=False)
    return mean, OutputSpectrum(
        mean=mean, eigenvalues=lam, eigenvectors=vecs, variances=variances,
        total_variance=total, tail_variance=0.0, n_trials=None, dim=d,
        rank=int(lam.size), method="covariance",
    )


def calibrate_query(outputs, log_posterior, *, mi_budget: float,
                    rule: str = "anisotropic") -> QueryNoise:
    """Gaussian noise for one query under the current world posterior.

    Parameters
    ----------
    outputs : array_like of shape (m, d)
        ``o_j = f_j(q_t)``, one row per world (float64, finite).
    log_posterior : array_like of shape (m,)
        Log weights of the world posterior (any additive constant).
    mi_budget : float
        Per-query budget ``b_t > 0`` in nats.
    rule : {"anisotropic", "exact-mi", "isotropic"}, default "anisotropic"
        Calibration rule of :func:`pacpriv.pac.calibrate_noise` (square-root rule, exact-MI
        water-filling, isotropic). For ``d = 1`` all three give variance ``Var_p / (2 b_t)``
        (square-root, isotropic) or the exact ``Var_p / (e^{2b_t} − 1)`` (exact-MI).

    Returns
    -------
    QueryNoise

    References
    ----------
    .. [1] Zhu, Sridhar & Devadas, Private Prediction via PAC Privacy, arXiv:2601.14033.
    .. [2] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 3.
    """
    o = np.asarray(outputs, dtype=np.float64)
    w = posterior_weights(log_posterior)
    mean, spectrum = _spectrum(o, w)
    if spectrum is None:
        return QueryNoise(plan=None, mean=mean, total_variance=0.0, mi_budget=float(mi_budget))
    plan = calibrate_noise(spectrum, mi_budget=mi_budget, rule=rule)
    return QueryNoise(plan=plan, mean=mean, total_variance=spectrum.total_variance,
                      mi_budget=float(mi_budget))


def _whiten(plan: NoisePlan, diff: np.ndarray) -> np.ndarray:
    """``(y − o_j)`` of shape (m, d) expressed in noise-std units on the noisy directions."""
    std = plan.noise_std
    if plan.basis is None:
        coords = diff
    else:
        coords = diff @ np.asarray(plan.basis, dtype=np.float64)
    noisy = std > 0
    return coords[:, noisy] / std[noisy]


def update_log_posterior(log_posterior, outputs, answer, noise: QueryNoise) -> np.ndarray:
    """``log p_j + log N(y; o_j, Σ_B)``, normalised (shape ``(m,)``).

    Terms common to every world (the normalising constant, the noise-free directions in which
    all worlds agree) cancel in the normalisation and are left out.
    """
    log_p = np.asarray(log_posterior, dtype=np.float64)
    if noise.plan is None:
        return normalise_log_posterior(log_p)
    o = np.asarray(outputs, dtype=np.float64)
    z = _whiten(noise.plan, np.asarray(answer, dtype=np.float64)[None, :] - o)
    log_lik = -0.5 * np.einsum("mk,mk->m", z, z)
    return normalise_log_posterior(log_p + log_lik)


def answer_query(outputs, log_posterior, secret_index: int, *, mi_budget: float,
                 rule: str = "anisotropic", rng: np.random.Generator | None = None,
                 source: NoiseSource | None = None):
    """Answer one query: ``y = o_J + B`` and the updated log posterior.

    Parameters
    ----------
    outputs : array_like of shape (m, d)
        World outputs for this query.
    log_posterior : array_like of shape (m,)
        Current log posterior over worlds.
    secret_index : int
        ``J`` in ``[0, m)``; never leaves the caller except through ``y``.
    mi_budget : float
        ``b_t`` in nats.
    rule : str
        See :func:`calibrate_query`.
    rng : numpy.random.Generator, optional
        Seeded floating-point noise (tests and demos: "seeded, not for release").
    source : NoiseSource, optional
        The hardened release (used when ``rng`` is None): the noise is an exact discrete
        Gaussian on the declared grid of :mod:`pacpriv.pac._sampling`, from ``source``
        (the OS CSPRNG); the plan is calibrated to ``b_t − grid_overhead(d)`` so that the
        released answer, rounding included, stays within ``b_t``; the posterior is updated
        with the exact likelihood of the grid release (world means rounded to the grid).

    Returns
    -------
    answer : ndarray of shape (d,)
    log_posterior : ndarray of shape (m,)
    noise : QueryNoise
    """
    o = np.asarray(outputs, dtype=np.float64)
    if rng is None:
        return _answer_on_grid(o, log_posterior, secret_index, mi_budget=mi_budget, rule=rule,
                               source=NoiseSource(None) if source is None else source)
    noise = calibrate_query(o, log_posterior, mi_budget=mi_budget, rule=rule)
    y = o[secret_index].copy()
    if noise.plan is not None:
        y += noise.plan.sample(rng)
    return y, update_log_posterior(log_posterior, o, y, noise), noise


def smallest_grid_budget(d: int) -> float:
    """The smallest ``mi_budget`` (nats) a grid release of ``d`` output coordinates accepts,
    rounded up: the release needs ``mi_budget - grid_overhead(d) > mi_budget / 2``, so
    ``mi_budget > 2 * grid_overhead(d)`` (a relative ``1e-9`` margin covers float round-off).
    """
    return float(2.0 * grid_overhead(int(d)) * (1.0 + 1e-9))


def _answer_on_grid(o: np.ndarray, log_posterior, secret_index: int, *, mi_budget: float,
                    rule: str, source: NoiseSource):
    budget = mi_budget - grid_overhead(o.shape[1])
    if not budget > 0.5 * mi_budget:
        raise ValueError(f"`mi_budget` {mi_budget!r} nats is too small for the grid release of "
                         f"{o.shape[1]} output coordinates (its rounding may cost "
                         f"{grid_overhead(o.shape[1]):.3g} nats); raise it.")
    noise = calibrate_query(o, log_posterior, mi_budget=budget, rule=rule)
    if noise.plan is None:
        return o[secret_index].copy(), normalise_log_posterior(log_posterior), noise
    plan = noise.plan
    basis = None if plan.basis is None else np.asarray(plan.basis, dtype=np.float64)
    coords = o if basis is None else o @ basis  # (m, k): every world's coordinates
    released, h, _ = grid_release(coords[secret_index], plan.noise_std, source)
    if basis is None:
        y = released
    else:  # outside the basis every world agrees: o_J's component there is public
        y = basis @ released + (o[secret_index] - basis @ coords[secret_index])
    std = np.asarray(plan.noise_std, dtype=np.float64)
    noisy = std > 0
    means = np.rint(coords[:, noisy] / h[noisy]) * h[noisy]  # each world's grid-rounded mean
    z = (released[noisy][None, :] - means) / std[noisy]
    log_lik = -0.5 * np.einsum("mk,mk->m", z, z)
    return y, normalise_log_posterior(np.asarray(log_posterior) + log_lik), noise


def answer_rows_on_grid(outputs: np.ndarray, log_posterior, secret_index: int, *,
                        mi_budget: float, source: NoiseSource) -> tuple[np.ndarray, np.ndarray]:
    """The hardened answers of ``n`` rows in order under the square-root (``"anisotropic"``)
    rule, and the posterior after them: the same numbers as :func:`answer_query` row by row
    (the same noise from the same ``source``), without building a plan object per row.

    Parameters
    ----------
    outputs : ndarray of shape (m, n, d)
    log_posterior : ndarray of shape (m,)
    secret_index : int
    mi_budget : float
        ``b`` nats per row.
    source : NoiseSource

    Returns
    -------
    answers : ndarray of shape (n, d)
    log_posterior : ndarray of shape (m,)
    """
    _, n, d = outputs.shape
    budget = mi_budget - grid_overhead(d)
    if not budget > 0.5 * mi_budget:
        raise ValueError(f"`mi_budget` {mi_budget!r} nats is too small for the grid release of "
                         f"{d} output coordinates; raise it.")
    answers = np.empty((n, d))
    lp = normalise_log_posterior(log_posterior)
    for i in range(n):
        o = outputs[:, i, :]
        if np.all(o == o[0]):  # every world agrees: released as is, nothing learned
            answers[i] = o[0]
            continue
        w = posterior_weights(lp)
        _, lam, vecs = _eigen(o, w, w @ o)
        std = np.sqrt(_floor_variance(square_root_rule(lam, np.ones(lam.size), budget), lam))
        coords = o @ vecs
        released, h, _ = grid_release(coords[secret_index], std, source)
        answers[i] = vecs @ released + (o[secret_index] - vecs @ coords[secret_index])
        z = (released[None, :] - np.rint(coords / h) * h) / std
        lp = normalise_log_posterior(lp - 0.5 * np.einsum("mk,mk->m", z, z))
    return answers, lp
