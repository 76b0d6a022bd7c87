"""Data files whose columns float64 cannot carry are refused before any work (exit 2, one line).

0.4 read a CSV of 1e-300 values, ran a trial, and exited 1 with a mechanism error; a column of
1e300 under ``--standardize`` became NaN with numpy warnings. Every file source (CSV, .npy,
.npz), every preprocessing path and every command that loads ``--dataset`` now checks each
column's scale (and finiteness) at load time, naming the column and the range, never a value.
"""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.cli import main
from pacpriv.datasets import load_dataset
from pacpriv.datasets.preprocessing import COLUMN_SCALE_RANGE, Preprocessing
from pacpriv.pac.engine._mechanism import MAX_OUTPUT_MAGNITUDE, MIN_OUTPUT_MAGNITUDE

RNG = np.random.default_rng(0)


def _table(kind: str) -> np.ndarray:
    x = RNG.random((40, 3)) + 0.1
    if kind == "tiny":
        x *= 1e-300
    elif kind == "subnormal":
        x *= 1e-310
    elif kind == "huge":
        x *= 1e300
    elif kind == "one-huge-record":
        x[7, 0] = 1e200
    elif kind == "one-tiny-column":
        x[:, 1] *= 1e-200
    elif kind == "near-max":
        x[:, 2] = x[:, 2] / 1.2 * 1.7e308
    return x


KINDS = ["tiny", "subnormal", "huge", "one-huge-record", "one-tiny-column", "near-max"]


def _write(tmp_path, kind: str, ext: str):
    x = _table(kind)
    path = tmp_path / f"{kind}.{ext}"
    if ext == "csv":
        np.savetxt(path, x, delimiter=",", header="a,b,c", comments="")
    elif ext == "npy":
        np.save(path, x)
    else:
        np.savez(path, X=x, y=np.arange(40) % 2)
    return path


def _one_line_refusal(capsys, tmp_path):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pacpriv: error: "), err
    assert "range [3.87e-121, 2.58e+120]" in err[0] and "Traceback" not in err[0]
    assert "e+300" not in err[0] and "e-300" not in err[0] and "e+200" not in err[0]
    assert not (tmp_path / "out").exists()
    return err[0]


def test_the_range_is_the_engines():
    assert COLUMN_SCALE_RANGE == (MIN_OUTPUT_MAGNITUDE, MAX_OUTPUT_MAGNITUDE)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ext", ["csv", "npy", "npz"])
@pytest.mark.parametrize("standardize", [False, True])
def test_pac_run_refuses_before_any_work(kind, ext, standardize, tmp_path, capsys):
    path = _write(tmp_path, kind, ext)
    args = ["pac", "run", "--mechanism", "mean", "--dataset", str(path), "--trials", "20",
            "--mi-budget", "0.5", "--no-progress", "--out", str(tmp_path / "out")]
    assert main(args + (["--standardize"] if standardize else [])) == 2
    line = _one_line_refusal(capsys, tmp_path)
    column = {"one-tiny-column": "b", "near-max": "c"}.get(kind, "a")
    if ext != "csv":
        column = {"a": "x0", "b": "x1", "c": "x2"}[column]
    assert f"column {column!r}" in line


@pytest.mark.parametrize("command", [
    ["pac", "records", "--mechanism", "mean", "--trials", "20", "--target-accuracy", "0.6"],
    ["compare", "--epochs", "1"],
    ["predict", "fit", "--estimator", "logistic", "--label-column", "c",
     "--per-query-budget", "0.1", "--total-budget", "1"],
    ["audit", "--model", "logistic", "--non-private", "--label-column", "c"],
])
def test_every_command_that_loads_a_dataset_refuses(command, tmp_path, capsys):
    path = _write(tmp_path, "tiny", "csv")
    if command[0] == "predict":
        command = [*command, "--state", str(tmp_path / "out")]
    else:
        command = [*command, "--out", str(tmp_path / "out")]
    assert main([*command, "--dataset", str(path)]) == 2
    _one_line_refusal(capsys, tmp_path)


def test_text_columns_and_missing_cells_are_checked_before_standardising(tmp_path, capsys):
    path = tmp_path / "mixed.csv"
    rows = ["a,b,c"] + [f"{(i + 1) * 1e299},t{i % 3},{'' if i == 4 else i}" for i in range(30)]
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(ValueError, match="column 'a' has values above"):
        load_dataset(path, preprocessing=Preprocessing(categorical="one-hot", standardize=True,
                                                       missing="impute-median"))


def test_small_values_in_a_column_of_normal_scale_are_fine(tmp_path):
    x = _table("plain")
    x[3, 0], x[5, 1] = 1e-310, 0.0  # a subnormal and a zero beside values of order 1
    path = tmp_path / "fine.csv"
    np.savetxt(path, x, delimiter=",", header="a,b,c", comments="")
    ds = load_dataset(path)
    assert ds.X.shape == (40, 3) and ds.X[3, 0] == 1e-310
    zeros = tmp_path / "zeros.npy"
    np.save(zeros, np.c_[x, np.zeros(40)])
    assert load_dataset(zeros).X.shape == (40, 4)
