"""Owner-only files for data derived from the private pool (checkpoints, disk-backed outputs).

Checkpoints, ``output_path=`` memmaps and prediction state hold un-noised per-trial outputs and
subset masks: for a linear statistic they reconstruct the records exactly, so they are as
private as the raw data. Directories created here get mode 0700 and files mode 0600,
whatever the process umask (an explicit ``chmod`` after creation, which a umask cannot widen).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["PRIVATE_DIR_MODE", "PRIVATE_FILE_MODE", "atomic_write", "create_private_file",
           "private_dir"]

#: Mode of a directory that holds pool-derived data (owner only).
PRIVATE_DIR_MODE = 0o700
#: Mode of a file that holds pool-derived data (owner read/write only).
PRIVATE_FILE_MODE = 0o600


def private_dir(path: str | os.PathLike) -> Path:
    """Create ``path`` (and missing parents) and make a newly created leaf mode 0700.

    An existing directory keeps its mode (it may be the caller's own, shared folder); the files
    written into it by :func:`atomic_write` are 0600 in any case. Missing parents are created
    with the default mode (they hold no data).

    Parameters
    ----------
    path : str or os.PathLike
        The directory.

    Returns
    -------
    pathlib.Path
        ``Path(path)``.
    """
    directory = Path(path)
    if directory.is_dir():
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        directory.mkdir(mode=PRIVATE_DIR_MODE)
    except FileExistsError:  # created concurrently; it is not ours to chmod
        return directory
    os.chmod(directory, PRIVATE_DIR_MODE)  # the umask may have narrowed it; never widened
    return directory


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fchmod(fd: int, mode: int) -> None:
    if hasattr(os, "fchmod"):  # POSIX; Windows has no group/other modes to narrow
        os.fchmod(fd, mode)


def create_private_file(path: str | os.PathLike, *, mode: int = PRIVATE_FILE_MODE) -> None:
    """Create (or truncate) ``path`` as an empty file with ``mode`` (0600 by default).

    Used before a library opens the file itself (e.g. ``numpy.lib.format.open_memmap``, which
    keeps an existing file's mode when it truncates it).
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        _fchmod(fd, mode)  # an existing file keeps its old mode otherwise; umask-proof
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, mode: int = PRIVATE_FILE_MODE) -> None:
    """Write ``data`` to ``path`` atomically with ``mode`` (0600 by default).

    Temporary file in the same directory (created with ``mode`` and ``fchmod``-ed, so the
    umask cannot change it), flushed and ``fsync``-ed, moved into place with :func:`os.replace`
    (atomic on POSIX and Windows), then the directory is ``fsync``-ed.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            _fchmod(fh.fileno(), mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.replace(tmp, path)
    _fsync_dir(path.parent)
