"""Ensemble mechanisms: trials evaluated a canonical block at a time.

A mechanism may declare that it evaluates a block of subsets at once: it has a method
``run_block(pool, masks, *, seeds) -> ndarray of shape (B, d)`` (masks ``(B, n)`` bool, one
:class:`numpy.random.SeedSequence` per row), whose row ``k`` is what ``mechanism(subset_k,
rng=seeds[k])`` returns, up to floating-point rounding (the :mod:`pacpriv.ensemble` mechanisms
are such; tested to 1e-12 in float64). With ``ExecutionOptions(ensemble=True)`` (the default)
the engine then runs trials by blocks.

The blocks are **canonical**: trial ``i`` is always evaluated in the block
``[B·⌊i/B⌋, min(B·⌊i/B⌋ + B, n_trials))`` with the seeds of those trials
(``stream_seed(root, i, MECHANISM_STREAM)``, the seeds of the one-trial path), whatever the
batch, the worker or ``n_jobs``. So a simulation's outputs are bit-identical for any ``n_jobs``,
backend and ``batch_size``, and a re-run of one trial (reproducibility check, checkpoint
verification) reproduces it bit for bit. Between block sizes, and against
``ExecutionOptions(ensemble=False)`` (one call per trial), outputs agree to floating-point
tolerance. Batches are aligned to block boundaries (see :mod:`~pacpriv.pac.engine._parallel`),
so checkpoints are written per block. The worker side is
:func:`pacpriv.pac.engine._trial.run_blocks`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DEFAULT_BLOCK_SIZE", "block_size_of"]

#: Trials per block unless the mechanism sets ``block_size``.
DEFAULT_BLOCK_SIZE = 64


def block_size_of(mechanism, ensemble: bool) -> int:
    """Trials per canonical block for ``mechanism`` (0: one call per trial).

    A mechanism with ``run_block`` sets ``block_size`` to choose the block (default
    :data:`DEFAULT_BLOCK_SIZE`), or to 0 when this instance has no block form.

    Raises
    ------
    ValueError
        If the mechanism's ``block_size`` is not a positive integer.
    """
    if not ensemble or not callable(getattr(mechanism, "run_block", None)):
        return 0
    size = getattr(mechanism, "block_size", None)
    if size is None:
        return DEFAULT_BLOCK_SIZE
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
        raise ValueError(f"the mechanism's `block_size` must be a positive integer (0: no "
                         f"block form for this instance); got {size!r}.")
    return int(size)
