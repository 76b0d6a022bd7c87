"""The PostgreSQL ledger store (psycopg 3; extra ``postgres``): one ledger for several replicas.

The same tables as :mod:`pacpriv.storage._sqlite`. A scope's transaction starts with
``SELECT ... FROM totals WHERE scope = %s FOR UPDATE``: the row lock serialises the writers of
one scope across every replica and connection, and a replica killed mid-transaction releases
it when its connection drops (PostgreSQL rolls the transaction back).
"""

from __future__ import annotations

from pacpriv._optional import import_optional
from pacpriv.exceptions import CheckpointError
from pacpriv.storage._store import SCHEMA_VERSION, LedgerStore

__all__ = ["PostgresStore"]

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS totals (scope TEXT PRIMARY KEY, spent TEXT NOT NULL, "
    "nrows BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS entries (id BIGSERIAL PRIMARY KEY, scope TEXT NOT NULL, "
    "kind TEXT NOT NULL CHECK (kind IN ('charge', 'refund')), nats DOUBLE PRECISION NOT NULL, "
    "nrows BIGINT NOT NULL, key_id TEXT, label TEXT, idem TEXT, refund_of BIGINT, "
    "ts DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE IF NOT EXISTS state (scope TEXT NOT NULL, name TEXT NOT NULL, "
    "body BYTEA NOT NULL, PRIMARY KEY (scope, name))",
    "CREATE TABLE IF NOT EXISTS keys (key_id TEXT PRIMARY KEY, name TEXT NOT NULL, "
    "quota DOUBLE PRECISION, spent TEXT NOT NULL, nrows BIGINT NOT NULL, "
    "created DOUBLE PRECISION NOT NULL, revoked DOUBLE PRECISION, salt BYTEA NOT NULL, "
    "digest BYTEA NOT NULL)",
    "CREATE TABLE IF NOT EXISTS responses (scope TEXT NOT NULL, key_id TEXT NOT NULL, "
    "idem TEXT NOT NULL, body BYTEA NOT NULL, ts DOUBLE PRECISION NOT NULL, "
    "PRIMARY KEY (scope, key_id, idem))",
    "CREATE INDEX IF NOT EXISTS responses_age ON responses (scope, ts)",
    "CREATE INDEX IF NOT EXISTS entries_idem ON entries (scope, idem)",
    "CREATE TABLE IF NOT EXISTS audit (id BIGSERIAL PRIMARY KEY, scope TEXT NOT NULL, "
    "key_id TEXT, ts DOUBLE PRECISION NOT NULL, nrows BIGINT NOT NULL, "
    "nats DOUBLE PRECISION NOT NULL, outcome TEXT NOT NULL)",
    "CREATE OR REPLACE FUNCTION pacpriv_append_only() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN RAISE EXCEPTION 'table % is append-only', TG_TABLE_NAME; END $$",
    "DROP TRIGGER IF EXISTS audit_append_only ON audit",
    "CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit "
    "FOR EACH ROW EXECUTE FUNCTION pacpriv_append_only()",
    "DROP TRIGGER IF EXISTS entries_append_only ON entries",
    "CREATE TRIGGER entries_append_only BEFORE UPDATE OR DELETE ON entries "
    "FOR EACH ROW EXECUTE FUNCTION pacpriv_append_only()",
]


class PostgresStore(LedgerStore):
    """A :class:`~pacpriv.storage.LedgerStore` in a PostgreSQL database.

    Parameters
    ----------
    url : str
        ``postgresql://user@host:port/dbname`` (a libpq connection string).

    Raises
    ------
    ImportError
        Without psycopg (``pip install 'pacpriv[postgres]'``).
    CheckpointError
        If the server cannot be reached or holds another ledger schema version (the message
        names the host, never a password).
    """

    placeholder = "%s"

    def __init__(self, url: str) -> None:
        super().__init__()
        self._psycopg = import_optional("psycopg", "a PostgreSQL ledger", extra="postgres")
        self.url = url
        try:
            conn = self._connection()
            with conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(80873)")  # one schema writer at once
                for statement in SCHEMA:
                    cur.execute(statement)
                cur.execute("INSERT INTO meta (k, v) VALUES ('schema', %s) ON CONFLICT (k) DO "
                            "NOTHING", (str(SCHEMA_VERSION),))
                cur.execute("SELECT v FROM meta WHERE k = 'schema'")
                version = cur.fetchone()[0]
            conn.commit()
        except self._psycopg.Error as err:
            raise CheckpointError(f"PostgreSQL ledger at {self._where()} cannot be used: "
                                  f"{_reason(err)} ({type(err).__name__}).") from None
        if version != str(SCHEMA_VERSION):
            raise CheckpointError(f"the PostgreSQL ledger at {self._where()} holds schema "
                                  f"{version}; this pacpriv reads schema {SCHEMA_VERSION}.")

    def _where(self) -> str:
        info = self._psycopg.conninfo.conninfo_to_dict(self.url)
        return f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"

    def __repr__(self) -> str:
        return f"PostgresStore({self._where()!r})"

    def _connect(self):
        return self._psycopg.connect(self.url, autocommit=False)

    def _begin(self, cur, scope: str | None, write: bool = True) -> None:
        if scope is not None:
            cur.execute("SELECT spent FROM totals WHERE scope = %s FOR UPDATE", (scope,))
            cur.fetchall()


#: Words for the SQLSTATE classes a user can act on (PostgreSQL, Appendix A)
_SQLSTATE_WORDS = {"28": "authentication failed (user or password)",
                   "3D": "the database does not exist", "42": "permission denied or a bad "
                   "schema (the user may not create the ledger's tables)",
                   "53": "the server is out of resources", "57": "the server is shutting down "
                   "or refused the connection", "08": "the connection failed"}


def _reason(err) -> str:
    """Why a PostgreSQL ledger cannot be used, in words (thirteenth new-user pass: only the
    driver's class name was shown); never the URL's password (the message is not quoted)."""
    state = getattr(err, "sqlstate", None)
    if state:
        return _SQLSTATE_WORDS.get(state[:2], f"the server answered SQLSTATE {state}")
    return ("the server cannot be reached (no such host, connection refused, or it did not "
            "answer)")
