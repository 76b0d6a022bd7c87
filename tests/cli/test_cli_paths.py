"""Every path option of every command fails in one line, before any work (issue 25, item 3).

``predict fit --state FILE`` printed a ``NotADirectoryError`` traceback, a port in use printed
uvicorn's own error. The table below lists every path-taking option of every command (folders
written, folders read, files read, the serve port) and each way it can be wrong: an existing
file where a folder is expected, a folder where a file is expected, a missing folder, a file
on the way, no permission, a port in use. Each gives exit status 2, one ``pacpriv: error:``
line that names the option's path, and no traceback; the user's code never runs.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import numpy as np
import pytest

from pacpriv.cli import main

FUNCS = '''
import os
import numpy as np

def counted(X):
    open(os.environ["PACPRIV_TEST_CALLS"], "a").write("x")
    X = X[0] if isinstance(X, tuple) else X
    return np.clip(np.asarray(X), -3, 3).mean(axis=0)

def fit(data):
    open(os.environ["PACPRIV_TEST_CALLS"], "a").write("x")
    from sklearn.naive_bayes import GaussianNB
    return GaussianNB().fit(*data)
'''

#: A folder no one can create files in, not even root (sysfs is read-only).
UNWRITABLE = "/sys/pacpriv-cannot-write-here"


@pytest.fixture()
def user(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 2))
    y = (X[:, 0] > 0).astype(int)
    rows = ["a,b,label"] + [f"{float(r[0])!r},{float(r[1])!r},{c}"
                            for r, c in zip(X, y, strict=True)]
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "myfuncs.py").write_text(FUNCS)
    (tmp_path / "afile.txt").write_text("a file\n")
    (tmp_path / "adir.csv").mkdir()  # a folder named like a data file
    (tmp_path / "adir.py").mkdir()
    (tmp_path / "ranges.txt").write_text("-5,5\n")
    (tmp_path / "emptystate").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PACPRIV_TEST_CALLS", str(tmp_path / "calls.txt"))
    return tmp_path


PAC_RUN = ["pac", "run", "--mechanism", "myfuncs.py:counted", "--dataset", "data.csv",
           "--label-column", "label", "--mi-budget", "0.2", "--trials", "10", "--seed", "1",
           "--no-progress", "--rule", "anisotropic", "--out", "rep"]
#: --feature-ranges reaches built-in mechanisms only (a user function with it is refused)
PAC_RUN_BUILTIN = [("mean" if a == "myfuncs.py:counted" else a) for a in PAC_RUN]
RECORDS = ["pac", "records", "--mechanism", "myfuncs.py:counted", "--dataset", "data.csv",
           "--noise-std", "0.5", "--trials", "10", "--records", "0-1", "--seed", "1",
           "--no-progress", "--out", "rec"]
COMPARE = ["compare", "--dataset", "data.csv", "--label-column", "label", "--trials", "10",
           "--epochs", "1", "--steps-per-epoch", "2", "--repeats", "1", "--no-exact",
           "--per-record-trials", "0", "--no-progress", "--out", "cmp"]
FIT = ["predict", "fit", "--estimator", "myfuncs.py:fit", "--dataset", "data.csv",
       "--label-column", "label", "--state", "st", "--n-worlds", "4", "--per-query-budget",
       "2^-10", "--total-budget", "2^-8", "--seed", "1", "--no-progress"]
QUERY = ["predict", "query", "--state", "emptystate", "--queries", "data.csv",
         "--label-column", "label"]
STATUS = ["predict", "status", "--state", "emptystate", "--out", "statusrep"]
SERVE = ["serve", "--state", "emptystate", "--port", "8765"]

#: What can be wrong with each kind of path: (case, bad value, words of the one line).
WRITTEN_FOLDER = [
    ("an existing file", "afile.txt", "is an existing file"),
    ("a file on the way", "afile.txt/sub", "cannot be created: 'afile.txt' is an existing file"),
    ("no permission", UNWRITABLE, "is not writable"),
]
READ_FOLDER = [
    ("missing", "nostate", "'nostate' does not exist"),
    ("an existing file", "afile.txt", "is an existing file"),
]
READ_FILE = [
    ("missing", "missing.csv", "not found: missing.csv"),
    ("a folder", "adir.csv", "'adir.csv' is a folder"),
    ("a missing folder", "nodir/data.csv", "the folder 'nodir' does not exist"),
]

#: Every path option of every command: (command line, option, kind of path).
OPTIONS = [
    (PAC_RUN, "--out", WRITTEN_FOLDER),
    (PAC_RUN, "--checkpoint", WRITTEN_FOLDER),
    (PAC_RUN, "--dataset", READ_FILE),
    (PAC_RUN_BUILTIN, "--feature-ranges", [
        ("missing", "missing.txt", "feature ranges file not found: missing.txt"),
        ("a folder", "adir.csv", "feature ranges file 'adir.csv' is a folder")]),
    (PAC_RUN, "--mechanism", [
        ("missing", "missing.py:f", "mechanism file not found: missing.py"),
        ("a folder", "adir.py:f", "mechanism file 'adir.py' is a folder")]),
    (RECORDS, "--out", WRITTEN_FOLDER),
    (RECORDS, "--checkpoint", WRITTEN_FOLDER),
    (RECORDS, "--dataset", READ_FILE),
    (RECORDS, "--mechanism", [("missing", "missing.py:f", "mechanism file not found")]),
    (COMPARE, "--out", WRITTEN_FOLDER),
    (COMPARE, "--dataset", READ_FILE),
    (COMPARE, "--feature-ranges", [("missing", "missing.txt", "feature ranges file not found")]),
    (FIT, "--state", WRITTEN_FOLDER),
    (FIT, "--dataset", READ_FILE),
    (FIT, "--estimator", [("missing", "missing.py:f", "estimator file not found"),
                          ("a folder", "adir.py:f", "estimator file 'adir.py' is a folder")]),
    (QUERY, "--state", READ_FOLDER),
    (QUERY, "--queries", [("missing", "missing.csv", "--queries file not found"),
                          ("a folder", "adir.csv", "--queries file 'adir.csv' is a folder")]),
    (STATUS, "--state", READ_FOLDER),
    (STATUS, "--out", WRITTEN_FOLDER),
    (SERVE, "--state", READ_FOLDER),
]

CASES = [pytest.param(argv, flag, bad, words, id=f"{argv[0]} {argv[1]} {flag}: {case}")
         for argv, flag, kinds in OPTIONS for case, bad, words in kinds]


def _with(argv: list[str], flag: str, value: str) -> list[str]:
    if flag in argv:
        out = list(argv)
        out[out.index(flag) + 1] = value
        return out
    return [*argv, flag, value]


@pytest.mark.parametrize("argv, flag, bad, words", CASES)
def test_a_bad_path_is_one_line_before_any_work(user, capsys, argv, flag, bad, words):
    code = main(_with(argv, flag, bad))
    _, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("pacpriv: error: "), err
    assert words in lines[0] and "Traceback" not in err
    assert not (user / "calls.txt").exists()  # the user's code never ran
    assert not (user / "rep").exists() and not (user / "st").exists()


@pytest.mark.parametrize("flag, value, words", [
    ("--dataset", "locked.csv", "dataset file 'locked.csv' cannot be read (Permission denied)"),
    ("--mechanism", "locked.py:f", "mechanism file 'locked.py' cannot be read"),
    ("--feature-ranges", "locked.txt", "feature ranges file 'locked.txt' cannot be read"),
])
def test_an_unreadable_file_is_one_line(user, capsys, monkeypatch, flag, value, words):
    """chmod 000 does not stop root, so the refusal is simulated where the file is opened."""
    import builtins

    locked = Path(value.split(":")[0])
    locked.write_text(Path("data.csv").read_text() if locked.suffix == ".csv" else "x\n")
    os.chmod(locked, 0)
    real_open = builtins.open

    def guarded_open(file, *args, **kwargs):
        if Path(str(file)).name == locked.name:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    code = main(_with(PAC_RUN_BUILTIN if flag == "--feature-ranges" else PAC_RUN, flag, value))
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and words in lines[0]
    assert not (user / "calls.txt").exists()


def test_serve_on_a_port_in_use_is_one_line_and_not_uvicorns(user, capsys):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        code = main(_with(SERVE, "--port", str(port)))
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1
    assert f"--port {port} on 127.0.0.1 is already in use" in lines[0]
    assert "uvicorn" not in err.lower() and "Errno" not in err


def test_missing_parent_folders_of_an_output_folder_are_created(user, capsys):
    """Not an error: --out a/b/c creates the folders (a file on the way is one)."""
    code = main(_with(PAC_RUN, "--out", "deep/er/rep"))
    assert code == 0, capsys.readouterr().err
    assert (user / "deep" / "er" / "rep" / "report.json").is_file()
