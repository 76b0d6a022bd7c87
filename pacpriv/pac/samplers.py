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

import dataclasses
import functools
import hashlib
import inspect
import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from pacpriv._numbers import format_bound, format_percent
from pacpriv._random import (
    SAMPLER_STREAM,
    RNGLike,
    as_seed_sequence,
    stream_seed,
)
from pacpriv._validation import check_int
from pacpriv.registry import Registry, user_facing_name

#: The public samplers, re-exported by :mod:`pacpriv.pac`. :data:`SAMPLERS` (names ->
#: classes; ``SAMPLERS.from_dict`` rebuilds a ``to_dict()``), :func:`callable_fingerprint` and
#: :func:`check_inclusion_probability` serve the engine, the checkpoints and the reports.

#: Largest ``subset_size`` a sampler accepts (no pool holds more records).
_MAX_RECORDS = 2**62

__all__ = [
    "SAMPLERS",
    "CallableSampler",
    "ComplementaryPairsSampler",
    "FixedSizeSampler",
    "PoissonSampler",
    "Sampler",
    "as_sampler",
]

#: Sampler names -> classes (``--sampler`` choices, ``as_sampler(name)``, ``from_dict``).
SAMPLERS: Registry[type[Sampler]] = Registry("sampler", callable_entries=True)

def callable_fingerprint(func: Callable) -> dict:
    """Name and source hash of a callable (used in ``to_dict`` and checkpoint fingerprints).

    Returns ``{"name": "module.qualname", "source_sha256": hex or None, "bound": list}``;
    the hash is ``None`` when the source is unavailable (builtins, interactive sessions);
    ``bound`` holds the ``repr`` of the arguments bound by ``functools.partial`` layers.
    State held in closures or callable objects is not covered.
    """
    owner, name, bound = _named_owner(func)
    try:
        source = inspect.getsource(owner)
    except (OSError, TypeError):
        digest = None
    else:
        digest = hashlib.sha256(source.encode()).hexdigest()
    return {"name": name, "source_sha256": digest, "bound": bound}


def _named_owner(func: Callable) -> tuple[Any, str, list[str]]:
    """``(owner, "module.qualname", bound)`` of ``func`` below its ``functools.partial``
    layers (``bound``: the ``repr`` of their arguments); ``owner`` is the function, or the
    class of a callable object."""
    target, bound = func, []
    while isinstance(target, functools.partial):
        bound.append(repr((target.args, sorted(target.keywords.items()))))
        target = target.func
    owner = target if hasattr(target, "__qualname__") else type(target)
    name = f"{getattr(owner, '__module__', '?')}.{getattr(owner, '__qualname__', repr(owner))}"
    return owner, name, bound


def display_name(func: Callable) -> str:
    """The name errors and warnings give ``func``: ``module.qualname`` as in
    :func:`callable_fingerprint` (without reading its source), but ``file.py:qualname`` for an
    object loaded from a user's file (:func:`pacpriv.registry.load_object`), never its private
    module name."""
    return user_facing_name(_named_owner(func)[1])


def _check_n_records(n_records) -> int:
    return check_int(n_records, "n_records", low=0)


#: Uniforms drawn at a time by :meth:`PoissonSampler.trial_mask_into` (64 KiB of float64:
#: below glibc's smallest mmap threshold, so the buffer comes from the heap's free lists).
DRAW_BLOCK = 8_192


def _uniform_mask_into(out: np.ndarray, rng: np.random.Generator, rate: float) -> None:
    """``out[:] = rng.random(len(out)) < rate``, drawn in blocks of :data:`DRAW_BLOCK`
    (the same words of ``rng`` in the same order: bit for bit the one-call mask)."""
    n = out.shape[0]
    buf = np.empty(min(n, DRAW_BLOCK))
    for start in range(0, n, DRAW_BLOCK):
        part = buf[: min(DRAW_BLOCK, n - start)]
        rng.random(out=part)
        np.less(part, rate, out=out[start : start + part.shape[0]])


def check_inclusion_probability(value, name: str) -> float:
    """Validate an inclusion probability: a real number in ``(0, 1)``, **exclusive**.

    At 0 or 1 membership is not secret (no record, or every record, is in every subset), so
    the posterior bound is meaningless; such a sampler is refused before any trial runs.

    Raises
    ------
    TypeError
        If ``value`` is not a real number.
    ValueError
        If ``value`` is NaN or outside ``(0, 1)``; at 0 or 1 the message says why; below
        about ``5.6e-17`` (where ``1 − value`` rounds to 1).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number; got {type(value).__name__} {value!r}.")
    p = float(value)
    if not 0.0 < p < 1.0:
        why = ""
        if p == 1.0:
            why = (": every record would always be included, so membership is not secret "
                   "(the posterior bound is meaningless)")
        elif p == 0.0:
            why = (": no record would ever be included, so membership is not secret "
                   "(the posterior bound is meaningless)")
        raise ValueError(f"`{name}` must be in (0, 1) exclusive; got {value!r}{why}.")
    if 1.0 - p == 1.0:  # so close to 0 that the blind guess 1 - q rounds to 1
        raise ValueError(f"`{name}` must be in [{_SMALLEST_RATE!r}, 1) (below, the blind guess "
                         f"1 - {name} rounds to 1 in float64 and no bound is defined); "
                         f"got {value!r}.")
    return p


#: The smallest inclusion probability ``q`` with ``1 - q < 1`` in float64.
_SMALLEST_RATE = 2.0**-54 * (1.0 + 2.0**-52)


class Sampler(ABC):
    """Base class of samplers (the data distribution D of [1]_).

    Subclasses are frozen dataclasses implementing :meth:`draw`; they must be picklable
    (they travel to worker processes) and deterministic given the generator.
    """

    #: Short name used by :meth:`to_dict` and :func:`as_sampler`.
    name: ClassVar[str] = "sampler"
    #: Trials drawn together (2 for complementary pairs): only the first of each group is an
    #: independent draw (:meth:`independent_rows`), and a design of whole groups needs a
    #: multiple of it.
    trials_per_draw: ClassVar[int] = 1
    #: Whether every record's membership is an independent Bernoulli draw (across records and
    #: trials): what the per-record analysis needs.
    independent_memberships: ClassVar[bool] = False
    #: Why the memberships are not independent, in words (the per-record analysis's refusal).
    dependence: ClassVar[str] = ("independent Bernoulli memberships are required and cannot be "
                                 "verified for this sampler")

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

    def trial_mask_into(self, out: np.ndarray, *, root: np.random.SeedSequence,
                        index: int) -> np.ndarray:
        """:meth:`trial_mask` written into ``out`` (bool, shape ``(n_records,)``), which it
        returns: the engine's in-process trials write each mask straight into the stored row.

        Equal to ``out[...] = self.trial_mask(len(out), root=root, index=index)`` (the same cast
        of a non-boolean mask); :class:`PoissonSampler` draws in blocks of
        :data:`DRAW_BLOCK` uniforms, bit for bit the same mask, with no ``n_records``-sized
        temporary.
        """
        out[...] = self.trial_mask(out.shape[0], root=root, index=index)
        return out

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

    #: Whether one trial keeps each record independently (with probability :attr:`prior`),
    #: so a group of ``k`` records is left out with probability ``(1 − prior)^k``.
    independent_records: ClassVar[bool] = False

    def check_pool(self, n_records: int) -> None:
        """Refuse, before any trial runs, a sampler that is degenerate on ``n_records`` records.

        The base implementation accepts every pool; :class:`FixedSizeSampler` refuses sizes
        outside ``[1, n_records − 1]``.

        Raises
        ------
        ValueError
            If membership would not be secret on this pool (message names the argument).
        """
        _check_n_records(n_records)

    def independent_rows(self, n_trials: int) -> np.ndarray:
        """Indices of trials whose masks are i.i.d. draws of the sampler's law.

        The certificate of the certified rules needs independent trials; a sampler whose
        trials are coupled (complementary pairs) keeps one trial of each coupled group.
        Default: the first trial of each group of :attr:`trials_per_draw`.

        Returns
        -------
        numpy.ndarray of int, shape (m,), increasing, ``m <= n_trials``
        """
        return np.arange(0, check_int(n_trials, "n_trials", low=0), self.trials_per_draw)

    def describe(self) -> str:
        """The subset in words, for the report (``"a random secret subset of 10 records"``)."""
        return f"a random secret subset drawn by the sampler {self.name!r}"

    def to_dict(self) -> dict:
        """JSON-serialisable description (used by reports and checkpoint fingerprints);
        ``SAMPLERS.from_dict`` rebuilds a registered sampler from it."""
        return {"name": self.name, **{f.name: getattr(self, f.name)
                                      for f in dataclasses.fields(self)}} \
            if dataclasses.is_dataclass(self) else {"name": self.name}

    @staticmethod
    def describe_dict(description: dict) -> str:
        """:meth:`describe` of the sampler a ``to_dict()`` describes (report wording)."""
        try:
            return SAMPLERS.from_dict(description).describe()
        except (ValueError, TypeError, KeyError):
            return f"a random secret subset drawn by the sampler {description.get('name')!r}"


@dataclass(frozen=True)
class PoissonSampler(Sampler):
    """Each record enters independently with probability ``sampling_rate``.

    Parameters
    ----------
    sampling_rate : float, default 0.5
        Inclusion probability in ``(0, 1)`` exclusive; ½ gives PAC membership privacy with
        prior ½ [1]_. The best blind guess of a record's membership is ``max(q, 1 − q)``.

    Raises
    ------
    TypeError, ValueError
        If ``sampling_rate`` is not a real number in ``(0, 1)`` (0 and 1 make membership
        public; the message says so).
    """

    sampling_rate: float = field(default=0.5, metadata={
        "flag": "--sampling-rate", "help": "Poisson sampling rate in (0, 1) (default 0.5: "
        "membership prior 1/2)"})
    name: ClassVar[str] = "poisson"
    independent_memberships: ClassVar[bool] = True

    def __post_init__(self) -> None:
        rate = check_inclusion_probability(self.sampling_rate, "sampling_rate")
        object.__setattr__(self, "sampling_rate", rate)

    def draw(self, n_records: int, rng: np.random.Generator) -> np.ndarray:
        """One mask: ``rng.random(n_records) < sampling_rate``."""
        return rng.random(_check_n_records(n_records)) < self.sampling_rate

    def trial_mask_into(self, out: np.ndarray, *, root: np.random.SeedSequence,
                        index: int) -> np.ndarray:
        """:meth:`Sampler.trial_mask_into`: the uniforms drawn :data:`DRAW_BLOCK` at a time
        (``Generator.random`` consumes one 64-bit word per float64 whatever the block, so the
        mask is bit for bit :meth:`draw`'s) and compared into ``out``; a subclass that
        overrides :meth:`draw` keeps its own."""
        if (type(self).draw is not PoissonSampler.draw
                or type(self).trial_mask is not Sampler.trial_mask
                or out.dtype != bool or out.ndim != 1):
            return super().trial_mask_into(out, root=root, index=index)
        rng = np.random.default_rng(stream_seed(root, index, SAMPLER_STREAM))
        _uniform_mask_into(out, rng, self.sampling_rate)
        return out

    independent_records: ClassVar[bool] = True

    @property
    def prior(self) -> float:
        """Membership prior of one record, ``sampling_rate``."""
        return self.sampling_rate

    def describe(self) -> str:
        """Each record kept independently with probability ``sampling_rate``."""
        rate = self.sampling_rate
        return (f"a random secret subset: each record kept independently with probability "
                f"{format_bound(rate, side='nearest')} (about "
                f"{format_percent(rate, 0, side='nearest')} of the pool)")

    def to_dict(self) -> dict:
        """``{"name": "poisson", "sampling_rate": rate, "prior": rate}``."""
        return {"name": self.name, "sampling_rate": self.sampling_rate, "prior": self.prior}


@dataclass(frozen=True)
class FixedSizeSampler(Sampler):
    """A uniform subset of exactly ``subset_size`` records, drawn without replacement.

    Parameters
    ----------
    subset_size : int
        Number of records per subset, in ``[1, n_records − 1]`` (checked against the pool by
        :meth:`check_pool` before any trial runs; 0 or ``n_records`` make membership public).

    Raises
    ------
    TypeError, ValueError
        If ``subset_size`` is not an integer ``>= 1``.
    """

    subset_size: int = field(metadata={"flag": "--subset-size",
                                       "help": "records in each subset, in [1, n_records - 1]"})
    name: ClassVar[str] = "fixed"
    dependence: ClassVar[str] = (
        "with FixedSizeSampler the other records' memberships determine b_i "
        "(b_i = subset_size − Σ_{j≠i} b_j), so an informed adversary knows it.")

    def __post_init__(self) -> None:
        k = check_int(self.subset_size, "subset_size")
        if k < 1:
            raise ValueError(
                f"`subset_size` must be >= 1; got {k}"
                + (": every subset would be empty, so membership is not secret." if k == 0
                   else ".")
            )
        if k > _MAX_RECORDS:  # no pool is larger; keeps subset_size / n_records a float
            raise ValueError(f"`subset_size` must be at most {_MAX_RECORDS} (2**62); got an "
                             f"integer of {len(str(k))} digits.")
        object.__setattr__(self, "subset_size", k)

    def check_pool(self, n_records: int) -> None:
        """Refuse ``subset_size`` outside ``[1, n_records − 1]`` (before any trial runs).

        Raises
        ------
        ValueError
            If ``subset_size >= n_records``: every record would always be included.
        """
        n_records = _check_n_records(n_records)
        if self.subset_size >= n_records:
            why = (": every record would always be included, so membership is not secret"
                   if self.subset_size == n_records else ": larger than the pool")
            raise ValueError(
                f"`subset_size` must be in [1, n_records - 1] = [1, {n_records - 1}]; "
                f"got {self.subset_size}{why}."
            )

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

    def describe(self) -> str:
        """A uniform subset of ``subset_size`` records."""
        return f"a random secret subset of {self.subset_size} records"


@dataclass(frozen=True)
class ComplementaryPairsSampler(Sampler):
    """Complementary pairs: trial ``2k`` is Poisson-½, trial ``2k+1`` is its complement.

    Every record is in exactly half of each pair, so in exactly half of the trials when
    ``n_trials`` is even (an antithetic design that halves the membership noise of the
    estimate). With an odd ``n_trials`` the last trial is unpaired (a plain Poisson-½ draw).
    Both trials of pair ``k`` derive their mask from trial ``2k``'s sampler stream.
    """

    name: ClassVar[str] = "pairs"
    trials_per_draw: ClassVar[int] = 2  # trial 2k+1 is determined by trial 2k
    independent_records: ClassVar[bool] = True  # within a trial (both halves Poisson-½)
    dependence: ClassVar[str] = (
        "ComplementaryPairsSampler makes trial 2k+1 the complement of trial 2k, so memberships "
        "are not independent across trials (b_i of one trial determines it in the other) and "
        "the trials are not i.i.d.")

    def draw(self, n_records: int, rng: np.random.Generator) -> np.ndarray:
        """One Poisson-½ mask (the first member of a pair)."""
        return rng.random(_check_n_records(n_records)) < 0.5

    def trial_mask(self, n_records: int, *, root: np.random.SeedSequence, index: int) -> np.ndarray:
        """Mask of trial ``index``: pair ``index // 2``'s draw, complemented for odd ``index``."""
        pair = int(index) // 2
        mask = super().trial_mask(n_records, root=root, index=2 * pair)
        return ~mask if int(index) % 2 else mask

    def trial_mask_into(self, out: np.ndarray, *, root: np.random.SeedSequence,
                        index: int) -> np.ndarray:
        """:meth:`trial_mask` written into ``out`` in blocks (see
        :meth:`PoissonSampler.trial_mask_into`; bit for bit the same mask)."""
        if (type(self).draw is not ComplementaryPairsSampler.draw
                or type(self).trial_mask is not ComplementaryPairsSampler.trial_mask
                or out.dtype != bool or out.ndim != 1):
            return super().trial_mask_into(out, root=root, index=index)
        rng = np.random.default_rng(stream_seed(root, 2 * (int(index) // 2), SAMPLER_STREAM))
        _uniform_mask_into(out, rng, 0.5)
        if int(index) % 2:
            np.logical_not(out, out=out)
        return out

    @property
    def prior(self) -> float:
        """Membership prior of one record, ½."""
        return 0.5

    def describe(self) -> str:
        """A random half of the pool, in complementary pairs."""
        return "a random secret half of the pool (complementary pairs)"

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
    inclusion_probability : float or None, default None
        Probability ``q`` in ``(0, 1)`` (exclusive) that a given record is in a subset. Declare
        it: the posterior bound uses the best blind guess ``max(q, 1 − q)``. Undeclared, the
        prior is *estimated* from the simulated masks with an upper confidence bound
        (:func:`pacpriv.pac.bounds.resolve_membership_prior`), which costs tightness. Default:
        ``func.inclusion_probability`` if the callable has that attribute. A declaration is
        checked against the simulated masks (each record's count, and the pooled count of
        all memberships, at false-alarm level 1e-9) and a contradicted one is refused before
        any bound; the pooled test assumes a mask's memberships are independent or negatively
        associated, so a sampler that includes records in positively correlated groups
        (cluster sampling) should declare nothing.
    prior : float or None, default None
        Alias of ``inclusion_probability`` (kept for compatibility).

    Raises
    ------
    TypeError
        If ``func`` is not callable or a probability is not a real number.
    ValueError
        If the probability is not in ``(0, 1)``, or ``prior`` and ``inclusion_probability``
        disagree.
    """

    func: Callable[[int, np.random.Generator], Any]
    prior: float | None = None  # type: ignore[assignment]
    inclusion_probability: float | None = None
    name: ClassVar[str] = "callable"

    def __post_init__(self) -> None:
        if not callable(self.func):
            raise TypeError(f"`func` must be callable; got {type(self.func).__name__}.")
        q, name = self.inclusion_probability, "inclusion_probability"
        if q is None and self.prior is not None:
            q, name = self.prior, "prior"
        if q is None:
            q = getattr(self.func, "inclusion_probability", None)
        if q is not None:
            q = check_inclusion_probability(q, name)
            if self.prior is not None and self.inclusion_probability is not None and (
                    float(self.prior) != q):
                raise ValueError(
                    f"`prior` ({self.prior!r}) and `inclusion_probability` ({q!r}) disagree; "
                    "give one of them."
                )
        object.__setattr__(self, "inclusion_probability", q)
        object.__setattr__(self, "prior", q)

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
        """``{"name": "callable", "func": ..., "source_sha256": ..., "prior": q or None}``."""
        fp = callable_fingerprint(self.func)
        return {
            "name": self.name,
            "func": fp["name"],
            "source_sha256": fp["source_sha256"],
            "prior": self.prior,
            "inclusion_probability": self.inclusion_probability,
        }


SAMPLERS.register("poisson", PoissonSampler)
SAMPLERS.register("fixed", FixedSizeSampler)
SAMPLERS.register("pairs", ComplementaryPairsSampler, aliases=("complementary_pairs",))


def as_sampler(sampler: Sampler | Callable | str | None) -> Sampler:
    """Normalise the ``sampler`` argument of the engine.

    ``None`` -> ``PoissonSampler(0.5)``; a :class:`Sampler` -> itself; a callable ->
    :class:`CallableSampler`; a name of :data:`SAMPLERS` -> that sampler with its defaults
    (``"poisson"``: Poisson-½; ``"pairs"`` or ``"complementary_pairs"``: complementary pairs).

    Raises
    ------
    TypeError
        If ``sampler`` is of another type, or its registered entry makes no Sampler.
    ValueError
        If ``sampler`` is an unknown name, or names a sampler whose parameters have no
        defaults (``"fixed"`` needs ``FixedSizeSampler(subset_size=...)``).
    """
    if sampler is None:
        return PoissonSampler(0.5)
    if isinstance(sampler, Sampler):
        return sampler
    if isinstance(sampler, str):
        cls = SAMPLERS.get(sampler)
        label = getattr(cls, "__name__", type(cls).__name__)
        try:
            made = cls()
        except TypeError:
            raise ValueError(
                f"`sampler` {sampler!r} needs its parameters: give {label}(...) "
                "instead of its name."
            ) from None
        if not isinstance(made, Sampler):
            raise TypeError(f"the sampler registered as {sampler!r} ({label}) made a "
                            f"{type(made).__name__} value, not a Sampler; register a Sampler "
                            "subclass.")
        return made
    if callable(sampler):
        return CallableSampler(sampler)
    raise TypeError(
        "`sampler` must be None, a Sampler, a callable (n_records, rng) -> mask or a name; "
        f"got {type(sampler).__name__}."
    )
