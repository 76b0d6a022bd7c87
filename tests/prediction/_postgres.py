"""A real PostgreSQL server for the tests: initdb into a temporary folder, pg_ctl start on a free
port of 127.0.0.1, stop and remove it afterwards. No mock stands in for it.

PostgreSQL refuses to run as root: as root, the server runs as the ``postgres`` user (created
by Debian's ``postgresql`` package) through ``runuser``. The binaries are Debian's
(/usr/lib/postgresql/*/bin, installed by ``.ci/run`` when missing) or on PATH.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return None if on_path is None else Path(on_path).parent


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free ports of 127.0.0.1: every socket is held until all are chosen (two
    ``bind(0)`` in a row return the same port about once in 20,000 tries: two replicas on one
    port then failed to start)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _free_port() -> int:
    return _free_ports(1)[0]


def _run(args: list[str], as_root: bool) -> None:
    command = (["runuser", "-u", "postgres", "--", *args] if as_root else args)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                   timeout=120)


class PostgresServer:
    """A throw-away PostgreSQL cluster (:meth:`start`, :meth:`stop`, :attr:`url`)."""

    def __init__(self) -> None:
        bindir = _bindir()
        if bindir is None:
            # CI always has the server (.ci/run installs it): there its absence is a failure.
            # Elsewhere the server is an optional system extra, like the Python ones: the
            # README's test command passes on a fresh machine without a database server.
            message = ("PostgreSQL server binaries are not installed: apt-get install -y "
                       "postgresql (.ci/run does it), or put initdb and pg_ctl on PATH")
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        self.bindir = bindir
        self.as_root = os.geteuid() == 0
        self.folder = Path(tempfile.mkdtemp(prefix="pacpriv-pg-"))
        self.port = _free_port()

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> PostgresServer:
        """initdb, then pg_ctl start; a port taken meanwhile (the free port is chosen before
        initdb's seconds) is retried on another. A server that cannot start fails the test
        under CI (which installs it) and skips it elsewhere, after removing its folder."""
        data = self.folder / "data"
        try:
            if self.as_root:
                shutil.chown(self.folder, "postgres")
            _run([str(self.bindir / "initdb"), "-D", str(data), "-U", "postgres",
                  "--auth=trust", "-E", "UTF8", "--no-sync"], self.as_root)
            for attempt in range(3):
                if attempt:
                    self.port = _free_port()
                options = (f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                           f"-c max_connections=300 -c unix_socket_directories={self.folder} "
                           "-c fsync=on")
                try:
                    _run([str(self.bindir / "pg_ctl"), "-D", str(data), "-o", options, "-w",
                          "-t", "60", "-l", str(self.folder / "log"), "start"], self.as_root)
                    return self
                except subprocess.CalledProcessError as exc:
                    error: Exception = exc
            raise error
        except (OSError, subprocess.SubprocessError) as exc:
            log = self.folder / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            shutil.rmtree(self.folder, ignore_errors=True)
            message = f"PostgreSQL server could not start: {type(exc).__name__}: {exc}"
            if os.environ.get("CI"):
                pytest.fail(f"{message}\n{tail}")
            pytest.skip(message)

    def stop(self) -> None:
        try:
            _run([str(self.bindir / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate",
                  "-w", "stop"], self.as_root)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
