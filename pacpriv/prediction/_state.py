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
    ledger.json     queries answered, MI spent (nats), log posterior over worlds
    lock            advisory lock file (one writer at a time across processes)

The directory holds un-noised models of subsets of the pool, their subset masks and the
engine's checkpoint: it is as private as the raw data. A directory created here has mode 0700
and every file mode 0600 (see :mod:`pacpriv._files`); ``secret.json`` must stay 0600.

Every file is written to a temporary name, flushed and ``fsync``-ed, then moved into place with
:func:`os.replace` (atomic on POSIX), and the directory is ``fsync``-ed. The ledger is written
*before* an answer is returned: a crash can lose an answer that was never delivered, but never a
spend, and a restart continues the same posterior.

Only open state directories you created: ``models/*.joblib`` and ``evaluator.joblib`` are
pickles, and loading a pickle runs code.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pacpriv import _json
from pacpriv._files import atomic_write, check_existing_dir, check_output_dir, private_dir
from pacpriv._random import seed_to_dict
from pacpriv.exceptions import CheckpointError
from pacpriv.prediction._seeds import SECRET_UNKNOWN, Seeds

__all__ = ["Fitted", "StateDir"]


@dataclass(frozen=True, eq=False)
class Fitted:
    """What a fitted state holds: the world arrays, the evaluator, the secret, the ledger."""

    arrays: dict
    evaluator: dict
    secret_index: int
    noise_entropy: int
    n_answered: int
    log_posterior: np.ndarray

_FORMAT = "pacpriv.prediction.state"
_VERSION = 1


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

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():  # never a state: one clear line
            raise NotADirectoryError(f"`state` {str(self.path)!r} is an existing file; give a "
                                     "folder path (a new one, or a predictor's state).")

    def __repr__(self) -> str:
        return f"StateDir({str(self.path)!r})"

    # -- files ---------------------------------------------------------------------------
    config_path = _StateFile("config.json")
    ledger_path = _StateFile("ledger.json")
    secret_path = _StateFile("secret.json")
    worlds_path = _StateFile("worlds.npz")
    evaluator_path = _StateFile("evaluator.joblib")

    def exists(self) -> bool:
        """Whether a config was written (a predictor was created here)."""
        return self.config_path.is_file()

    def is_fitted(self) -> bool:
        """Whether worlds, secret and ledger are all present (fit finished)."""
        return self.worlds_path.is_file() and self.secret_path.is_file() and \
            self.ledger_path.is_file()

    # -- config --------------------------------------------------------------------------
    def write_config(self, config: dict) -> None:
        if not self.path.is_dir():  # creating the state: a file on the way, no permission
            check_output_dir(self.path, "`state`")
        private_dir(self.path)
        body = {"format": _FORMAT, "version": _VERSION, **config}
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
        if config.get("format") != _FORMAT or config.get("version") != _VERSION:
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
        differences = _json.diff(stored, json.loads(_json.dumps(fingerprint)), "state")
        if differences:
            raise CheckpointError(
                f"state directory {str(self.path)!r} belongs to a different predictor; it "
                f"differs in: {'; '.join(differences)}. Use a new directory (a resumed "
                "predictor must use the same pool, worlds, seed and budgets)."
            )

    # -- worlds --------------------------------------------------------------------------
    def write_worlds(self, arrays: dict) -> None:
        import io

        buf = io.BytesIO()
        np.savez(buf, **{k: v for k, v in arrays.items() if v is not None})
        atomic_write(self.worlds_path, buf.getvalue())

    def read_worlds(self) -> dict:
        with np.load(self.worlds_path, allow_pickle=False) as f:
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
    def write_ledger(self, n_answered: int, log_posterior: np.ndarray,
                     per_query_budget: float) -> None:
        """Record ``n_answered`` queries (``spent = n_answered · b``) and the posterior, durably."""
        body = {"n_answered": int(n_answered),
                "spent": float(n_answered) * float(per_query_budget),
                "log_posterior": [float(x) for x in np.asarray(log_posterior, np.float64)]}
        atomic_write(self.ledger_path, _json.dumps(body).encode())

    def read_ledger(self) -> tuple[int, np.ndarray]:
        """``(n_answered, log_posterior)``.

        Raises
        ------
        CheckpointError
            If the ledger is missing or corrupt.
        """
        try:
            body = json.loads(self.ledger_path.read_text())
            lp = np.asarray(body["log_posterior"], dtype=np.float64)
            n = int(body["n_answered"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise CheckpointError(f"state directory {str(self.path)!r}: unreadable "
                                  f"ledger.json ({err}).") from err
        if n < 0 or lp.ndim != 1 or not np.all(np.isfinite(lp)):
            raise CheckpointError(f"state directory {str(self.path)!r}: corrupt ledger.json.")
        return n, lp

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

    def store_fit(self, arrays: dict, evaluator: dict, secret: tuple[int, int],
                  per_query_budget: float) -> tuple[tuple[int, int], int, np.ndarray]:
        """Write the fitted worlds, the evaluator, the secret (unless one was written before a
        crash: it is kept) and an empty ledger (unless one exists).

        Returns
        -------
        (secret_index, noise_entropy), n_answered, log_posterior
        """
        import joblib

        self.write_worlds(arrays)
        buf = io.BytesIO()
        joblib.dump(evaluator, buf)
        atomic_write(self.evaluator_path, buf.getvalue())  # 0600, like every state file
        if self.secret_path.exists():
            secret = self.read_secret()
        else:
            self.write_secret(*secret)
        n_worlds = arrays["masks"].shape[0]
        if not self.ledger_path.exists():
            self.write_ledger(0, np.zeros(n_worlds), per_query_budget)
        n_answered, log_posterior = self.read_ledger()
        return secret, n_answered, log_posterior

    def read_fitted(self, n_worlds: int, evaluator: dict | None = None) -> Fitted:
        """The fitted state (``evaluator``: the already-read ``evaluator.joblib``).

        Raises
        ------
        CheckpointError
            If the secret or the ledger is corrupt or does not fit ``n_worlds`` worlds.
        """
        import joblib

        arrays = self.read_worlds()
        evaluator = joblib.load(self.evaluator_path) if evaluator is None else evaluator
        secret_index, noise_entropy = self.read_secret()
        if not 0 <= secret_index < n_worlds:
            raise CheckpointError(f"state directory {str(self.path)!r}: corrupt secret file.")
        n_answered, log_posterior = self.read_ledger()
        if log_posterior.shape != (n_worlds,):
            raise CheckpointError(f"state directory {str(self.path)!r}: the ledger's posterior "
                                  f"has {log_posterior.size} worlds, not {n_worlds}.")
        return Fitted(arrays, evaluator, secret_index, noise_entropy, n_answered, log_posterior)
