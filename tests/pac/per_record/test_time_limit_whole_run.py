"""``time_limit`` / ``--time-limit`` is one limit for the whole run (issue 35, fix10a item 4):
the certification trials get what the shape trials left, pac records' whole-subset plan what
the per-record trials left, and its estimate covers all of them."""

from __future__ import annotations

import time

import numpy as np
import pytest

from pacpriv.exceptions import TimeLimitError
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._limit import carry_over, whole_run_words


def test_carry_over_gives_what_is_left_and_refuses_nothing_left():
    ex = ExecutionOptions(progress=False, time_limit=10.0)
    left = carry_over(ex, time.monotonic() - 4.0, 10.0, before="the next part").time_limit
    assert 5.0 < left <= 6.0
    assert carry_over(ex, time.monotonic() - 99, None, before="x") is ex  # no limit
    with pytest.raises(TimeLimitError, match=r"`time_limit` 10 s, the whole run\) before "
                                             r"the certification trials"):
        carry_over(ex, time.monotonic() - 10.5, 10.0, before="the certification trials")


def test_a_part_names_the_whole_limit():
    with pytest.raises(TimeLimitError, match=r"`time_limit` 60 s for the whole run \(12.5 s "
                                             r"were left for this part\)"):
        with whole_run_words(60.0):
            raise TimeLimitError("the run reached its time limit (`time_limit` 12.5 s) and "
                                 "stopped with 3 of 9 trials finished")


def test_certification_trials_get_what_the_shape_trials_left(monkeypatch):
    import pacpriv.pac.per_record._calibration as calibration
    from pacpriv.pac.per_record import calibrate_per_record

    seen = {}
    shape_sim = calibration.simulate_differences
    cert_sim = calibration.simulate_distances

    def shape(*a, execution, **k):
        seen["shape"] = execution.time_limit
        time.sleep(0.3)  # the shape trials take time: less is left for the certification
        return shape_sim(*a, execution=execution, **k)

    def cert(*a, execution, **k):
        seen["certify"] = execution.time_limit
        return cert_sim(*a, execution=execution, **k)

    monkeypatch.setattr(calibration, "simulate_differences", shape)
    monkeypatch.setattr(calibration, "simulate_distances", cert)
    X = np.random.default_rng(0).normal(size=(30, 2))
    calibrate_per_record(lambda S: S.mean(axis=0), X, target_accuracy=0.75, n_trials=120,
                         records=[0, 1], rng=0,
                         execution=ExecutionOptions(progress=False, time_limit=100.0))
    assert seen["shape"] == 100.0
    assert seen["certify"] <= 100.0 - 0.3


def test_cli_estimate_covers_the_whole_subset_plan_and_it_gets_what_is_left(tmp_path, capsys,
                                                                              monkeypatch):
    import pacpriv.pac.job as job
    from pacpriv.cli import main

    limits = []
    real = job.run_pac

    def run_pac(*a, execution, **k):
        limits.append(execution.time_limit)
        return real(*a, execution=execution, **k)

    monkeypatch.setattr(job, "run_pac", run_pac)
    rc = main(["pac", "records", "--mechanism", "mean", "--dataset", "iris",
               "--target-accuracy", "0.7", "--trials", "120", "--records", "sample:4",
               "--seed", "1", "--n-jobs", "1", "--time-limit", "500",
               "--out", str(tmp_path / "r"), "--no-progress", "--format", "json"])
    err = capsys.readouterr().err
    assert rc == 0
    assert "for the whole-subset plan it is compared with (120 trials x 1 evaluation)" in err
    assert "in all" in err
    assert len(limits) == 1 and 0 < limits[0] < 500


def test_help_says_whole_run(capsys):
    from pacpriv.cli import main

    try:
        main(["pac", "records", "--help"])
    except SystemExit:
        pass
    text = " ".join(capsys.readouterr().out.split())
    assert "limit in seconds on the whole run" in text
    assert "certification trials and the whole-subset plan" in text


def test_compare_phases_share_one_limit(monkeypatch):
    pytest.importorskip("torch")
    import pacpriv.compare.experiment as experiment
    from pacpriv.compare import compare_pac_dpsgd

    seen = []

    class Stop(Exception):
        pass

    def record_trials(*a, execution, **k):
        seen.append(execution.time_limit)
        raise Stop

    monkeypatch.setattr(experiment, "simulate_record_trials", record_trials)
    with pytest.raises(Stop):
        compare_pac_dpsgd("iris", target_accuracy=0.75, n_trials=8, epochs=1,
                          steps_per_epoch=1, n_repeats=1, exact=False, per_record_trials=200,
                          rng=0, execution=ExecutionOptions(progress=False, time_limit=300.0))
    assert len(seen) == 1 and 0 < seen[0] < 300.0  # the references were trained first


def test_api_refuses_a_run_whose_simulations_together_exceed_the_limit(monkeypatch):
    """The estimate covers the shape and the certification trials before either runs."""
    import pacpriv.pac.per_record._calibration as calibration
    from pacpriv.datasets import load_dataset
    from pacpriv.pac.per_record import calibrate_per_record

    def boom(*a, **k):
        raise AssertionError("a trial ran")

    monkeypatch.setattr(calibration, "simulate_differences", boom)
    X = load_dataset("iris").X
    with pytest.raises(TimeLimitError, match=r"over `time_limit` 0.5 s \(the whole run: every "
                                             r"simulation of it\)") as info:
        calibrate_per_record(lambda S: S.mean(axis=0), X, target_accuracy=0.75,
                             n_trials=100_000, rng=0,
                             execution=ExecutionOptions(progress=False, time_limit=0.5))
    assert info.value.estimate_s > 0.5
