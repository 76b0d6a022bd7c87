"""A release carries its error bar: ``noise_std_per_coordinate = sqrt(diag(Σ_B))`` (issue 25,
item 5), exact against the dense ``Σ_B`` on every basis kind (coordinate axes, a full and a
partial eigenbasis with a residual, a lazy eigenbasis), checked by Monte Carlo, and carried by
``PacResult``, ``PacPrivateFunction`` and the summaries; and the per-record/whole-subset noise
comparison."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pacpriv
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.noise._plan import NoisePlan, per_record_noise_excess


def _plan(dim, basis, noise_std, residual_std=0.0) -> NoisePlan:
    return NoisePlan(rule="anisotropic", mi_budget=0.1, mi_bound=0.1, linearised_mi_bound=0.1,
                     mi_claim=0.1, confidence=None, dim=dim, basis=basis,
                     noise_std=np.asarray(noise_std, dtype=np.float64),
                     residual_std=residual_std)


def _dense_cov(plan: NoisePlan) -> np.ndarray:
    if plan.basis is None:
        return np.diag(np.broadcast_to(plan.noise_std, (plan.dim,)) ** 2)
    W = np.asarray(plan.basis, dtype=np.float64)
    return (W * plan.noise_std**2) @ W.T + plan.residual_std**2 * (np.eye(plan.dim) - W @ W.T)


def _orthonormal(d, k, seed):
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(d, d)))
    return q[:, :k]


@pytest.mark.parametrize("case", ["axes", "full basis", "partial basis + residual",
                                  "float32 basis"])
def test_error_bar_is_the_exact_diagonal_of_the_noise_covariance(case):
    d = 7
    std = np.array([3.0, 0.5, 1.25, 2.0, 0.1, 4.0, 1.0])
    if case == "axes":
        plan = _plan(d, None, std)
    elif case == "full basis":
        plan = _plan(d, _orthonormal(d, d, 1), std)
    elif case == "float32 basis":
        plan = _plan(d, _orthonormal(d, 4, 3).astype(np.float32), std[:4], residual_std=0.7)
    else:
        plan = _plan(d, _orthonormal(d, 3, 2), std[:3], residual_std=0.7)
    bar = plan.noise_std_per_coordinate
    assert bar.shape == (d,) and bar.dtype == np.float64 and not bar.flags.writeable
    exact = np.sqrt(np.diag(_dense_cov(plan)))
    np.testing.assert_allclose(bar, exact, rtol=1e-12 if case != "float32 basis" else 1e-6)
    assert float(np.sum(bar**2)) == pytest.approx(plan.expected_noise_power, rel=1e-6)


def test_error_bar_matches_the_noise_that_is_drawn():
    plan = _plan(5, _orthonormal(5, 2, 4), [2.0, 0.3], residual_std=0.9)
    draws = np.stack([plan.sample(np.random.default_rng(i)) for i in range(20_000)])
    # the std of 20000 Gaussian draws is within ~4 % (6 standard errors of 0.5 %)
    np.testing.assert_allclose(draws.std(axis=0), plan.noise_std_per_coordinate, rtol=0.04)


def test_a_lazy_eigenbasis_gives_the_same_error_bar_as_the_formed_one():
    from pacpriv.pac.noise import calibrate_noise
    from pacpriv.pac.spectrum import estimate_output_spectrum

    outputs = np.random.default_rng(5).normal(size=(12, 40)) * np.linspace(0.1, 3, 40)
    lazy = calibrate_noise(estimate_output_spectrum(outputs, eigenvectors="lazy"),
                           mi_budget=0.5, rule="anisotropic")
    dense = calibrate_noise(estimate_output_spectrum(outputs, eigenvectors="dense"),
                            mi_budget=0.5, rule="anisotropic")
    assert hasattr(lazy.basis, "matvec") and not hasattr(dense.basis, "matvec")
    assert lazy.residual_std > 0 and lazy.basis.shape[1] < 40  # a partial basis
    np.testing.assert_allclose(lazy.noise_std_per_coordinate, dense.noise_std_per_coordinate,
                               rtol=1e-9)
    np.testing.assert_allclose(dense.noise_std_per_coordinate,
                               np.sqrt(np.diag(_dense_cov(dense))), rtol=1e-10)


def _mean(subset):
    return np.asarray(subset).mean(axis=0) if len(subset) else np.zeros(3)


@pytest.fixture(scope="module")
def result():
    pool = np.random.default_rng(6).normal(size=(50, 3)) * [1.0, 10.0, 100.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pacpriv.run_pac(_mean, pool, mi_budget=0.5, n_trials=200, rng=0,
                               release_rng=1, execution=ExecutionOptions(progress=False))


def test_the_result_carries_the_error_bar_in_the_output_units(result):
    bar = result.noise_std_per_coordinate
    assert bar is result.plan.noise_std_per_coordinate and bar.shape == (3,)
    # the coordinates are scaled 1 : 10 : 100; the certified (square-root) rule's noise std
    # grows like the square root of the spread: about 1 : 3 : 10
    assert bar[0] < bar[1] < bar[2] and bar[2] / bar[0] > 5
    assert result.to_dict()["noise_std_per_coordinate"] == [float(v) for v in bar]
    text = str(result)
    assert "noise std per coordinate (error bar)" in text
    from pacpriv._numbers import format_bound

    assert format_bound(float(bar[2]), 6, side="up") in text


def test_a_pac_private_function_carries_the_error_bar():
    f = pacpriv.pac_private(_mean, mi_budget=0.5, rule="anisotropic")
    assert f.noise_std_per_coordinate is None
    pool = np.random.default_rng(7).normal(size=(40, 3))
    f.calibrate(pool, n_trials=100, rng=0, execution=ExecutionOptions(progress=False))
    np.testing.assert_allclose(f.noise_std_per_coordinate,
                               np.sqrt(np.diag(_dense_cov(f.plan))), rtol=1e-12)


def test_per_record_noise_excess():
    d = 3
    whole = _plan(d, None, [1.0, 1.0, 1.0])
    assert per_record_noise_excess(_plan(d, None, [0.5, 0.9, 1.0]), whole) is None
    text = per_record_noise_excess(_plan(d, None, [2.0, 0.5, 0.5]), whole)
    # power 4.5 / 3 = 1.5; one coordinate larger; ratios only, no absolute scale
    assert text is not None and "1.5x its noise power" in text and "1 of 3 coordinates" in text
    assert "2.0" not in text
    with pytest.raises(ValueError, match="different output dimensions"):
        per_record_noise_excess(_plan(2, None, [1.0, 1.0]), whole)
