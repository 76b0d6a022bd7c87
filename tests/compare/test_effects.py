"""The stabiliser-effects table: every variant, its estimated noise, labels, JSON."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("torch")

from pacpriv.compare.effects import stabiliser_effects
from pacpriv.datasets import load_dataset
from pacpriv.pac.engine import ExecutionOptions


@pytest.mark.slow
def test_effects_table_is_labelled_an_estimate_and_meets_the_plug_in_target():
    ds = load_dataset("breast_cancer")
    pool = replace(ds, X=ds.X[:80], y=ds.y[:80], name="bc80")
    eff = stabiliser_effects(pool, target_accuracy=0.65, n_trials=4, n_records=6, n_repeats=2,
                             rng=1, execution=ExecutionOptions(progress=False, n_jobs=1))
    assert len(eff.rows) == 7
    assert eff.label == "estimated (plug-in, 4 trials, SAMPLE of 6 records; not certified)"
    for r in eff.rows:
        assert r.max_plug_in_accuracy == pytest.approx(0.65, abs=1e-5)
        assert 0 <= r.test_accuracy <= 1 and r.expected_noise_power >= 0
    default = eff.rows[4]
    assert default.variant.endswith("(default)") and default.dim < eff.rows[0].dim
    md = eff.to_markdown()
    assert "not certified" in md and "| black box | parameters |" in md
    json.dumps(eff.to_dict())
    assert np.asarray(eff.pool[0]).shape == (80, 30) and "pool" not in eff.to_dict()
