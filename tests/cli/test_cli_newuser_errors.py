"""Unclear errors of the new-user pass made clear (log #89, #230): each names the flag, one
line, before any work."""

from __future__ import annotations

import pytest

import pacpriv
from pacpriv.cli.main import main


def test_dataset_folder_is_named_a_folder(tmp_path, capsys):
    assert main(["pac", "run", "--mechanism", "mean", "--dataset", str(tmp_path),
                 "--mi-budget", "0.1", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a folder" in err[0] and "extension" not in err[0]
    with pytest.raises(IsADirectoryError, match="is a folder"):
        pacpriv.load_dataset(str(tmp_path))


def test_no_release_with_release_seed_refused(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
                 "--no-release", "--release-seed", "5", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--no-release" in err[0] and "--release-seed" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("value", ["-inf:inf", "-inf:3"])
def test_feature_ranges_may_start_with_a_minus(value, tmp_path, capsys):
    """argparse read '-inf:inf' as an option ('expected one argument'): the range's own check
    now answers, naming --feature-ranges."""
    assert main(["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
                 "--feature-ranges", value, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--feature-ranges" in err[0] and "expected one" not in err[0]
    assert "finite" in err[0]


@pytest.mark.parametrize("rate", ["1e-300", "5e-17"])
def test_tiny_sampling_rate_names_the_flag(rate, tmp_path, capsys):
    """--sampling-rate 1e-300 blamed `prior` (1 - q rounds to 1) and warned 'vacuous'."""
    assert main(["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
                 "--sampling-rate", rate, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pacpriv: error: --sampling-rate must be in [")
    assert "prior" not in err[0] and "vacuous" not in err[0]


def test_tiny_sampling_rate_api():
    from pacpriv.pac.samplers import PoissonSampler

    with pytest.raises(ValueError, match=r"`sampling_rate` must be in \["):
        PoissonSampler(1e-300)
    assert PoissonSampler(1e-16).membership_prior(10) < 1.0


@pytest.mark.parametrize("pool", [[["a", "b"]] * 20, ([["a"]] * 20, [0, 1] * 10)])
def test_text_pool_is_a_pool_type_error(pool):
    """A pool of strings surfaced as a MechanismError from trial 0 (log #390)."""
    import numpy as np

    with pytest.raises(TypeError, match=r"`pool(\[0\])?` must hold numbers"):
        pacpriv.run_pac(lambda x: np.asarray(x, dtype=float).mean(0), pool, mi_budget=0.1,
                        n_trials=10, rng=0)
