"""Random-allocation batching for DP-SGD (torch).

Random allocation: in every epoch each of the ``n_records`` records is assigned to exactly
one of the ``steps_per_epoch`` (M) steps, independently and uniformly at random. Batch sizes
therefore vary -- marginally each is Binomial(n, 1/M) and together they are
Multinomial(n; 1/M, ..., 1/M) -- and a step may be empty (it still takes a noisy step in the
trainer). This is the sampling scheme analysed in [1]_, as opposed
to Poisson subsampling (opacus' ``UniformWithReplacementSampler``) or shuffling.

Randomness comes only from an injected :class:`torch.Generator` (never torch's global
state); :func:`torch_generators` derives independent generators from a numpy
``SeedSequence`` so that the allocation and the gradient noise use separate streams.

This module imports torch; it is never imported by ``import pacpriv``.

References
----------
.. [1] Membership-inference accuracy bound for DP-SGD with random allocation (RA-MIA,
   CWI / VU Amsterdam); V. Feldman, M. Shenfeld, Privacy Amplification by Random
   Allocation, 2025; L. Chua et al., Balls-and-Bins Sampling for DP-SGD, AISTATS 2025.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

from pacpriv._optional import import_torch
from pacpriv._random import RNGLike, as_seed_sequence, torch_generator, trial_seed
from pacpriv._validation import check_int

torch = import_torch("pacpriv.dpsgd.allocation")

__all__ = [
    "RandomAllocationSampler",
    "random_allocation",
    "secure_generator",
    "torch_generator",
    "torch_generators",
]


def torch_generators(rng: RNGLike, *, n: int = 2) -> tuple[torch.Generator, ...]:
    """``n`` independent torch generators derived from ``rng`` (children 0 to n − 1).

    Parameters
    ----------
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        SPEC 7 seed; ``None`` draws fresh OS entropy.
    n : int, default 2
        Number of generators (the trainer uses child 0 for allocation, 1 for noise).

    Returns
    -------
    tuple of torch.Generator
    """
    n = check_int(n, "n", low=1)
    root = as_seed_sequence(rng)
    return tuple(torch_generator(trial_seed(root, i)) for i in range(n))


def secure_generator() -> torch.Generator:
    """A CPU :class:`torch.Generator` seeded with 64 fresh bits from the OS CSPRNG.

    The seed comes from :mod:`secrets` (``os.urandom``), so it cannot be recovered from
    any seed the user passed; the generator itself is still torch's Mersenne Twister (see
    the ``secure_noise`` notes of :func:`pacpriv.dpsgd.trainer.train_dpsgd`).
    """
    return torch.Generator().manual_seed(secrets.randbits(64))


def random_allocation(
    n_records: int, *, steps_per_epoch: int, generator: torch.Generator, k: int = 1
) -> list[torch.Tensor]:
    """Allocate every record to ``k`` uniformly random distinct steps of one epoch.

    Parameters
    ----------
    n_records : int
        Number of records n (>= 0).
    steps_per_epoch : int
        Number of steps t (>= 1).
    generator : torch.Generator
        Source of randomness (CPU generator).
    k : int, default 1
        Steps per record (``1 ≤ k ≤ t``): each record's ``k``-subset of steps is uniform and
        independent of the other records' (k out of t, Feldman & Shenfeld 2025), drawn by
        Floyd's algorithm (exactly uniform; Bentley & Floyd, CACM 30(9), 1987).

    Returns
    -------
    list of torch.Tensor
        ``steps_per_epoch`` int64 index tensors (sorted, possibly empty); every record
        appears in exactly ``k`` of them. For ``k = 1`` they partition ``range(n_records)``,
        the size of step ``j`` is Binomial(n, 1/t) and the sizes are jointly Multinomial;
        for any ``k`` the size of a step is Binomial(n, k/t).

    Raises
    ------
    TypeError
        If ``generator`` is not a ``torch.Generator``.
    ValueError
        If ``n_records < 0``, ``steps_per_epoch < 1`` or ``k`` is outside ``[1, t]``.
    """
    n_records = check_int(n_records, "n_records", low=0)
    steps_per_epoch = check_int(steps_per_epoch, "steps_per_epoch", low=1)
    k = check_int(k, "k", low=1, high=steps_per_epoch)
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"`generator` must be a torch.Generator; got {type(generator).__name__}."
        )
    if k > 1:
        return _k_of_t(n_records, steps_per_epoch, k, generator)
    step_of_record = torch.randint(
        steps_per_epoch, (n_records,), generator=generator, dtype=torch.int64
    )
    order = torch.argsort(step_of_record, stable=True)
    counts = torch.bincount(step_of_record, minlength=steps_per_epoch)
    return list(torch.split(order, counts.tolist()))


def _k_of_t(n: int, t: int, k: int, generator: torch.Generator) -> list[torch.Tensor]:
    """Floyd's algorithm, vectorised over records: for ``j = t − k, ..., t − 1`` draw
    ``r ~ U{0..j}`` and take ``r``, or ``j`` if ``r`` was already taken (uniform k-subsets)."""
    chosen = torch.empty((n, k), dtype=torch.int64)
    for i, j in enumerate(range(t - k, t)):
        r = torch.randint(j + 1, (n,), generator=generator, dtype=torch.int64)
        taken = (chosen[:, :i] == r[:, None]).any(dim=1) if i else torch.zeros(n, dtype=bool)
        chosen[:, i] = torch.where(taken, torch.full_like(r, j), r)
    steps = chosen.reshape(-1)
    records = torch.arange(n, dtype=torch.int64).repeat_interleave(k)
    order = torch.argsort(steps, stable=True)  # within a step: records in increasing order
    counts = torch.bincount(steps, minlength=t)
    return list(torch.split(records[order], counts.tolist()))


class RandomAllocationSampler(torch.utils.data.Sampler):
    """Batch sampler: each pass is one epoch of random allocation.

    Use as ``DataLoader(dataset, batch_sampler=RandomAllocationSampler(...))``. Each
    iteration yields ``steps_per_epoch`` batches (lists of indices) which together contain
    every index exactly ``k`` times (each record at ``k`` distinct steps); a batch may be
    empty, so the ``collate_fn`` must accept empty
    lists (torch's default collate does not; opacus' ``wrap_collate_with_empty`` shows one
    way). :func:`pacpriv.dpsgd.trainer.train_dpsgd` indexes tensors directly and handles
    empty steps itself.

    Parameters
    ----------
    n_records : int
        Dataset size n (>= 0).
    steps_per_epoch : int
        Number of batches M per epoch (>= 1).
    generator : torch.Generator, optional
        Source of randomness. ``None`` uses :func:`secure_generator` (fresh OS entropy).
    k : int, default 1
        Steps per record per epoch (k out of t): every index appears in ``k`` batches.
    """

    def __init__(
        self, n_records: int, *, steps_per_epoch: int, generator: torch.Generator | None = None,
        k: int = 1,
    ) -> None:
        self.n_records = check_int(n_records, "n_records", low=0)
        self.steps_per_epoch = check_int(steps_per_epoch, "steps_per_epoch", low=1)
        self.k = check_int(k, "k", low=1, high=self.steps_per_epoch)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(
                f"`generator` must be a torch.Generator or None; got {type(generator).__name__}."
            )
        self.generator = secure_generator() if generator is None else generator

    def __len__(self) -> int:
        return self.steps_per_epoch

    def __iter__(self) -> Iterator[list[int]]:
        batches = random_allocation(
            self.n_records, steps_per_epoch=self.steps_per_epoch, generator=self.generator,
            k=self.k,
        )
        for batch in batches:
            yield batch.tolist()
