"""Samplers: the data distribution D of PAC Privacy, as membership masks over a pool.

A sampler draws which records of a pool of ``n_records`` enter one trial's subset, as a
boolean mask of shape ``(n_records,)``. The secret of PAC Privacy [1]_ is this random
subset; for Poisson sampling at rate ½ every record is in with prior ½ (PAC membership
privacy). Empty subsets are legal and are passed to the mechanism like any other.

Seed contract
-------------
Mask ``i`` depends only on the root seed and ``i``: trial ``i``'s
:class:`numpy.random.SeedSequence` is ``trial_seed(root, i)``; it is split into a sampler
stream ``trial_seed(trial_seed(root, i), 0)`` and a mechanism stream
``trial_seed(trial_seed(root, i), 1)`` (see :func:`stream_seed`). Any trial can therefore
be recomputed alone, on any worker, in any order, after any resume.

References
----------
.. [1] H. Xiao and S. Devadas, "PAC Privacy: Automatic Privacy Measurement and Control of
   Data Processing", CRYPTO 2023, Sec. 3 (data distribution D, membership privacy).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from pacpriv._random import RNGLike, as_seed_sequence
from pacpriv._validation import check_int, check_real

__all__ = [
    "MECHANISM_STREAM",
    "SAMPLER_STREAM",
    "CallableSampler",
    "ComplementaryPairsSampler",
    "FixedSizeSampler",
    "PoissonSampler",
    "Sampler",
    "as_sampler",
    "callable_fingerprint",
    "sampler_from_dict",
    "stream_seed",
]

#: Index of the sampler stream inside a trial's seed.
SAMPLER_STREAM = 0
#: Index of the mechanism stream inside a trial's seed.
MECHANISM_STREAM = 1


def stream_seed(root: np.random.SeedSequence, index: int, stream: int) -> np.random.SeedSequence:
    """Seed of one stream (``SAMPLER_STREAM`` or ``MECHANISM_STREAM``) of trial ``index``.

    Equal to ``trial_seed(trial_seed(root, index), stream)``; pure, so it can be computed
    on any worker.
    """
    # built in one step (same value as the nested form, half the hashing cost)
    return np.random.SeedSequence(
        root.entropy, spawn_key=(*root.spawn_key, int(index), int(stream)), pool_size=root.pool_size
    )


def callable_fingerprint(func: Callable) -> dict:
    """Name and source hash of a callable (used in ``to_dict`` and checkpoint fingerprints).

    Returns ``{"name": "module.qualname", "source_sha256": hex or None, "bound": list}``;
    the hash is ``None`` when the source is unavailable (builtins, interactive sessions);
    ``bound`` holds the ``repr`` of the arguments bound by ``functools.partial`` layers.
    State held in closures or callable objects is not covered.
    """
    target, bound = func, []
    while isinstance(target, functools.partial):
        bound.append(repr((target.args, sorted(target.keywords.items()))))
        target = target.func
    owner = target if hasattr(target, "__qualname__") else type(target)
    name = f"{getattr(owner, '__module__', '?')}.{getattr(owner, '__qualname__', repr(owner))}"
    try:
        source = inspect.getsource(owner)
    except (OSError, TypeError):
        digest = None
    else:
        digest = hashlib.sha256(source.encode()).hexdigest()
    return {"name": name, "source_sha256": digest, "bound": bound}


def _check_n_records(n_records) -> int:
    return check_int(n_records, "n_records", low=0)


class Sampler(ABC):
    """Base class of samplers (the data distribution D of [1]_).

    Subclasses are frozen dataclasses implementing :meth:`draw`; they must be picklable
    (they travel to worker processes) and deterministic given the generator.
    """

    #: Short name used by :meth:`to_dict` and :func:`as_sampler`.
    name: ClassVar[str] = "sampler"

    @abstractmethod
    def draw(self, n_records: int, rng: np.random.Generator) -> np.ndarray:
        """One membership mask, bool of shape ``(n_records,)``, drawn from ``rng``."""

    def trial_mask(self, n_records: int, *, root: np.random.SeedSequence, index: int) -> np.ndarray:
        """Mask of trial ``index`` under root seed ``root`` (depends only on both).

        Parameters
        ----------
        n_records : int
            Pool size, >= 0.
        root : numpy.random.SeedSequence
            Root seed of the simulation.
        index : int
            Trial index, >= 0.

        Returns
        -------
        numpy.ndarray of bool, shape (n_records,)
        """
        rng = np.random.default_rng(stream_seed(root, index, SAMPLER_STREAM))
        return self.draw(n_records, rng)

    def masks(self, n_records: int, *, n_trials: int, rng: RNGLike = None) -> np.ndarray:
        """Masks of trials ``0 .. n_trials-1``, bool of shape ``(n_trials, n_records)``.

        Identical to the masks :func:`pacpriv.pac.engine.simulate` draws with the same
        ``rng`` (an ``int`` or ``SeedSequence``; ``None`` = fresh OS entropy).
        """
        n_records = _check_n_records(n_records)
        n_trials = check_int(n_trials, "n_trials", low=0)
        root = as_seed_sequence(rng)
        out = np.empty((n_trials, n_records), dtype=bool)
        for i in range(n_trials):
            out[i] = self.trial_mask(n_records, root=root, index=i)
        return out

    @property
    def prior(self) -> float | None:
        """Membership prior of one record if it does not depend on ``n_records``, else None."""
        return None

    def membership_prior(self, n_records: int) -> float | None:
        """Probability that a given record is in a trial's subset (``None`` if unknown)."""
        return self.prior

    def to_dict(self) -> dict:
        """JSON-serialisable description (used by reports and checkpoint fingerprints)."""
        return {"name": self.name}


@dataclass(frozen=True)
class PoissonSampler(Sampler):
    """Each record enters independently with probability ``sampling_rate``.

    Parameters
    ----------
    sampling_rate : float, default 0.5
        Inclusion probability in [0, 1]; ½ gives PAC membership privacy with prior ½ [1]_.
    """

    sampling_rate: float = 0.5
    name: ClassVar[str] = "poisson"

    def __post_init__(self) -> None:
        rate = check_real(self.sampling_rate, "sampling_rate", low=0.0, high=1.0)
        object.__setattr__(self, "sampling_rate", rate)

    def draw(self, n_records: int, rng: np.random.Generator) -> np.ndarray:
        """One mask: ``rng.random(n_records) < sampling_rate``."""
        return rng.random(_check_n_records(n_records)) < self.sampling_rate

    @property
    def prior(self) -> float:
        """Membership prior of one record, ``sampling_rate``."""
        return self.sampling_rate

    def to_dict(self) -> dict:
        """``{"name": "poisson", "sampling_rate": rate, "prior": rate}``."""
        return {"name": self.name, "sampling_rate": self.sampling_rate, "prior": self.prior}


@dataclass(frozen=True)
class FixedSizeSampler(Sampler):
    """A uniform subset of exactly ``subset_size`` records, drawn without replacement.

    Parameters
    ----------
    subset_size : int
        Number of records per subset, >= 0 and <= ``n_records`` (checked when drawing).
    """

    subset_size: int
    name: ClassVar[str] = "fixed"

    def __post_init__(self) -> None:
        object.__setattr__(self, "subset_size", check_int(self.subset_size, "subset_size", low=0))

    def draw(self, n_records: int, rng: np.random.Generator) -> np.ndarray:
        """One mask with exactly ``subset_size`` True entries, uniformly placed.

        Raises
        ------
        ValueError
            If ``subset_size > n_records``.
        """
        n_records = _check_n_records(n_records)
        if self.subset_size > n_records:
            raise ValueError(
                f"`subset_size` must be <= n_records = {n_records}; got {self.subset_size}."
            )
        mask = np.zeros(n_records, dtype=bool)
        mask[rng.choice(n_records, size=self.subset_size, replace=False)] = True
        return mask

    def membership_prior(self, n_records: int) -> float | None:
        """``subset_size / n_records`` (None for an empty pool)."""
        n_records = _check_n_records(n_records)
        return self.subset_size / n_records if n_records else None

    def to_dict(self) -> dict:
        """``{"name": "fixed", "subset_size": k}``."""
        return {"name": self.name, "subset_size": self.subset_size}


@dataclass(frozen=True)
class ComplementaryPairsSampler(Sampler):
    """Complementary pairs: trial ``2k`` is Poisson-½, trial ``2k+1`` is its complement.

    Every record is in exactly half of each pair, so in exactly half of the trials when
    ``n_trials`` is even (an antithetic design that halves the membership noise of the
    estimate). With an odd ``n_trials`` the last trial is unpaired (a plain Poisson-½ draw).
    Both trials of pair ``k`` derive their mask from trial ``2k``'s sampler stream.
    """

    name: ClassVar[str] = "pairs"

    def draw(self, n_records: int, rng: np.random.Generator) -> np.ndarray:
        """One Poisson-½ mask (the first member of a pair)."""
        return rng.random(_check_n_records(n_records)) < 0.5

    def trial_mask(self, n_records: int, *, root: np.random.SeedSequence, index: int) -> np.ndarray:
        """Mask of trial ``index``: pair ``index // 2``'s draw, complemented for odd ``index``."""
        pair = int(index) // 2
        mask = super().trial_mask(n_records, root=root, index=2 * pair)
        return ~mask if int(index) % 2 else mask

    @property
    def prior(self) -> float:
        """Membership prior of one record, ½."""
        return 0.5

    def to_dict(self) -> dict:
        """``{"name": "pairs", "prior": 0.5}``."""
        return {"name": self.name, "prior": self.prior}


@dataclass(frozen=True)
class CallableSampler(Sampler):
    """Any callable ``func(n_records, rng) -> mask`` used as a sampler.

    The mask must be a bool (or 0/1 integer/float) array of shape ``(n_records,)``; it is
    validated on every trial. ``func`` must be picklable for process backends.

    Parameters
    ----------
    func : callable
        ``func(n_records: int, rng: numpy.random.Generator) -> array of shape (n_records,)``.
    prior : float or None, default None
        Membership prior of one record, if known.
    """

    func: Callable[[int, np.random.Generator], Any]
    prior: float | None = None  # type: ignore[assignment]
    name: ClassVar[str] = "callable"

    def __post_init__(self) -> None:
        if not callable(self.func):
            raise TypeError(f"`func` must be callable; got {type(self.func).__name__}.")
        if self.prior is not None:
            object.__setattr__(self, "prior", check_real(self.prior, "prior", low=0.0, high=1.0))

    def draw(self, n_records: int, rng: np.random.Generator) -> np.ndarray:
        """Call ``func`` and validate its mask (see :meth:`trial_mask` for the trial index)."""
        return self._validated(self.func(n_records, rng), _check_n_records(n_records), None)

    def trial_mask(self, n_records: int, *, root: np.random.SeedSequence, index: int) -> np.ndarray:
        """Mask of trial ``index``; errors name the trial.

        Raises
        ------
        TypeError, ValueError
            If ``func`` returns something other than a 0/1 array of shape ``(n_records,)``.
        """
        rng = np.random.default_rng(stream_seed(root, index, SAMPLER_STREAM))
        return self._validated(self.func(n_records, rng), n_records, index)

    def _validated(self, mask: Any, n_records: int, index: int | None) -> np.ndarray:
        where = f" in trial {index}" if index is not None else ""
        arr = np.asarray(mask)
        if arr.shape != (n_records,):
            raise ValueError(
                f"`sampler` must return a mask of shape ({n_records},){where}; "
                f"got shape {arr.shape}."
            )
        if arr.dtype == bool:
            return arr
        if arr.dtype.kind not in "iuf" or not np.isin(arr, (0, 1)).all():
            raise TypeError(
                f"`sampler` must return a boolean (or 0/1) mask{where}; got dtype {arr.dtype} "
                f"with values outside {{0, 1}}."
            )
        return arr.astype(bool)

    def to_dict(self) -> dict:
        """``{"name": "callable", "func": qualified name, "source_sha256": ..., "prior": ...}``."""
        fp = callable_fingerprint(self.func)
        return {
            "name": self.name,
            "func": fp["name"],
            "source_sha256": fp["source_sha256"],
            "prior": self.prior,
        }


_BY_NAME: dict[str, Callable[[], Sampler]] = {
    "poisson": PoissonSampler,
    "pairs": ComplementaryPairsSampler,
    "complementary_pairs": ComplementaryPairsSampler,
}


def as_sampler(sampler: Sampler | Callable | str | None) -> Sampler:
    """Normalise the ``sampler`` argument of the engine.

    ``None`` -> ``PoissonSampler(0.5)``; a :class:`Sampler` -> itself; a callable ->
    :class:`CallableSampler`; ``"poisson"`` -> Poisson-½; ``"pairs"`` (or
    ``"complementary_pairs"``) -> :class:`ComplementaryPairsSampler`.

    Raises
    ------
    TypeError
        If ``sampler`` is of another type.
    ValueError
        If ``sampler`` is an unknown name (``"fixed"`` needs an explicit
        ``FixedSizeSampler(subset_size=...)``).
    """
    if sampler is None:
        return PoissonSampler(0.5)
    if isinstance(sampler, Sampler):
        return sampler
    if isinstance(sampler, str):
        try:
            return _BY_NAME[sampler]()
        except KeyError:
            raise ValueError(
                f"`sampler` must be one of {sorted(_BY_NAME)} when given by name "
                f"(use FixedSizeSampler(subset_size=...) for fixed-size subsets); "
                f"got {sampler!r}."
            ) from None
    if callable(sampler):
        return CallableSampler(sampler)
    raise TypeError(
        "`sampler` must be None, a Sampler, a callable (n_records, rng) -> mask or a name; "
        f"got {type(sampler).__name__}."
    )


def sampler_from_dict(description: dict) -> Sampler:
    """Rebuild a built-in sampler from its :meth:`Sampler.to_dict` description.

    Raises
    ------
    ValueError
        For a ``"callable"`` description (the function cannot be rebuilt) or an unknown name.
    """
    name = description.get("name")
    if name == "poisson":
        return PoissonSampler(description.get("sampling_rate", 0.5))
    if name == "fixed":
        return FixedSizeSampler(description["subset_size"])
    if name == "pairs":
        return ComplementaryPairsSampler()
    raise ValueError(
        f"`description` must describe a built-in sampler (poisson, fixed, pairs); got {name!r}."
    )
