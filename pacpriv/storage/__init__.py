"""Transactional storage of privacy budgets: the one ledger store of pacpriv.

:class:`~pacpriv.pac.bounds.PrivacyLedger` (any release) and the private predictor's budget
(:class:`~pacpriv.prediction.PrivatePredictor`, ``pacpriv serve``) keep their charges here.
:func:`open_store` opens SQLite (the default: one file, standard library) or PostgreSQL
(``postgresql://...``, extra ``postgres``: one ledger for several server replicas).
"""

from __future__ import annotations

import os

from pacpriv.storage._keys import KeyVerifier, add_key, parse_token
from pacpriv.storage._store import Entry, KeyRecord, LedgerStore, Transaction

__all__ = ["Entry", "KeyRecord", "KeyVerifier", "LedgerStore", "Transaction", "add_key",
           "open_store", "parse_token"]


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
    ImportError
        For PostgreSQL without psycopg (``pip install 'pacpriv[postgres]'``).
    CheckpointError
        If the location holds something else than a pacpriv ledger, or cannot be reached.
    """
    text = os.fspath(location)
    if isinstance(text, str) and text.startswith(("postgresql://", "postgres://")):
        from pacpriv.storage._postgres import PostgresStore

        return PostgresStore(text)
    from pacpriv.storage._sqlite import SQLiteStore

    return SQLiteStore(text, synchronous=synchronous)
