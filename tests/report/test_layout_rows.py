"""The noise and simulation tables read their rows by field name (one builder,
``layout._field_rows``); each row keeps the label and rounding side it was written with."""

from __future__ import annotations

from pacpriv.report import layout

NOISE = [
    ("rule", "nearest"),
    ("basis", "nearest"),
    ("directions with own noise", "nearest"),
    ("noise std (max)", "up"),
    ("noise std (min)", "up"),
    ("residual std (other directions)", "up"),
    ("expected noise power E‖B‖²", "up"),
    ("confidence 1 − γ (certificate, or Algorithm 1)", "nearest"),
]
SIMULATION = [
    ("trials", "nearest"),
    ("output dimension d", "nearest"),
    ("backend", "nearest"),
    ("n_jobs", "nearest"),
    ("wall time (s)", "nearest"),
    ("trials restored from checkpoint", "nearest"),
]


def test_noise_rows_round_every_noise_scale_up():
    values = {key: 0.5 + i for i, (_, key) in enumerate(layout._NOISE_FIELDS)}
    rows = layout._field_rows(values, layout._NOISE_FIELDS)
    assert [(label, side) for label, _, side, _ in rows] == NOISE
    assert [value for _, value, _, _ in rows] == [0.5 + i for i in range(len(NOISE))]
    assert not any(vacuous for *_, vacuous in rows)


def test_simulation_rows_are_nearest_and_absent_fields_are_none():
    sim = {"n_trials": 100, "dim": 3, "backend": "loky", "n_jobs": 2}
    rows = layout._field_rows(sim, layout._SIMULATION_FIELDS)
    assert [(label, side) for label, _, side, _ in rows] == SIMULATION
    assert [value for _, value, _, _ in rows] == [100, 3, "loky", 2, None, None]
