"""Tests for pacpriv.datasets: bundled loaders, CSV / NumPy files, error messages."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pacpriv.datasets import BUNDLED_DATASETS, Dataset, load_dataset

# (n_records, n_features, number of classes or None) from scikit-learn's dataset documentation.
SHAPES = {
    "iris": (150, 4, 3),
    "wine": (178, 13, 3),
    "breast_cancer": (569, 30, 2),
    "digits": (1797, 64, 10),
    "diabetes": (442, 10, None),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_bundled_shapes(name):
    """Bundled datasets load with their documented sizes, float64 X and a JSON summary."""
    ds = load_dataset(name)
    n, p, k = SHAPES[name]
    assert isinstance(ds, Dataset) and ds.name == name
    assert ds.X.shape == (n, p) and ds.X.dtype == np.float64 and ds.n_records == n
    assert len(ds.feature_names) == p
    assert (ds.classes is None) == (k is None)
    if k is not None:
        assert len(ds.classes) == k and ds.y.dtype == np.int64 and len(ds.target_names) == k
    json.dumps(ds.to_dict())
    assert set(BUNDLED_DATASETS) == set(SHAPES)


def test_iris_published_ranges_and_pool():
    """Iris ranges are the published min/max (sepal length 4.3..7.9); pool is (X, y)."""
    ds = load_dataset("iris")
    info = ds.info()
    assert info.feature_low[0] == 4.3 and info.feature_high[0] == 7.9
    assert info.bounds_source == "published" and info.n_features == 4
    X, y = ds.pool
    assert X is ds.X and y is ds.y
    np.testing.assert_array_equal(np.bincount(y), [50, 50, 50])


def test_digits_published_pixel_range():
    """Digits pixels use the published range [0, 16], even for always-blank pixels."""
    info = load_dataset("digits").info()
    assert set(info.feature_low) == {0.0} and set(info.feature_high) == {16.0}


def test_diabetes_is_regression():
    """Diabetes keeps a float target and no class list (its targets are integer-valued)."""
    ds = load_dataset("diabetes")
    assert ds.classes is None and ds.y.dtype == np.float64 and ds.target_names is None


def test_arrays_read_only():
    """Pool arrays are read-only, so a mechanism cannot corrupt the pool."""
    ds = load_dataset("wine")
    with pytest.raises(ValueError, match="read-only"):
        ds.X[0, 0] = 1.0


def test_csv_with_header_and_label_name(tmp_path):
    """A CSV with a header and a named label column loads features, classes and names."""
    path = tmp_path / "pool.csv"
    path.write_text("a,label,b\n1.5,0,2\n-1,1,3e2\n\n0,1,4\n")
    ds = load_dataset(path, label_column="label")
    np.testing.assert_array_equal(ds.X, [[1.5, 2.0], [-1.0, 300.0], [0.0, 4.0]])
    np.testing.assert_array_equal(ds.y, [0, 1, 1])
    assert ds.feature_names == ("a", "b") and ds.classes == (0, 1) and ds.name == "pool"
    assert ds.feature_low == (-1.0, 2.0) and ds.info().bounds_source == "pool"


def test_csv_without_header_unlabelled(tmp_path):
    """A header-less CSV is all data; the pool is X alone."""
    path = tmp_path / "x.csv"
    path.write_text("1,2\n3,4\n")
    ds = load_dataset(str(path))
    np.testing.assert_array_equal(ds.pool, [[1, 2], [3, 4]])
    assert ds.y is None and ds.feature_names == ("x0", "x1")


def test_csv_string_labels_and_negative_index(tmp_path):
    """String labels become codes 0..K-1 in sorted order, kept as target_names."""
    path = tmp_path / "s.csv"
    path.write_text("f,species\n1,setosa\n2,virginica\n3,setosa\n")
    ds = load_dataset(path, label_column=-1)
    np.testing.assert_array_equal(ds.y, [0, 1, 0])
    assert ds.target_names == ("setosa", "virginica")


def test_csv_float_labels_are_regression(tmp_path):
    """Non-integer numeric labels give a regression target (classes None)."""
    path = tmp_path / "r.csv"
    path.write_text("1,0.5\n2,1.25\n")
    ds = load_dataset(path, label_column=1)
    assert ds.classes is None and ds.y.dtype == np.float64


def test_csv_non_numeric_reports_line(tmp_path):
    """A non-numeric feature value names the file, line and column."""
    path = tmp_path / "bad.csv"
    path.write_text("a,b\n1,2\n3,oops\n")
    with pytest.raises(ValueError, match=r"line 3, column 2: non-numeric value; ") as err:
        load_dataset(path)
    assert "oops" not in str(err.value)  # a record's value stays out of messages (and logs)
    assert "if column 'b' holds labels, pass it as `label_column`" in str(err.value)


@pytest.mark.parametrize("cell", ["1e400", "-1e309", "inf", "-Infinity"])
def test_csv_non_finite_cell_is_not_quoted(tmp_path, cell):
    """New-user review F12: an overflowing salary is a record's value: line/column only."""
    path = tmp_path / "inf.csv"
    path.write_text(f"a,b\n1,{cell}\n3,4\n")
    with pytest.raises(ValueError, match=r"inf.csv, line 2, column 2: non-finite value") as err:
        load_dataset(path)
    message = str(err.value)
    assert repr(cell) not in message and "1e" not in message and "-I" not in message
    assert message.startswith("inf.csv, line 2, column 2: non-finite value (NaN, infinity or "
                              "beyond the float range); features must be finite numbers")


def test_csv_undecodable_byte_is_not_quoted(tmp_path):
    """A non-UTF-8 file: say so, without the byte (codec messages quote it)."""
    path = tmp_path / "latin.csv"
    path.write_bytes(b"a,b\n1,\xe9\n3,4\n")
    with pytest.raises(ValueError, match=r"latin.csv: not UTF-8 text") as err:
        load_dataset(path)
    assert "0xe9" not in str(err.value) and "\\xe9" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "kwargs", "match"),
    [
        # an empty field is a non-numeric value, not a silent NaN
        ("1,2\n3,\n", {}, r"line 2, column 2: empty value"),
        # a NaN/NA marker is a missing value (pandas' convention), refused by default
        ("1,2\n3,nan\n", {}, r"line 2, column 2: missing-value marker; missing values"),
        ("1,2\n3,inf\n", {}, r"line 2, column 2: non-finite value \(NaN"),  # inf refused
        ("1,2\n3,4,5\n", {}, "line 2: expected 2 fields, found 3"),  # ragged rows
        ("", {}, "is empty"),
        ("\n\n  \n", {}, "is empty"),  # blank lines only
        ("a,b\n", {}, "has a header but no data rows"),
        ("1,2\n", {"label_column": "y"}, "has no header row"),  # a label name needs a header
    ],
    ids=["missing", "nan-marker", "non-finite", "ragged", "empty", "blank", "header-only",
         "label-no-header"],
)
def test_bad_csv_is_refused(tmp_path, text, kwargs, match):
    """Malformed CSV files raise ValueError naming the problem (and the line where it has one)."""
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_dataset(path, **kwargs)


def test_csv_other_delimiter_is_hinted(tmp_path):
    """A ';'-separated file read with ',' says which delimiter to pass."""
    path = tmp_path / "semi.csv"
    path.write_text("a;b\n1;2\n3;4\n")
    with pytest.raises(ValueError, match=r"pass `delimiter`=';'") as info:
        load_dataset(path)
    assert "--" not in str(info.value)  # a Python caller reads argument names, not CLI flags
    assert load_dataset(path, delimiter=";").X.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_label_name_not_in_header(tmp_path):
    """A label column name must be a header field."""
    path = tmp_path / "n.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="'y' is not a column"):
        load_dataset(path, label_column="y")


def test_label_index_out_of_range(tmp_path):
    """A label column index must exist."""
    path = tmp_path / "n.csv"
    path.write_text("1,2\n")
    with pytest.raises(ValueError, match=r"must be in \[-2, 1\] for 2 columns; got 5"):
        load_dataset(path, label_column=5)


def test_npy_with_label_column(tmp_path):
    """A 2-D .npy array, with an integer label column split off."""
    path = tmp_path / "a.npy"
    np.save(path, np.array([[1.0, 0.0, 2.0], [3.0, 1.0, 4.0]]))
    ds = load_dataset(path, label_column=1)
    np.testing.assert_array_equal(ds.X, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(ds.y, [0, 1])
    assert ds.classes == (0, 1)


def test_npz_X_and_y(tmp_path):
    """An .npz archive with X and y."""
    path = tmp_path / "a.npz"
    np.savez(path, X=np.eye(3), y=np.array([0, 1, 1]))
    ds = load_dataset(path)
    np.testing.assert_array_equal(ds.X, np.eye(3))
    assert ds.classes == (0, 1)


def test_npz_without_X(tmp_path):
    """An .npz archive must hold an array named X."""
    path = tmp_path / "a.npz"
    np.savez(path, data=np.eye(2))
    with pytest.raises(ValueError, match="must hold an array named 'X'"):
        load_dataset(path)


def test_npz_length_mismatch(tmp_path):
    """X and y must have the same number of records."""
    path = tmp_path / "a.npz"
    np.savez(path, X=np.eye(3), y=np.array([0, 1]))
    with pytest.raises(ValueError, match="X has 3 rows but y has 2 entries"):
        load_dataset(path)


def test_npy_one_dimensional(tmp_path):
    """A 1-D .npy array is not a pool."""
    path = tmp_path / "v.npy"
    np.save(path, np.arange(3.0))
    with pytest.raises(ValueError, match="must be a 2-D array"):
        load_dataset(path)


def test_npy_non_numeric(tmp_path):
    """A string array is refused."""
    path = tmp_path / "s.npy"
    np.save(path, np.array([["a", "b"]]))
    with pytest.raises(ValueError, match="must be numeric"):
        load_dataset(path)


def test_unknown_name_lists_bundled():
    """An unknown name lists the bundled datasets."""
    with pytest.raises(ValueError, match=r"unknown dataset 'irs'; bundled datasets are .*iris"):
        load_dataset("irs")


def test_missing_file(tmp_path):
    """A missing file raises FileNotFoundError with the path."""
    path = tmp_path / "nope.csv"
    with pytest.raises(FileNotFoundError, match=r"nope\.csv"):
        load_dataset(path)


def test_unsupported_extension(tmp_path):
    """Only .csv, .npy and .npz are read."""
    path = tmp_path / "d.xlsx"
    path.write_text("x")
    with pytest.raises(ValueError, match=r"unsupported dataset file extension '\.xlsx'"):
        load_dataset(path)


def test_label_column_for_bundled():
    """label_column is meaningless for bundled datasets."""
    with pytest.raises(ValueError, match=r"applies to \.csv/\.npy files only"):
        load_dataset("iris", label_column=0)


def test_bad_spec_type():
    """The spec must be a name or a path."""
    with pytest.raises(TypeError, match="must be a dataset name or a path"):
        load_dataset(3)


def test_a_first_record_with_a_text_label_is_data_not_a_header(tmp_path):
    """Leak review (session 20): a headerless CSV whose first record had a text label (or an
    empty cell) was read as a header: its values became column names in every report."""
    rows = ["98765432.1,98765432.1,98765432.1,CEO", "1,2,3,staff", "4,5,6,staff"]
    path = tmp_path / "nohdr.csv"
    path.write_text("\n".join(rows) + "\n")
    ds = load_dataset(path, label_column=3)
    assert ds.n_records == 3 and ds.X[0, 0] == 98765432.1
    assert "98765432.1" not in json.dumps(ds.to_dict())
    gap = tmp_path / "gap.csv"
    gap.write_text("98765432.1,,98765432.1\n1,2,3\n")
    with pytest.raises(ValueError, match=r"line 1, column 2: empty value") as err:
        load_dataset(gap)
    assert "98765432" not in str(err.value)
    # a real header (names, or a blank index column as pandas writes it) is still a header
    hdr = tmp_path / "hdr.csv"
    hdr.write_text(",a,b\n0,1.5,2\n1,3,4\n")
    assert load_dataset(hdr).n_records == 2


@pytest.mark.parametrize("first", ['"$98765432.1","$51234.5","$49000.0"',
                                   'emp0,"98,765,432.1",NA', "98765432.1,NA,1"])
def test_a_formatted_or_missing_first_record_is_not_a_header(first, tmp_path):
    """Leak re-check (session 20): `$`-formatted numbers, thousands separators and NA markers
    in a headerless first record made it a header (its values became column names)."""
    path = tmp_path / "p.csv"
    path.write_text(first + "\n1,2,3\n4,5,6\n")
    with pytest.raises(ValueError, match=r"line 1, column \d") as err:
        load_dataset(path)
    assert "98765432" not in str(err.value) and "98,765" not in str(err.value)


def test_wrong_delimiter_error_does_not_quote_the_first_record(tmp_path):
    path = tmp_path / "semi.csv"
    path.write_text("50628.7;98765432.1;53202.1;0\n1;2;3;1\n")
    with pytest.raises(ValueError) as err:
        load_dataset(path, label_column="dept")
    assert "98765432" not in str(err.value)


def test_csv_text_column_hints_name_api_arguments(tmp_path):
    """Python callers read `drop_columns`/`label_column`/`categorical`, never CLI flags."""
    path = tmp_path / "text.csv"
    path.write_text("a,notes\n1,x\n2,y\n")
    with pytest.raises(ValueError) as info:
        load_dataset(path)
    msg = str(info.value)
    assert "`drop_columns`" in msg and "`label_column`" in msg and "`categorical`" in msg
    assert "--" not in msg


@pytest.mark.parametrize("ranges", ["1e300:1e301", "-1e200:0", "0:2e121"])
def test_feature_ranges_beyond_2_pow_400_are_refused_at_load(tmp_path, ranges):
    """A declared range whose end a mechanism's output could not carry (|end| > 2**400) is a
    ValueError naming `feature_ranges` at load, not a failure inside the trials."""
    path = tmp_path / "pool.csv"
    path.write_text("a,b\n1,2\n3,4\n5,6\n7,8\n")
    with pytest.raises(ValueError, match=r"`feature_ranges`: feature 0 .* outside ±2\*\*400"):
        load_dataset(path, feature_ranges=ranges)
    ds = load_dataset(path, feature_ranges=f"{-(2.0**400)!r}:{2.0**400!r}")
    assert ds.feature_high == (2.0**400, 2.0**400)


@pytest.mark.parametrize(("text", "kw", "after"), [
    ("label\n1\n0\n1\n0\n1\n", {"label_column": "label"}, r"after the label column\.$"),
    ("a,label\n1,1\n2,0\n3,1\n4,0\n", {"label_column": "label", "drop_columns": ["a"]},
     r"after the label column and `drop_columns`\.$"),
    ("a,b\n1,1\n2,0\n3,1\n4,0\n", {"drop_columns": ["a", "b"]}, r"after `drop_columns`\.$"),
])
def test_no_feature_column_left_names_what_took_them(tmp_path, text, kw, after):
    """A CSV left without features says what removed them; `drop_columns` only if given."""
    path = tmp_path / "pool.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match="no feature column is left of 'pool.csv' " + after):
        load_dataset(path, **kw)


@pytest.mark.parametrize("label", ["label", 2, -1])
@pytest.mark.parametrize("drop", [["label"], [2], ["a", -1]])
def test_drop_columns_naming_the_label_column_is_refused(tmp_path, label, drop):
    """`drop_columns` listing the label column (by name or index) was silently ignored: the
    labels were still read from it. Now one ValueError, before any column is read."""
    path = tmp_path / "pool.csv"
    path.write_text("a,b,label\n1,2,0\n3,4,1\n5,6,0\n7,8,1\n")
    with pytest.raises(ValueError, match="`drop_columns` must not list the label column"):
        load_dataset(path, label_column=label, drop_columns=drop)
    ds = load_dataset(path, label_column=label, drop_columns=["a"])  # the label kept apart
    assert ds.X.shape == (4, 1) and list(ds.y) == [0, 1, 0, 1]
