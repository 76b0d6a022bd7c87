"""Issue 12 item 1: numerical resolution never gives a positive-variance direction zero noise.

The true MI of a plan, ``½ ln det(I + Σ Σ_B⁻¹)``, is recomputed independently here in 60-digit
mpmath from the *known* Σ and the plan's explicit ``Σ_B``, never through pacpriv's own MI code.
"""

from __future__ import annotations

import math
import warnings

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.job import run_pac
from pacpriv.pac.noise import Algorithm1
from pacpriv.pac.noise._calibration import SPECTRUM_RULES, NoisePlan, calibrate_noise
from pacpriv.pac.spectrum._covariance import estimate_output_spectrum, spectrum_from_covariance

QUIET = ExecutionOptions(progress=False)

ALG1 = {"c": 1e-3, "beta": 0.25, "output_bound": 1.0}


def _rule(rule: str) -> str | Algorithm1:
    return Algorithm1(**ALG1) if rule == "algorithm1" else rule


def _noise_cov(plan: NoisePlan) -> np.ndarray:
    d = plan.dim
    if plan.basis is None:
        return np.diag(np.asarray(plan.noise_std, dtype=np.float64) ** 2)
    w = np.asarray(plan.basis, dtype=np.float64)
    return (w * np.asarray(plan.noise_std) ** 2) @ w.T + plan.residual_std**2 * (
        np.eye(d) - w @ w.T)


def true_mi(cov: np.ndarray, plan: NoisePlan) -> float:
    """½ ln det(I + Σ Σ_B⁻¹) in mpmath (inf when Σ_B is singular)."""
    with mp.workdps(60):
        d = cov.shape[0]
        if plan.basis is None:
            sb = mp.diag([mp.mpf(float(s)) ** 2 for s in plan.noise_std])
        else:
            w = mp.matrix(np.asarray(plan.basis, dtype=np.float64).tolist())
            s2 = mp.diag([mp.mpf(float(s)) ** 2 for s in plan.noise_std])
            r2 = mp.mpf(plan.residual_std) ** 2
            sb = w * s2 * w.T + r2 * (mp.eye(d) - w * w.T)
        try:
            chol = mp.cholesky(sb)
        except (ValueError, ZeroDivisionError):
            return math.inf
        if min(abs(chol[i, i]) for i in range(d)) == 0:
            return math.inf
        inv = chol**-1
        k = inv * mp.matrix(cov.tolist()) * inv.T
        c = mp.cholesky(mp.eye(d) + (k + k.T) / 2)
        return float(sum(mp.log(c[i, i]) for i in range(d)))


@pytest.mark.parametrize("rule", SPECTRUM_RULES)
def test_scale_separated_known_covariance_finite_mi_within_budget(rule):
    """diag(1e12, 1e-6): both directions get noise; the true MI is finite and <= the claim."""
    cov = np.diag([1e12, 1e-6])
    spec = spectrum_from_covariance(cov)
    assert spec.scale_blocks == 2
    assert spec.eigenvalues.min() >= 1e-6  # never lowered, let alone to 0
    plan = calibrate_noise(spec, mi_budget=0.05, rule=_rule(rule))
    mi = true_mi(cov, plan)
    assert math.isfinite(mi)
    assert mi <= plan.mi_claim * (1 + 1e-9)
    small_axis_var = _noise_cov(plan)[1, 1]
    assert small_axis_var > 0


def test_scale_separated_samples_get_noise_on_small_coordinate():
    """Sampled diag(1e12, 1e-6): the small coordinate is resolved in its own block."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 2)) * np.sqrt([1e12, 1e-6]) + [5e6, 0.5]
    spec = estimate_output_spectrum(x)
    assert spec.scale_blocks == 2 and spec.block_inflation < 0.2
    # the small eigenvalue is the sample variance of the share (times 1 + inflation), not 0
    assert spec.eigenvalues[1] >= np.var(x[:, 1], ddof=1) * (1 - 1e-9)
    plan = calibrate_noise(spec, mi_budget=0.05)
    cov_hat = np.cov(x.T)
    assert true_mi(cov_hat, plan) <= 0.05 * (1 + 1e-9)  # certified on the estimate
    assert math.isfinite(true_mi(np.diag([1e12, 1e-6]), plan))


def _income_share(n_records: int = 2000, seed: int = 1):
    rng = np.random.default_rng(seed)
    income = rng.lognormal(10.5, 0.8, n_records)  # dollars
    flag = (rng.random(n_records) < 0.1).astype(float)
    return np.column_stack([income, flag])


def _total_income_and_share(subset):
    """(total income in dollars, share of flagged records in the pool of 2000)."""
    return np.array([subset[:, 0].sum(), subset[:, 1].sum() / 2000.0])


def test_income_and_share_example_gets_noise_on_share_and_true_mi_within_budget():
    """Issue 12 item 1's example: the share is no longer released with zero noise."""
    pool = _income_share()
    # Poisson-½ membership bits b_i: f is linear in b, so Σ = ¼ Σ_i a_i a_iᵀ exactly
    a = np.column_stack([pool[:, 0], pool[:, 1] / 2000.0])
    sigma = a.T @ a / 4.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = run_pac(_total_income_and_share, pool, mi_budget=0.05, n_trials=1000, rng=0,
                      execution=QUIET, release_rng=1, rule="anisotropic")
    assert res.spectrum.scale_blocks == 2
    share_noise_var = _noise_cov(res.plan)[1, 1]
    assert share_noise_var > 0
    mi = true_mi(sigma, res.plan)
    assert math.isfinite(mi) and mi <= 0.05


def _random_cov(draw_seed: int, d: int, log_range: float) -> np.ndarray:
    rng = np.random.default_rng(draw_seed)
    std = 10.0 ** rng.uniform(-log_range / 2, log_range / 2, size=d)
    g = rng.normal(size=(d, d + rng.integers(0, 3)))
    corr = g @ g.T
    corr /= np.sqrt(np.outer(np.diag(corr), np.diag(corr)))
    return corr * np.outer(std, std)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(2, 5), log_range=st.floats(0.0, 24.0))
def test_no_positive_variance_direction_gets_zero_noise_known_cov(seed, d, log_range):
    """Random Σ = D R D with up to 24 decades of coordinate variances, every rule: MI finite
    and <= the plan's claim, recomputed in mpmath."""
    cov = _random_cov(seed, d, log_range)
    spec = spectrum_from_covariance(cov)
    assert np.all(spec.eigenvalues > 0)
    for rule in SPECTRUM_RULES:
        plan = calibrate_noise(spec, mi_budget=0.1, rule=_rule(rule))
        mi = true_mi(cov, plan)
        assert mi <= plan.mi_claim * (1 + 1e-9), (rule, mi)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.integers(2, 6), n=st.integers(3, 40),
       log_range=st.floats(0.0, 24.0))
def test_no_positive_variance_direction_gets_zero_noise_sampled(seed, d, n, log_range):
    """Samples of such a Σ (also n <= d): every rule gives a finite MI on the sample covariance,
    within the claim (the plug-in rules certify the estimate)."""
    cov = _random_cov(seed, d, log_range)
    rng = np.random.default_rng(seed + 1)
    std = np.sqrt(np.diag(cov))
    chol = np.linalg.cholesky(cov / np.outer(std, std))
    x = (rng.normal(size=(n, d)) @ chol.T) * std
    spec = estimate_output_spectrum(x)
    cov_hat = np.cov(x.T)
    for rule in SPECTRUM_RULES:
        plan = calibrate_noise(spec, mi_budget=0.1, rule=_rule(rule))
        mi = true_mi(cov_hat, plan)
        assert mi <= plan.mi_claim * (1 + 1e-6), (rule, mi)


def test_unresolved_directions_when_n_trials_at_most_d_dense_and_gram_agree():
    """n <= d: the directions the sample could not reach are charged tr(Σ̂), on both paths."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 9))
    dense = estimate_output_spectrum(x, method="dense")
    gram = estimate_output_spectrum(x, method="gram")
    assert dense.unresolved_dim == gram.unresolved_dim == 4
    trace = np.trace(np.cov(x.T))
    # dense: 4 explicit directions at tr/4 each; gram: the pooled complement carries tr
    charged = np.isclose(dense.eigenvalues, trace / 4, rtol=1e-9)
    assert charged.sum() == 4
    assert gram.tail_variance == pytest.approx(trace, rel=1e-9)
    for spec in (dense, gram):
        plan = calibrate_noise(spec, mi_budget=0.2)
        assert true_mi(np.eye(9), plan) <= 0.2  # the population is N(0, I_9)


def test_low_rank_outputs_are_resolved_not_charged():
    """Rank 2 < n - 1: the outputs live in a plane; the other directions sit at the resolution."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(50, 2)) @ rng.normal(size=(2, 6))
    spec = estimate_output_spectrum(x)
    assert spec.rank == 2 and spec.unresolved_dim == 0
    assert np.all(spec.eigenvalues[2:] == spec.resolution) and spec.resolution > 0
    plan = calibrate_noise(spec, mi_budget=0.2)
    assert np.all(plan.noise_std > 0)
