"""Crash-safe checkpoints of a simulation: finished trials on disk, no pickle.

Layout of a checkpoint directory::

    manifest.json                     fingerprint, root seed, output dim, list of chunks
    trials_<start>_<stop>.npz         outputs (k, d) and masks (k, n_records) of trials
                                      start .. stop-1 (``numpy.savez``, read with
                                      ``allow_pickle=False``)

**A checkpoint is as private as the raw data**: the chunks hold the un-noised output of the
mechanism on every simulated subset together with the subset masks, from which the records
can be reconstructed (exactly, for a linear statistic). A directory created here has mode
0700 and every file mode 0600 (whatever the umask; see :mod:`pacpriv._files`). Treat a
checkpoint like the raw data and delete it after the run.

Every file is written to a temporary name and moved into place with :func:`os.replace`
(atomic on POSIX and Windows), chunk first, manifest second. The manifest is the only
source of truth: a chunk it does not list (the process was killed between the two
writes) is ignored and recomputed. Each listed chunk carries its SHA-256, so a truncated
or edited file is detected. A killed run (``KeyboardInterrupt``, ``kill -9``) resumed with
the same arguments loses no trial whose batch reached the parent.

The fingerprint identifies the run: mechanism name, source hash and state digest (see
:func:`mechanism_digest`), sampler description, pool shapes/dtypes and content hash, output
dtype and root seed. ``n_trials`` is *not* part of it: trial ``i`` depends only on (root
seed, ``i``), so a checkpoint can be resumed with a larger ``n_trials`` to extend a run. Any
other mismatch raises :class:`~pacpriv.exceptions.CheckpointError`; trials of different runs
are never mixed.

A fingerprint cannot see everything a mechanism depends on (files it reads, servers it calls,
C extensions). So a resume also re-runs recorded trials -- the first and one chosen from the
root seed -- and requires bit-identical outputs and masks (:meth:`Checkpoint.verify`). A
mechanism that changed, or that does not draw its randomness only from its ``rng`` argument
(e.g. from the global ``np.random``), fails this check and the resume is refused.

Runs stored below float64 keep the float64 output of trial 0 in ``reference.npy`` (outputs
are stored relative to it, see :mod:`pacpriv.pac.engine._simulate`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import io
import json
import os
import re
import sys
import sysconfig
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pacpriv import _json
from pacpriv._files import atomic_write, check_output_dir, private_dir
from pacpriv._random import seed_to_dict
from pacpriv.exceptions import CheckpointError
from pacpriv.pac.engine._checkpoint_words import (
    _RECORDS,
    differences_in_words,
    fingerprint_kind,
    kind_phrase,
    seed_text,
)
from pacpriv.pac.engine._mechanism import mechanism_fingerprint

__all__ = ["Checkpoint", "checked_fingerprint", "mechanism_digest", "pool_fingerprint",
           "run_fingerprint"]

_FORMAT = "pacpriv.checkpoint"
_VERSION = 2
_MANIFEST = "manifest.json"
_REFERENCE = "reference.npy"
_VERIFY_ADVICE = "Use another checkpoint directory or delete this one."
#: How a mismatched root seed is fixed in the API (the CLI rewords it: "omit --seed").
SEED_ADVICE = "pass rng=None to reuse the checkpoint's seed"


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


# --- mechanism state digest -----------------------------------------------------------------

_MAX_DEPTH = 8
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_LIBRARY_DIRS = tuple(
    os.path.normcase(os.path.realpath(p))
    for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)
# pacpriv and its bundled mechanisms are versioned code: fingerprinted by name and version.
_OWN_PACKAGES = ("pacpriv", "mechanisms")


@functools.lru_cache(maxsize=1024)
def _is_library_module(name: str) -> bool:
    """Installed or standard-library module: fingerprinted by name (and version), not code."""
    top = name.partition(".")[0]
    if top in _OWN_PACKAGES or top in sys.builtin_module_names or top in sys.stdlib_module_names:
        return True
    module = sys.modules.get(name) or sys.modules.get(top)
    file = getattr(module, "__file__", None)
    if file is None:
        return module is not None and name != "__main__" and not hasattr(module, "__path__")
    path = os.path.normcase(os.path.realpath(file))
    return any(path.startswith(d + os.sep) for d in _LIBRARY_DIRS) or (
        "site-packages" in path or "dist-packages" in path
    )


def _module_version(name: str) -> str:
    top = sys.modules.get(name.partition(".")[0])
    return str(getattr(top, "__version__", ""))


def _global_names(code: types.CodeType) -> list[str]:
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += _global_names(const)
    return list(dict.fromkeys(names))


def _code_text(func: types.FunctionType) -> bytes:
    try:
        return inspect.getsource(func).encode()
    except (OSError, TypeError):  # no source (interactive, exec): the code object
        code = func.__code__
        return code.co_code + repr((code.co_consts, code.co_names, code.co_varnames)).encode()


#: Class attributes that are not the class's code or state: Python's own, and the caches that
#: pickling and ABCs add on first use (``copyreg`` sets ``__slotnames__`` the first time an
#: instance is pickled, e.g. by joblib, so a mechanism's digest changed once it had run and its
#: checkpoint could not be resumed: twelfth new-user pass, AJ1)
_CLASS_CACHES = frozenset({"__dict__", "__weakref__", "__doc__", "__module__", "__qualname__",
                           "__slotnames__", "_abc_impl"})


class _Digest:
    """Deterministic SHA-256 of an object and what it reaches (see ``mechanism_digest``)."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.seen: dict[int, int] = {}
        self._alive: list[Any] = []  # keeps visited temporaries alive, so no id is reused

    def tag(self, text: str) -> None:
        self.hash.update(text.encode() + b"\0")

    def feed(self, obj: Any, depth: int = 0) -> None:
        if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
            self.tag(f"{type(obj).__name__}:{obj!r}")
            return
        if isinstance(obj, np.generic):
            self.tag(f"np:{obj.dtype.str}:{obj!r}")
            return
        if isinstance(obj, np.ndarray):
            self.tag(f"ndarray:{obj.dtype.str}:{obj.shape}")
            if obj.dtype.hasobject:
                self.feed(obj.tolist(), depth + 1)
            else:
                self.hash.update(memoryview(np.ascontiguousarray(obj)).cast("B"))
            return
        if depth > _MAX_DEPTH:
            self.tag(f"deep:{type(obj).__qualname__}")
            return
        if id(obj) in self.seen:  # cycles and shared objects
            self.tag(f"seen:{self.seen[id(obj)]}")
            return
        self.seen[id(obj)] = len(self.seen)
        self._alive.append(obj)
        self._feed_object(obj, depth + 1)

    def _feed_object(self, obj: Any, depth: int) -> None:
        if isinstance(obj, types.ModuleType):
            self.tag(f"module:{obj.__name__}:{_module_version(obj.__name__)}")
        elif isinstance(obj, functools.partial):
            self.tag("partial")
            for part in (obj.func, obj.args, sorted(obj.keywords.items())):
                self.feed(part, depth)
        elif isinstance(obj, types.MethodType):
            self.tag("method")
            self.feed(obj.__func__, depth)
            self.feed(obj.__self__, depth)
        elif isinstance(obj, types.FunctionType):
            self._feed_function(obj, depth)
        elif isinstance(obj, type):
            self._feed_class(obj, depth)
        elif isinstance(obj, (types.BuiltinFunctionType, np.ufunc)):
            owner = getattr(obj, "__self__", None)
            name = getattr(obj, "__qualname__", obj.__name__)
            self.tag(f"builtin:{getattr(obj, '__module__', '')}.{name}")
            if owner is not None and not isinstance(owner, types.ModuleType):
                self.feed(owner, depth)
        elif isinstance(obj, (list, tuple)):
            self.tag(f"{type(obj).__name__}:{len(obj)}")
            for item in obj:
                self.feed(item, depth)
        elif isinstance(obj, (set, frozenset)):
            digests = []
            for item in obj:
                sub = _Digest()
                sub.feed(item, depth)
                digests.append(sub.hash.hexdigest())
            self.tag(f"set:{sorted(digests)}")
        elif isinstance(obj, dict):
            self.tag(f"dict:{len(obj)}")
            for key, value in obj.items():
                self.feed(key, depth)
                self.feed(value, depth)
        else:
            self._feed_instance(obj, depth)

    def _feed_function(self, func: types.FunctionType, depth: int) -> None:
        module = getattr(func, "__module__", None) or ""
        self.tag(f"function:{module}.{func.__qualname__}")
        if module and _is_library_module(module):
            self.tag(_module_version(module))
            return
        self.hash.update(_code_text(func))
        self.feed(func.__defaults__, depth)
        self.feed(sorted((func.__kwdefaults__ or {}).items()), depth)
        for cell in func.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # empty cell
                self.tag("empty-cell")
            else:
                self.feed(value, depth)
        namespace = func.__globals__
        for name in _global_names(func.__code__):
            if name in namespace:
                self.tag(f"global:{name}")
                self.feed(namespace[name], depth)

    def _feed_class(self, cls: type, depth: int) -> None:
        module = getattr(cls, "__module__", "") or ""
        self.tag(f"class:{module}.{cls.__qualname__}")
        if _is_library_module(module):
            self.tag(_module_version(module))
            return
        for base in cls.__mro__[1:]:
            if base is not object:
                self.feed(base, depth)
        for name, value in vars(cls).items():
            if name in _CLASS_CACHES:
                continue
            self.tag(f"attr:{name}")
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            elif isinstance(value, property):
                value = (value.fget, value.fset)
            self.feed(value, depth)

    def _feed_instance(self, obj: Any, depth: int) -> None:
        cls = type(obj)
        self.feed(cls, depth)
        if dataclasses.is_dataclass(obj):
            state: Any = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        elif hasattr(obj, "__dict__") and not _is_library_module(cls.__module__ or ""):
            state = dict(vars(obj))
        else:
            state = None
        if state is not None:
            self.feed(state, depth)
            return
        import cloudpickle  # library objects (estimators, tensors...): their pickled state

        try:
            self.hash.update(cloudpickle.dumps(obj))
        except Exception:  # unpicklable: its repr without memory addresses
            self.tag(_ADDRESS.sub("", repr(obj)))


def mechanism_digest(mechanism: Callable) -> str:
    """SHA-256 of a mechanism's code and of the state it reaches, stable across processes.

    Covered: the source (or code object) of every user function reached, its default
    arguments, closure values and the module-level names it references (helper functions,
    module constants, recursively), ``functools.partial`` arguments, bound-method owners,
    callable objects' fields (dataclass fields or ``__dict__``) and class attributes.
    Standard-library, installed (site-packages), pacpriv and bundled-mechanism code is
    identified by module, name and version only; objects of such classes by their field
    values or, failing that, their ``cloudpickle`` bytes (their repr without memory addresses
    when unpicklable). Arrays are hashed by dtype, shape and bytes.

    Not covered: files or services the mechanism reads, and state inside C extensions. The
    re-run check of :meth:`Checkpoint.verify` covers those.
    """
    digest = _Digest()
    digest.feed(mechanism)
    return digest.hash.hexdigest()


def run_fingerprint(mechanism, pool, sampler, output_dtype) -> dict:
    """JSON fingerprint of everything that determines the trials, except the root seed."""
    return {
        "mechanism": {
            **mechanism_fingerprint(mechanism), "state_sha256": mechanism_digest(mechanism),
        },
        "sampler": sampler.to_dict(),
        "pool": pool_fingerprint(pool),
        "output_dtype": np.dtype(output_dtype).str,
    }


def checked_fingerprint(checkpoint: Any, mechanism, pool, sampler, output_dtype,
                        root: np.random.SeedSequence | None) -> dict | None:
    """The run's fingerprint when it has a ``checkpoint`` (else None), after refusing an
    existing checkpoint of another run (:meth:`Checkpoint.check`): before any probe or trial.
    """
    if checkpoint is None:
        return None
    fingerprint = run_fingerprint(mechanism, pool, sampler, output_dtype)
    Checkpoint.check(checkpoint, fingerprint=fingerprint, root=root)
    return fingerprint


def _bound_records(mechanism: Any) -> str | None:
    """The audited records a per-record simulation's fingerprint names (its bound arguments'
    ``records=...``), or None."""
    found = _RECORDS.search(str(mechanism.get("bound"))) if isinstance(mechanism, dict) else None
    return None if found is None else found.group(1)


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
        check_output_dir(directory, "`checkpoint`")  # a file on the way, no permission
        manifest_path = directory / _MANIFEST
        if not manifest_path.exists():
            private_dir(directory)
            root = np.random.SeedSequence() if root is None else root
            manifest = {
                "format": _FORMAT,
                "version": _VERSION,
                "fingerprint": fingerprint,
                "root_seed": seed_to_dict(root),
                "n_records": n_records,
                "dim": None,
                "reference": None,
                "chunks": [],
            }
            ckpt = cls(directory, manifest, root, resumed=False)
            ckpt._write_manifest()
            return ckpt
        manifest = cls._read_manifest(manifest_path)
        cls._refuse_other_run(directory, manifest, fingerprint, root)
        stored_root = np.random.SeedSequence(**manifest["root_seed"])
        return cls(directory, manifest, stored_root, resumed=True)

    @classmethod
    def check(cls, path: Any, *, fingerprint: dict,
              root: np.random.SeedSequence | None) -> None:
        """Refuse, before any work, an existing checkpoint at ``path`` that :meth:`open` would
        refuse for its fingerprint or seed (reads only; nothing is created). Nothing to
        check: no path, or no manifest yet (then :meth:`open` reports any other problem).

        Raises
        ------
        CheckpointError
            The checkpoint belongs to another run: what differs, in words.
        """
        if not isinstance(path, (str, os.PathLike)):
            return
        manifest_path = Path(path) / _MANIFEST
        if manifest_path.is_file():
            cls._refuse_other_run(Path(path), cls._read_manifest(manifest_path), fingerprint,
                                  root)

    @classmethod
    def check_kind(cls, path: Any, *, kind: str, records: str | None = None,
                   root: np.random.SeedSequence | None = None) -> None:
        """Before a command's probe or estimate: refuse an existing checkpoint at ``path``
        that another kind of run wrote (``kind``: a :func:`fingerprint_kind`), that audited
        other ``records`` (:func:`records_text`), or that has another root seed (reads only;
        the whole fingerprint is checked when the checkpoint is opened).

        Raises
        ------
        CheckpointError
            What differs, in words.
        """
        if not isinstance(path, (str, os.PathLike)):
            return
        manifest_path = Path(path) / _MANIFEST
        if not manifest_path.is_file():
            return
        manifest = cls._read_manifest(manifest_path)
        old = manifest["fingerprint"] if isinstance(manifest["fingerprint"], dict) else {}
        differences = ([] if fingerprint_kind(old) == kind
                       else [kind_phrase(fingerprint_kind(old), kind)])
        stored = old.get("records") or _bound_records(old.get("mechanism"))
        if not differences and records is not None and stored is not None \
                and stored != records:
            differences = [f"the audited records (`records`): checkpoint {stored}, now "
                           f"{records}"]
        if differences or root is not None:
            cls._refuse_other_run(Path(path), manifest, {}, None if differences else root,
                                  differences)

    @staticmethod
    def _refuse_other_run(directory: Path, manifest: dict, fingerprint: dict,
                          root: np.random.SeedSequence | None,
                          known: list[str] | None = None) -> None:
        """A :class:`CheckpointError` naming, in words, what differs from this call."""
        differences = (list(known) if known is not None else
                       differences_in_words(manifest["fingerprint"],
                                            json.loads(_json.dumps(fingerprint))))
        if (root is not None and seed_to_dict(root) != manifest["root_seed"]
                and not any(d.startswith("it was written by") for d in differences)):
            differences.append(
                f"the root seed (`rng`): checkpoint {seed_text(manifest['root_seed'])}, now "
                f"{seed_text(seed_to_dict(root))}; {SEED_ADVICE}")
        if differences:
            raise CheckpointError(
                f"Checkpoint {str(directory)!r} belongs to a different run: "
                + "; ".join(differences) + ". Use another checkpoint directory or delete this "
                "one.")

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
        atomic_write(self.path / name, data)
        if self.manifest["dim"] is None:
            self.manifest["dim"] = int(outputs.shape[1])
        self.manifest["chunks"].append([start, start + k, name, hashlib.sha256(data).hexdigest()])
        self._write_manifest()

    def replay_indices(self, store) -> list[int]:
        """Recorded trials to re-run on resume: the first and one chosen from the root seed."""
        done = np.flatnonzero(store.done)
        if done.size == 0:
            return []
        chooser = np.random.default_rng(self.root.generate_state(4))
        return sorted({int(done[0]), int(done[chooser.integers(done.size)])})

    def verify(self, store, rerun: Callable[[int], tuple[np.ndarray, np.ndarray]]) -> list[int]:
        """Re-run :meth:`replay_indices` with ``rerun(index) -> (output, mask)``; return them.

        The outputs (in the storage dtype) and masks must be bit-identical to the recorded
        ones.

        Raises
        ------
        CheckpointError
            If a re-run differs from the checkpoint or fails (chained ``from`` its
            ``MechanismError``).
        """
        indices = self.replay_indices(store)
        for index in indices:
            try:
                output, mask = rerun(index)
            except Exception as err:
                raise CheckpointError(
                    f"Checkpoint {str(self.path)!r}: re-running recorded trial {index} to "
                    f"verify the mechanism failed ({type(err).__name__}). "
                    + _VERIFY_ADVICE
                ) from err
            recorded = np.asarray(store.outputs[index])
            if not np.array_equal(mask, store.masks[index]):
                what = "membership mask"
            elif output.shape != recorded.shape or output.tobytes() != recorded.tobytes():
                n_diff = int(np.sum(output != recorded)) if output.shape == recorded.shape else -1
                what = (
                    f"output ({n_diff} of {recorded.size} coordinates differ)"
                    if n_diff >= 0 else "output shape"
                )
            else:
                continue
            raise CheckpointError(
                f"Checkpoint {str(self.path)!r}: re-running recorded trial {index} from its seed "
                f"gave a different {what} than the checkpoint holds: the mechanism is not the "
                "one that wrote the checkpoint (its code, closure values, fields, helper "
                "functions, module constants or the data it reads changed), or it is not "
                "reproducible from its seed (randomness drawn outside its `rng` argument, e.g. "
                "from the global numpy.random). Resuming would mix outputs of two mechanisms. "
                + _VERIFY_ADVICE
            )
        return indices

    def load_reference(self) -> np.ndarray | None:
        """Float64 output of trial 0 stored by :meth:`save_reference` (None if absent)."""
        entry = self.manifest.get("reference")
        if entry is None:
            return None
        name, sha = entry
        file = self.path / name
        try:
            data = file.read_bytes()
        except OSError as err:
            raise CheckpointError(f"Checkpoint file {str(file)!r} is missing ({err}).") from err
        if hashlib.sha256(data).hexdigest() != sha:
            raise CheckpointError(f"Checkpoint file {str(file)!r} is corrupt (SHA-256 mismatch).")
        return np.load(io.BytesIO(data), allow_pickle=False)

    def save_reference(self, reference: np.ndarray) -> None:
        """Persist the float64 reference output (atomically, before any chunk)."""
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(reference, dtype=np.float64))
        data = buffer.getvalue()
        atomic_write(self.path / _REFERENCE, data)
        self.manifest["reference"] = [_REFERENCE, hashlib.sha256(data).hexdigest()]
        self._write_manifest()

    def _write_manifest(self) -> None:
        data = _json.dumps(self.manifest, indent=1).encode()
        atomic_write(self.path / _MANIFEST, data)
