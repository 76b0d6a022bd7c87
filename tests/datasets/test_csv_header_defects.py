"""CSV header defects (new-user log #71, #82, #98, #99): a UTF-8 byte-order mark is not part
of the first column's name, and duplicate column names are refused, naming the names."""

from __future__ import annotations

import pytest

from pacpriv.datasets import load_dataset


def test_bom_is_stripped_and_columns_select_by_name(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfa,b\n1,2\n3,4\n5,6\n")
    ds = load_dataset(str(path))
    assert list(ds.feature_names) == ["a", "b"]
    picked = load_dataset(str(path), columns=["a"])
    assert list(picked.feature_names) == ["a"]
    assert picked.pool.tolist() == [[1.0], [3.0], [5.0]]


@pytest.mark.parametrize("header", ["age,age,income", "x,y,x,y"])
def test_duplicate_names_refused(tmp_path, header):
    path = tmp_path / "dup.csv"
    n = len(header.split(","))
    path.write_text(header + "\n" + "\n".join(",".join(["7"] * n) for _ in range(3)) + "\n")
    with pytest.raises(ValueError, match=r"duplicate column names \[") as info:
        load_dataset(str(path))
    assert "7" not in str(info.value).replace(str(path), "")  # names, never values

