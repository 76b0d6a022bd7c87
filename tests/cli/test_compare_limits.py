"""``pacpriv compare`` refuses huge counts in one line before any work (new user: ``--epochs
1e9`` trained for minutes, ``--steps-per-epoch 1e12`` allocated 8 TB, ``--trials 1e12`` was
refused only after PAC trials ran, ``--repeats 1e9`` ran ~forever)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest


@pytest.fixture()
def pool(tmp_path):
    """A small two-class CSV (loads without scikit-learn)."""
    path = tmp_path / "pool.csv"
    rows = [f"{(i * 7) % 11 / 10:.1f},{(i * 3) % 5 / 4:.2f},{i % 2}" for i in range(40)]
    path.write_text("a,b,y\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize(("flag", "value"), [
    ("--epochs", "1e9"), ("--epochs", str(10**400)), ("--steps-per-epoch", "1e12"),
    ("--trials", "1e12"), ("--repeats", "1e9"), ("--per-record-trials", "1e7"),
])
def test_huge_count_refused_in_one_line(flag, value, pool, tmp_path):
    argv = [sys.executable, "-m", "pacpriv", "compare", "--dataset", str(pool),
            "--label-column", "y", "--out", str(tmp_path / "out"), "--force", "--no-progress",
            flag, value]
    tic = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr[-400:]
    assert time.monotonic() - tic < 30
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and "Traceback" not in proc.stderr, lines
    assert len(lines[0]) < 300  # a 400-digit count is described, not echoed
    assert not (tmp_path / "out").exists()  # refused before the folder is taken


def test_step_product_refused_and_limits_accepted(pool):
    """The product of epochs and steps is bounded too; values at the limits pass the checks."""
    from pacpriv.compare.run import MAX_STEPS, ComparisonSettings, check_comparison
    from pacpriv.datasets import load_dataset

    ds = load_dataset(pool, label_column="y")
    assert MAX_STEPS == 10**7
    with pytest.raises(ValueError, match="steps_per_epoch"):
        check_comparison(ComparisonSettings(epochs=10**4, steps_per_epoch=10**4), (0.6,), [ds])
    check_comparison(ComparisonSettings(epochs=10**3, steps_per_epoch=10**4, n_repeats=1000,
                                        n_trials=10**6, per_record_trials=0), (0.6,), [ds])
