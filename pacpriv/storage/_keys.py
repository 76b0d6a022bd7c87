"""Analysts' API keys: bearer tokens, stored only as salted scrypt hashes.

A token is ``pp_<key id>_<secret>``: the key id (8 hex digits) is public (it names the analyst
in ``keys list``, the ledger and the audit table); the secret is 256 bits from :mod:`secrets`
and is shown once, when the key is added. The store keeps ``scrypt(secret, salt)`` with a
random 16-byte salt (RFC 7914; ``n = 2^14, r = 8, p = 1``), compared in constant time
(:func:`hmac.compare_digest`). A verified token is remembered in memory by its SHA-256 only,
so that a busy server does not pay scrypt per request; revocation is read from the store on
every request, so it takes effect at once on every replica.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading

from pacpriv._validation import check_real
from pacpriv.storage._store import KeyRecord, LedgerStore

__all__ = ["KeyVerifier", "add_key", "hash_secret", "parse_token"]

_TOKEN = re.compile(r"pp_([0-9a-f]{8})_([A-Za-z0-9_-]{20,100})")
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}


def hash_secret(secret: str, salt: bytes) -> bytes:
    """``scrypt(secret, salt)`` (32 bytes)."""
    return hashlib.scrypt(secret.encode(), salt=salt, **_SCRYPT)


def parse_token(token: str) -> tuple[str, str] | None:
    """``(key_id, secret)`` of a well-formed token, else None."""
    m = _TOKEN.fullmatch(token or "")
    return None if m is None else (m.group(1), m.group(2))


def add_key(store: LedgerStore, name: str, *, quota: float | None = None) -> tuple[str, str]:
    """Create an analyst key; returns ``(key_id, token)`` (the token is not stored: show it once).

    Parameters
    ----------
    store : LedgerStore
    name : str
        The analyst's name (public, 1–100 printable characters).
    quota : float or None
        The analyst's cap in nats (``> 0``) inside the global budget; None: only the global cap.

    Raises
    ------
    ValueError
        For an empty or over-long name, a name an active key already has, or a quota that is
        not a finite number ``> 0``.
    """
    if not isinstance(name, str) or not 0 < len(name) <= 100 or not name.isprintable():
        raise ValueError("`name` must be 1 to 100 printable characters.")
    if quota is not None:
        quota = check_real(quota, "quota", low=0.0, low_inclusive=False)
    existing = store.keys()
    if any(k.name == name and k.active for k in existing):
        raise ValueError(f"`name` {name!r} is already the name of an active key; revoke that "
                         "key first or choose another name.")
    # 32-bit ids collide once in ~4e9 pairs: redraw one an existing key has (a collision
    # would otherwise fail the insert, or let two analysts' tokens name one record)
    taken = {k.key_id for k in existing}
    key_id = secrets.token_hex(4)
    while key_id in taken:
        key_id = secrets.token_hex(4)
    secret = secrets.token_urlsafe(32)
    salt = secrets.token_bytes(16)
    store.add_key(key_id, name, salt, hash_secret(secret, salt), quota)
    return key_id, f"pp_{key_id}_{secret}"


class KeyVerifier:
    """Verify bearer tokens against a store (thread-safe; caches verified tokens' SHA-256)."""

    def __init__(self) -> None:
        self._ok: dict[bytes, str] = {}
        self._lock = threading.Lock()

    def verify(self, record: KeyRecord | None, token: str) -> bool:
        """Whether ``token`` matches the stored ``record`` (revocation is checked by the caller)."""
        parsed = parse_token(token)
        if record is None or parsed is None or parsed[0] != record.key_id:
            return False
        fast = hashlib.sha256(token.encode() + record.digest).digest()
        with self._lock:
            if self._ok.get(fast) == record.key_id:
                return True
        if not hmac.compare_digest(hash_secret(parsed[1], record.salt), record.digest):
            return False
        with self._lock:
            if len(self._ok) > 10_000:
                self._ok.clear()
            self._ok[fast] = record.key_id
        return True
