"""Per-record differences of the SGD black box through :mod:`pacpriv.ensemble` (imports torch).

One per-record trial needs ``f(S)`` and ``f(S xor {i})`` for every audited record ``i``:
``1 + k`` trainings. :class:`EnsemblePerRecord` trains them as one vectorised block
(:meth:`pacpriv.ensemble.EnsembleLogisticRegression.run_block`, which equals the sequential
:class:`~pacpriv.compare.models.LogisticRegressionMechanism` training to float round-off;
tested) and exposes the result as the ``per_record_differences`` fast path that
:mod:`pacpriv.pac.per_record._sim` calls once per trial. The mechanism is deterministic (its
initialisation and batches come from a public seed), so every model of a block shares the
internal randomness, as the informed adversary requires; the rows do not depend on the block
size (chunks of :data:`BLOCK` models).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["BLOCK", "EnsemblePerRecord"]

#: Models per ensemble call (bounds memory; results do not depend on it).
BLOCK = 256


@dataclass(frozen=True)
class EnsemblePerRecord:
    """The SGD black box with a vectorised per-record path (module notes).

    ``__call__``, ``predict``, ``losses``, ``describe`` and ``dim`` are those of ``mechanism``
    (the release path); ``per_record_differences`` and ``run_block`` (the PAC simulation's
    blocks of trials) run the ensemble.
    """

    mechanism: Any
    ensemble: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.ensemble is None:
            from pacpriv.ensemble import EnsembleLogisticRegression

            object.__setattr__(self, "ensemble",
                               EnsembleLogisticRegression.from_compare(self.mechanism))

    @property
    def dim(self) -> int:
        """Output dimension."""
        return int(self.mechanism.dim)

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """The sequential training (what a release runs)."""
        return self.mechanism(subset)

    def run_block(self, pool, masks, *, seeds=None) -> np.ndarray:
        """The whole-subset trials of a block as one vectorised training (the engine's block
        contract, :mod:`pacpriv.pac.engine._blocks`); rows equal ``__call__`` on each subset
        to float tolerance (the training is deterministic: ``seeds`` are unused)."""
        return self.ensemble.run_block(pool, masks)

    def predict(self, theta, X) -> np.ndarray:
        """Class indices."""
        return self.mechanism.predict(theta, X)

    def losses(self, theta, X, y) -> np.ndarray:
        """Per-record losses."""
        return self.mechanism.losses(theta, X, y)

    def describe(self) -> str:
        """In words."""
        return self.mechanism.describe() + " (per-record trials vectorised by pacpriv.ensemble)"

    def per_record_differences(self, pool, mask, records=None) -> tuple[np.ndarray, np.ndarray]:
        """``f(S)`` and ``Δᵢ = f(S ∪ {i}) − f(S ∖ {i})`` for the records (default all)."""
        X, y = pool
        mask = np.asarray(mask, dtype=bool)
        recs = np.arange(mask.size) if records is None else np.asarray(records, np.int64)
        masks = np.repeat(mask[None, :], 1 + recs.size, axis=0)
        masks[1 + np.arange(recs.size), recs] = ~mask[recs]
        out = np.vstack([self.ensemble.run_block((X, y), masks[lo:lo + BLOCK])
                         for lo in range(0, masks.shape[0], BLOCK)])
        sign = np.where(mask[recs], 1.0, -1.0)[:, None]  # in S: f(S) − f(S∖i)
        return out[0], (out[0][None, :] - out[1:]) * sign
