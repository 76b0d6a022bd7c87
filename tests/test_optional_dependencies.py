"""Dependencies: pandas is core; an optional package reached from the CLI gives an install hint."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from pacpriv.cli import main

ROOT = Path(__file__).resolve().parents[1]
DP = ("dp_accounting", "dp_accounting.pld", "dp_accounting.pld.privacy_loss_distribution")


def _block(monkeypatch, names) -> None:
    for name in names:  # None in sys.modules makes the import raise ModuleNotFoundError
        monkeypatch.setitem(sys.modules, name, None)


def test_pandas_is_a_core_dependency():
    text = (ROOT / "pyproject.toml").read_text()  # tomllib is 3.11+; the block is plain
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.M | re.S)
    assert block is not None
    assert re.search(r'^\s*"pandas>=1\.5",?$', block.group(1), re.M), block.group(1)


def test_csv_preprocessing_without_pandas_names_the_fix(monkeypatch, tmp_path):
    from pacpriv.datasets import Preprocessing, load_dataset

    path = tmp_path / "people.csv"
    path.write_text("age,city,label\n34,paris,0\n,london,1\n29,paris,0\n51,berlin,1\n")
    _block(monkeypatch, ["pandas"])
    with pytest.raises(ImportError, match=r"CSV preprocessing needs pandas: pip install"):
        load_dataset(str(path), label_column="label", preprocessing=Preprocessing(
            categorical="one-hot", missing="impute-median"))


def test_cli_poisson_epsilon_without_dp_accounting_names_the_extra(monkeypatch, capsys):
    _block(monkeypatch, DP)
    rc = main(["dpsgd", "sigma", "--steps-per-epoch", "13", "--epochs", "2",
               "--target-epsilon", "3", "--sampling", "poisson"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert "needs dp_accounting: pip install 'pacpriv[compare]'" in err
    assert len(err.strip().splitlines()) == 1


def test_poisson_tradeoff_without_dp_accounting_names_the_extra(monkeypatch):
    from pacpriv.dpsgd import tradeoff

    _block(monkeypatch, DP)
    with pytest.raises(ImportError, match=r"pip install 'pacpriv\[compare\]'"):
        tradeoff._poisson_loss(1.37, 0.071, 7, 1e-3)
