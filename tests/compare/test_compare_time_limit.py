"""compare_pac_dpsgd's whole-run ``time_limit`` covers the stages that are not simulations
(twelfth new-user pass, R8, R9): building the models, the references and the DP-SGD rows stop
at the limit with a ``TimeLimitError``, and no later stage starts."""

from __future__ import annotations

import time

import pytest

from pacpriv.exceptions import TimeLimitError
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._limit import stage_within

pytest.importorskip("torch")

_SMALL = dict(target_accuracy=0.75, n_trials=8, epochs=1, steps_per_epoch=1, n_repeats=1,
              exact=False, per_record_trials=0, rng=0)


def _slow(finished: list):
    """A stage that would take 30 s unless interrupted; ``finished`` records a full run."""
    def run(*a, **k):
        for _ in range(3000):
            time.sleep(0.01)
        finished.append(True)
        raise AssertionError("the stage was not stopped at the limit")
    return run


def _no_simulation(monkeypatch):
    import pacpriv.compare.experiment as experiment

    def boom(*a, **k):
        raise AssertionError("a simulation started past the limit")

    monkeypatch.setattr(experiment, "run_pac", boom)
    monkeypatch.setattr(experiment, "simulate_record_trials", boom)


@pytest.mark.parametrize("limit", [1e-3, 0.01])
def test_tiny_limit_stops_the_first_stage(monkeypatch, limit):
    from pacpriv.compare import compare_pac_dpsgd
    from pacpriv.compare.blackbox import StableBlackBox

    finished: list = []
    monkeypatch.setattr(StableBlackBox, "build", _slow(finished))
    _no_simulation(monkeypatch)
    with pytest.raises(TimeLimitError, match=rf"`time_limit` {limit:g} s\) while building the "
                                             r"models, before any trial") as info:
        compare_pac_dpsgd("iris", execution=ExecutionOptions(progress=False, time_limit=limit),
                          **_SMALL)
    assert not finished
    assert "Nothing was released or charged" in str(info.value)


def test_limit_that_fits_the_first_stages_but_not_the_rest(monkeypatch):
    import pacpriv.compare.experiment as experiment
    from pacpriv.compare import compare_pac_dpsgd

    finished: list = []
    trained = []
    real = experiment._references

    def references(*a, **k):
        trained.append(True)
        return real(*a, **k)

    monkeypatch.setattr(experiment, "_references", references)
    monkeypatch.setattr(experiment, "dpsgd_row", _slow(finished))
    _no_simulation(monkeypatch)
    with pytest.raises(TimeLimitError, match=r"`time_limit` 3 s\) while training the DP-SGD "
                                             r"rows \(bound 0.75\)"):
        compare_pac_dpsgd("iris", execution=ExecutionOptions(progress=False, time_limit=3.0),
                          **_SMALL)
    assert trained and not finished


def test_limit_with_a_checkpoint_names_it(monkeypatch, tmp_path):
    import pacpriv.compare.experiment as experiment
    from pacpriv.compare import compare_pac_dpsgd

    finished: list = []
    monkeypatch.setattr(experiment, "dpsgd_row", _slow(finished))
    _no_simulation(monkeypatch)
    ck = tmp_path / "ck"
    with pytest.raises(TimeLimitError, match="kept in the checkpoint") as info:
        compare_pac_dpsgd("iris", execution=ExecutionOptions(
            progress=False, time_limit=2.0, checkpoint=str(ck)), **_SMALL)
    assert str(ck) in str(info.value) and "resume" in str(info.value)
    assert not finished


def test_stage_within_contract():
    assert stage_within(None, 0.0, lambda: 7, what="x") == 7
    assert stage_within(5.0, time.monotonic(), lambda: 7, what="x") == 7
    started = []
    with pytest.raises(TimeLimitError, match=r"`time_limit` 1 s\) while the stage"):
        stage_within(1.0, time.monotonic() - 2.0, lambda: started.append(1), what="the stage")
    assert not started  # nothing left: the call does not start

    def past():  # returns past the limit (cannot be interrupted): discarded
        time.sleep(0.05)
        return 7

    with pytest.raises(TimeLimitError):
        stage_within(0.04, time.monotonic() - 0.03, past, what="the stage")

    def own_error():
        raise KeyError("mine")

    with pytest.raises(KeyError):  # the call's own failure, inside the limit, is its own
        stage_within(60.0, time.monotonic(), own_error, what="the stage")


def test_a_later_refusal_says_the_earlier_stages_ran(monkeypatch):
    import pacpriv.compare.experiment as experiment
    from pacpriv.compare import compare_pac_dpsgd

    def refuse(*a, **k):
        raise TimeLimitError("the run would take about 9 s, over `time_limit` 1 s (nothing was "
                             "run or charged)")

    monkeypatch.setattr(experiment, "run_pac", refuse)
    with pytest.raises(TimeLimitError) as info:
        compare_pac_dpsgd("iris", execution=ExecutionOptions(progress=False, time_limit=60.0),
                          **_SMALL)
    text = str(info.value)
    assert "nothing was run" not in text
    assert "none of the whole-subset trials ran, after the comparison's earlier stages" in text
