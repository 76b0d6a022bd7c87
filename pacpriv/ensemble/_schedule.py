"""Batch order of each model, and the padded index block of one synchronous step.

Model ``k`` trains on its own subset ``S_k`` (the pool indices where its mask is true, in
ascending order, as ``pool[mask_k]`` gives them) and draws its batch order from its own
generator (child ``BATCH_STREAM`` of its seed) with the torch calls of the sequential
reference, so its batches do not depend on which other models share its chunk.

Padding and reproducibility
---------------------------
The models of one step have batches of different sizes; they are padded with zero-weight rows
to the step's largest batch and trained together. A zero-weight row adds exact zeros, so a
model's gradient does not depend on its chunk *mathematically*; in floating point the padding
length and the number of models in a batched matrix product can change the order of the
summation (MKL's batched ``gemm`` does not promise per-matrix results independent of the batch
count or the thread count), so results agree across chunk and block sizes to round-off
(about 10⁻¹⁶ relative in float64), and are bit-identical for the same chunks on one machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pacpriv._random import trial_seed
from pacpriv.ensemble._spec import BATCH_STREAM, Batching, FullBatch, RandomAllocation, Shuffled
from pacpriv.ensemble._torch import torch, torch_generator

__all__ = ["EpochPlan", "Schedule", "batch_positions", "padded_subsets", "subsets_of"]


def subsets_of(masks: np.ndarray) -> list[np.ndarray]:
    """Ascending pool indices of each row of a boolean ``(k, n_records)`` mask array."""
    return [np.flatnonzero(row) for row in masks]


def padded_subsets(subsets: Sequence[np.ndarray], width: int) -> tuple[np.ndarray, np.ndarray]:
    """``(index, real)``: each subset's pool indices zero-padded to ``width`` columns, and a
    bool mask of the real entries; both of shape ``(k, width)``."""
    sizes = np.array([s.size for s in subsets], dtype=np.int64)
    index = np.zeros((len(subsets), width), dtype=np.int64)
    for row, subset in enumerate(subsets):
        index[row, :subset.size] = subset
    return index, np.arange(width)[None, :] < sizes[:, None]


class Schedule:
    """The batches of a chunk of models, epoch after epoch.

    Parameters
    ----------
    batching : FullBatch, Shuffled or RandomAllocation
    subsets : sequence of numpy.ndarray
        Each model's pool indices.
    seeds : sequence of numpy.random.SeedSequence
        Each model's seed; its child ``BATCH_STREAM`` seeds the batch generator.
    """

    def __init__(self, batching: Batching, subsets: Sequence[np.ndarray],
                 seeds: Sequence[np.random.SeedSequence]) -> None:
        self.batching = batching
        self.subsets = list(subsets)
        self.sizes = np.array([s.size for s in self.subsets], dtype=np.int64)
        self.generators = [
            None if isinstance(batching, FullBatch) or s.size == 0
            else torch_generator(trial_seed(seed, BATCH_STREAM))
            for s, seed in zip(self.subsets, seeds, strict=True)
        ]
        self.width = int(self.sizes.max(initial=0))
        self.index, self.real = padded_subsets(self.subsets, self.width)

    def epoch(self) -> EpochPlan:
        """The next epoch's batches of every model (one draw from each model's generator)."""
        k, batching, sizes = len(self.subsets), self.batching, self.sizes
        # step_of[k, i]: the step that uses position i of subset k (n_steps: no position)
        step_of = np.zeros((k, self.width), dtype=np.int64)
        if isinstance(batching, FullBatch):
            n_steps = 1
        elif isinstance(batching, Shuffled):
            b = batching.batch_size
            n_steps = -(-self.width // b)
            for row, (n, gen) in enumerate(zip(sizes, self.generators, strict=True)):
                if n:
                    perm = torch.randperm(int(n), generator=gen).numpy()
                    step_of[row, perm] = np.arange(n) // b
        else:
            n_steps = batching.steps_per_epoch
            for row, (n, gen) in enumerate(zip(sizes, self.generators, strict=True)):
                if n:
                    step_of[row, :n] = _labels(int(n), n_steps, gen)
        step_of[~self.real] = n_steps
        # A stable sort by step has one result: each step's positions in ascending order, as
        # torch.argsort(stable=True) in random_allocation (for Shuffled: each batch's set).
        perm = np.argsort(step_of, axis=1, kind="stable")
        order = np.take_along_axis(self.index, perm, axis=1)
        flat = (step_of + (n_steps + 1) * np.arange(k)[:, None]).reshape(-1)
        counts = np.bincount(flat, minlength=k * (n_steps + 1)).reshape(k, n_steps + 1)
        counts = counts[:, :n_steps]
        if isinstance(batching, RandomAllocation):
            active = np.repeat((sizes > 0)[:, None], n_steps, axis=1)
        else:
            active = counts > 0
        return EpochPlan(order=order, offsets=np.cumsum(counts, axis=1) - counts,
                         counts=counts, active=active)


@dataclass(frozen=True)
class EpochPlan:
    """One epoch of a chunk of ``k`` models in ``n_steps`` synchronous steps.

    Attributes
    ----------
    order : numpy.ndarray of shape (k, width), int64
        Each model's pool indices in batch order (step 0's batch first), zero-padded.
    offsets, counts : numpy.ndarray of shape (k, n_steps), int64
        Where step ``j``'s batch starts in ``order[k]``, and its size.
    active : numpy.ndarray of shape (k, n_steps), bool
        Whether the model takes step ``j`` (an empty random-allocation batch is active: it
        still takes a noisy step; a model with fewer shuffled batches sits the rest out).
    """

    order: np.ndarray
    offsets: np.ndarray
    counts: np.ndarray
    active: np.ndarray

    @property
    def n_steps(self) -> int:
        """Synchronous steps of the epoch."""
        return int(self.counts.shape[1])

    def step(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """``(index, weight)`` of step ``j``, shape ``(k, L)`` with ``L`` the largest batch
        (at least 1): pool indices (0 in padding) and 1.0 for real rows, 0.0 for padding."""
        counts = np.where(self.active[:, j], self.counts[:, j], 0)
        length = max(int(counts.max(initial=0)), 1)
        cols = np.arange(length)
        real = cols[None, :] < counts[:, None]
        if self.order.shape[1] == 0:  # every subset is empty
            return np.zeros(real.shape, dtype=np.int64), real.astype(np.float64)
        rows = np.minimum(self.offsets[:, j][:, None] + cols[None, :], self.order.shape[1] - 1)
        index = np.where(real, np.take_along_axis(self.order, rows, axis=1), 0)
        return index, real.astype(np.float64)


def _labels(n: int, m: int, generator: torch.Generator | None) -> np.ndarray:
    """Random allocation of ``n`` positions to ``m`` steps: each position's step (torch draw,
    as in :func:`pacpriv.dpsgd.allocation.random_allocation`)."""
    return torch.randint(m, (n,), generator=generator, dtype=torch.int64).numpy()


def batch_positions(n: int, batching: Batching, generator: torch.Generator | None
                    ) -> list[np.ndarray]:
    """Positions (into the model's subset of ``n >= 1`` records) of each batch of one epoch.

    ``FullBatch``: one batch ``0..n-1``. ``Shuffled(b)``: ``torch.randperm(n)`` cut into
    slices of ``b``. ``RandomAllocation(M)``: ``torch.randint(M, (n,))`` step labels, each step's
    positions ascending (``argsort(stable=True)`` then ``split`` by ``bincount``), as
    :func:`pacpriv.dpsgd.allocation.random_allocation`.
    """
    if isinstance(batching, FullBatch):
        return [np.arange(n)]
    if isinstance(batching, Shuffled):
        perm = torch.randperm(n, generator=generator).numpy()
        b = batching.batch_size
        return [perm[i:i + b] for i in range(0, n, b)]
    if isinstance(batching, RandomAllocation):
        labels = torch.as_tensor(_labels(n, batching.steps_per_epoch, generator))
        order = torch.argsort(labels, stable=True)
        counts = torch.bincount(labels, minlength=batching.steps_per_epoch)
        return [t.numpy() for t in torch.split(order, counts.tolist())]
    raise TypeError(f"unknown batching {type(batching).__name__}")  # pragma: no cover
