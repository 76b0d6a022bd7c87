"""CLI conveniences users looked for (issue 25, item 8).

``--columns``/``--drop-columns`` for a CSV with a text column, on every command that reads a
dataset (and in ``load_dataset``); a ``--label-column`` hint when ``compare`` gets an
unlabelled file; "file not found" for a missing ``--feature-ranges`` file; a reminder after a
run that a checkpoint folder holds un-noised outputs; a progress bar by default in
``PacPrivateFunction.calibrate``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import pacpriv
from pacpriv.cli import main


@pytest.fixture()
def user(tmp_path, monkeypatch):
    """people.csv: two numeric features, a free-text column and a label."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(40, 2))
    y = (X[:, 0] > 0).astype(int)
    rows = ["a,notes,b,label"] + [f"{float(r[0])!r},note {i} by ann,{float(r[1])!r},{c}"
                                  for i, (r, c) in enumerate(zip(X, y, strict=True))]
    (tmp_path / "people.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "queries.csv").write_text("\n".join(rows[:4]) + "\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _err(capsys) -> str:
    return capsys.readouterr().err


RUN = ["pac", "run", "--mechanism", "mean", "--dataset", "people.csv", "--mi-budget", "0.2",
       "--trials", "30", "--seed", "1", "--no-progress", "--rule", "anisotropic",
       "--label-column", "label"]


def test_a_text_column_is_refused_with_the_drop_columns_hint(user, capsys):
    assert main([*RUN, "--out", "r"]) == 2
    err = _err(capsys)
    assert "column 2: non-numeric value" in err and "add 'notes' to --drop-columns" in err
    assert "note 0 by ann" not in err  # the cell is described, never quoted


@pytest.mark.parametrize("selection", [["--drop-columns", "notes"], ["--columns", "a,b"],
                                       ["--columns", "0,2"], ["--drop-columns", "1"]])
def test_pac_run_with_a_column_selection(user, capsys, selection):
    assert main([*RUN, *selection, "--out", "r", "--json"]) == 0, _err(capsys)
    report = json.loads(capsys.readouterr().out)
    assert report["dataset"]["feature_names"] == ["a", "b"]


def test_pac_records_with_drop_columns(user, capsys):
    code = main(["pac", "records", "--mechanism", "mean", "--dataset", "people.csv",
                 "--drop-columns", "notes,label", "--noise-std", "0.5", "--trials", "10",
                 "--records", "0-1", "--seed", "1", "--no-progress", "--json", "--out", "rec"])
    assert code == 0, _err(capsys)
    assert json.loads(capsys.readouterr().out)["kind"] == "analytic"


def test_predict_fit_and_query_with_drop_columns(user, capsys):
    fit = ["predict", "fit", "--estimator", "naive_bayes", "--dataset", "people.csv",
           "--label-column", "label", "--drop-columns", "notes", "--state", "st",
           "--n-worlds", "4", "--per-query-budget", "2^-10", "--total-budget", "2^-8",
           "--seed", "1", "--no-progress"]
    assert main(fit) == 0, _err(capsys)
    capsys.readouterr()
    code = main(["predict", "query", "--state", "st", "--queries", "queries.csv",
                 "--label-column", "label", "--drop-columns", "notes", "--json"])
    assert code == 0, _err(capsys)
    assert len(json.loads(capsys.readouterr().out)["outputs"]) == 3


def test_columns_and_drop_columns_are_exclusive(user, capsys):
    with pytest.raises(SystemExit):
        main([*RUN, "--columns", "a", "--drop-columns", "notes"])
    assert "not allowed with" in _err(capsys)


def test_an_unknown_column_names_the_flag_and_the_columns(user, capsys):
    assert main([*RUN, "--drop-columns", "nope", "--out", "r"]) == 2
    err = _err(capsys)
    assert "--drop-columns: 'nope' is not a column of 'people.csv'" in err
    assert "['a', 'notes', 'b', 'label']" in err  # column names are public facts


def test_load_dataset_selects_columns_of_every_kind_of_file(user):
    ds = pacpriv.load_dataset("people.csv", drop_columns=["notes"], label_column="label")
    assert ds.feature_names == ("a", "b") and ds.X.shape == (40, 2) and ds.y is not None
    same = pacpriv.load_dataset("people.csv", columns=[0, "b"], label_column="label")
    np.testing.assert_array_equal(ds.X, same.X)
    np.save("m.npy", np.arange(12.0).reshape(4, 3))
    assert pacpriv.load_dataset("m.npy", columns=["x2", 0]).X.tolist() == [
        [2.0, 0.0], [5.0, 3.0], [8.0, 6.0], [11.0, 9.0]]
    iris = pacpriv.load_dataset("iris", drop_columns=["sepal width (cm)"])
    assert iris.n_features == 3 and len(iris.feature_low) == 3
    with pytest.raises(ValueError, match="either `columns` or `drop_columns`"):
        pacpriv.load_dataset("people.csv", columns=["a"], drop_columns=["notes"])
    with pytest.raises(ValueError, match="must not list the label column"):
        pacpriv.load_dataset("people.csv", columns=["a", "label"], label_column="label")


@pytest.mark.parametrize("dropped, words", [
    ("notes", "has no labels: compare trains a classifier on (X, y); pass --label-column label"),
    ("notes,label", "pass --label-column NAME (the column holding the classes)"),
])
def test_compare_hints_at_label_column_for_an_unlabelled_file(user, capsys, dropped, words):
    code = main(["compare", "--dataset", "people.csv", "--drop-columns", dropped,
                 "--no-progress", "--out", "cmp"])
    assert code == 2 and words in _err(capsys)


def test_a_missing_feature_ranges_file_is_file_not_found(user, capsys):
    assert main([*RUN, "--drop-columns", "notes", "--feature-ranges", "ranges.txt",
                 "--out", "r"]) == 2
    assert "feature ranges file not found: ranges.txt" in _err(capsys)


@pytest.mark.parametrize("command", ["pac run", "pac records"])
def test_a_checkpoint_reminder_after_the_run(user, capsys, command):
    argv = ([*RUN, "--drop-columns", "notes", "--out", "r"] if command == "pac run" else
            ["pac", "records", "--mechanism", "mean", "--dataset", "people.csv",
             "--drop-columns", "notes,label", "--noise-std", "0.5", "--trials", "10",
             "--records", "0-1", "--seed", "1", "--no-progress", "--out", "rec"])
    assert main([*argv, "--checkpoint", "ck"]) == 0
    err = _err(capsys)
    assert "the checkpoint folder 'ck' holds the un-noised output of every trial" in err
    assert "delete it once you are done" in err
    assert main([*argv, "--force"]) == 0  # the same --out again: replacing needs --force
    assert "checkpoint folder" not in _err(capsys)


def test_calibrate_shows_progress_by_default(capsys):
    f = pacpriv.pac_private(lambda s: np.asarray(s).mean(axis=0) if len(s) else np.zeros(2),
                            mi_budget=0.5, rule="anisotropic")
    f.calibrate(np.random.default_rng(0).normal(size=(30, 2)), n_trials=50, rng=0)
    err = capsys.readouterr().err
    assert "pac: 100%" in err and "50/50" in err and "trial" in err


# --- a header name holding a comma (seventh new-user pass, #5/#6) ------------------------------


_COMMA_CSV = ('age,"income, usd",score,label\n30,50000,1.5,0\n40,60000,2.5,1\n50,70000,3.5,0\n'
              '35,55000,2.0,1\n45,65000,3.0,0\n55,75000,4.0,1\n')


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.PacprivWarning")
@pytest.mark.parametrize("flag", ["--columns", "--drop-columns"])
def test_a_name_with_a_comma_is_given_in_quotes_or_by_index(tmp_path, capsys, flag):
    """``--columns "income, usd"`` is cut at the comma: the error says how to name it (its
    index, or the name in double quotes), and both ways select the column."""
    import json

    from pacpriv.cli import main

    data = tmp_path / "messy.csv"
    data.write_text(_COMMA_CSV)
    base = ["pac", "run", "--mechanism", "mean", "--dataset", str(data), "--label-column",
            "label", "--mi-budget", "0.1", "--trials", "20", "--seed", "0", "--no-progress"]
    rc = main([*base, flag, "income, usd", "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err
    assert "'income, usd' holds a comma: give its 0-based index 1, or its name in double " \
           "quotes" in err
    dims = []
    for spec in ('"income, usd"', "1"):
        out = tmp_path / f"o{len(dims)}"
        rc = main([*base, flag, spec, "--out", str(out), "--json"])
        assert rc == 0, capsys.readouterr().err
        dims.append(json.loads(capsys.readouterr().out)["simulation"]["dim"])
    assert dims == ([1, 1] if flag == "--columns" else [2, 2])


def test_feature_ranges_with_a_user_function_is_refused_before_loading(tmp_path, capsys):
    """Only a built-in mechanism receives --feature-ranges; with a user function they were
    accepted and ignored (seventh new-user pass, #385)."""
    from pacpriv.cli import main

    (tmp_path / "own.py").write_text("def f(S):\n    return S[0].mean(axis=0)\n")
    rc = main(["pac", "run", "--mechanism", f"{tmp_path / 'own.py'}:f", "--dataset", "iris",
               "--feature-ranges=-3:3", "--mi-budget", "0.1", "--trials", "20", "--no-progress",
               "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and not (tmp_path / "o").exists()
    assert "does not receive them: clip inside it" in err and "warning" not in err
