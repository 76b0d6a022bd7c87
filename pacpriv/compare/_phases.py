"""Checkpoint folders of a comparison: the root seed, and one subfolder per dataset and phase.

A comparison runs several simulations per dataset (the whole-subset PAC trials, the
per-record shape and certification trials). With ``ExecutionOptions(checkpoint=DIR)`` the
engine's checkpoint (:class:`pacpriv.pac.engine._checkpoint.Checkpoint`) at ``DIR`` records
the comparison's root seed, and each simulation keeps its trials in
``DIR/<dataset>-<hash>/<phase>``, so the same call resumes an interrupted comparison.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from typing import Any

from pacpriv._random import RNGLike, as_seed_sequence
from pacpriv.pac.engine._options import ExecutionOptions

__all__ = ["checkpoint_root", "phase_execution"]


def checkpoint_root(rng: RNGLike, execution: ExecutionOptions) -> Any:
    """The root seed of a comparison; with a checkpoint, the one recorded in its folder.

    The folder's own manifest (the engine's :class:`~pacpriv.pac.engine._checkpoint.
    Checkpoint`) records the root seed, so ``rng=None`` resumes the interrupted run; each
    dataset's simulations keep their trials in subfolders (:func:`phase_execution`).

    Raises
    ------
    CheckpointError
        If the folder belongs to another run or a given ``rng`` differs from its seed.
    """
    if execution.checkpoint is None:
        return as_seed_sequence(rng)
    from pacpriv.pac.engine._checkpoint import Checkpoint

    given = None if rng is None else as_seed_sequence(rng)
    return Checkpoint.open(execution.checkpoint, fingerprint={"run": "pacpriv.compare"},
                           n_records=0, root=given).root


def phase_execution(execution: ExecutionOptions, dataset: str, phase: str) -> ExecutionOptions:
    """``execution`` with the checkpoint subfolder of one dataset's simulation phase."""
    if execution.checkpoint is None:
        return execution
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(str(dataset)))[:60] or "data"
    tag = hashlib.sha256(str(dataset).encode()).hexdigest()[:8]
    return dataclasses.replace(
        execution, checkpoint=os.path.join(os.fspath(execution.checkpoint), f"{slug}-{tag}",
                                           phase))
