"""`predict query` reads query rows like `predict fit` reads the pool (V1 review F10).

A header row is allowed, `--delimiter` and `--label-column` work as at fit time, and a
wrong shape names the CLI flag (never the Python argument `X_queries`).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from pacpriv.cli import main


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A state fitted on cls.csv (4 features and a label column 'y label' with a space)."""
    folder = tmp_path_factory.mktemp("pq")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    body = [",".join(repr(float(v)) for v in r) + f",{c}" for r, c in zip(X, y, strict=True)]
    (folder / "cls.csv").write_text("\n".join(["f1,f2,f3,f4,y label", *body]) + "\n")
    state = folder / "st"
    assert main(["predict", "fit", "--estimator", "naive_bayes", "--dataset",
                 str(folder / "cls.csv"), "--label-column", "y label", "--state", str(state),
                 "--n-worlds", "4", "--per-query-budget", "2^-12", "--total-budget", "1",
                 "--seed", "1", "--no-progress"]) == 0
    return folder, state, X


def _query(capsys, state, *argv):
    code = main(["predict", "query", "--state", str(state), *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _write(path, rows, header=None, sep=","):
    lines = ([sep.join(header)] if header else []) + [sep.join(repr(float(v)) for v in r)
                                                      for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_header_delimiter_and_label_column_as_at_fit(fitted, capsys, tmp_path):
    """The same three rows answer from: a headed CSV, a ';' CSV without header, the pool
    file itself with --label-column, and an .npy; each gives 3 probability rows."""
    folder, state, X = fitted
    sources = [
        ("--queries", _write(tmp_path / "h.csv", X[:3], header=["f1", "f2", "f3", "f4"])),
        ("--queries", _write(tmp_path / "s.csv", X[:3], sep=";"), "--delimiter", ";"),
        ("--dataset", folder / "cls.csv", "--rows", "0:3", "--label-column", "y label"),
    ]
    np.save(tmp_path / "q.npy", X[:3])
    sources.append(("--queries", tmp_path / "q.npy"))
    for argv in sources:
        code, out, err = _query(capsys, state, *argv, "--json")
        assert code == 0, (argv, err)
        outputs = np.array(json.loads(out)["outputs"])
        assert outputs.shape == (3, 2)
        assert np.allclose(outputs.sum(axis=1), 1.0)  # noisy probabilities still sum to 1


def test_label_column_forgotten_takes_the_fit_s_columns_by_name(fitted, capsys):
    """Without --label-column the pool file has 5 columns: the state knows the fit's 4 feature
    columns by name (a CSV fit), so they are taken by name and the label column is ignored,
    with a note (fourteenth new-user pass: refused before, with no hint)."""
    folder, state, _ = fitted
    code, out, err = _query(capsys, state, "--dataset", folder / "cls.csv", "--rows", "0:3",
                            "--json")
    assert code == 0 and len(json.loads(out)["outputs"]) == 3
    assert "taken by name; 1 other column(s) ignored" in err and "X_queries" not in err


def test_wrong_width_queries_file(fitted, capsys, tmp_path):
    _, state, X = fitted
    path = _write(tmp_path / "w.csv", X[:2, :3])
    code, _, err = _query(capsys, state, "--queries", path)
    # a CSV fit knows its columns' names: the error names them and the widths
    assert code == 2 and "w.csv, line 1: 3 feature columns; the state's fit read 4 (f1, f2, " \
        "f3, f4)" in err
    assert "label-column" not in err  # 3 columns: not a label column too many
    assert "X_queries" not in err


def test_rows_outside_the_file(fitted, capsys):
    folder, state, _ = fitted
    code, _, err = _query(capsys, state, "--dataset", folder / "cls.csv", "--rows", "70:72",
                          "--label-column", "y label")
    assert code == 2 and "--rows 70:72: STOP is beyond the 60 rows of --dataset" in err


@pytest.mark.parametrize("rows", ["0:100000", "58:61"])
def test_rows_stop_beyond_the_file_is_refused_before_spending(fitted, capsys, rows):
    """New-user review F10: STOP past the end was clamped like a slice and 60 rows were spent."""
    from pacpriv.prediction import PrivatePredictor

    folder, state, _ = fitted
    before = PrivatePredictor.load(state).n_answered
    code, out, err = _query(capsys, state, "--dataset", folder / "cls.csv", "--rows", rows,
                            "--label-column", "y label")
    assert code == 2 and out == ""
    assert (f"--rows {rows}: STOP is beyond the 60 rows of --dataset (START:STOP must lie "
            "within 0:60)") in err
    assert PrivatePredictor.load(state).n_answered == before
    code, _, err = _query(capsys, state, "--dataset", folder / "cls.csv", "--rows", "58:60",
                          "--label-column", "y label")
    assert code == 0, err  # the last rows themselves are fine


def test_bad_query_value_withheld(fitted, capsys, tmp_path):
    """A non-numeric value in a query file: line and column, not the value."""
    _, state, X = fitted
    path = _write(tmp_path / "bad.csv", X[:2], header=["f1", "f2", "f3", "f4"])
    path.write_text(path.read_text().replace(repr(float(X[1, 2])), "secretword"))
    code, _, err = _query(capsys, state, "--queries", path)
    assert code == 2 and "line 3, column 3" in err and "secretword" not in err
