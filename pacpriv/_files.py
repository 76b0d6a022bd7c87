"""Files and folders: path checks before any work, and owner-only files for pool-derived data.

Path checks (:func:`check_input_file`, :func:`check_existing_dir`, :func:`check_output_dir`,
:func:`check_output_file`) run before any work starts, for every path a public function or a
command-line option takes. Each failure is one sentence that names the argument (or the flag),
the path and what is wrong -- an existing file where a folder is expected, a folder where a
file is expected, a missing folder, no permission -- raised as the matching ``OSError``
subclass (``FileNotFoundError``, ``NotADirectoryError``, ``IsADirectoryError``,
``PermissionError``), so ``except OSError`` catches them all.

Checkpoints, ``output_path=`` memmaps and prediction state hold un-noised per-trial outputs and
subset masks: for a linear statistic they reconstruct the records exactly, so they are as
private as the raw data. Directories created here get mode 0700 and files mode 0600,
whatever the process umask (an explicit ``chmod`` after creation, which a umask cannot widen).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import tempfile
from pathlib import Path

__all__ = ["INDEX_LIST_MARKER", "LOCK_NAME", "PRIVATE_DIR_MODE", "PRIVATE_FILE_MODE",
           "REPORT_MARKERS", "SCAN_LIMIT", "as_path", "atomic_write", "check_existing_dir",
           "check_input_file", "check_no_private_files", "check_not_in_report",
           "check_output_dir", "check_output_file", "create_private_file", "private_dir",
           "refuse_link_loop", "report_folder"]

#: Mode of a directory that holds pool-derived data (owner only).
PRIVATE_DIR_MODE = 0o700
#: Mode of a file that holds pool-derived data (owner read/write only).
PRIVATE_FILE_MODE = 0o600


#: ``scheme://`` at the start of a location (two letters at least: ``C:/`` is a drive).
URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")


def as_path(path, what: str) -> Path:
    """``path`` as a ``Path``: a non-empty ``str`` or ``os.PathLike`` (an empty one would be
    the working folder), not a URL, not a loop of symbolic links; ``TypeError`` /
    ``ValueError`` / ``OSError`` naming ``what`` otherwise."""
    return _as_path(path, what)


def _as_path(path, what: str) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path (str or os.PathLike); got {path!r}.")
    text = os.fspath(path)
    if not (text.strip() if isinstance(text, str) else text.strip(b" \t\r\n")):
        raise ValueError(f"{what} must be a non-empty path (an empty one would be the working "
                         f"folder, a blank one a folder named by spaces); got {text!r}.")
    url = URL_SCHEME.match(os.fspath(path)) if isinstance(os.fspath(path), str) else None
    if url is not None:  # Path() would collapse '//' and create a folder named 'scheme:'
        raise ValueError(f"{what} must be a local file or folder path; got a URL "
                         f"({url.group(1)}://...), which pacpriv does not read or write.")
    refuse_link_loop(Path(path), what)
    return Path(path)


def refuse_link_loop(path: Path, what: str) -> None:
    """A loop of symbolic links at ``path`` or on its way is refused in one line that names it
    (not "already exists", "link to a missing path" or pathlib's ``RuntimeError``).

    Raises
    ------
    OSError
        Naming ``what``, ``path`` and the link of the loop.
    """
    try:
        os.stat(path)
        return
    except OSError as err:
        if err.errno != errno.ELOOP:
            return  # missing, no permission...: the caller's own check names it
    for probe in (*reversed(path.parents), path):
        try:
            os.stat(probe)
        except OSError as err:
            if err.errno == errno.ELOOP:
                where = "" if probe == path else f" ({str(probe)!r} on its way)"
                raise OSError(f"{what} {str(path)!r} cannot be used{where}: it is "
                              f"a loop of symbolic links ({str(probe)!r} -> "
                              f"{os.readlink(probe)!r} -> ... leads back to itself); point it "
                              "at a real folder or file, or give another path.") from None


def _can_create_in(folder: Path) -> str | None:
    """Why no file can be created in the existing ``folder`` (None: it can)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        return err.strerror or type(err).__name__
    return None


def check_input_file(path, what: str) -> Path:
    """``path`` as a :class:`~pathlib.Path` if it is an existing file that can be read.

    ``what`` names it in the message (e.g. ``"dataset file"``, ``"--queries file"``).

    Raises
    ------
    FileNotFoundError
        ``"<what> not found: <path>"`` (and which folder is missing, if one is).
    IsADirectoryError
        If ``path`` is a folder.
    PermissionError
        If it cannot be opened for reading.
    """
    p = _as_path(path, what)
    if p.is_dir():
        raise IsADirectoryError(f"{what} {str(p)!r} is a folder; give a file.")
    if not p.exists():
        missing = p.parent if not p.parent.exists() else None
        raise FileNotFoundError(f"{what} not found: {p}"
                                + (f" (the folder {str(missing)!r} does not exist)"
                                   if missing is not None else ""))
    try:
        with open(p, "rb"):
            pass
    except OSError as err:
        raise PermissionError(f"{what} {str(p)!r} cannot be read "
                              f"({err.strerror or type(err).__name__}).") from None
    return p


def check_existing_dir(path, what: str) -> Path:
    """``path`` if it is an existing folder that can be listed (e.g. a fitted state).

    Raises
    ------
    FileNotFoundError, NotADirectoryError, PermissionError
        It does not exist, is a file, or cannot be read.
    """
    p = _as_path(path, what)
    if not p.exists():
        raise FileNotFoundError(f"{what} {str(p)!r} does not exist.")
    if not p.is_dir():
        raise NotADirectoryError(f"{what} {str(p)!r} is an existing file; give a folder.")
    if not os.access(p, os.R_OK | os.X_OK):
        raise PermissionError(f"{what} {str(p)!r} cannot be read (permission denied).")
    return p


def check_output_dir(path, what: str) -> Path:
    """``path`` if it is, or can be created as, a folder that files can be written into.

    Creates nothing (the writer does, so a run refused later leaves no empty folder); missing
    parent folders are fine (they are created), a file on the way is not.

    Raises
    ------
    NotADirectoryError
        ``path``, or a parent on its way, is an existing file.
    PermissionError
        No file can be created there.
    """
    p = _as_path(path, what)
    if p.exists() and not p.is_dir():
        raise NotADirectoryError(f"{what} {str(p)!r} is an existing file; give a folder path.")
    probe = p
    while not probe.exists():  # the nearest existing ancestor must take the new folder
        _refuse_dangling_link(probe, p, what)
        probe = probe.parent
    if not probe.is_dir():
        raise NotADirectoryError(f"{what} {str(p)!r} cannot be created: {str(probe)!r} is an "
                                 "existing file, not a folder.")
    why = _can_create_in(probe)
    if why is not None:
        raise PermissionError(f"{what} {str(p)!r} is not writable: no file can be created in "
                              f"{str(probe)!r} ({why}).")
    return p


def _refuse_dangling_link(link: Path, path: Path, what: str) -> None:
    """A symbolic link to a missing path, at ``path`` or on its way, is refused in words: the
    folder cannot be created there ("[Errno 17] File exists" otherwise: seventh new-user pass,
    #226)."""
    if link.is_symlink():
        where = "" if link == path else f" ({str(link)!r} on its way)"
        raise FileNotFoundError(f"{what} {str(path)!r} cannot be created{where}: it is a symbolic "
                                f"link to a missing path ({os.readlink(link)!r}); create the "
                                "link's target or give another path.")


def check_output_file(path, what: str, *, suffix: str | None = None) -> Path:
    """``path`` if a file can be written there: its folder exists and takes files, and it is
    not a folder (an existing file is overwritten, so it must be writable).

    Raises
    ------
    ValueError
        ``suffix`` given and ``path`` does not end with it.
    IsADirectoryError, FileNotFoundError, NotADirectoryError, PermissionError
        ``path`` is a folder; its folder is missing or a file; it cannot be written.
    """
    p = _as_path(path, what)
    if suffix is not None and p.suffix != suffix:
        raise ValueError(f"{what} must end with {suffix!r}; got {str(p)!r}.")
    if p.is_dir():
        raise IsADirectoryError(f"{what} {str(p)!r} is a folder; give a file path.")
    folder = p.parent
    if not p.exists():
        _refuse_dangling_link(p, p, what)
    if not folder.exists():
        raise FileNotFoundError(f"{what} {str(p)!r}: the folder {str(folder)!r} does not exist.")
    if not folder.is_dir():
        raise NotADirectoryError(f"{what} {str(p)!r}: {str(folder)!r} is an existing file, not "
                                 "a folder.")
    why = _can_create_in(folder)
    if why is None and p.exists() and not os.access(p, os.W_OK):
        why = "permission denied"
    if why is not None:
        raise PermissionError(f"{what} {str(p)!r} is not writable ({why}).")
    return p


#: Lock file of a report folder in use (held with ``fcntl.flock`` while a run writes there).
LOCK_NAME = ".pacpriv-lock"
#: Files that make a folder a report folder (a report written there, or a run writing one).
REPORT_MARKERS = ("report.json", "report.md", "report.html", LOCK_NAME)
#: Most entries (files and folders, at any depth) scanned in an existing report folder for
#: private pacpriv files; a larger folder is refused as too large to check.
SCAN_LIMIT = 10_000
#: The ``private`` field of a ``--private-index-list`` file (how the scan recognises one).
INDEX_LIST_MARKER = "record indices with per-record upper bounds: do not publish"
_SQLITE_MAGIC = b"SQLite format 3\x00"


#: A checkpoint chunk's name (``pac.engine._checkpoint``: ``trials_<start>_<stop>.npz``).
_CHUNK = re.compile(r"trials_\d{12}_\d{12}\.npz")


def _private_kind(entry: os.DirEntry) -> str | None:
    """What private pacpriv artefact the file ``entry`` is (None: none), by the markers its
    writer leaves: a prediction state's ``secret.json``/``worlds.npz``, a checkpoint's
    ``manifest.json`` (format ``pacpriv.checkpoint``), a disk-backed run's ``*.masks.npy``,
    a private index list's ``private`` field, a ledger's SQLite header."""
    name = entry.name
    if name in ("secret.json", "worlds.npz"):
        return "a prediction state (the secret world index and the world models)"
    if name.endswith(".masks.npy"):
        return "a disk-backed run's outputs (un-noised outputs and subset masks)"
    if _CHUNK.fullmatch(name):  # a checkpoint's chunk, with or without its manifest (eighth
        # new-user pass: chunks left after the manifest was deleted took a report beside them)
        return "a checkpoint's trials (un-noised outputs and subset masks)"
    try:
        if not entry.is_file(follow_symlinks=False):
            return None
        with open(entry.path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return "an unreadable file (it cannot be checked)"
    if name == "manifest.json" and b'"pacpriv.checkpoint"' in head:
        return "a checkpoint (every trial's un-noised output and subset)"
    if name.endswith(".json") and INDEX_LIST_MARKER.encode() in head:
        return "a private index list (which records are most exposed)"
    if head.startswith(_SQLITE_MAGIC) and _is_ledger(entry.path):
        return "a ledger (the budget's charges and analysts' keys)"
    return None


def _is_ledger(path: str) -> bool:
    """Whether the SQLite file ``path`` has the ledger's tables. Read as an immutable file
    (no lock, no ``-wal``/``-shm`` file created in the folder checked); a database that cannot
    be read, or one with a write-ahead log whose tables may not be in the file yet, counts as
    a ledger: it cannot be checked."""
    import sqlite3

    try:
        conn = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro&immutable=1",
                               uri=True)
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        finally:
            conn.close()
    except sqlite3.Error:
        return True
    return {"totals", "entries"} <= names or os.path.exists(f"{path}-wal")


def check_no_private_files(path, what: str) -> None:
    """Refuse a report folder that is, or holds at any depth, a private pacpriv artefact.

    The report folder is what a user shares: a prediction state, a checkpoint, a ledger, a
    private index list or a disk-backed run's outputs inside it would travel with the report
    (sixth new-user pass, c9207/m23). At most :data:`SCAN_LIMIT` entries are scanned (links
    are not followed); a larger folder is refused as too large to check. ``--force`` does
    not override this. A folder that does not exist yet passes.

    Raises
    ------
    PermissionError
        Naming ``what``, the private file (its path inside the folder, never its content)
        and what it is; or that the folder is too large to check.
    """
    top = Path(path)
    _check_no_private_ancestor(top, what)
    if not top.is_dir():
        return
    seen, stack = 0, [str(top)]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as err:
            raise PermissionError(
                f"{what} {str(top)!r}: the folder {folder!r} inside it cannot be listed "
                f"({err.strerror or type(err).__name__}), so it cannot be checked for private "
                "pacpriv files; give another folder for the report.") from None
        for entry in entries:
            seen += 1
            if seen > SCAN_LIMIT:
                raise PermissionError(
                    f"{what} {str(top)!r} holds more than {SCAN_LIMIT} files and folders: "
                    "too large to check that no private pacpriv file (state, checkpoint, "
                    "ledger) lies inside it; give a new or smaller folder for the report.")
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
                continue
            kind = None if entry.name in REPORT_MARKERS else _private_kind(entry)
            if kind is not None:
                inside = os.path.relpath(entry.path, top)
                raise PermissionError(
                    f"{what} {str(top)!r} holds {kind} ({inside!r}): a report folder may be "
                    "shared, so it must hold no private pacpriv file (--force does not change "
                    "this); give another folder for the report.")


#: Names whose presence in a folder marks it as a private artefact's folder (a prediction
#: state, a checkpoint): checked in every ancestor of a report folder, by name first (cheap).
_PRIVATE_FOLDER_NAMES = ("secret.json", "worlds.npz", "manifest.json")


def _check_no_private_ancestor(top: Path, what: str) -> None:
    """Refuse a report folder inside a prediction state or a checkpoint (e.g. a state's
    ``models/``): each existing ancestor is checked for the markers of
    :data:`_PRIVATE_FOLDER_NAMES` only, so the check costs a few ``stat`` calls."""
    for folder in top.expanduser().resolve().parents:
        for name in _PRIVATE_FOLDER_NAMES:
            candidate = folder / name
            if not candidate.is_file():
                continue
            entry = next((e for e in os.scandir(folder) if e.name == name), None)
            kind = None if entry is None else _private_kind(entry)
            if kind is not None:
                raise PermissionError(
                    f"{what} {str(top)!r} lies inside {str(folder)!r}, which holds {kind}: a "
                    "report folder may be shared, so it must not lie inside a private pacpriv "
                    "folder (--force does not change this); give another folder for the report.")


def _report_marks(folder: Path) -> list[str]:
    """The :data:`REPORT_MARKERS` in ``folder`` that make it a pacpriv report folder: the lock
    of a run writing there, or a report file that names pacpriv in its first MiB (a user's own
    ``report.md`` does not count)."""
    found = []
    for name in REPORT_MARKERS:
        marker = folder / name
        if name == LOCK_NAME:
            if marker.exists():
                found.append(name)
            continue
        try:
            with open(marker, "rb") as fh:
                if b"pacpriv" in fh.read(1 << 20):
                    found.append(name)
        except OSError:  # absent (or unreadable: not ours)
            continue
    return found


def check_not_in_report(path, what: str) -> None:
    """Refuse a private path (a checkpoint, a prediction state, a ledger, an outputs file, an
    index list) that is, or lies inside, a report folder (:func:`_report_marks`: written by
    an earlier command or being written now): the report folder may be shared.

    Raises
    ------
    PermissionError
        Naming ``what``, the path and the report folder.
    """
    p = Path(os.path.abspath(os.path.expanduser(path)))
    for folder in (p, *p.parents):
        found = _report_marks(folder)
        if found:
            raise PermissionError(
                f"{what} {str(path)!r} lies inside the report folder {str(folder)!r} (it "
                f"holds {found[0]}): a report folder may be shared, and {what} is private; "
                "give a path outside it.")


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
    check_not_in_report(directory, "a private folder")
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
    check_not_in_report(path, "a private file")
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


#: Report folders this process holds (a nested writer in the same process does not re-lock).
_HELD: set[str] = set()


def _acquire(lock: Path, what: str, folder: Path) -> int:
    """An exclusive, non-blocking ``flock`` on ``lock`` (created if needed); the file must
    still be the one locked afterwards (a releasing run unlinks it)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no advisory locks, no refusal
        return -1
    for _ in range(20):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise BlockingIOError(
                f"{what} {str(folder)!r} is in use by another pacpriv run (it holds "
                f"{LOCK_NAME}): wait for that run to finish, or give another folder.") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # locked a file that a finishing run had just unlinked: try again
    raise BlockingIOError(f"{what} {str(folder)!r}: could not lock {LOCK_NAME}.")


@contextlib.contextmanager
def report_folder(path, what: str, *, force: bool = False, report_files=(),
                  force_hint: str = "--force"):
    """Hold the report folder ``path`` for one run: refuse it when another run holds it, and
    refuse to replace an earlier report (any of ``report_files`` present) unless ``force``.

    Checked before any work, held until the report is written (an ``fcntl`` lock on
    ``<path>/.pacpriv-lock``, released and removed at the end; a killed run's lock is released
    by the system). A folder created here and left empty by a failed run is removed again.
    Yields ``(path, replaced)``: the earlier report files that this run will replace.
    ``force_hint`` is how the caller's user says "replace": ``--force`` on the command line,
    ``overwrite=True`` in the API.

    Raises
    ------
    BlockingIOError
        Another run holds the folder.
    FileExistsError
        The folder holds a report and ``force`` is False.
    PermissionError
        The folder holds a private pacpriv file, whatever ``force`` says
        (:func:`check_no_private_files`).
    NotADirectoryError, PermissionError
        As :func:`check_output_dir`.
    """
    p = check_output_dir(path, what)
    key = os.path.realpath(p)
    if key in _HELD:  # this process already holds it (a writer inside a locked command)
        yield p, []
        return
    check_no_private_files(p, what)
    created = not p.exists()
    p.mkdir(parents=True, exist_ok=True)
    lock = p / LOCK_NAME
    fd = -1
    try:
        fd = _acquire(lock, what, p)
        earlier = sorted(f for f in report_files if (p / f).exists())
        if earlier and not force:
            raise FileExistsError(
                f"{what} {str(p)!r} already holds a report ({', '.join(earlier)}): pass "
                f"{force_hint} to replace it, or give another folder.")
        _HELD.add(key)
        yield p, earlier
    finally:
        _HELD.discard(key)
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(lock)
            os.close(fd)  # closing releases the lock
        if created:
            with contextlib.suppress(OSError):
                p.rmdir()  # only if the run left it empty
