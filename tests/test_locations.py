"""A location of an unknown form is refused in one line before anything is opened (new-user
pass 6, h134: ``pacpriv serve --ledger bogus://x`` said "[Errno 2] No such file or directory:
'bogus:/x'": the URL was read as a path and its ``//`` collapsed).

Siblings: every ``--ledger`` flag, the API ``open_store``, and the path flags/arguments
(``--state``, ``--checkpoint``, ``--out``) that go through :mod:`pacpriv._files`.
"""

from __future__ import annotations

import os

import pytest

from pacpriv import _files
from pacpriv.cli.main import main
from pacpriv.storage import check_location, open_store

BAD = ["bogus://x", "sqlite:///tmp/l.db", "file:///tmp/l.db", "s3://bucket/key", "HTTP://h/x"]


@pytest.mark.parametrize("url", BAD)
def test_open_store_refuses_other_schemes(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"unsupported URL scheme .*SQLite file path.*postgres"):
        open_store(url)
    assert os.listdir(tmp_path) == []  # nothing was created


@pytest.mark.parametrize("ok", ["ledger.db", "dir/ledger.db", "C:/x/ledger.db",
                                "postgresql://u@h:5432/db", "postgres://h/db",
                                "PostgreSQL://h/db"])
def test_known_forms_pass(ok):
    check_location(ok)


def test_sqlite_path_still_opens(tmp_path):
    store = open_store(tmp_path / "ledger.db")
    assert (tmp_path / "ledger.db").exists()
    del store


@pytest.mark.parametrize("check", [_files.check_existing_dir, _files.check_output_dir,
                                   _files.check_input_file, _files.check_output_file])
@pytest.mark.parametrize("url", BAD)
def test_path_checks_refuse_urls(check, url):
    with pytest.raises(ValueError, match=r"--flag must be a local file or folder path; got a URL"):
        check(url, "--flag")


@pytest.mark.parametrize("argv", [
    ["serve", "--state", "{d}", "--ledger", "bogus://x"],
    ["serve", "keys", "list", "--state", "{d}", "--ledger", "sqlite:///x"],
    ["predict", "status", "--state", "{d}", "--ledger", "file:///x"],
])
def test_cli_ledger_flags_refuse_in_one_line(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = [a.format(d=tmp_path) for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "argument --ledger: unsupported URL scheme" in err and "postgresql://" in err
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize(("flag", "extra"), [
    ("--out", []), ("--checkpoint", ["--out", "{d}/o"]),
])
def test_cli_path_flags_refuse_urls(flag, extra, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
            "--no-progress", *[e.format(d=tmp_path) for e in extra], flag, "bogus://x"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"pacpriv: error: {flag} must be a local file or folder path; got a URL "
                   "(bogus://...), which pacpriv does not read or write.")
    assert not (tmp_path / "bogus:").exists()


@pytest.mark.parametrize("spec", ["", " ", "\t"])
def test_an_empty_dataset_is_named_not_read_as_the_current_folder(spec, tmp_path, monkeypatch,
                                                                  capsys):
    # new-user pass 6, c8505: --dataset '' said "dataset file '.' is a folder"
    from pacpriv.datasets import load_dataset
    with pytest.raises(ValueError, match=r"^`spec` must name a dataset or a \.csv"):
        load_dataset(spec)
    monkeypatch.chdir(tmp_path)
    rc = main(["pac", "run", "--no-progress", "--mechanism", "mean", "--dataset", spec,
               "--mi-budget", "0.1", "--out", "r"])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"pacpriv: error: --dataset must name a dataset or a .csv, .npy or "
                          f".npz file; got {spec!r}; bundled datasets are ")
    assert os.listdir(tmp_path) == []
