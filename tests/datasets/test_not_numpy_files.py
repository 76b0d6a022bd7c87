"""A file named ``.npy``/``.npz`` that is not one is "not a NumPy file" in one line (ninth
new-user pass, #232: a text file named ``.npy`` said "Cannot load file containing pickled
data"), for ``--dataset``, ``load_dataset`` and the ``--rows`` files alike; its content is
never quoted."""

from __future__ import annotations

import numpy as np
import pytest

from pacpriv.cli.main import main
from pacpriv.datasets import load_dataset
from pacpriv.datasets.files import load_numpy

_SECRET = b"age,income\n41,123456\n"


@pytest.mark.parametrize("name, content, words", [
    ("text.npy", _SECRET, "it is not a NumPy .npy file (its first bytes are not NumPy's header)"),
    ("text.NPY", _SECRET, "it is not a NumPy .npy file"),
    ("text.npz", _SECRET, "it is not a NumPy .npz file (its first bytes are not a ZIP"),
    ("saved.npz", None, "it is not a NumPy .npz file"),  # a .npy file named .npz
    ("empty.npy", b"", "the file is empty"),
])
def test_not_a_numpy_file(tmp_path, name, content, words):
    path = tmp_path / name
    if content is None:
        np.save(tmp_path / "a.npy", np.ones((3, 2)))
        (tmp_path / "a.npy").rename(path)
    else:
        path.write_bytes(content)
    with pytest.raises(ValueError) as info:
        load_numpy(path)
    text = str(info.value)
    assert words in text and "pickle" not in text and "123456" not in text
    with pytest.raises(ValueError, match=r"NumPy|empty"):
        load_dataset(str(path))


def test_real_numpy_files_still_load(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(6.0).reshape(3, 2))
    np.savez(tmp_path / "x.npz", X=np.arange(6.0).reshape(3, 2))
    assert load_numpy(tmp_path / "x.npy").shape == (3, 2)
    with load_numpy(tmp_path / "x.npz") as npz:
        assert npz["X"].shape == (3, 2)


def test_cli_dataset_named_npy_holding_text(tmp_path, capsys):
    path = tmp_path / "notnpy.npy"
    path.write_bytes(_SECRET)
    rc = main(["pac", "run", "--mechanism", "mean", "--dataset", str(path), "--mi-budget", "0.1",
               "--trials", "30", "--out", str(tmp_path / "rep"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err
    assert err == (f"pacpriv: error: cannot read {str(path)!r}: it is not a NumPy .npy file "
                   "(its first bytes are not NumPy's header): give a file written by "
                   "numpy.save, or a .csv file")
