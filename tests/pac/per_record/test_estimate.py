"""Time estimate of a per-record run from a timed probe (a fake clock: no timing in tests)."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.pac.per_record import _estimate


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.calls = 0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = _Clock()
    monkeypatch.setattr(_estimate.time, "perf_counter", c)
    return c


def test_generic_path_scales_the_probe_to_one_plus_k_evaluations(clock):
    """Each call costs 1 fake second: the probe times f(S) and 3 flips (4 calls); a trial
    costs 1 + k calls; the trials divide among the workers (rounded up)."""
    def mech(subset):
        clock.now += 1.0
        clock.calls += 1
        return np.array([float(len(subset))])

    pool = np.arange(40.0)
    records = np.arange(10)
    est = _estimate.estimate_per_record_time(mech, pool, records, n_records=40, n_trials=25,
                                             workers=2)
    assert clock.calls == 4 and est.probe_evaluations == 4
    assert est.per_trial_s == pytest.approx(11.0)
    assert est.seconds == pytest.approx(13 * 11.0)
    assert est.evaluations_per_trial == 11
    assert "about 2.4 min" in est.text() and "25 trials" in est.text()


def test_fast_path_is_timed_by_one_call(clock):
    class Fast:
        def __call__(self, subset):
            return np.zeros(1)

        def per_record_differences(self, pool, mask, records=None):
            clock.now += 0.5
            clock.calls += 1
            return np.zeros(1), np.zeros((len(records), 1))

    est = _estimate.estimate_per_record_time(Fast(), np.zeros((30, 2)), np.arange(30),
                                             n_records=30, n_trials=8)
    assert clock.calls == 1 and est.evaluations_per_trial == 1
    assert est.seconds == pytest.approx(4.0) and est.text().startswith("about 4.0 s")


def test_record_blocks_count_their_extra_evaluations_and_divide_among_workers(clock):
    """100 records in blocks of 30: 4 blocks a trial, each evaluating f(S) too (104 calls a
    trial); the 4 x 5 blocks divide among 3 workers (7 rounds of a full block, 31 calls)."""
    def mech(subset):
        clock.now += 1.0
        return np.array([float(len(subset))])

    est = _estimate.estimate_per_record_time(mech, np.arange(200.0), np.arange(100),
                                             n_records=200, n_trials=5, workers=3,
                                             record_block=30)
    assert est.evaluations_per_trial == 104
    assert est.per_trial_s == pytest.approx(104.0)
    assert est.seconds == pytest.approx(7 * 31.0)
