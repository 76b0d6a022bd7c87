"""The SQLite ledger store: one file, WAL journal, one writer at a time (standard library).

Writers take the database's write lock with ``BEGIN IMMEDIATE`` (across threads and processes
on one host); readers never block them (WAL). ``synchronous=FULL``: a committed transaction
survives a power cut, not only a killed process. The file is created with mode 0600.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from pacpriv._files import check_not_in_report, refuse_link_loop
from pacpriv.exceptions import CheckpointError
from pacpriv.storage._store import SCHEMA_VERSION, LedgerStore

__all__ = ["SQLiteStore"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS totals (scope TEXT PRIMARY KEY, spent TEXT NOT NULL,
    nrows INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS entries (id INTEGER PRIMARY KEY AUTOINCREMENT, scope TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('charge', 'refund')), nats REAL NOT NULL,
    nrows INTEGER NOT NULL, key_id TEXT, label TEXT, idem TEXT, refund_of INTEGER,
    ts REAL NOT NULL);
CREATE TABLE IF NOT EXISTS state (scope TEXT NOT NULL, name TEXT NOT NULL, body BLOB NOT NULL,
    PRIMARY KEY (scope, name));
CREATE TABLE IF NOT EXISTS keys (key_id TEXT PRIMARY KEY, name TEXT NOT NULL, quota REAL,
    spent TEXT NOT NULL, nrows INTEGER NOT NULL, created REAL NOT NULL, revoked REAL,
    salt BLOB NOT NULL, digest BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS responses (scope TEXT NOT NULL, key_id TEXT NOT NULL,
    idem TEXT NOT NULL, body BLOB NOT NULL, ts REAL NOT NULL, PRIMARY KEY (scope, key_id, idem));
CREATE INDEX IF NOT EXISTS responses_age ON responses (scope, ts);
CREATE INDEX IF NOT EXISTS entries_idem ON entries (scope, idem);
CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY AUTOINCREMENT, scope TEXT NOT NULL,
    key_id TEXT, ts REAL NOT NULL, nrows INTEGER NOT NULL, nats REAL NOT NULL,
    outcome TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS audit_append_only_u BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit table is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_append_only_d BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit table is append-only'); END;
CREATE TRIGGER IF NOT EXISTS entries_append_only_u BEFORE UPDATE ON entries
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
CREATE TRIGGER IF NOT EXISTS entries_append_only_d BEFORE DELETE ON entries
    BEGIN SELECT RAISE(ABORT, 'the ledger is append-only'); END;
"""


class SQLiteStore(LedgerStore):
    """A :class:`~pacpriv.storage.LedgerStore` in one SQLite file.

    Parameters
    ----------
    path : path
        The database file (created with mode 0600 if absent).
    timeout : float, default 30
        Seconds a writer waits for the write lock before failing (``sqlite3.OperationalError``).
    synchronous : {"FULL", "NORMAL"}, default "FULL"
        ``FULL``: every commit is fsync-ed (a charge survives a power cut; about 8 ms per
        answer on a slow disk). ``NORMAL`` (WAL): a commit survives a killed process but the
        last commits may be lost in a power cut or an OS crash, i.e. answers already released
        could lose their charge; choose it only where that risk is accepted.

    Raises
    ------
    CheckpointError
        If the file is not a pacpriv ledger (another schema version, or not SQLite).
    """

    def __init__(self, path: str | os.PathLike, *, timeout: float = 30.0,
                 synchronous: str = "FULL") -> None:
        super().__init__()
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"`synchronous` must be 'FULL' or 'NORMAL'; got {synchronous!r}.")
        self._synchronous = synchronous
        self.path = Path(path)
        refuse_link_loop(self.path, "the ledger")  # before exists(), which says False
        self.url = str(self.path)
        self._timeout = float(timeout)
        if not self.path.exists():
            check_not_in_report(self.path, "the ledger")  # a report folder may be shared
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)
        try:
            conn = self._connection()
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SCHEMA)
            conn.execute("INSERT OR IGNORE INTO meta (k, v) VALUES ('schema', ?)",
                         (str(SCHEMA_VERSION),))
            version = conn.execute("SELECT v FROM meta WHERE k = 'schema'").fetchone()[0]
        except sqlite3.DatabaseError as err:
            raise CheckpointError(f"{str(self.path)!r} is not a pacpriv ledger database "
                                  f"({err}).") from None
        if version != str(SCHEMA_VERSION):
            raise CheckpointError(f"{str(self.path)!r} holds ledger schema {version}; this "
                                  f"pacpriv reads schema {SCHEMA_VERSION}.")

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    def _connect(self):
        conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None,
                               check_same_thread=False)
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute(f"PRAGMA busy_timeout={int(self._timeout * 1000)}")
        return conn

    def _begin(self, cur, scope: str | None, write: bool = True) -> None:
        cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
