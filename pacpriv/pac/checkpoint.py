"""Crash-safe checkpoints of a simulation: finished trials on disk, no pickle.

Layout of a checkpoint directory::

    manifest.json                     fingerprint, root seed, output dim, list of chunks
    trials_<start>_<stop>.npz         outputs (k, d) and masks (k, n_records) of trials
                                      start .. stop-1 (``numpy.savez``, read with
                                      ``allow_pickle=False``)

Every file is written to a temporary name and moved into place with :func:`os.replace`
(atomic on POSIX and Windows), chunk first, manifest second. The manifest is the only
source of truth: a chunk it does not list (the process was killed between the two
writes) is ignored and recomputed. Each listed chunk carries its SHA-256, so a truncated
or edited file is detected. A killed run (``KeyboardInterrupt``, ``kill -9``) resumed with
the same arguments loses no trial whose batch reached the parent.

The fingerprint identifies the run: mechanism name and source hash, sampler description,
pool shapes/dtypes and content hash, output dtype and root seed. ``n_trials`` is *not*
part of it: trial ``i`` depends only on (root seed, ``i``), so a checkpoint can be resumed
with a larger ``n_trials`` to extend a run. Any other mismatch raises
:class:`~pacpriv.exceptions.CheckpointError`; trials of different runs are never mixed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from pacpriv._random import seed_to_dict
from pacpriv.exceptions import CheckpointError
from pacpriv.pac._mechanism import mechanism_fingerprint

__all__ = ["Checkpoint", "pool_fingerprint", "run_fingerprint"]

_FORMAT = "pacpriv.checkpoint"
_VERSION = 1
_MANIFEST = "manifest.json"


def pool_fingerprint(pool: Any) -> dict:
    """Shapes, dtypes and SHA-256 of the pool's bytes (an ndarray or a tuple of ndarrays)."""
    arrays = pool if isinstance(pool, tuple) else (pool,)
    digest = hashlib.sha256()
    for a in arrays:
        if a.dtype.hasobject:  # object arrays: hash the element reprs, not the pointers
            digest.update(repr(a.tolist()).encode())
        else:
            digest.update(memoryview(np.ascontiguousarray(a)).cast("B"))
    return {
        "shapes": [list(a.shape) for a in arrays],
        "dtypes": [a.dtype.str for a in arrays],
        "sha256": digest.hexdigest(),
    }


def run_fingerprint(mechanism, pool, sampler, output_dtype) -> dict:
    """JSON fingerprint of everything that determines the trials, except the root seed."""
    return {
        "mechanism": mechanism_fingerprint(mechanism),
        "sampler": sampler.to_dict(),
        "pool": pool_fingerprint(pool),
        "output_dtype": np.dtype(output_dtype).str,
    }


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out += _diff(old.get(key), new.get(key), f"{prefix}{key}.")
        return out
    return [] if old == new else [f"{prefix[:-1]} (checkpoint: {old!r}, now: {new!r})"]


class Checkpoint:
    """A checkpoint directory bound to one run (see the module docstring).

    Use :meth:`open`; then :meth:`load_into` to restore finished trials and :meth:`save`
    after each finished batch.

    Attributes
    ----------
    path : pathlib.Path
        The directory.
    root : numpy.random.SeedSequence
        Root seed of the run (the checkpoint's own when resuming with ``rng=None``).
    resumed : bool
        Whether a manifest existed.
    """

    def __init__(self, path: Path, manifest: dict, root: np.random.SeedSequence, resumed: bool):
        self.path = path
        self.manifest = manifest
        self.root = root
        self.resumed = resumed

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        *,
        fingerprint: dict,
        n_records: int,
        root: np.random.SeedSequence | None,
    ) -> Checkpoint:
        """Open (or create) the checkpoint at ``path`` for the run ``fingerprint``.

        ``root=None`` (the caller passed ``rng=None``) reuses the checkpoint's root seed,
        so a resumed run continues the interrupted one; a fresh checkpoint then gets fresh
        OS entropy. A given ``root`` must equal the checkpoint's.

        Raises
        ------
        TypeError
            If ``path`` is not a path.
        CheckpointError
            If ``path`` is a file, the manifest is unreadable, or the checkpoint belongs to
            a different run (names every differing field).
        """
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"`checkpoint` must be a directory path; got {type(path).__name__}.")
        directory = Path(path)
        if directory.exists() and not directory.is_dir():
            raise CheckpointError(
                f"`checkpoint` must be a directory; {str(directory)!r} is a file."
            )
        manifest_path = directory / _MANIFEST
        if not manifest_path.exists():
            directory.mkdir(parents=True, exist_ok=True)
            root = np.random.SeedSequence() if root is None else root
            manifest = {
                "format": _FORMAT,
                "version": _VERSION,
                "fingerprint": fingerprint,
                "root_seed": seed_to_dict(root),
                "n_records": n_records,
                "dim": None,
                "chunks": [],
            }
            ckpt = cls(directory, manifest, root, resumed=False)
            ckpt._write_manifest()
            return ckpt
        manifest = cls._read_manifest(manifest_path)
        differences = _diff(manifest["fingerprint"], json.loads(json.dumps(fingerprint)))
        stored_root = np.random.SeedSequence(**manifest["root_seed"])
        if root is not None and seed_to_dict(root) != manifest["root_seed"]:
            differences.append(
                f"root_seed (checkpoint: {manifest['root_seed']}, now: {seed_to_dict(root)}); "
                "pass rng=None to reuse the checkpoint's seed"
            )
        if differences:
            raise CheckpointError(
                f"Checkpoint {str(directory)!r} belongs to a different run: "
                + "; ".join(differences)
                + ". Use another checkpoint directory or delete this one."
            )
        return cls(directory, manifest, stored_root, resumed=True)

    @staticmethod
    def _read_manifest(manifest_path: Path) -> dict:
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CheckpointError(
                f"Checkpoint manifest {str(manifest_path)!r} is corrupt or unreadable ({err})."
            ) from err
        required = {"format", "version", "fingerprint", "root_seed", "dim", "chunks", "n_records"}
        if not isinstance(manifest, dict) or not required <= set(manifest):
            raise CheckpointError(
                f"Checkpoint manifest {str(manifest_path)!r} is corrupt: missing fields "
                f"{sorted(required - set(manifest if isinstance(manifest, dict) else {}))}."
            )
        if manifest["format"] != _FORMAT or manifest["version"] != _VERSION:
            raise CheckpointError(
                f"Checkpoint manifest {str(manifest_path)!r} has format "
                f"{manifest['format']!r} version {manifest['version']!r}; expected "
                f"{_FORMAT!r} version {_VERSION}."
            )
        return manifest

    @property
    def dim(self) -> int | None:
        """Output dimension recorded by the first saved chunk (None before)."""
        return self.manifest["dim"]

    def load_into(self, store) -> int:
        """Copy every listed chunk into ``store`` (an :class:`OutputStore`); return #trials.

        Raises
        ------
        CheckpointError
            If a chunk is missing, fails its SHA-256 check or has the wrong shape.
        """
        loaded = 0
        for start, stop, name, sha in self.manifest["chunks"]:
            if start >= store.n_trials:
                continue
            file = self.path / name
            try:
                data = file.read_bytes()
            except OSError as err:
                raise CheckpointError(
                    f"Checkpoint chunk {str(file)!r} is missing ({err})."
                ) from err
            if hashlib.sha256(data).hexdigest() != sha:
                raise CheckpointError(
                    f"Checkpoint chunk {str(file)!r} is corrupt (SHA-256 mismatch)."
                )
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                outputs, masks = npz["outputs"], npz["masks"]
            k = stop - start
            if outputs.shape != (k, self.dim) or masks.shape != (k, self.manifest["n_records"]):
                raise CheckpointError(
                    f"Checkpoint chunk {str(file)!r} has outputs {outputs.shape} and masks "
                    f"{masks.shape}; expected ({k}, {self.dim}) and "
                    f"({k}, {self.manifest['n_records']})."
                )
            store.put(start, outputs, masks)
            loaded += min(stop, store.n_trials) - start
        return loaded

    def save(self, start: int, outputs: np.ndarray, masks: np.ndarray) -> None:
        """Persist trials ``start .. start + len(outputs) - 1`` (atomically; no-op if empty)."""
        k = len(outputs)
        if k == 0:
            return
        name = f"trials_{start:012d}_{start + k:012d}.npz"
        buffer = io.BytesIO()
        np.savez(buffer, outputs=outputs, masks=masks)
        data = buffer.getvalue()
        _atomic_write(self.path / name, data)
        if self.manifest["dim"] is None:
            self.manifest["dim"] = int(outputs.shape[1])
        self.manifest["chunks"].append([start, start + k, name, hashlib.sha256(data).hexdigest()])
        self._write_manifest()

    def _write_manifest(self) -> None:
        data = json.dumps(self.manifest, indent=1).encode()
        _atomic_write(self.path / _MANIFEST, data)
