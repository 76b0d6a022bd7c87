"""Numeric options at their extremes answer or fail in one line, CLI and API (issue 35, item 3)."""

import math

import numpy as np
import pytest

from pacpriv.cli.main import main
from pacpriv.dpsgd.epsilon import gaussian_epsilon
from pacpriv.pac import ExecutionOptions, run_pac, simulate
from pacpriv.pac.noise._certificate import certify_noise

PAC = ["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--trials", "160",
       "--seed", "0", "--no-progress", "--format", "json"]


def _mean(x):
    return np.asarray(x, dtype=float).mean(axis=0)


@pytest.mark.parametrize("budget", ["1e9", "1e300", "100.5"])
def test_huge_mi_budget_is_refused_in_one_line(budget, tmp_path, capsys):
    """0.3 ended in an OverflowError from the certificate at --mi-budget 1e9."""
    assert main([*PAC, "--mi-budget", budget, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pacpriv: error: --mi-budget must be <= 100")
    assert not (tmp_path / "o").exists()  # refused before any work, no folder left


def test_huge_mi_budget_api():
    pool = np.random.default_rng(0).random((30, 2))
    for call in (lambda: run_pac(_mean, pool, mi_budget=1e9, n_trials=20, rng=0),
                 lambda: certify_noise(np.random.default_rng(0).random((50, 2)),
                                       mi_budget=1e9)):
        with pytest.raises(ValueError, match=r"`mi_budget` must be (<= 100|in)"):
            call()


def test_target_accuracy_a_rounding_step_above_the_blind_guess(tmp_path, capsys):
    """The error names the flag the user gave (0.3 blamed --mi-budget)."""
    assert main([*PAC, "--target-accuracy", "0.5000000000000001",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--target-accuracy" in err and "Traceback" not in err


@pytest.mark.parametrize("timeout", [1e300, 1e12])
def test_huge_timeout_is_no_limit(timeout):
    """0.3 raised OverflowError inside the trial (blamed on the mechanism) at 1e300."""
    pool = np.arange(20.0).reshape(10, 2)
    sim = simulate(_mean, pool, n_trials=4, rng=0,
                   execution=ExecutionOptions(n_jobs=1, timeout=timeout, progress=False))
    assert sim.outputs.shape == (4, 2) and np.all(np.isfinite(sim.outputs))


def test_smallest_delta_still_gives_a_finite_epsilon(capsys):
    assert main(["dpsgd", "bound", "--steps-per-epoch", "100", "--epochs", "10",
                 "--noise-multiplier", "1", "--delta", "5e-324", "--json"]) == 0
    import json

    eps = json.loads(capsys.readouterr().out)["epsilon"]["epsilon"]
    # at such a δ the loss is in its far tail, where one epoch's loss is the Gaussian one less
    # ln M: about the Gaussian ε at μ = √E/σ (≈ 127) less E·ln M (≈ 46); never above the
    # Gaussian-dominance closed form
    gauss = gaussian_epsilon(math.sqrt(10.0), 5e-324)
    assert math.isfinite(eps) and gauss - 10 * math.log(100) - 5 < eps <= gauss
