"""The predictor's hardened noise: grid releases from the OS CSPRNG unless seeded (labelled),
the exact grid likelihood in the posterior, and the per-direction noise floor."""

from __future__ import annotations

import numpy as np

from pacpriv.pac._sampling import FROM_OS, GRID_STEPS, NoiseSource, grid_overhead
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.prediction import PrivatePredictor, answer_query, calibrate_query

from ._helpers import cancer, logreg

QUIET = ExecutionOptions(progress=False)


def test_unseeded_answers_lie_on_the_declared_grid():
    o = np.array([[0.1], [0.7], [0.4], [0.2]])  # d = 1: the noise basis is ±1
    lp = np.zeros(4)
    plan = calibrate_query(o, lp, mi_budget=2**-6 - grid_overhead(1)).plan
    h = plan.noise_std[0] / GRID_STEPS
    for seed in range(10):
        y, new_lp, noise = answer_query(o, lp, 2, mi_budget=2**-6, source=NoiseSource(seed))
        assert abs(y[0] / h - np.rint(y[0] / h)) < 1e-3 and h * np.rint(y[0] / h) == y[0]
        assert noise.plan.noise_std[0] == plan.noise_std[0]
        # the exact grid likelihood: world means rounded to the grid, Gaussian exponent
        means = np.rint(o[:, 0] * plan.basis[0, 0] / h) * h
        z = (y[0] * plan.basis[0, 0] - means) / plan.noise_std[0]
        want = -0.5 * z**2
        np.testing.assert_allclose(new_lp - new_lp[0], want - want[0], rtol=1e-12, atol=1e-12)


def test_predictor_noise_is_labelled():
    X, y = cancer()
    seeded = PrivatePredictor(logreg(), (X, y), n_worlds=4, per_query_budget=2**-8,
                              total_budget=1.0, rng=1, secret_rng=2).fit(execution=QUIET)
    assert seeded.noise_source == "seeded, not for release"
    hardened = PrivatePredictor(logreg(), (X, y), n_worlds=4, per_query_budget=2**-8,
                                total_budget=1.0, rng=1).fit(execution=QUIET)
    assert hardened.noise_source == FROM_OS
    out = hardened.predict_proba(X[:3])
    assert out.shape == (3, 2) and np.allclose(out.sum(axis=1), 1.0)
    assert hardened.to_dict()["noise"] == FROM_OS


def test_tiny_posterior_weights_do_not_drop_the_noise_floor():
    """A world with posterior weight e^-700 that alone differs in a direction: that direction
    still gets noise at the resolution floor (it was ~1e-78 without the floor)."""
    o = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1e-3], [1.0, 0.0]])
    plan = calibrate_query(o, np.array([0.0, 0.0, -700.0, 0.0]), mi_budget=2**-8).plan
    assert plan.noise_std_per_coordinate[1] > 1e-6


def test_batched_grid_rows_equal_row_by_row_answers():
    """The batch path (no plan objects) gives the same answers and posterior as answer_query
    row by row with the same noise source."""
    from pacpriv.prediction._noise import answer_rows_on_grid

    rng = np.random.default_rng(4)
    outputs = rng.random((8, 12, 3))
    outputs[:, 5, :] = outputs[0, 5, :]  # a row on which every world agrees
    lp0 = rng.normal(size=8)
    batch, lp_batch = answer_rows_on_grid(outputs, lp0, 3, mi_budget=2**-6,
                                          source=NoiseSource(11))
    src, lp = NoiseSource(11), lp0
    for i in range(12):
        y, lp, _ = answer_query(outputs[:, i, :], lp, 3, mi_budget=2**-6, source=src)
        np.testing.assert_allclose(batch[i], y, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(lp_batch, lp, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(batch[5], outputs[0, 5, :])
