"""``pacpriv pac records``: per-record exposure and calibration from the command line."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from scipy.stats import norm

from pacpriv.cli import main
from pacpriv.pac.engine import ExecutionOptions


def test_noise_std_measures_exposure(tmp_path, capsys):
    """--noise-std: the report holds the exposure of the audited records, aggregates only."""
    out = tmp_path / "rep"
    rc = main(["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--noise-std",
               "0.05", "--trials", "30", "--records", "0-4", "--seed", "0", "--n-jobs", "1",
               "--out", str(out), "--no-progress", "--format", "json,md"])
    assert rc == 0
    rep = json.loads((out / "report.json").read_text())
    sec = rep["sections"][0]["per_record"]
    assert sec["n_audited"] == 5 and sec["n_trials"] == 30
    assert "most_exposed" not in sec  # aggregates only: no record index in a report
    q = sec["accuracy_upper_quantiles"]
    assert q["p50"] <= q["p90"] <= q["p99"] <= q["max"] == sec["max_accuracy_upper"]
    assert 0.5 < sec["max_accuracy_estimate"] <= sec["max_accuracy_upper"] <= 1.0
    md = (out / "report.md").read_text()
    assert "5.1, 3.5, 1.4, 0.2" not in md and "informed adversary" in md
    printed = capsys.readouterr().out
    # new-user review F13: every printed bound carries its label, with 1−γ
    assert "max exposure" in printed and "% certified (1−γ = 0.95); median " in printed
    assert "1-gamma" not in printed


def test_target_accuracy_calibrates(tmp_path, capsys):
    out = tmp_path / "rep"
    rc = main(["pac", "records", "--mechanism", "mean", "--dataset", "iris",
               "--target-accuracy", "0.7", "--trials", "120", "--records", "sample:6",
               "--seed", "1", "--n-jobs", "1", "--out", str(out), "--no-progress", "--json",
               "--format", "json"])
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    sec = rep["sections"][0]["per_record"]
    assert sec["noise_plan"]["max_accuracy_upper"] <= 0.7
    assert sec["max_accuracy_upper"] <= 0.7 and sec["n_audited"] == 6


def test_target_accuracy_summary_labels_every_bound(tmp_path, capsys):
    """New-user review F13: the plan bound is certified; max exposure at the chosen scale is
    the per-record upper bounds there, under the plan bound (and said so)."""
    rc = main(["pac", "records", "--mechanism", "mean", "--dataset", "iris",
               "--target-accuracy", "0.7", "--trials", "120", "--records", "sample:6",
               "--seed", "1", "--n-jobs", "1", "--out", str(tmp_path / "rep"), "--no-progress",
               "--format", "json"])
    assert rc == 0
    lines = {line[:21].strip(): line[21:] for line in capsys.readouterr().out.splitlines()}
    assert lines["plan bound"].endswith(
        "% certified (1−γ = 0.95), SAMPLE of 6 of 150 records, target 0.7")
    assert lines["certificate"].startswith("betting confidence bound (Waudby-Smith & Ramdas")
    assert lines["coverage"].startswith("a SAMPLE: the 6 audited records only")
    assert lines["max exposure"].split("%", 1)[1].startswith(
        " per-record upper bounds at the calibrated scale (what is certified for every audited "
        "record at once is the plan bound above); median ")
    assert "(estimated)" in lines["whole-subset MI"]


@pytest.mark.parametrize(("argv", "match"), [
    (["--noise-std", "0.1", "--target-accuracy", "0.6"], "exactly one"),
    ([], "exactly one"),
    (["--noise-std", "0"], "--noise-std"),
    (["--target-accuracy", "0.5"], "--target-accuracy"),
    (["--target-accuracy", "0.6", "--trials", "20"], "cannot be certified for 150 records"),
    (["--noise-std", "1", "--records", "0-999"], "--records"),
    (["--noise-std", "1", "--confidence", "1"], "--confidence"),
])
def test_bad_input_is_one_line_exit_2(argv, match, tmp_path, capsys):
    rc = main(["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--out",
               str(tmp_path / "o"), "--no-progress", *argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and match in err and "\n" not in err


def test_exposure_of_a_sum_matches_closed_form():
    """Sanity of the CLI's engine path: Δᵢ = xᵢ for a sum, so the estimate is Φ(|xᵢ|/(2s))."""
    from pacpriv.pac import record_exposure

    x = np.array([[0.5], [1.5]])
    res = record_exposure(lambda s: s.sum(axis=0), x, noise_cov=1.0, n_trials=3, rng=0,
                          execution=ExecutionOptions(progress=False))
    np.testing.assert_allclose(res.accuracy, norm.cdf(np.abs(x[:, 0]) / 2), atol=1e-12)


@pytest.mark.filterwarnings("always::pacpriv.exceptions.PacprivWarning")  # the outlier's
def test_calibrated_noise_scale_of_a_private_pool_is_not_printed(tmp_path, capsys):
    """Review (session 20): the calibrated noise scale of a mean is ~ an outlier's value / n;
    for a pool that is not public it stays out of the report and the terminal unless asked."""
    pool = np.random.default_rng(0).normal(5e4, 1e4, size=(60, 3))
    pool[0, 1] = 98_765_432.1
    csv = tmp_path / "people.csv"
    np.savetxt(csv, pool, delimiter=",", header="a,salary,c", comments="")
    argv = ["pac", "records", "--mechanism", "mean", "--dataset", str(csv), "--target-accuracy",
            "0.6", "--trials", "200", "--seed", "0", "--records", "0-4", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "hidden")]) == 0
    out, err = capsys.readouterr()
    assert "absolute scale not shown" in out and "E||B||" not in out
    assert "needs more noise than the whole-subset plan" in err  # ratios only (issue 25)
    assert not [t for t in re.findall(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?", err) if float(t) >= 1e5]
    text = (tmp_path / "hidden" / "report.json").read_text()
    assert "pool_statistics" in text
    big = [float(t) for t in re.findall(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?", text)
           if abs(float(t)) >= 1e5]
    assert big == []
    assert main([*argv, "--out", str(tmp_path / "shown"), "--report-pool-statistics"]) == 0
    assert "E||B||^2 = " in capsys.readouterr().out
    full = json.loads((tmp_path / "shown" / "report.json").read_text())
    assert full["sections"][0]["per_record"]["noise_plan"]["noise_std_max"] > 1e6


def test_a_sample_of_records_says_what_it_covers(tmp_path, capsys):
    # a plan calibrated on 6 of 150 records printed "certified 70%" with no word on the rest
    rc = main(["pac", "records", "--mechanism", "mean", "--dataset", "iris",
               "--target-accuracy", "0.7", "--trials", "120", "--records", "sample:6",
               "--seed", "1", "--n-jobs", "1", "--out", str(tmp_path / "rep"), "--no-progress"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "the 6 audited records only" in out and "144 records" in out
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Coverage: a SAMPLE of 6 audited records only" in md and "144 records" in md


def test_report_has_the_root_seed_and_command(tmp_path, capsys, monkeypatch):
    argv = ["pac", "records", "--mechanism", "mean", "--dataset", "iris",
            "--noise-std", "0.5", "--trials", "60", "--records", "0-3", "--seed", "7",
            "--n-jobs", "1", "--out", str(tmp_path / "rep"), "--no-progress"]
    monkeypatch.setattr("sys.argv", ["pacpriv", *argv])
    rc = main(argv)
    assert rc == 0
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())["reproducibility"]
    assert rep["root_seed"] == {"entropy": 7, "spawn_key": []}
    assert "pac records" in rep["command"] and "--seed 7" in rep["command"]
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Root seed of the simulation" in md and "Command: `" in md


def test_every_record_by_default_is_said_in_the_terminal(tmp_path, capsys):
    rc = main(["pac", "records", "--mechanism", "mean", "--dataset", "iris",
               "--target-accuracy", "0.7", "--trials", "120", "--seed", "1", "--n-jobs", "1",
               "--out", str(tmp_path / "rep"), "--no-progress", "--format", "json"])
    assert rc == 0
    lines = {line[:21].strip(): line[21:] for line in capsys.readouterr().out.splitlines()}
    assert lines["plan bound"].endswith("% certified (1−γ = 0.95), every record (150), "
                                        "target 0.7")
    assert lines["coverage"] == "every record of the pool (150)"


def test_time_limit_refuses_before_any_trial_with_the_estimate(tmp_path, capsys):
    """--time-limit below the probe's estimate: exit 2, the estimate printed, nothing written;
    a bad limit is one line naming the flag."""
    out = tmp_path / "o"
    rc = main(["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--noise-std", "1",
               "--trials", "100000", "--time-limit", "0.5", "--out", str(out),
               "--no-progress"])  # a probe of well under a millisecond, a run of ~30 s
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert err.startswith("pacpriv: estimate: about ")
    assert "100000 trials" in err and "over --time-limit 0.5 s" in err
    assert "nothing was run" in err
    # a limit shorter than the probe itself: the probe is stopped there (issue 35)
    rc = main(["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--noise-std", "1",
               "--trials", "100000", "--time-limit", "1e-9", "--out", str(out),
               "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and not out.exists()
    assert err == ("pacpriv: error: the timed probe of the mechanism (before the run) did not "
                   "finish within 1e-09 s (--time-limit); nothing was run or charged")
    for bad in ("0", "-3", "inf"):
        rc = main(["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--noise-std",
                   "1", "--time-limit", bad, "--out", str(out), "--no-progress"])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and "--time-limit must be a number of seconds in (0, inf)" in err
        assert "\n" not in err and not out.exists()


def test_record_indices_only_in_the_private_index_list(tmp_path, capsys):
    """Reports and the screen hold aggregates only; --private-index-list writes the ranked
    indices to a new owner-only file outside --out, on request."""
    import os
    import re
    import stat

    out, private = tmp_path / "rep", tmp_path / "private.json"
    base = ["pac", "records", "--mechanism", "mean", "--dataset", "iris", "--noise-std",
            "0.05", "--trials", "30", "--records", "0-9", "--seed", "0", "--n-jobs", "1",
            "--no-progress", "--format", "json,md"]
    for bad, why in ((out / "inside.json", "outside --out"), (tmp_path / "x.txt", ".json")):
        assert main([*base, "--out", str(out), "--private-index-list", str(bad)]) == 2
        assert why in capsys.readouterr().err and not out.exists()
    assert main([*base, "--out", str(out), "--private-index-list", str(private)]) == 0
    screen = capsys.readouterr()
    assert not re.search(r"#\d", screen.out) and "no record is named" in screen.out
    assert "private output" in screen.err
    for name in ("report.json", "report.md"):
        assert not re.search(r"#\d|\"record\":", (out / name).read_text())
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    ranked = json.loads(private.read_text())["records"]
    assert sorted(e["record"] for e in ranked) == list(range(10))
    ups = [e["accuracy_upper"] for e in ranked]
    assert ups == sorted(ups, reverse=True)
    assert main([*base, "--out", str(tmp_path / "rep2"), "--private-index-list",
                 str(private)]) == 2  # never replaced
    assert "exists" in capsys.readouterr().err


def test_a_checkpoint_keeps_the_whole_subset_comparison(tmp_path, capsys):
    """With --checkpoint the whole-subset plan was calibrated into the per-record checkpoint
    (a CheckpointError: "could not be calibrated for comparison" on every run, seventh new-user
    pass #504); it has its own subfolder, and a second run resumes it."""
    ck = tmp_path / "ck"
    for i in range(2):
        rc = main(["pac", "records", "--mechanism", "mean", "--dataset", "iris",
                   "--target-accuracy", "0.6", "--trials", "60", "--records", "sample:3",
                   "--seed", "0", "--no-progress", "--checkpoint", str(ck),
                   "--out", str(tmp_path / f"r{i}")])
        err = capsys.readouterr().err
        assert rc == 0, err
        assert "could not be calibrated for comparison" not in err
        assert {"shape", "certify", "whole-subset"} <= {p.name for p in ck.iterdir()}
