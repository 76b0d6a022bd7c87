"""The API's report writers protect an earlier report as the CLI does (new-user log #424).

``pacpriv.write_report(r, "rep")`` twice silently replaced the first report while
``pacpriv pac run --out rep`` refuses without ``--force``. Every API function that writes a
report folder -- ``write_report``, ``write_audit_report``, ``AuditReport.write`` and
``run_audit(out=...)`` -- refuses a folder that holds a report unless ``overwrite=True``, before
anything is written, and takes the same per-folder lock against concurrent writers.
"""

from __future__ import annotations

import os
import re
import warnings

import numpy as np
import pytest

import pacpriv
import pacpriv.exceptions
from pacpriv._files import LOCK_NAME
from pacpriv.pac.engine import ExecutionOptions
from pacpriv.report import write_report
from pacpriv.report.audit import write_audit_report

POOL = np.arange(20.0).reshape(10, 2)


def _mean(subset):
    return np.asarray(subset).mean(axis=0)


@pytest.fixture(scope="module")
def result():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pacpriv.run_pac(_mean, POOL, mi_budget=0.5, n_trials=20, rng=0,
                               rule="anisotropic", execution=ExecutionOptions(progress=False))


def test_second_write_refused_and_first_kept(result, tmp_path):
    out = tmp_path / "rep"
    first = write_report(result, out, formats=("json", "md"))
    before = first["json"].read_bytes()
    os.utime(first["json"], (1, 1))
    with pytest.raises(FileExistsError, match=r"already holds a report .*overwrite=True"):
        write_report(result, out, formats=("json",))
    assert first["json"].read_bytes() == before
    assert os.stat(first["json"]).st_mtime == 1  # untouched, not rewritten with equal bytes
    assert not (out / LOCK_NAME).exists()
    with pytest.warns(pacpriv.exceptions.PacprivWarning, match=r"report\.md"):
        again = write_report(result, out, formats=("json",), overwrite=True)
    assert os.stat(again["json"]).st_mtime > 1
    assert not (out / "report.md").exists()  # the earlier report is replaced whole


def test_any_earlier_report_file_counts(result, tmp_path):
    (tmp_path / "report.html").write_text("<p>earlier</p>")
    with pytest.raises(FileExistsError, match=r"report\.html"):
        write_report(result, tmp_path, formats=("json",))
    assert (tmp_path / "report.html").read_text() == "<p>earlier</p>"


def test_overwrite_must_be_a_bool(result, tmp_path):
    with pytest.raises(TypeError, match="`overwrite` must be a bool"):
        write_report(result, tmp_path, formats=("json",), overwrite="yes")


@pytest.mark.parametrize("formats", [("json", "pdf"), ("svg",), ["md", "txt", "pdf"]])
def test_both_writers_refuse_an_unknown_format_before_writing(result, tmp_path, formats):
    """write_report and write_audit_report name the unknown formats (sorted), one check."""
    unknown = re.escape(str(sorted(set(formats) - {"json", "md", "html"})))
    for write, what in ((write_report, result), (write_audit_report, {"attacks": []})):
        with pytest.raises(ValueError, match=r"subset of json, md, html; got " + unknown):
            write(what, tmp_path / "rep", formats=formats)
    assert not (tmp_path / "rep").exists()


def test_folder_locked_by_another_writer_is_refused(result, tmp_path):
    fcntl = pytest.importorskip("fcntl")
    tmp_path.mkdir(exist_ok=True)
    fd = os.open(tmp_path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # flock locks are per open file description: a second open in this process conflicts
        with pytest.raises(BlockingIOError, match="in use by another pacpriv run"):
            write_report(result, tmp_path, formats=("json",), overwrite=True)
    finally:
        os.close(fd)
    assert not (tmp_path / "report.json").exists()


def test_audit_writer_refuses_too(tmp_path):
    report = {"attacks": [], "notes": []}
    (tmp_path / "report.json").write_text("{}\n")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_audit_report(report, tmp_path, formats=("json",))
    assert (tmp_path / "report.json").read_text() == "{}\n"


def test_run_audit_refuses_before_training(tmp_path):
    from pacpriv.audit import run_audit

    class Never:  # a model family whose fit must not run
        def __getattr__(self, name):
            if name in ("fit", "statistics", "describe", "certified_curves",
                        "accountant_epsilon"):
                return self._never
            raise AttributeError(name)

        def _never(self, *a, **k):
            raise AssertionError("trained before the folder was checked")

    (tmp_path / "roc.png").write_bytes(b"png")
    with pytest.raises(FileExistsError, match=r"roc\.png.*overwrite=True"):
        run_audit(np.zeros((8, 2)), np.zeros(8, dtype=int), model=Never(), reference_models=4,
                  out=tmp_path)
