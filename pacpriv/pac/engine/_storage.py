"""Where the engine puts finished trials: preallocated arrays, in memory or on disk.

Outputs are written in place as batches finish (never accumulated in lists). With
``output_path`` the arrays are ``.npy`` files opened with
:func:`numpy.lib.format.open_memmap`, so ``n_trials x d`` can exceed memory: outputs go to
``output_path`` and masks to the sibling ``<stem>.masks.npy``. Both are ordinary ``.npy``
files readable with ``numpy.load(path, mmap_mode="r")``. They hold un-noised outputs and subset
masks, which can reconstruct the records: they are created with mode 0600 (owner only), and
should be treated like the raw data and deleted after use.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from pacpriv._files import check_output_file, create_private_file
from pacpriv.exceptions import DISK_ADVICE, DTYPE_ADVICE

__all__ = ["OutputStore", "masks_path_for"]


def masks_path_for(output_path: str | os.PathLike) -> Path:
    """Path of the masks file that accompanies ``output_path`` (``<stem>.masks.npy``)."""
    path = Path(output_path)
    return path.with_name(f"{path.stem}.masks.npy")


def _check_output_path(output_path) -> Path | None:
    if output_path is None:
        return None
    if not isinstance(output_path, (str, os.PathLike)):
        raise TypeError(
            "`output_path` must be None or a path to a .npy file; "
            f"got {type(output_path).__name__}."
        )
    path = check_output_file(output_path, "`output_path`", suffix=".npy")
    check_output_file(masks_path_for(path), "`output_path`'s masks file")
    return path


def physical_memory() -> int | None:
    """Bytes of memory this process may use: the smallest of the physical memory, the
    address-space limit (``ulimit -v``) and the cgroup limit; None where none is known."""
    limits = []
    try:
        limits.append(int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES")))
    except (AttributeError, ValueError, OSError):
        pass
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
            limits.append(int(soft))
    except (ImportError, AttributeError, ValueError, OSError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < 2**62:
            limits.append(int(text))
    return min(limits) if limits else None


def _check_output_memory(n_trials: int, dim: int, dtype: np.dtype) -> None:
    """Refuse, as soon as the output dimension is known (after the first trial), outputs
    that cannot fit in memory: ``(n_trials, dim)`` values, more than half of the machine's
    physical memory (the analysis of the certified rule needs several times more)."""
    memory = physical_memory()
    need = n_trials * dim * np.dtype(dtype).itemsize
    if memory is not None and need > memory // 2:
        raise ValueError(
            f"`n_trials` = {n_trials} outputs of dimension d = {dim} ({np.dtype(dtype).name}) "
            f"need {need / 2**30:.1f} GiB in memory, more than half of the "
            f"{memory / 2**30:.1f} GiB this process may use (the certified rule's analysis "
            f"needs several times more); use fewer trials, a smaller output, {DTYPE_ADVICE}, "
            f"or {DISK_ADVICE} with a plug-in rule.")


class OutputStore:
    """Preallocated ``outputs (n_trials, d)`` and ``masks (n_trials, n_records)``.

    ``d`` is learnt from the first stored batch (or given). ``done`` marks finished trials.

    Parameters
    ----------
    n_trials, n_records : int
        Array sizes.
    dtype : numpy dtype
        Output dtype (float64 by default in the engine).
    output_path : path or None
        ``.npy`` file for disk-backed outputs (masks beside it); ``None`` keeps them in memory.
    """

    def __init__(self, n_trials: int, n_records: int, *, dtype, output_path=None) -> None:
        self.n_trials = n_trials
        self.n_records = n_records
        self.dtype = np.dtype(dtype)
        self.path = _check_output_path(output_path)
        self.dim: int | None = None
        self.done = np.zeros(n_trials, dtype=bool)
        self.outputs: np.ndarray | None = None
        self.masks: np.ndarray | None = None

    def _allocate(self, dim: int) -> None:
        shape = (self.n_trials, dim)
        mshape = (self.n_trials, self.n_records)
        if self.path is None:
            _check_output_memory(self.n_trials, dim, self.dtype)
        self.dim = dim
        if self.path is None:
            self.outputs = np.zeros(shape, dtype=self.dtype)
            self.masks = np.zeros(mshape, dtype=bool)
        else:
            open_memmap = np.lib.format.open_memmap
            for path in (self.path, masks_path_for(self.path)):
                create_private_file(path)  # 0600: open_memmap keeps the mode of what it truncates
            self.outputs = open_memmap(self.path, mode="w+", dtype=self.dtype, shape=shape)
            self.masks = open_memmap(masks_path_for(self.path), mode="w+", dtype=bool, shape=mshape)

    def put(self, start: int, outputs: np.ndarray, masks: np.ndarray) -> None:
        """Store trials ``start .. start + len(outputs) - 1`` (rows beyond ``n_trials`` dropped)."""
        k = min(len(outputs), self.n_trials - start)
        if k <= 0:
            return
        if self.outputs is None:
            self._allocate(outputs.shape[1])
        stored_outputs, stored_masks = self._arrays()
        stored_outputs[start : start + k] = outputs[:k]
        stored_masks[start : start + k] = masks[:k]
        self.done[start : start + k] = True

    def mark_done(self, start: int, count: int) -> None:
        """Mark trials ``start .. start + count - 1`` finished: their rows were written in
        place (:func:`~pacpriv.pac.engine._trial.run_batch_into`)."""
        self.done[start : start + max(0, min(count, self.n_trials - start))] = True

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(outputs, masks)``; both are allocated by the first stored trial."""
        if self.outputs is None or self.masks is None:
            raise RuntimeError("no trial has been stored yet")
        return self.outputs, self.masks

    def row(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Stored output and membership mask of the finished trial ``index``."""
        outputs, masks = self._arrays()
        return outputs[index], masks[index]

    def missing_ranges(self) -> list[tuple[int, int]]:
        """Maximal ``[start, stop)`` ranges of unfinished trials, in increasing order."""
        padded = np.concatenate(([False], ~self.done, [False])).astype(np.int8)
        edges = np.flatnonzero(np.diff(padded))
        return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]

    @property
    def n_done(self) -> int:
        """Number of finished trials."""
        return int(self.done.sum())

    def finalize(self) -> tuple[np.ndarray, np.ndarray]:
        """Flush and return ``(outputs, masks)``; disk-backed arrays are reopened read-only."""
        outputs, masks = self._arrays()
        if self.path is None:
            return outputs, masks
        for arr in (outputs, masks):
            if isinstance(arr, np.memmap):  # always, on disk (open_memmap)
                arr.flush()
        del self.outputs, self.masks, outputs, masks, arr
        outputs = np.load(self.path, mmap_mode="r")
        masks = np.load(masks_path_for(self.path), mmap_mode="r")
        return outputs, masks
