"""Random-number plumbing (SPEC 7): one root ``SeedSequence``, one child per trial.

``rng=None`` means fresh OS entropy; an ``int``, a ``SeedSequence`` or a ``Generator``
is accepted. Trial ``i``'s seed is the ``i``-th child of the root, computed directly
(``SeedSequence(entropy, spawn_key=root.spawn_key + (i,))``) rather than by the stateful
``spawn`` method, so any subset of trials can be (re)computed in any order, on any
worker, after any resume, with bit-identical results.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

RNGLike = None | int | np.random.SeedSequence | np.random.Generator

__all__ = ["RNGLike", "as_generator", "as_seed_sequence", "seed_to_dict", "trial_seed"]


def as_seed_sequence(rng: RNGLike, *, name: str = "rng") -> np.random.SeedSequence:
    """Normalise ``rng`` to a root :class:`numpy.random.SeedSequence`.

    ``None`` draws fresh OS entropy; an ``int`` (>= 0) is used as entropy; a
    ``Generator`` contributes 128 bits drawn from it (advancing it).

    Raises
    ------
    TypeError
        If ``rng`` is of another type.
    ValueError
        If ``rng`` is a negative integer.
    """
    if rng is None:
        return np.random.SeedSequence()
    if isinstance(rng, np.random.SeedSequence):
        return rng
    if isinstance(rng, np.random.Generator):
        words = rng.integers(0, 2**32, size=4, dtype=np.uint64)
        return np.random.SeedSequence([int(w) for w in words])
    if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
        if int(rng) < 0:
            raise ValueError(f"`{name}` must be a non-negative integer seed; got {rng}.")
        return np.random.SeedSequence(int(rng))
    raise TypeError(
        f"`{name}` must be None, a non-negative int, a numpy SeedSequence or a numpy "
        f"Generator; got {type(rng).__name__}."
    )


def as_generator(rng: RNGLike, *, name: str = "rng") -> np.random.Generator:
    """Return a ``Generator``: ``rng`` itself if it is one, else seeded from ``rng``."""
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(as_seed_sequence(rng, name=name))


def trial_seed(root: np.random.SeedSequence, index: int) -> np.random.SeedSequence:
    """The ``index``-th child of ``root``, identical to ``root.spawn(n)[index]`` on a fresh root."""
    return np.random.SeedSequence(
        root.entropy, spawn_key=(*root.spawn_key, int(index)), pool_size=root.pool_size
    )


def seed_to_dict(seed: np.random.SeedSequence) -> dict:
    """JSON-serialisable description of a ``SeedSequence`` (``SeedSequence(**d)`` rebuilds it)."""
    raw: Any = seed.entropy
    entropy = [int(e) for e in raw] if isinstance(raw, (list, tuple, np.ndarray)) else int(raw)
    return {"entropy": entropy, "spawn_key": [int(k) for k in seed.spawn_key]}
