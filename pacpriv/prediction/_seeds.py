"""The randomness of a private predictor: the public world seed, the secret index and noise.

Two separate seeds (the streams are named in :mod:`pacpriv._random`):

* ``rng`` seeds the *public* worlds only: child :data:`~pacpriv._random.WORLDS_STREAM`,
  hashed (:func:`~pacpriv._random.hashed_stream`), is the engine's root seed, recorded in
  ``config.json``;
* the secret index ``J`` and the noise entropy come from OS entropy (:mod:`secrets`), or, for
  tests and demos, from a separate ``secret_rng`` (streams
  :data:`~pacpriv._random.SECRET_STREAM` and :data:`~pacpriv._random.ANSWER_NOISE_STREAM`):
  nothing public may derive from the secret's seed, since anyone could search a public seed
  and recompute them (Zhu, Sridhar & Devadas, Private Prediction via PAC Privacy,
  arXiv:2601.14033, 2026: only ``J`` and the noise are secret).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import numpy as np

from pacpriv._random import (
    ANSWER_NOISE_STREAM,
    SECRET_STREAM,
    WORLDS_STREAM,
    RNGLike,
    as_seed_sequence,
    hashed_stream,
    seed_to_dict,
)

__all__ = ["SECRET_FROM_OS", "SECRET_SEEDED", "SECRET_UNKNOWN", "Seeds", "draw_secret",
           "noise_generator"]

#: How ``J`` and the noise entropy were drawn (public label in config.json and the report).
SECRET_FROM_OS = "OS entropy (not recorded)"
SECRET_SEEDED = "caller-seeded secret (not for production)"
SECRET_UNKNOWN = "not recorded by the pacpriv version that wrote this state"


@dataclass(frozen=True, eq=False)
class Seeds:
    """The seeds of one predictor.

    Attributes
    ----------
    root : SeedSequence or None
        The caller's public ``rng`` (None: OS entropy, or the stored seed of a resumed state).
    world_seed : SeedSequence
        Root seed of the engine that draws and fits the worlds (public).
    secret_root : SeedSequence or None
        The caller's ``secret_rng`` (tests and demos); None: OS entropy.
    secret_randomness : str
        :data:`SECRET_FROM_OS`, :data:`SECRET_SEEDED` or, for an old state,
        :data:`SECRET_UNKNOWN`.
    """

    root: np.random.SeedSequence | None
    world_seed: np.random.SeedSequence
    secret_root: np.random.SeedSequence | None
    secret_randomness: str

    @classmethod
    def from_arguments(cls, rng: RNGLike, secret_rng: RNGLike) -> Seeds:
        """Check ``rng`` and ``secret_rng`` and derive the world seed.

        Raises
        ------
        TypeError
            If ``rng`` is a Generator (it cannot be stored for a resume) or of another type.
        ValueError
            If ``secret_rng`` equals ``rng`` (the secret could be searched for).
        """
        if isinstance(rng, np.random.Generator):
            raise TypeError("`rng` must be None, an int or a SeedSequence (a Generator cannot be "
                            "stored for a resume); got Generator.")
        root = as_seed_sequence(rng) if rng is not None else None
        secret_root = (None if secret_rng is None
                       else as_seed_sequence(secret_rng, name="secret_rng"))
        if root is not None and secret_root is not None and \
                seed_to_dict(root) == seed_to_dict(secret_root):
            raise ValueError("`secret_rng` must differ from `rng`: `rng` seeds the public "
                             "worlds, so a secret drawn from the same seed could be searched "
                             f"for; got the same seed {seed_to_dict(root)} for both.")
        world_seed = (hashed_stream(root, WORLDS_STREAM) if root is not None
                      else np.random.SeedSequence())
        return cls(root=root, world_seed=world_seed, secret_root=secret_root,
                   secret_randomness=SECRET_FROM_OS if secret_root is None else SECRET_SEEDED)

    @classmethod
    def stored(cls, config: dict) -> Seeds:
        """The seeds of a fitted state (its secret is read from the secret file)."""
        return cls(root=None, world_seed=np.random.SeedSequence(**config["world_seed"]),
                   secret_root=None,
                   secret_randomness=config.get("secret_randomness", SECRET_UNKNOWN))

    def replace(self, **changes) -> Seeds:
        """A copy with some fields changed (a resumed state's world seed or label)."""
        fields = {"root": self.root, "world_seed": self.world_seed,
                  "secret_root": self.secret_root, "secret_randomness": self.secret_randomness}
        return Seeds(**{**fields, **changes})


def draw_secret(seeds: Seeds, n_worlds: int) -> tuple[int, int]:
    """``(J, noise_entropy)``: ``J`` uniform on ``[0, n_worlds)`` and 128 bits of noise entropy.

    From :mod:`secrets` (OS entropy), or from the hashed streams of ``secret_root`` when given.
    """
    if seeds.secret_root is None:
        return secrets.randbelow(n_worlds), secrets.randbits(128)
    gen = np.random.default_rng(hashed_stream(seeds.secret_root, SECRET_STREAM))
    secret_index = int(gen.integers(n_worlds))
    noise_seed = hashed_stream(seeds.secret_root, ANSWER_NOISE_STREAM)
    return secret_index, int(noise_seed.generate_state(4, np.uint64)[0])


def noise_generator(noise_entropy: int, query_index: int) -> np.random.Generator:
    """The noise generator of the ``query_index``-th answered row (0-based, over the life of
    the predictor): the same row index always gets the same noise, in any batch split."""
    return np.random.default_rng(np.random.SeedSequence(noise_entropy,
                                                        spawn_key=(int(query_index),)))
