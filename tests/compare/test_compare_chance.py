"""`pacpriv compare` says when the non-private baseline is at chance (V1 review F8).

One outlying record sets the pool's feature ranges, every other record is squeezed to a
point after min-max scaling, and no model learns: the comparison must say so (report and
CLI), name `--feature-ranges`, and quote no record.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pacpriv.cli import main
from pacpriv.compare.render import CHANCE_NOTE_PREFIX, chance_note

OUTLIER = (2503.25, -3017.5, 911.75, 733.125)  # distinctive values, searched for in outputs


@pytest.mark.parametrize(
    ("accuracy", "labels", "n_test", "fires"),
    [
        (0.60, [0] * 60 + [1] * 40, 100, True),    # majority 0.6: a constant predictor
        (0.69, [0] * 60 + [1] * 40, 100, True),    # 0.6 + 2·sqrt(0.24/100) = 0.698
        (0.70, [0] * 60 + [1] * 40, 100, False),
        (0.45, [0, 1, 2, 2], 10_000, True),        # below the majority rate 0.5
        (0.52, [0, 1, 2, 2], 10_000, False),       # 0.5 + 2·sqrt(0.25/1e4) = 0.51
    ],
)
def test_threshold_is_majority_rate_plus_two_standard_errors(accuracy, labels, n_test, fires):
    note = chance_note(accuracy, np.array(labels), n_test=n_test, bounds_source="pool")
    assert (note is not None) == fires
    if fires:
        q = max(np.bincount(labels)) / len(labels)
        assert note.startswith(CHANCE_NOTE_PREFIX)
        assert f"majority-class rate {q:.3f}" in note
        assert f"{q + 2 * math.sqrt(q * (1 - q) / n_test):.3f} with 2 standard errors" in note


def test_cause_named_only_for_pool_ranges():
    y = np.array([0] * 50 + [1] * 50)
    pool = chance_note(0.5, y, n_test=50, bounds_source="pool")
    published = chance_note(0.5, y, n_test=50, bounds_source="published")
    assert "--feature-ranges" in pool and "extreme record" in pool
    assert "--feature-ranges" not in published and "published" in published


def _csv(path, X, y):
    rows = ["a,b,c,d,y label"] + [",".join(repr(float(v)) for v in r) + f",{c}"
                                  for r, c in zip(X, y, strict=True)]
    path.write_text("\n".join(rows) + "\n")


@pytest.mark.slow  # two comparisons with torch training: about 15 s on 2 loaded cores
@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_cli_warns_on_outlier_and_feature_ranges_fix_it(tmp_path, capsys):
    pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 4))
    y = (X @ np.array([1.0, -1.0, 0.5, 0.3]) > 0).astype(int)
    X[0] = OUTLIER
    _csv(tmp_path / "cls.csv", X, y)
    base = ["compare", "--dataset", str(tmp_path / "cls.csv"), "--label-column", "y label",
            "--trials", "8", "--repeats", "1", "--n-jobs", "1", "--seed", "4", "--no-progress",
            "--no-exact", "--per-record-trials", "0", "--format", "json,md"]

    assert main([*base, "--out", str(tmp_path / "bad")]) == 0
    out = capsys.readouterr().out
    assert f"warning: {CHANCE_NOTE_PREFIX}" in out and "--feature-ranges" in out
    comparison = json.loads((tmp_path / "bad" / "comparison.json").read_text())
    assert comparison["baseline"]["test_accuracy"] < 0.7  # at chance indeed
    assert comparison["notes"][0].startswith(CHANCE_NOTE_PREFIX)
    md = (tmp_path / "bad" / "report.md").read_text()
    assert CHANCE_NOTE_PREFIX in md
    for text in (out, md, json.dumps(comparison)):
        assert not any(str(v) in text for v in OUTLIER)

    assert main([*base, "--feature-ranges", "-4:4", "--out", str(tmp_path / "good")]) == 0
    out = capsys.readouterr().out
    assert CHANCE_NOTE_PREFIX not in out
    comparison = json.loads((tmp_path / "good" / "comparison.json").read_text())
    assert comparison["baseline"]["test_accuracy"] > 0.85
    assert not any(n.startswith(CHANCE_NOTE_PREFIX) for n in comparison["notes"])
    assert comparison["settings"]["feature_scaling"].endswith("declared feature ranges")
