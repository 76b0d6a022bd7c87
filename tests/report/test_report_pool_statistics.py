"""Which statistics of the pool a report shows (review, session 20; issue 25, item 5).

For a mean over subsets, the output covariance is ≈ Σ(x_i − x̄)²/n² per coordinate, so an
outlier's value can be read off the top eigenvalue, the coordinate variances or the noise
scale. Unless the pool is a bundled public dataset (or the caller opts in), the report keeps
scale-free facts and the release's error bar (the noise std per output coordinate, which the
PAC adversary knows and a user needs to read the release); ``pool_statistics=False``
(``--withhold-pool-statistics``) withholds the error bar too, for a confidential pool.
"""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

import pacpriv
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.report import build_report, to_markdown, write_report


def _mean(x, rng=None):
    return np.asarray(x, dtype=float).mean(axis=0)


@pytest.fixture(scope="module")
def outlier_run():
    pool = np.random.default_rng(0).normal(size=(60, 3))
    pool[0, 1] = 98_765_432.1  # one record's salary
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pacpriv.run_pac(_mean, pool, mi_budget=0.02, n_trials=100, rng=0,
                               execution=ExecutionOptions(progress=False))


def _numbers(text: str) -> list[float]:
    return [float(t) for t in re.findall(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?", text)]


ERROR_BAR = ("noise_std_per_coordinate", "noise_std_per_coordinate_max",
             "noise_std_per_coordinate_min")


def _without_error_bar(rep: dict) -> dict:
    noise = {k: v for k, v in rep["noise"].items() if k not in ERROR_BAR}
    return {**{k: v for k, v in rep.items() if k != "release"}, "noise": noise}


def test_default_report_hides_the_pool_scale_but_shows_the_error_bar(outlier_run, tmp_path):
    paths = write_report(outlier_run, tmp_path, formats=("json", "md"))
    rep = json.loads(paths["json"].read_text())
    spec, noise = rep["spectrum"], rep["noise"]
    for key in ("eigenvalues", "coordinate_variances", "total_variance",
                "max_coordinate_variance"):
        assert key not in spec
    for key in ("noise_std", "noise_std_top", "noise_std_max", "expected_noise_power"):
        assert key not in noise
    assert "clip_radius" not in json.dumps(noise)
    # the error bar: exactly the plan's sqrt(diag Σ_B), with the sentence on what it reveals
    assert noise["noise_std_per_coordinate"] == [
        float(v) for v in outlier_run.plan.noise_std_per_coordinate]
    assert "a statistic of the pool, not of the secret subset" in noise["error_bar"]
    md = paths["md"].read_text()
    assert "Error bar: each coordinate of the release carries Gaussian noise" in md
    assert "--withhold-pool-statistics" in md
    # the outlier's scale: the top eigenvalue (~(1e8)²/(4·60)) is in the full report only
    full = build_report(outlier_run, pool_statistics=True)
    top = full["spectrum"]["eigenvalues"][0]
    assert top > 1e12
    everything_else = json.dumps(_without_error_bar(rep))
    assert all(abs(x) < 1e6 for x in _numbers(everything_else.replace("e-", "e~")))
    assert "hidden" in spec["pool_statistics"] and "--report-pool-statistics" in to_markdown(rep)
    # no per-direction ratios (a reviewer recovered an outlier's value from the relative
    # eigenvalues); the RMS noise / spread only, to one significant digit, rounded down
    assert "relative_eigenvalues" not in spec and "noise_to_spread_top" not in noise
    d = full["simulation"]["dim"]
    ratio = (full["noise"]["expected_noise_power"] / d) ** 0.5 / (
        full["spectrum"]["total_variance"] / d) ** 0.5
    shown = noise["noise_to_spread_rms"]
    digit = 10.0 ** np.floor(np.log10(ratio))
    assert shown == pytest.approx(np.floor(ratio / digit) * digit, rel=1e-12) and shown <= ratio


def test_withheld_report_shows_nothing_pool_derived(outlier_run, tmp_path):
    paths = write_report(outlier_run, tmp_path, formats=("json", "md"), pool_statistics=False)
    rep = json.loads(paths["json"].read_text())
    assert not set(ERROR_BAR) & set(rep["noise"])
    assert "withheld" in rep["noise"]["pool_statistics"]
    everything_but_release = json.dumps({k: v for k, v in rep.items() if k != "release"})
    assert all(abs(x) < 1e6 for x in _numbers(everything_but_release.replace("e-", "e~")))
    md = paths["md"].read_text()
    assert "Error bar" not in md and "withheld (pool_statistics=False" in md
    # withheld means nothing derived from the pool: not even the one-digit ratio that the
    # default policy keeps (sixth new-user pass, m9)
    assert "noise_to_spread_rms" not in rep["noise"]
    assert "noise_to_spread_orders" not in rep["noise"]
    assert build_report(outlier_run)["noise"]["noise_to_spread_rms"] > 0


def test_withheld_report_does_not_resolve_the_spectrum():
    """Two pools whose spectra differ only in the ratio of their eigenvalues (an outlier's
    value in one column) give the same withheld report, up to the one-digit utility ratio;
    the default report differs, by its error bar only (which the PAC adversary knows)."""
    rng = np.random.default_rng(3)
    base = np.column_stack([rng.normal(40, 10, 60), rng.normal(5e4, 1e4, 60)])
    reports, defaults = [], []
    for outlier in (9.8e5, 1.02e6):
        pool = base.copy()
        pool[0, 1] = outlier
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = pacpriv.run_pac(lambda s: np.asarray(s).mean(axis=0), pool, mi_budget=0.02,
                                  n_trials=100, rng=0,
                                      execution=ExecutionOptions(progress=False, n_jobs=1),
                                  rule="anisotropic")
        rep = build_report(res, pool_statistics=False)
        reports.append(json.dumps({k: rep[k] for k in ("spectrum", "noise")}, sort_keys=True))
        defaults.append(build_report(res))
    assert reports[0] == reports[1]
    bars = [d["noise"]["noise_std_per_coordinate"] for d in defaults]
    assert bars[0][1] != bars[1][1]  # the outlier's column: its error bar shows the scale
    assert json.dumps(_without_error_bar(defaults[0])["noise"], sort_keys=True) == \
        json.dumps(_without_error_bar(defaults[1])["noise"], sort_keys=True)


def test_public_bundled_dataset_keeps_its_statistics():
    ds = pacpriv.load_dataset("iris")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = pacpriv.run_pac(_mean, ds.X, mi_budget=0.02, n_trials=60, rng=0,
                              execution=ExecutionOptions(progress=False),
                              dataset=ds.to_dict())
    rep = build_report(res)
    assert rep["spectrum"]["eigenvalues"] and "expected_noise_power" in rep["noise"]
    hidden = build_report(res, pool_statistics=False)
    assert "eigenvalues" not in hidden["spectrum"]


def test_prior_is_rounded_the_same_way_everywhere_in_a_report():
    """Review finding: the headline said prior 99.92 % and the prior line 99.91 %."""
    from pacpriv.report.layout import _prior_text

    p = {"membership_prior": 0.000876815, "blind_guess_prior": 0.9991231843134014,
         "prior_explanation": "estimated"}
    assert "Prior used: 99.92%" in _prior_text(p)


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_pac_run_terminal_summary_hides_the_scale_of_a_private_pool(tmp_path, capsys):
    from pacpriv.cli import main

    pool = np.random.default_rng(1).normal(5e4, 1e4, size=(40, 2))
    pool[0, 0] = 98_765_432.1
    csv = tmp_path / "p.csv"
    np.savetxt(csv, pool, delimiter=",", header="salary,b", comments="")
    argv = ["pac", "run", "--mechanism", "mean", "--dataset", str(csv), "--mi-budget", "0.1",
            "--trials", "40", "--seed", "0", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "absolute scale not shown" in out and "E||B||" not in out
    assert "error bar            noise std per coordinate [" in out  # shown for every pool
    assert "a statistic of the pool, not of the secret subset" in out
    assert main([*argv, "--out", str(tmp_path / "b"), "--report-pool-statistics"]) == 0
    assert "E||B||^2 = " in capsys.readouterr().out
    assert main([*argv, "--out", str(tmp_path / "c"), "--withhold-pool-statistics"]) == 0
    out = capsys.readouterr().out
    assert "error bar" not in out and "withheld: --withhold-pool-statistics" in out
    rep = json.loads((tmp_path / "c" / "report.json").read_text())
    assert "noise_std_per_coordinate" not in rep["noise"]


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_pac_run_json_without_a_json_report_prints_the_public_report(tmp_path, capsys):
    from pacpriv.cli import main

    pool = np.random.default_rng(2).normal(size=(40, 2))
    pool[0, 0] = 98_765_432.1
    csv = tmp_path / "p.csv"
    np.savetxt(csv, pool, delimiter=",", header="salary,b", comments="")
    assert main(["pac", "run", "--mechanism", "mean", "--dataset", str(csv), "--mi-budget",
                 "0.1", "--trials", "40", "--seed", "0", "--no-progress", "--json",
                 "--format", "md", "--out", str(tmp_path / "o")]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["kind"] == "pac" and "eigenvalues" not in printed["spectrum"]
    assert "pool_statistics" in printed["noise"]


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_a_file_named_like_sklearn_is_not_a_public_pool(tmp_path, capsys):
    """Leak review (session 20): `sklearn.payroll.csv` passed a startswith("sklearn.") test."""
    from pacpriv.cli import main
    from pacpriv.datasets.loading import is_bundled_source

    assert is_bundled_source("sklearn.datasets.load_iris")
    assert not is_bundled_source("sklearn.payroll.csv")
    assert not is_bundled_source("sklearn.datasets.load_iris.csv")
    pool = np.random.default_rng(3).normal(5e4, 1e4, size=(40, 2))
    pool[0, 0] = 98_765_432.1
    csv = tmp_path / "sklearn.payroll.csv"
    np.savetxt(csv, pool, delimiter=",", header="salary,b", comments="")
    assert main(["pac", "run", "--mechanism", "mean", "--dataset", str(csv), "--mi-budget",
                 "0.1", "--trials", "40", "--seed", "0", "--no-progress",
                 "--out", str(tmp_path / "o")]) == 0
    assert "E||B||" not in capsys.readouterr().out
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert "eigenvalues" not in rep["spectrum"]


def test_api_per_record_report_hides_the_calibrated_scale(tmp_path):
    """Leak review (session 20): write_report(calibrate_per_record(...)) kept noise_std_max."""
    from pacpriv.pac import calibrate_per_record

    pool = np.random.default_rng(4).normal(5e4, 1e4, size=(60, 3))
    pool[0, 1] = 98_765_432.1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = calibrate_per_record(_mean, pool, target_accuracy=0.6, n_trials=200,
                                    records=np.arange(5), rng=0)
    text = json.dumps(build_report(plan))
    assert "noise_std_max" not in text and "pool_statistics" in text
    assert all(abs(x) < 1e5 for x in _numbers(text.replace("e-", "e~")))
    full = json.dumps(build_report(plan, pool_statistics=True))
    assert "noise_std_max" in full
