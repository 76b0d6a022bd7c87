"""Random-number plumbing (SPEC 7): one root ``SeedSequence``, one child per trial, and every
named seed stream of pacpriv, in this one module.

``rng=None`` means fresh OS entropy; an ``int``, a ``SeedSequence`` or a ``Generator``
is accepted. Trial ``i``'s seed is the ``i``-th child of the root, computed directly
(``SeedSequence(entropy, spawn_key=root.spawn_key + (i,))``) rather than by the stateful
``spawn`` method, so any subset of trials can be (re)computed in any order, on any
worker, after any resume, with bit-identical results.

The streams (children of a seed with a fixed meaning) are named here, once:

* a trial's seed: :data:`SAMPLER_STREAM` (its membership mask), :data:`MECHANISM_STREAM` (the
  mechanism's ``rng``), :data:`GLOBAL_STREAM` (reseeding the global state under fork);
* a DP-SGD training's root: :data:`ALLOCATION_STREAM` (random-allocation batches) and
  :data:`GRADIENT_NOISE_STREAM` (the Gaussian noise);
* a private predictor: :data:`WORLDS_STREAM` of its public seed, :data:`SECRET_STREAM` and
  :data:`ANSWER_NOISE_STREAM` of its separate secret seed (:func:`hashed_stream`).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

RNGLike = None | int | np.random.SeedSequence | np.random.Generator

__all__ = [
    "torch_generator",
    "ALLOCATION_STREAM",
    "AUDIT_ATTACK_STREAM",
    "AUDIT_MODELS_STREAM",
    "AUDIT_ONE_RUN_STREAM",
    "AUDIT_SPLIT_STREAM",
    "ANSWER_NOISE_STREAM",
    "GLOBAL_STREAM",
    "GRADIENT_NOISE_STREAM",
    "MECHANISM_STREAM",
    "MODEL_INIT_STREAM",
    "MODEL_TRAINING_STREAM",
    "SAMPLER_STREAM",
    "SECRET_STREAM",
    "WORLDS_STREAM",
    "RNGLike",
    "as_generator",
    "as_seed_sequence",
    "hashed_stream",
    "seed_to_dict",
    "stream_seed",
    "trial_seed",
]

# --- the streams ---------------------------------------------------------------------------
#: Streams of one engine trial's seed.
SAMPLER_STREAM, MECHANISM_STREAM, GLOBAL_STREAM = 0, 1, 2
#: Streams of a DP-SGD training's root seed.
ALLOCATION_STREAM, GRADIENT_NOISE_STREAM = 0, 1
#: Streams of a private predictor: its worlds (of ``rng``); the secret index and the answer
#: noise (of ``secret_rng``, a separate seed: nothing public may derive from the secret's seed).
WORLDS_STREAM, SECRET_STREAM, ANSWER_NOISE_STREAM = 0, 1, 2
#: Streams of a membership audit's root seed (:mod:`pacpriv.audit`): the split of the records
#: (members / population, or canaries), the target or reference models, the attacks' own
#: randomness, the one-run audit.
AUDIT_SPLIT_STREAM, AUDIT_MODELS_STREAM, AUDIT_ATTACK_STREAM, AUDIT_ONE_RUN_STREAM = 0, 1, 2, 3
#: Streams of one audited model's seed: its initialisation and its training.
MODEL_INIT_STREAM, MODEL_TRAINING_STREAM = 0, 1


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


def stream_seed(root: np.random.SeedSequence, index: int, stream: int) -> np.random.SeedSequence:
    """Seed of one stream (e.g. :data:`SAMPLER_STREAM`) of trial ``index`` of ``root``.

    Equal to ``trial_seed(trial_seed(root, index), stream)``; pure, so it can be computed
    on any worker (built in one step: same value as the nested form, half the hashing cost).
    """
    return np.random.SeedSequence(
        root.entropy, spawn_key=(*root.spawn_key, int(index), int(stream)), pool_size=root.pool_size
    )


def hashed_stream(root: np.random.SeedSequence, stream: int) -> np.random.SeedSequence:
    """A fresh ``SeedSequence`` whose entropy is hashed from ``root``'s child ``stream``.

    Unlike :func:`trial_seed`, its ``seed_to_dict`` does not reveal ``root`` (for the secret
    streams of a private predictor).
    """
    words = trial_seed(root, stream).generate_state(4, dtype=np.uint32)
    return np.random.SeedSequence([int(w) for w in words])


def torch_generator(seed: np.random.SeedSequence) -> Any:
    """A CPU ``torch.Generator`` seeded with 64 bits drawn from ``seed`` (written once).

    The DP-SGD trainer and the ensemble derive every torch generator here, so a model's batch
    order and noise in :mod:`pacpriv.ensemble` equal those of ``train_dpsgd`` with the same seed.
    torch is imported on call (``import pacpriv`` imports no torch).

    Parameters
    ----------
    seed : numpy.random.SeedSequence
        Source of entropy; the same ``seed`` always gives the same generator state.

    Returns
    -------
    torch.Generator
        A CPU generator (draws on another device are made on the CPU and moved).

    Raises
    ------
    TypeError
        If ``seed`` is not a ``SeedSequence``.
    ImportError
        If torch is not installed.
    """
    if not isinstance(seed, np.random.SeedSequence):
        raise TypeError(f"`seed` must be a numpy SeedSequence; got {type(seed).__name__}.")
    import torch

    state = int(seed.generate_state(1, dtype=np.uint64)[0])
    return torch.Generator().manual_seed(state)
