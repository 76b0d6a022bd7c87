"""Fixtures shared by the CLI tests."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pacpriv._files import LOCK_NAME


@pytest.fixture
def holder(tmp_path):
    """A report folder whose lock another process holds (a concurrent run); yields its path."""
    out = tmp_path / "held"
    out.mkdir()
    code = textwrap.dedent(f"""
        import fcntl, os, time
        fd = os.open({str(out / LOCK_NAME)!r}, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("held", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield out
    proc.kill()
    proc.wait()
