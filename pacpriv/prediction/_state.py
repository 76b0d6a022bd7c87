"""Crash-safe state directory of a :class:`~pacpriv.prediction.PrivatePredictor`.

Layout::

    config.json     public: fingerprint (pool, sampler, fit, n_worlds, world seed), budgets, rule,
                    output, feature shape, membership prior, and how J was drawn (a label:
                    OS entropy or caller-seeded; never a seed or anything derived from one)
    worlds.npz      world masks (m, n_records) and digests (m, 32) or parameters (m, P)
    models/         one joblib file per world model, named by its SHA-256
    checkpoint/     the engine's checkpoint while the worlds are being fitted
    evaluator.joblib  output transform (and torch model factory), pickled by reference
    secret.json     mode 0600: the secret world index J and the noise entropy
    ledger.db       the ledger (SQLite, WAL; mode 0600): charge and refund rows, the log
                    posterior over worlds, analysts' keys (salted hashes), answers kept for
                    idempotent retries, the audit table (see :mod:`pacpriv.storage`). With
                    ``ledger="postgresql://..."`` the ledger lives in PostgreSQL instead
                    (replicas), under the scope named in config.json.
    lock            advisory lock file (one fitter at a time across processes)

A 0.3 state (config version 1, ``ledger.json``) is migrated when opened: its count and
posterior become one charge row labelled ``migrated from 0.3 ledger.json`` and its posterior
blob, ``ledger.json`` is renamed ``ledger.json.migrated``, and config.json gets version 2. A
state holding both a non-empty database ledger and ``ledger.json`` is refused.

The directory holds un-noised models of subsets of the pool, their subset masks and the
engine's checkpoint: it is as private as the raw data. A directory created here has mode 0700
and every file mode 0600 (see :mod:`pacpriv._files`); ``secret.json`` must stay 0600.

Every file is written to a temporary name, flushed and ``fsync``-ed, then moved into place with
:func:`os.replace` (atomic on POSIX), and the directory is ``fsync``-ed. The ledger is committed
*before* an answer is returned (one transaction per answer): a crash can lose an answer that
was never delivered, but never a spend, and a restart continues the same posterior.

Only open state directories you created: ``models/*.joblib`` and ``evaluator.joblib`` are
pickles, and loading a pickle runs code. So a fit records the SHA-256 of ``evaluator.joblib``
and ``worlds.npz`` (which names every model file by its SHA-256) in the ledger store, and
every load checks them before unpickling, and refuses a blob that is not owned by the
current user or is readable or writable by group/others. A state fitted before these hashes
(a 0.3 state, or an early 0.4 one) gets them recorded once, when first opened, with a note
``blob_sha256_note`` in the store. The hashes stop a copied or swapped blob;
they do not stop someone who can write both the folder and the ledger store.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pacpriv import _json
from pacpriv._files import (
    as_path,
    atomic_write,
    check_existing_dir,
    check_output_dir,
    private_dir,
)
from pacpriv._random import seed_to_dict
from pacpriv.exceptions import CheckpointError
from pacpriv.prediction._seeds import SECRET_UNKNOWN, Seeds
from pacpriv.storage import LedgerStore, open_store

__all__ = ["Fitted", "StateDir"]


_MAX_DIFFS = 4  # settings named in a refusal (the message stays one short line)
_MAX_VALUE = 32  # characters of a setting's value shown
_MAX_NAME = 72  # characters of an estimator's name shown (a pipeline's steps fit)


def _short(value: Any, limit: int = _MAX_VALUE) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _brief_diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted names of the settings that differ, each with short (truncated) values: a
    parameter dump never fills the one-line refusal. A scikit-learn fit's parameters are
    named one by one, and not at all when the estimator itself differs (fourteenth new-user
    pass: truncated reprs of two pipelines' parameter lists)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        other = old.get("estimator") != new.get("estimator")
        for key in sorted(set(old) | set(new)):
            if key == "params" and (other or _params(old.get(key)) is not None):
                if not other:
                    out += _brief_diff(_params(old.get(key)), _params(new.get(key)),
                                       f"{prefix}{key}.")
                continue
            out += _brief_diff(old.get(key), new.get(key), f"{prefix}{key}.")
        return out
    if old == new:
        return []
    limit = _MAX_NAME if prefix.endswith("estimator.") else _MAX_VALUE
    return [f"{prefix[:-1]} (state: {_short(old, limit)}, now: {_short(new, limit)})"]


#: Parameters of scikit-learn composites that repeat their parts' parameters as one repr.
_COMPOSITE_PARAMS = ("steps", "transformers", "transformer_list", "estimators")


def _params(text: Any) -> dict | None:
    """A fit fingerprint's ``params`` (the repr of sorted ``(name, repr(value))`` pairs, deep)
    as a dict of its leaf parameters (a part's own repr, whose parameters are listed as
    ``part__name``, and a composite's list of parts are left out), or None when it is not
    one."""
    import ast

    try:
        pairs = ast.literal_eval(text) if isinstance(text, str) else None
        if not isinstance(pairs, list):
            return None
        params = {str(k): v for k, v in pairs}
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return {k: v for k, v in params.items() if k not in _COMPOSITE_PARAMS
            and not any(other.startswith(f"{k}__") for other in params)}


@dataclass(frozen=True, eq=False)
class Fitted:
    """What a fitted state holds: the world arrays, the evaluator, the secret, the ledger."""

    arrays: dict
    evaluator: dict
    secret_index: int
    noise_entropy: int

_FORMAT = "pacpriv.prediction.state"
_VERSION = 2
_MIGRATED = "migrated from 0.3 ledger.json"
_HASHED = ("evaluator.joblib", "worlds.npz")  # worlds.npz names each model file by its SHA-256
_FIRST_HASH_NOTE = (b"blob hashes recorded when first opened (the state was fitted before "
                    b"pacpriv recorded them, e.g. a 0.3 state); trust rests on the folder then")


class _StateFile:
    """Read-only attribute ``state.path / name`` of a :class:`StateDir`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, state: StateDir, owner: type | None = None) -> Path:
        return state.path / self.name

    def __set__(self, state: StateDir, value: object) -> None:
        raise AttributeError(f"`{self.name}` path of a StateDir is read-only")


class StateDir:
    """One state directory (see the module docstring). Holds no secret in its ``repr``."""

    def __init__(self, path: str | os.PathLike, *, moved: bool = False) -> None:
        self.path = as_path(path, "`state`")  # '' (the working folder) and URLs refused
        self.moved = bool(moved)  # the caller confirms a move its ledger file cannot prove
        self._hashes: dict[str, str] | None = None  # from the ledger store, once opened
        self._fresh_hashes: dict[str, str] | None = None  # written by store_fit, not yet stored
        self._opened: tuple | None = None  # (location, store, scope) of the last open_ledger
        if self.path.exists() and not self.path.is_dir():  # never a state: one clear line
            raise NotADirectoryError(f"`state` {str(self.path)!r} is an existing file; give a "
                                     "folder path (a new one, or a predictor's state).")

    def __repr__(self) -> str:
        return f"StateDir({str(self.path)!r})"

    # -- files ---------------------------------------------------------------------------
    config_path = _StateFile("config.json")
    ledger_path = _StateFile("ledger.db")
    legacy_ledger_path = _StateFile("ledger.json")
    secret_path = _StateFile("secret.json")
    worlds_path = _StateFile("worlds.npz")
    evaluator_path = _StateFile("evaluator.joblib")

    def exists(self) -> bool:
        """Whether a config was written (a predictor was created here)."""
        return self.config_path.is_file()

    def is_fitted(self) -> bool:
        """Whether worlds, evaluator and secret are all present (fit finished)."""
        return self.worlds_path.is_file() and self.secret_path.is_file() and \
            self.evaluator_path.is_file()

    # -- config --------------------------------------------------------------------------
    def write_config(self, config: dict) -> None:
        if not self.path.is_dir():  # creating the state: a file on the way, no permission
            check_output_dir(self.path, "`state`")
        private_dir(self.path)
        scope = None
        if self.config_path.is_file():  # a rewrite keeps the ledger's scope
            with contextlib.suppress(OSError, ValueError, AttributeError):
                scope = json.loads(self.config_path.read_text()).get("ledger_scope")
        body = {"format": _FORMAT, "version": _VERSION,
                "ledger_scope": scope or f"predictor:{secrets.token_hex(8)}", **config}
        atomic_write(self.config_path, _json.dumps(body, indent=2, sort_keys=True).encode())

    def read_config(self) -> dict:
        """The stored config.

        Raises
        ------
        CheckpointError
            If the file is missing, corrupt or of another format.
        """
        check_existing_dir(self.path, "`state`")
        try:
            config = json.loads(self.config_path.read_text())
        except (OSError, ValueError) as err:
            raise CheckpointError(f"state directory {str(self.path)!r}: unreadable "
                                  f"config.json ({err}).") from err
        if not isinstance(config, dict):  # valid JSON, but not the object written
            raise CheckpointError(f"state directory {str(self.path)!r}: config.json is not a "
                                  f"JSON object (line 1 holds a {type(config).__name__}).")
        if config.get("format") != _FORMAT or config.get("version") not in (1, _VERSION):
            raise CheckpointError(
                f"state directory {str(self.path)!r} is not a pacpriv prediction state "
                f"(format {config.get('format')!r} version {config.get('version')!r}).")
        return config

    def check_fingerprint(self, fingerprint: dict) -> None:
        """Refuse to resume with another pool, sampler, fit, world count, seed or budget.

        Raises
        ------
        CheckpointError
            Naming every field that differs.
        """
        stored = self.read_config().get("fingerprint", {})
        differences = _brief_diff(stored, json.loads(_json.dumps(fingerprint)))
        if differences:
            shown = differences[:_MAX_DIFFS]
            if len(differences) > _MAX_DIFFS:
                shown.append(f"and {len(differences) - _MAX_DIFFS} more")
            raise CheckpointError(
                f"state directory {str(self.path)!r} belongs to a different predictor; it "
                f"differs in: {'; '.join(shown)}. Use a new directory (a resumed "
                "predictor must use the same pool, worlds, seed and budgets)."
            )

    # -- worlds --------------------------------------------------------------------------
    def write_worlds(self, arrays: dict) -> None:
        import io

        buf = io.BytesIO()
        np.savez(buf, **{k: v for k, v in arrays.items() if v is not None})
        atomic_write(self.worlds_path, buf.getvalue())

    def read_worlds(self) -> dict:
        with np.load(io.BytesIO(self.read_blob("worlds.npz")), allow_pickle=False) as f:
            return {"masks": f["masks"], "digests": f["digests"] if "digests" in f else None,
                    "params": f["params"] if "params" in f else None}

    # -- secret --------------------------------------------------------------------------
    def write_secret(self, secret_index: int, noise_entropy: int) -> None:
        """Create ``secret.json`` with mode 0600 (never overwritten)."""
        if self.secret_path.exists():
            raise CheckpointError(f"state directory {str(self.path)!r} already has a secret; "
                                  "refusing to overwrite it.")
        data = _json.dumps({"secret_index": int(secret_index),
                           "noise_entropy": int(noise_entropy)}).encode()
        atomic_write(self.secret_path, data, mode=0o600)

    def read_secret(self) -> tuple[int, int]:
        """``(J, noise_entropy)``.

        Raises
        ------
        CheckpointError
            If the file is readable or writable by group/others, or corrupt.
        """
        st = os.stat(self.secret_path)
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise CheckpointError(
                f"{str(self.secret_path)!r} has mode {stat.S_IMODE(st.st_mode):o}; it must be "
                "0600 (readable by its owner only). Fix it with chmod 600.")
        try:
            body = json.loads(self.secret_path.read_text())
            return int(body["secret_index"]), int(body["noise_entropy"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise CheckpointError(f"state directory {str(self.path)!r}: corrupt secret "
                                  "file.") from err

    # -- ledger --------------------------------------------------------------------------
    def open_ledger(self, location: str | os.PathLike | LedgerStore | None,
                    per_query_budget: float) -> tuple[LedgerStore, str]:
        """The ledger store (``location``, default ``ledger.db`` here) and this state's scope
        in it; a 0.3 ``ledger.json`` is migrated first (see the module docstring).

        Raises
        ------
        CheckpointError
            If the store cannot be opened, or both a database ledger and ledger.json hold
            answers.
        """
        if self._opened is not None and self._opened[0] is location:
            store, scope = self._opened[1], self._opened[2]
            self._record_hashes(store, scope)
            return store, scope
        with self.locked():
            path = "" if isinstance(location, LedgerStore) else os.fspath(
                self.ledger_path if location is None else location)
            new_file = bool(path) and "://" not in path and not Path(path).exists()
            try:
                store = location if isinstance(location, LedgerStore) else open_store(path)
            except OSError as err:  # a missing folder, a folder, no permission: name the flag
                raise CheckpointError(self._unopenable(location, path, err)) from None
            except CheckpointError as err:  # not a ledger, unreachable: name the argument
                if location is None or str(err).startswith("`ledger`"):
                    raise
                raise CheckpointError(f"`ledger`: {err}") from None
            try:
                shown = None if location is None or isinstance(location, LedgerStore) else (
                    repr(path) if "://" not in path else None)  # a SQLite path as given
                scope = self._open_scope(store, per_query_budget, shown)
            except CheckpointError:  # a refused store this call created is not left behind
                if new_file:
                    store.close()
                    for suffix in ("", "-wal", "-shm", "-journal"):
                        with contextlib.suppress(OSError):
                            os.remove(path + suffix)
                raise
        self._opened = (location, store, scope)
        return store, scope

    def _open_scope(self, store: LedgerStore, per_query_budget: float,
                    shown: str | None = None) -> str:
        """This state's scope in ``store``, checked (see :meth:`open_ledger`; under the lock)."""
        config = self.read_config()
        if config.get("version") != _VERSION or "ledger_scope" not in config:
            config = {**config, "version": _VERSION,
                      "ledger_scope": config.get("ledger_scope",
                                                 f"predictor:{secrets.token_hex(8)}")}
            atomic_write(self.config_path,
                         _json.dumps(config, indent=2, sort_keys=True).encode())
        scope = str(config["ledger_scope"])
        # a store recorded by an earlier open: this version recorded the blob hashes in it
        # then, so a fitted state whose store now lacks them lost its ledger
        opened_before = "ledger_store" in config
        migrating = self.legacy_ledger_path.exists()
        if migrating:
            self._migrate(store, scope, per_query_budget)
        self._check_store(store, scope, config, shown)
        self._record_hashes(store, scope, lost_if_missing=opened_before and not migrating)
        if self._name_of(store) == "ledger.db":
            self._check_copy(store, scope)
        return scope

    def _check_copy(self, store: LedgerStore, scope: str) -> None:
        """Refuse a copy of a state whose own ledger file came along (``cp -a``): each copy
        would spend the full budget about the same secret world index (seventh new-user pass
        #516). The ledger records the folder it serves and its own file (device and inode):
        a folder renamed in place (``mv``: the same file) is re-recorded; one whose recorded
        folder is gone but whose ledger file is another (a copy whose original was deleted,
        a restore, a move across file systems) is refused unless ``moved`` confirms it: the
        original may have answered after the copy was made (those answers are not here)."""
        here = str(self.path.resolve())
        st = os.stat(self.ledger_path)
        ident = f"{st.st_dev}:{st.st_ino}".encode()
        with store.transaction(scope) as tx:
            body, known = tx.get_state("state_path"), tx.get_state("ledger_file")
            if body is not None and body.decode() != here:
                origin, same = Path(body.decode()), False
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    same = json.loads((origin / "config.json").read_text()).get(
                        "ledger_scope") == scope
                if same:
                    raise CheckpointError(
                        f"state directory {here!r} is a copy of {str(origin)!r} (the same "
                        "secret world index and ledger): each copy would spend the full "
                        "budget about the same secret; use the original (replicas share one "
                        "PostgreSQL ledger), or delete one of the two.")
                if known is not None and known != ident and not self.moved:
                    raise CheckpointError(_unproven_move(here, str(origin)))
            if body is None or body.decode() != here or known != ident:
                tx.put_state("state_path", here.encode())
                tx.put_state("ledger_file", ident)

    # -- blob integrity ------------------------------------------------------------------
    def _read_own(self, path: Path) -> bytes:
        """The bytes of ``path``, refused unless owned by this user and owner-only."""
        st = os.stat(path)
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise CheckpointError(f"{str(path)!r} is not owned by the current user; refusing "
                                  "to load it (a state folder must be your own).")
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise CheckpointError(
                f"{str(path)!r} has mode {stat.S_IMODE(st.st_mode):o}; it must be 0600 "
                "(owner only) to be loaded. Fix it with chmod 600 if you trust it.")
        return path.read_bytes()

    def _current_hashes(self) -> dict[str, str]:
        import hashlib

        return {name: hashlib.sha256(self._read_own(self.path / name)).hexdigest()
                for name in _HASHED if (self.path / name).is_file()}

    def _record_hashes(self, store: LedgerStore, scope: str, *,
                       lost_if_missing: bool = False) -> None:
        """Store the hashes a fit just wrote; read the stored ones (recording them once, with
        a note, for a state fitted before they existed). With ``lost_if_missing`` (the store
        was recorded by an earlier open, which also recorded the hashes) a store without them
        lost this state's ledger (deleted, emptied or replaced): refused, since its spend
        would restart at 0 while the secret world index is reused (seventh new-user pass,
        #507-#509)."""
        if not self.is_fitted():
            return
        hashes: dict[str, str]
        with store.transaction(scope) as tx:
            if self._fresh_hashes is not None:
                tx.put_state("blob_sha256", _json.dumps(self._fresh_hashes).encode())
                hashes, self._fresh_hashes = self._fresh_hashes, None
            elif (body := tx.get_state("blob_sha256")) is not None:
                hashes = json.loads(body)
            elif lost_if_missing:
                raise self._lost_ledger(self._name_of(store))
            else:
                hashes = self._current_hashes()
                tx.put_state("blob_sha256", _json.dumps(hashes).encode())
                tx.put_state("blob_sha256_note", _FIRST_HASH_NOTE)
        self._hashes = hashes

    def _lost_ledger(self, name: str) -> CheckpointError:
        return CheckpointError(
            f"state directory {str(self.path)!r}: its ledger ({name}) holds no record of this "
            "fitted state (deleted, emptied or replaced): the spend would restart at 0 while "
            "the secret world index is reused, so the answers could reveal more than the total "
            "budget; restore the ledger, or fit a new state in a new folder.")

    def read_blob(self, name: str) -> bytes:
        """The bytes of ``name`` (a path relative to the state folder), checked: owner-only,
        ours, and (``evaluator.joblib``, ``worlds.npz``) the SHA-256 the ledger store recorded
        or (``models/<sha256>.joblib``) the SHA-256 in its name.

        Raises
        ------
        CheckpointError
            One line naming the file (never its contents) on any mismatch, or when the ledger
            was not opened first.
        """
        import hashlib

        path = self.path / name
        data = self._read_own(path)
        if name.startswith("models/"):
            expected = Path(name).stem
        elif self._hashes is None or name not in self._hashes:
            raise CheckpointError(f"state directory {str(self.path)!r}: no recorded SHA-256 "
                                  f"for {name}; refusing to load it.")
        else:
            expected = self._hashes[name]
        if hashlib.sha256(data).hexdigest() != expected:
            raise CheckpointError(
                f"state directory {str(self.path)!r}: {name} does not match the SHA-256 "
                "recorded at fit (copied or swapped?); refusing to load it.")
        return data

    def load_pickle(self, name: str):
        """Unpickle the checked blob ``name`` (see :meth:`read_blob`)."""
        import joblib

        return joblib.load(io.BytesIO(self.read_blob(name)))

    def _unopenable(self, location, path: str, err: OSError) -> str:
        """One line for a SQLite ledger path that cannot be opened or created: the argument
        and the path as given, and why (never a traceback, never an internal repr)."""
        import errno

        why = {errno.ENOENT: "its folder does not exist",
               errno.EISDIR: "it is a folder, not a file",
               errno.ENOTDIR: "a part of its path is a file, not a folder",
               errno.EACCES: "permission denied",
               errno.EROFS: "read-only file system"}.get(err.errno or 0,
                                                         err.strerror or type(err).__name__)
        if location is None:
            return (f"state directory {str(self.path)!r}: cannot open or create its ledger.db "
                    f"({why}).")
        return (f"`ledger` {path!r}: cannot open or create a SQLite ledger there ({why}); give "
                "the path of a ledger file in an existing folder, or a postgresql:// URL.")

    def _name_of(self, store: LedgerStore) -> str:
        local = Path(getattr(store, "path", "")).resolve() == self.ledger_path.resolve()
        return "ledger.db" if local else repr(store)

    def _check_store(self, store: LedgerStore, scope: str, config: dict,
                     shown: str | None = None) -> None:
        """Refuse a ledger store other than the one holding this state's answers (another
        store would start the spend at 0); record the store used (never a password).
        ``shown``: the ``ledger`` argument as given (quoted), for the message."""
        name, stored = self._name_of(store), config.get("ledger_store")
        if stored == name:
            return
        if stored is not None:
            previous = open_store(self.ledger_path) if stored == "ledger.db" else None
            if previous is None or previous.read(scope)[1] != 0 or previous.has_keys():
                given = ("its own ledger.db (`ledger` not given)" if name == "ledger.db"
                         else f"{shown or _shown(name)} given as `ledger`")
                advice = ("omit `ledger` (its own ledger.db is the default)"
                          if stored == "ledger.db" else f"give `ledger` {_shown(stored)}")
                raise CheckpointError(
                    f"state directory {str(self.path)!r} records its answers in "
                    f"{_shown(stored)}, not in {given}: another store would start the spend "
                    f"at 0; {advice}.")
            if self.is_fitted() and self._fresh_hashes is None:  # the hashes move with it
                with previous.transaction(scope) as tx:
                    body = tx.get_state("blob_sha256")
                if body is None:
                    raise self._lost_ledger("ledger.db")
                self._fresh_hashes = json.loads(body)
        atomic_write(self.config_path, _json.dumps({**config, "ledger_store": name}, indent=2,
                                                   sort_keys=True).encode())

    def _migrate(self, store: LedgerStore, scope: str, per_query_budget: float) -> None:
        import hashlib

        try:
            raw = self.legacy_ledger_path.read_bytes()
            body = json.loads(raw)
            lp = np.asarray(body["log_posterior"], dtype=np.float64)
            n = int(body["n_answered"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise CheckpointError(f"state directory {str(self.path)!r}: unreadable 0.3 "
                                  f"ledger.json ({type(err).__name__}); not migrated.") from None
        if n < 0 or lp.ndim != 1 or not np.all(np.isfinite(lp)):
            raise CheckpointError(f"state directory {str(self.path)!r}: corrupt 0.3 ledger.json "
                                  "(not migrated).")
        digest = hashlib.sha256(raw).digest()
        with store.transaction(scope) as tx:
            done = tx.get_state("migrated_ledger_json") == digest  # crashed before the rename
            if not done and tx.entries():
                raise CheckpointError(
                    f"state directory {str(self.path)!r} holds both a 0.3 ledger.json and a "
                    "database ledger with answers; refusing to guess which is right (move one "
                    "away).")
            if not done:
                tx.charge(n * per_query_budget, rows=n, label=_MIGRATED)
                tx.put_state("log_posterior", lp.tobytes())
                tx.put_state("migrated_ledger_json", digest)
        os.replace(self.legacy_ledger_path, self.path / "ledger.json.migrated")

    @contextlib.contextmanager
    def locked(self):
        """Exclusive advisory lock (``fcntl.flock``) across processes sharing the directory."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: in-process lock only
            yield
            return
        private_dir(self.path)
        fd = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    # -- a predictor's life: create or resume, store a fit, read it back -----------------
    def resume(self, fingerprint: dict, config: dict, seeds: Seeds) -> Seeds:
        """Create the state (writing ``config``) or resume it; the seeds to use from now on.

        A resumed state must have the same ``fingerprint``; its stored world seed replaces
        the caller's (which must equal it when given), and the label of how ``J`` was drawn
        stays with the secret once drawn.

        Raises
        ------
        CheckpointError
            If the state belongs to another predictor or was created with another seed.
        """
        if not self.exists():
            self.write_config(config)
            return seeds
        self.check_fingerprint(fingerprint)
        stored = self.read_config()
        if seeds.root is not None and seed_to_dict(seeds.world_seed) != stored["world_seed"]:
            raise CheckpointError(
                f"state directory {str(self.path)!r} was created with another seed "
                "(`rng`); resume with the same seed or with rng=None.")
        seeds = seeds.replace(world_seed=np.random.SeedSequence(**stored["world_seed"]))
        if self.secret_path.exists():  # J was drawn: its label stands
            return seeds.replace(secret_randomness=stored.get("secret_randomness",
                                                              SECRET_UNKNOWN))
        if stored.get("secret_randomness") != seeds.secret_randomness:
            self.write_config({**config, "world_seed": stored["world_seed"]})
        return seeds

    def store_fit(self, arrays: dict, evaluator: dict, secret: tuple[int, int]
                  ) -> tuple[int, int]:
        """Write the fitted worlds, the evaluator and the secret (unless one was written before
        a crash: it is kept); returns ``(secret_index, noise_entropy)``."""
        import joblib

        self.write_worlds(arrays)
        buf = io.BytesIO()
        joblib.dump(evaluator, buf)
        if self.secret_path.exists():
            secret = self.read_secret()
        else:
            self.write_secret(*secret)
        atomic_write(self.evaluator_path, buf.getvalue())  # last: marks the fit finished
        self._fresh_hashes = self._current_hashes()  # into the ledger store by open_ledger
        self._opened = None
        return secret

    def read_fitted(self, n_worlds: int, evaluator: dict | None = None) -> Fitted:
        """The fitted state (``evaluator``: the already-read ``evaluator.joblib``).

        Raises
        ------
        CheckpointError
            If the secret is corrupt or does not fit ``n_worlds`` worlds.
        """
        arrays = self.read_worlds()
        evaluator = self.load_pickle("evaluator.joblib") if evaluator is None else evaluator
        secret_index, noise_entropy = self.read_secret()
        if not 0 <= secret_index < n_worlds:
            raise CheckpointError(f"state directory {str(self.path)!r}: corrupt secret file.")
        return Fitted(arrays, evaluator, secret_index, noise_entropy)


def _unproven_move(here: str, origin: str) -> str:
    return (f"state directory {here!r} was created at {origin!r}, which is gone, and its "
            "ledger.db is not the file recorded there (a copy whose original was deleted, a "
            "restore from a backup, or a move across file systems): answers the original gave "
            "after this copy was made are not in this ledger, and their budget would be spent "
            "again. If this folder is the original, moved with nothing answered at the old "
            f"place since, confirm it once: pacpriv predict status --state {here} --moved "
            "(in Python: PrivatePredictor.load with moved set to True).")


def _shown(name: str) -> str:
    """A recorded store name (``ledger.db``, or a store's repr) as a user gave it: the SQLite
    path quoted, or ``the PostgreSQL ledger at host:port/dbname``; never an internal repr."""
    import re

    m = re.fullmatch(r"SQLiteStore\((.*)\)", name)
    if m is not None:
        return m.group(1)
    m = re.fullmatch(r"PostgresStore\('(.*)'\)", name)
    if m is not None:
        return f"the PostgreSQL ledger at {m.group(1)}"
    return name
