"""Real CSVs (issue 36 item 4): categorical columns, missing values and standardisation with
scikit-learn's transformers, the same in the API and in every command that reads a dataset."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from pacpriv.cli import main
from pacpriv.datasets import Preprocessing, load_dataset

CITIES = ("paris", "london", "berlin")
SECRET_INCOME = "987654.5"  # a record's value: never in a message or a report


def write_table(path, n=60, seed=0):
    """A CSV with a text column, a yes/no column, missing cells (empty and NA) and raw scales."""
    rng = np.random.default_rng(seed)
    lines = ["age,income,city,smoker,label"]
    for i in range(n):
        age = str(int(rng.integers(20, 80)))
        income = SECRET_INCOME if i == 0 else f"{rng.normal(50000, 15000):.1f}"
        city = CITIES[int(rng.integers(3))]
        smoker = "yes" if rng.random() < 0.3 else "no"
        if i % 10 == 3:
            income = ""
        if i % 10 == 7:
            city = "NA"
        lines.append(f"{age},{income},{city},{smoker},{int(rng.integers(2))}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def table(tmp_path):
    return write_table(tmp_path / "people.csv")


def test_default_refuses_missing_with_counts_not_values(table):
    """Default: a text column, then missing cells, are one-line errors with counts only."""
    with pytest.raises(ValueError, match=r"column 3: non-numeric value.*`categorical`") as err:
        load_dataset(table, label_column="label")
    assert "paris" not in str(err.value)
    with pytest.raises(ValueError, match=r"line 5, column 2: empty value; missing values "
                       r"\(empty or NA\) in 12 of 60 rows and 2 of 3 feature columns; set "
                       r"`missing` to .drop.") as err:
        load_dataset(table, label_column="label", columns=["age", "income", "city"],
                     preprocessing=Preprocessing(categorical="ordinal"))
    assert SECRET_INCOME not in str(err.value)


def test_one_hot_and_median_match_sklearn_by_hand(table):
    """The pool equals the same ColumnTransformer built independently on a pandas frame."""
    import pandas as pd

    spec = Preprocessing(categorical="one-hot", missing="impute-median", standardize=True)
    ds = load_dataset(table, label_column="label", preprocessing=spec)
    frame = pd.read_csv(table, keep_default_na=True)
    ct = ColumnTransformer([
        ("num", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()),
         ["age", "income"]),
        ("city", make_pipeline(SimpleImputer(strategy="most_frequent"),
                               OneHotEncoder(sparse_output=False)), ["city"]),
        ("smoker", OneHotEncoder(sparse_output=False), ["smoker"]),
    ])
    expected = ct.fit_transform(frame.drop(columns="label"))
    np.testing.assert_allclose(ds.X, expected, atol=1e-12)
    assert ds.feature_names == ("age", "income", "city[0]", "city[1]", "city[2]",
                                "smoker[0]", "smoker[1]")
    np.testing.assert_array_equal(ds.y, frame["label"].to_numpy())
    np.testing.assert_allclose(ds.X[:, :2].mean(axis=0), 0, atol=1e-12)
    described = json.dumps(ds.to_dict())
    assert "one-hot" in described and "median" in described and "standardized" in described
    assert SECRET_INCOME not in described and "paris" not in described


def test_drop_removes_exactly_the_rows_with_a_missing_cell(table):
    ds = load_dataset(table, label_column="label",
                      preprocessing=Preprocessing(categorical="ordinal", missing="drop"))
    assert ds.n_records == 48  # rows 3, 7, 13, 17, ... hold a missing cell
    assert set(np.unique(ds.X[:, 2])) <= {0.0, 1.0, 2.0}
    assert "12 row(s) with missing values dropped" in ds.preprocessing


def test_missing_label_is_never_imputed(tmp_path):
    path = tmp_path / "l.csv"
    path.write_text("a,label\n1,0\n2,\n3,1\n4,0\n")
    with pytest.raises(ValueError, match=r"the label is missing.*set `missing` to 'drop' \(labels"):
        load_dataset(path, label_column="label",
                     preprocessing=Preprocessing(missing="impute-median"))
    ds = load_dataset(path, label_column="label", preprocessing=Preprocessing(missing="drop"))
    assert ds.n_records == 3 and ds.y.tolist() == [0, 1, 0]


def test_standardize_every_source_and_ranges_become_the_pools():
    ds = load_dataset("wine", preprocessing=Preprocessing(standardize=True))
    np.testing.assert_allclose(ds.X.std(axis=0), 1.0, rtol=1e-12)
    assert ds.bounds_source == "pool" and "feature_low" not in ds.to_dict()


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"categorical": "onehot"}, r"`categorical` must be one of one-hot, ordinal"),
    ({"missing": "mean"}, r"`missing` must be one of error, drop, impute-median"),
])
def test_bad_spec_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Preprocessing(**kwargs)


def test_no_value_column_and_inf_are_refused(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("a,b\n1,\n2,NA\n3,\n")
    with pytest.raises(ValueError, match=r"column 'b' has no value in any row"):
        load_dataset(path, preprocessing=Preprocessing(missing="impute-median"))
    path.write_text("a,b\n1,\n2,inf\n3,4\n")
    with pytest.raises(ValueError, match=r"line 3, column 2: non-finite value"):
        load_dataset(path, preprocessing=Preprocessing(missing="impute-median"))


FLAGS = ["--label-column", "label", "--categorical", "one-hot", "--missing", "impute-median",
         "--standardize"]


def _assert_applied(report: dict):
    pre = report["dataset"]["preprocessing"]
    assert "one-hot" in pre and "median" in pre and "standardized" in pre
    assert SECRET_INCOME not in json.dumps(report)


@pytest.mark.filterwarnings("ignore::pacpriv.exceptions.UndersampledWarning")
def test_pac_run_and_records_apply_and_report_it(table, tmp_path, capsys):
    base = ["--mechanism", "mean", "--dataset", str(table), *FLAGS, "--seed", "1",
            "--n-jobs", "1", "--no-progress", "--format", "json,md"]
    assert main(["pac", "run", *base, "--mi-budget", "0.1", "--trials", "30",
                 "--out", str(tmp_path / "run")]) == 0
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    _assert_applied(report)
    assert report["dataset"]["n_features"] == 7 and len(report["release"]) == 7
    assert "dataset preprocessing" in (tmp_path / "run" / "report.md").read_text()
    assert "pacpriv: preprocessing: 2 text column(s) one-hot" in capsys.readouterr().err
    assert main(["pac", "records", *base, "--noise-std", "0.5", "--trials", "20",
                 "--records", "0-2", "--out", str(tmp_path / "rec")]) == 0
    assert "one-hot" in json.dumps(json.loads((tmp_path / "rec" / "report.json").read_text()))


def test_compare_audit_and_predict_fit_apply_it(table, tmp_path, capsys):
    assert main(["compare", "--dataset", str(table), *FLAGS, "--target-accuracy", "0.6",
                 "--out", str(tmp_path / "cmp"), "--trials", "8", "--epochs", "1",
                 "--steps-per-epoch", "2", "--repeats", "1", "--n-jobs", "1", "--seed", "3",
                 "--no-progress", "--no-exact", "--format", "json",
                 "--per-record-trials", "0"]) == 0
    assert "one-hot" in (tmp_path / "cmp" / "report.json").read_text()
    assert main(["audit", "--dataset", str(table), *FLAGS, "--target-accuracy", "0.6",
                 "--out", str(tmp_path / "aud"), "--format", "json", "--model", "logistic",
                 "--reference-models", "4", "--epochs", "1", "--steps-per-epoch", "1",
                 "--seed", "3", "--n-jobs", "1", "--no-progress"]) == 0
    assert "one-hot" in (tmp_path / "aud" / "report.json").read_text()
    capsys.readouterr()
    assert main(["predict", "fit", "--estimator", "naive_bayes", "--dataset", str(table),
                 *FLAGS, "--state", str(tmp_path / "s"), "--n-worlds", "4",
                 "--per-query-budget", "2^-10", "--target-accuracy", "0.55", "--seed", "0",
                 "--no-progress"]) == 0
    assert "pacpriv: preprocessing: 2 text column(s) one-hot" in capsys.readouterr().err


def test_cli_default_is_one_line_with_counts(table, tmp_path, capsys):
    rc = main(["pac", "run", "--mechanism", "mean", "--dataset", str(table), "--label-column",
               "label", "--categorical", "ordinal", "--mi-budget", "1",
               "--out", str(tmp_path / "x")])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "in 12 of 60 rows and 2 of 4 feature columns" in err
    assert "set --missing to 'drop', 'impute-median' or 'impute-most-frequent'" in err
    assert SECRET_INCOME not in err


def test_predict_query_file_refuses_preprocessing_flags(table, tmp_path, capsys):
    """A query takes no preprocessing flags (the fit's transformers, stored in the state, are
    applied to raw rows: tests/prediction/test_query_preprocessing.py): one line, before the
    state is read."""
    queries = tmp_path / "q.csv"
    queries.write_text("1,2,3\n")
    state = tmp_path / "state"
    state.mkdir()
    rc = main(["predict", "query", "--state", str(state), "--queries", str(queries),
               "--standardize"])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "takes no --categorical, --missing or --standardize" in err
    assert "applied to the query rows automatically" in err

_CELL = st.one_of(st.integers(-50, 50).map(str), st.sampled_from(["", "NA", "nan", "?"]))


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(_CELL, _CELL, st.sampled_from(["a", "b", "c", ""]))
                .filter(lambda r: any(r)),  # a line of empty fields only is a blank line
                min_size=3, max_size=12))
def test_drop_and_impute_match_pandas(tmp_path_factory, rows):
    """Property: on any small table, `drop` keeps exactly pandas' dropna rows and
    `impute-median` fills numeric columns with pandas' median (and ordinal codes follow the
    sorted categories)."""
    import pandas as pd

    path = tmp_path_factory.mktemp("prop") / "t.csv"
    path.write_text("x,y,c\n" + "\n".join(",".join(r) for r in rows) + "\n")
    frame = pd.read_csv(path, na_values=["NA", "nan", "?"], keep_default_na=True,
                        dtype={"c": object})
    complete = frame.dropna()
    numeric_ok = frame[["x", "y"]].notna().any().all() and frame["c"].notna().any()
    if len(complete) >= 2:
        ds = load_dataset(path, preprocessing=Preprocessing(categorical="ordinal",
                                                            missing="drop"))
        codes = {c: float(k) for k, c in enumerate(sorted(complete["c"].unique()))}
        expected = np.column_stack([complete["x"], complete["y"], complete["c"].map(codes)])
        np.testing.assert_array_equal(ds.X, expected)
    if numeric_ok:
        ds = load_dataset(path, preprocessing=Preprocessing(categorical="ordinal",
                                                            missing="impute-median"))
        np.testing.assert_allclose(ds.X[:, 0], frame["x"].fillna(frame["x"].median()))
        np.testing.assert_allclose(ds.X[:, 1], frame["y"].fillna(frame["y"].median()))
