"""Transactional storage of privacy budgets: the one ledger store of pacpriv.

:class:`~pacpriv.pac.bounds.PrivacyLedger` (any release) and the private predictor's budget
(:class:`~pacpriv.prediction.PrivatePredictor`, ``pacpriv serve``) keep their charges here.
:func:`open_store` opens SQLite (the default: one file, standard library) or PostgreSQL
(``postgresql://...``, extra ``postgres``: one ledger for several server replicas).
"""

from __future__ import annotations

import os
import re

from pacpriv.storage._keys import KeyVerifier, add_key, parse_token
from pacpriv.storage._store import Entry, KeyRecord, LedgerStore, Transaction

__all__ = ["Entry", "KeyRecord", "KeyVerifier", "LedgerStore", "Transaction", "add_key",
           "check_location", "open_store", "parse_token"]

#: The URL schemes of a ledger location (anything else with ``scheme://`` is refused).
LEDGER_SCHEMES = ("postgresql", "postgres")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")


def check_location(location, what: str = "`ledger` location") -> None:
    """Refuse, in one line before anything is opened, a ledger location of an unknown form.

    The forms: a SQLite file path (e.g. ``state/ledger.db``) or ``postgresql://...`` /
    ``postgres://...`` (a libpq connection URL). Any other ``scheme://`` (``sqlite://``,
    ``file://``, a typo) is a ``ValueError`` naming the scheme and the forms: a path would
    otherwise collapse ``//`` and create a file named after the scheme.

    Raises
    ------
    ValueError
        For an empty location or a URL of another scheme.
    OSError
        For a path through a loop of symbolic links (named).
    """
    text = os.fspath(location)
    if isinstance(text, (str, bytes)) and not text.strip():  # '' would be the working folder
        raise ValueError(f"{what}: an empty location; give a SQLite file path (e.g. "
                         "DIR/ledger.db) or postgresql://user@host:port/dbname.")
    m = _SCHEME.match(text) if isinstance(text, str) else None
    if m is not None and m.group(1).lower() not in LEDGER_SCHEMES:
        raise ValueError(f"{what}: unsupported URL scheme {m.group(1)!r}; give a SQLite file "
                         "path (e.g. DIR/ledger.db) or postgresql://user@host:port/dbname.")
    if m is None and isinstance(text, str):
        from pathlib import Path

        from pacpriv._files import refuse_link_loop
        refuse_link_loop(Path(text), what)  # a SQLite path: a loop of links named


def open_store(location: str | os.PathLike, *, synchronous: str = "FULL") -> LedgerStore:
    """The ledger store at ``location``.

    Parameters
    ----------
    location : str or path
        ``postgresql://...`` / ``postgres://...`` for PostgreSQL, else a SQLite file path
        (created with mode 0600 if absent).
    synchronous : {"FULL", "NORMAL"}, default "FULL"
        SQLite only: see :class:`~pacpriv.storage._sqlite.SQLiteStore` (FULL fsyncs every
        commit: a charge survives a power cut).

    Returns
    -------
    LedgerStore

    Raises
    ------
    ValueError
        If ``location`` is a URL of another scheme than ``postgresql``/``postgres`` (see
        :func:`check_location`).
    ImportError
        For PostgreSQL without psycopg (``pip install 'pacpriv[postgres]'``).
    CheckpointError
        If the location holds something else than a pacpriv ledger, or cannot be reached.
    """
    text = os.fspath(location)
    check_location(text)
    if isinstance(text, str) and text.lower().startswith(("postgresql://", "postgres://")):
        from pacpriv.storage._postgres import PostgresStore

        return PostgresStore(text)
    from pacpriv.storage._sqlite import SQLiteStore

    return SQLiteStore(text, synchronous=synchronous)
