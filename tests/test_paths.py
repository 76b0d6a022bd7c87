"""Every path a public function takes fails in one line, before any work (issue 25, item 3).

``write_report(result, "afile.txt")`` raised a bare ``FileExistsError``. The table lists every
path-taking public function and argument -- report folders, checkpoints, disk-backed outputs,
prediction state (new and existing), dataset files, feature-range files, mechanism files, the
serve port -- with each way the path can be wrong. Each raises an ``OSError`` subclass (or
the documented ``CheckpointError``) whose one-line message names the argument and the path,
before the mechanism runs.
"""

from __future__ import annotations

import socket
import warnings
from pathlib import Path

import numpy as np
import pytest

import pacpriv
from pacpriv.exceptions import CheckpointError
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.pac.engine._simulate import simulate

UNWRITABLE = "/sys/pacpriv-cannot-write-here"  # read-only sysfs: not even root writes here
POOL = np.arange(20.0).reshape(10, 2)
CALLS: list[int] = []


def counted(subset):
    CALLS.append(1)
    return np.asarray(subset).mean(axis=0) if len(subset) else np.zeros(2)


@pytest.fixture()
def place(tmp_path, monkeypatch):
    (tmp_path / "afile.txt").write_text("a file\n")
    (tmp_path / "adir.npy").mkdir()
    (tmp_path / "adir.csv").mkdir()
    (tmp_path / "adir.py").mkdir()
    monkeypatch.chdir(tmp_path)
    CALLS.clear()
    return tmp_path


@pytest.fixture(scope="module")
def result():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pacpriv.run_pac(counted, POOL, mi_budget=0.5, n_trials=20, rng=0,
                               rule="anisotropic", execution=ExecutionOptions(progress=False))


def _simulate(**execution):
    return simulate(counted, POOL, n_trials=4, rng=0,
                    execution=ExecutionOptions(progress=False, **execution))


def _write_report(out_dir, result):
    from pacpriv.report import write_report

    return write_report(result, out_dir, formats=("json",))


def _predictor(state, result=None):
    from pacpriv.prediction import PrivatePredictor

    y = (POOL[:, 0] > 9).astype(int)
    return PrivatePredictor(counted, (POOL, y), n_worlds=4, per_query_budget=0.01,
                            total_budget=0.1, output="value", state=state, rng=1)


def _load_predictor(state, result=None):
    from pacpriv.prediction import PrivatePredictor

    return PrivatePredictor.load(state)


def _load_dataset(path, result=None):
    return pacpriv.load_dataset(path)


def _feature_ranges(path, result=None):
    from pacpriv.datasets import parse_feature_ranges

    return parse_feature_ranges(path, 2)


def _load_object(path, result=None):
    from pacpriv.registry import load_object

    return load_object(f"{path}:f", what="mechanism")


#: (function, bad path, exception, words of the message)
CASES = [
    # a folder written: write_report(out_dir), simulate/run_pac checkpoint, new predictor state
    (_write_report, "afile.txt", NotADirectoryError, "`out_dir` 'afile.txt' is an existing file"),
    (_write_report, "afile.txt/sub", NotADirectoryError, "'afile.txt' is an existing file"),
    (_write_report, UNWRITABLE, PermissionError, "`out_dir` '/sys/pacpriv-cannot-write-here' "
     "is not writable"),
    (lambda p, r: _simulate(checkpoint=p), "afile.txt", CheckpointError,
     "`checkpoint` must be a directory; 'afile.txt' is a file"),
    (lambda p, r: _simulate(checkpoint=p), "afile.txt/ck", NotADirectoryError,
     "`checkpoint` 'afile.txt/ck' cannot be created"),
    (lambda p, r: _simulate(checkpoint=p), UNWRITABLE, PermissionError, "`checkpoint` "),
    (_predictor, "afile.txt", NotADirectoryError, "`state` 'afile.txt' is an existing file"),
    (_predictor, "afile.txt/st", NotADirectoryError, "`state` 'afile.txt/st' cannot be created"),
    (_predictor, UNWRITABLE, PermissionError, "`state` '/sys/pacpriv-cannot-write-here' is not "
     "writable"),
    # a file written: simulate(output_path)
    (lambda p, r: _simulate(output_path=p), "adir.npy", IsADirectoryError,
     "`output_path` 'adir.npy' is a folder"),
    (lambda p, r: _simulate(output_path=p), "nodir/out.npy", FileNotFoundError,
     "`output_path` 'nodir/out.npy': the folder 'nodir' does not exist"),
    (lambda p, r: _simulate(output_path=p), "afile.txt/out.npy", NotADirectoryError,
     "'afile.txt' is an existing file, not a folder"),
    (lambda p, r: _simulate(output_path=p), UNWRITABLE + ".npy", PermissionError,
     "`output_path` '/sys/pacpriv-cannot-write-here.npy' is not writable"),
    (lambda p, r: _simulate(output_path=p), "out.txt", ValueError,
     "`output_path` must end with '.npy'"),
    # a folder read: a fitted state
    (_load_predictor, "nostate", FileNotFoundError, "`state` 'nostate' does not exist"),
    (_load_predictor, "afile.txt", NotADirectoryError, "`state` 'afile.txt' is an existing file"),
    # files read: datasets, feature ranges, mechanism files
    (_load_dataset, "missing.csv", FileNotFoundError, "dataset file not found: missing.csv"),
    (_load_dataset, "adir.csv", IsADirectoryError, "dataset file 'adir.csv' is a folder"),
    (_load_dataset, "nodir/x.csv", FileNotFoundError, "the folder 'nodir' does not exist"),
    (_feature_ranges, "ranges.txt", FileNotFoundError,
     "feature ranges file not found: ranges.txt (or give the ranges themselves"),
    (_feature_ranges, Path("adir.csv"), IsADirectoryError, "'adir.csv' is a folder"),
    (_load_object, "missing.py", FileNotFoundError, "mechanism file not found: missing.py"),
    (_load_object, "adir.py", IsADirectoryError, "mechanism file 'adir.py' is a folder"),
]


@pytest.mark.parametrize("call, bad, error, words", CASES,
                         ids=[f"{i}-{c[1]}" for i, c in enumerate(CASES)])
def test_a_bad_path_is_one_line_before_any_work(place, result, call, bad, error, words):
    CALLS.clear()
    with pytest.raises(error) as info:
        call(bad, result)
    text = str(info.value)
    assert words in text and "\n" not in text
    assert not CALLS  # the mechanism never ran
    if isinstance(info.value, OSError) and error is not CheckpointError:
        assert not text.startswith("[Errno")  # pacpriv's sentence, not the OS's


def test_write_report_into_a_new_nested_folder_creates_it(place, result):
    from pacpriv.report import write_report

    paths = write_report(result, place / "a" / "b", formats=("json",))
    assert paths["json"].is_file()


def test_a_port_in_use_is_refused_before_serving():
    from pacpriv.prediction._app import check_port

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(OSError, match=rf"`port` {port} on 127.0.0.1 is already in use"):
            check_port("127.0.0.1", port)
    check_port("127.0.0.1", port)  # free again: no error


def test_the_checks_themselves(tmp_path, monkeypatch):
    import builtins

    from pacpriv import _files

    f = tmp_path / "f.txt"
    f.write_text("x")
    assert _files.check_input_file(f, "x file") == f
    assert _files.check_output_dir(tmp_path / "new" / "deeper", "`d`") == tmp_path / "new" / \
        "deeper"
    assert not (tmp_path / "new").exists()  # creates nothing
    assert _files.check_output_file(tmp_path / "o.npy", "`o`", suffix=".npy")
    assert _files.check_existing_dir(tmp_path, "`s`") == tmp_path
    with pytest.raises(TypeError, match="`d` must be a path"):
        _files.check_output_dir(3, "`d`")
    real_open = builtins.open

    def refuse(file, *args, **kwargs):
        if Path(str(file)) == f:
            raise PermissionError(13, "Permission denied")
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", refuse)
    with pytest.raises(PermissionError, match=r"x file '.*f\.txt' cannot be read "
                       r"\(Permission denied\)"):
        _files.check_input_file(f, "x file")


# --- a symbolic link to a missing path (seventh new-user pass, #226) --------------------------


@pytest.mark.parametrize("where", ["itself", "on its way"])
def test_a_dangling_link_is_refused_in_words(tmp_path, where):
    """``--out`` naming a link to a missing folder said "[Errno 17] File exists"."""
    from pacpriv._files import check_output_dir, check_output_file

    link = tmp_path / "dangl"
    link.symlink_to(tmp_path / "missing" / "zz")
    target = link if where == "itself" else link / "sub"
    with pytest.raises(FileNotFoundError, match="is a symbolic link to a missing path") as info:
        check_output_dir(target, "--out")
    assert str(link) in str(info.value) and not (tmp_path / "missing").exists()
    if where == "itself":
        with pytest.raises(FileNotFoundError, match="symbolic link to a missing path"):
            check_output_file(link, "--private-index-list")


def test_cli_refuses_a_dangling_out_link_in_one_line(tmp_path, capsys, monkeypatch):
    from pacpriv.cli.main import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "dangl").symlink_to(tmp_path / "nowhere")
    rc = main(["pac", "run", "--mechanism", "mean", "--dataset", "iris", "--mi-budget", "0.1",
               "--trials", "30", "--out", "dangl", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "Errno" not in err
    assert err.startswith("pacpriv: error: --out 'dangl' cannot be created: it is a symbolic "
                          "link to a missing path")
