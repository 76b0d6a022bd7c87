"""compare refuses what it cannot certify before the trials that could not help (issue 35,
fix10a item 2): the whole-subset rule's trial floor and the black box's per-record floor
before any trial; a declared range's floor after the shape trials, before the certification
trials, in the words and with the count of ``pac records``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")

from pacpriv.compare import compare_pac_dpsgd
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.per_record._certificate import (
    certify_scale,
    check_betting_feasible,
    check_scale_feasible,
)

QUIET = ExecutionOptions(n_jobs=1, progress=False)


def _no_trials(monkeypatch, *modules):
    def boom(*a, **k):
        raise AssertionError("a trial ran")
    for mod, name in modules:
        monkeypatch.setattr(mod, name, boom)


def test_whole_subset_trials_refused_before_any_trial(monkeypatch):
    import pacpriv.compare.experiment as experiment

    _no_trials(monkeypatch, (experiment, "run_comparison"))
    with pytest.raises(ValueError, match=r"`n_trials` must be an integer in \[6, .*"
                                         r"rule='certified', which needs at least 6 trials"):
        compare_pac_dpsgd("iris", target_accuracy=0.6, n_trials=2, per_record_trials=0,
                          execution=QUIET)


@pytest.mark.parametrize("confidence", [0.95, 1 - 1e-9])
def test_black_box_per_record_floor_before_any_trial(monkeypatch, confidence):
    import pacpriv.compare.experiment as experiment

    _no_trials(monkeypatch, (experiment, "run_comparison"))
    with pytest.raises(ValueError, match=r"`per_record_trials`: `target_accuracy` = 0.6 cannot "
                                         r"be certified for 150 records with 22 certification "
                                         r"trials .* needs at least \d+ certification trials"):
        compare_pac_dpsgd("iris", target_accuracy=0.6, n_trials=30, per_record_trials=30,
                          black_box="sgd", confidence=confidence, execution=QUIET)


def test_declared_range_refused_before_the_certification_trials(monkeypatch):
    """The default (stable, declared range) black box: the eighth pass's repro ran every
    phase before failing; now the certification trials never start."""
    import pacpriv.pac.per_record._calibration as calibration

    _no_trials(monkeypatch, (calibration, "simulate_distances"))
    with pytest.raises(ValueError, match=r"^`per_record_trials`: `target_accuracy` = 0.6 "
                                         r"cannot be certified for 20 records with 22 "
                                         r"certification trials at confidence 0.95, whatever "
                                         r"the noise: the betting bound needs at least \d+"):
        compare_pac_dpsgd("iris", target_accuracy=0.6, n_trials=30, per_record_trials=30,
                          per_record_records=20, exact=False, execution=QUIET, rng=0)


@given(st.integers(2, 40), st.integers(1, 6), st.floats(0.52, 0.95),
       st.sampled_from([0.9, 0.95, 0.999]), st.booleans(), st.integers(0, 10_000))
@settings(max_examples=40, deadline=None)
def test_the_shape_floor_is_necessary(n_cert, n, target, confidence, declared, seed):
    """Whenever check_scale_feasible refuses, certify_scale fails on the most favourable
    certification trials (every distance 0); whenever those certify, it does not refuse."""
    rng = np.random.default_rng(seed)
    sh = rng.exponential(1.0, size=(6, n))
    bound = sh.max(axis=0) * rng.uniform(1.0, 3.0, size=n) if declared else None
    try:
        check_scale_feasible(sh, bound, target_accuracy=target, prior=0.5,
                             confidence=confidence, n_certify=n_cert)
        refused = False
    except ValueError:
        refused = True
    try:
        certify_scale(sh, np.zeros((n_cert, n)), target_accuracy=target, prior=0.5,
                      confidence=confidence, distance_bound=bound)
        certified = True
    except ValueError:
        certified = False
    assert not (refused and certified)
    if not declared:  # the up-front black-box floor is the same condition, data-free
        try:
            check_betting_feasible(target, n_cert, n, 0.5, confidence)
        except ValueError:
            assert not certified


def test_declared_range_up_front_floor_is_data_free_and_sound():
    """With a declared range the data-free floor refuses only the hopeless (2 trials at
    confidence 1 - 1e-12), never the iris case a tight range could certify."""
    with pytest.raises(ValueError, match=r"needs at least \d+ certification trials"):
        check_betting_feasible(0.6, 2, 150, 0.5, 1 - 1e-12, declared_range=True)
    check_betting_feasible(0.6, 22, 150, 0.5, 0.95, declared_range=True)
    with pytest.raises(ValueError, match=r"needs at least 43 certification trials"):
        check_betting_feasible(0.6, 22, 150, 0.5, 0.95)  # the black box: pac records' count


@pytest.mark.parametrize("form", ["npy", "csv", "dataset"])
def test_an_unlabelled_pool_says_pass_label_column(tmp_path, form):
    """Fix10a item 7 and its siblings: a path of any format, or a Dataset, without labels."""
    from pacpriv.datasets import load_dataset

    X = np.random.default_rng(0).normal(size=(50, 3))
    if form == "csv":
        path = tmp_path / "pool.csv"
        path.write_text("a,b,c\n" + "".join(",".join(f"{v:.3f}" for v in r) + "\n" for r in X))
    else:
        path = tmp_path / "pool.npy"
        np.save(path, X)
    dataset = load_dataset(path) if form == "dataset" else str(path)
    with pytest.raises(ValueError, match=r"^`dataset` 'pool' has no labels: compare trains a "
                                         r"classifier; .*label_column=\.\.\."):
        compare_pac_dpsgd(dataset, target_accuracy=0.6, execution=QUIET)
