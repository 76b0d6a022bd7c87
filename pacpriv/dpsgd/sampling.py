"""How DP-SGD picks a record's steps: random allocation (k of t) and Poisson subsampling.

Spec objects (frozen dataclasses) for the two sampling schemes that the analytic half of
pacpriv accounts for; strings are shorthands (:func:`as_sampling`). No torch here: the torch
batch sampler of :class:`RandomAllocation` lives in :mod:`pacpriv.dpsgd.allocation`.

* :class:`RandomAllocation` ``(k)``: in every epoch of ``t = steps_per_epoch`` steps each
  record is used at ``k`` distinct steps, the ``k``-subset drawn uniformly and independently
  of the other records (``k = 1``: "balls in bins", Chua et al. 2025; general ``k``: the
  "k out of t" allocation of Feldman & Shenfeld 2025, whose accounting package names the
  two numbers ``num_selected`` and ``num_steps``).
* :class:`PoissonSampling` ``(sampling_rate)``: every record joins every step independently
  with probability ``sampling_rate`` (Abadi et al. 2016), ``t·E`` steps in all.

References
----------
.. [1] L. Chua et al., Balls-and-Bins Sampling for DP-SGD, AISTATS 2025, arXiv:2412.16802.
.. [2] V. Feldman, M. Shenfeld, Privacy Amplification by Random Allocation, 2025.
.. [3] M. Abadi et al., Deep Learning with Differential Privacy, CCS 2016.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import ClassVar

from pacpriv._validation import check_int, check_real, integer_digits

#: The largest step count (``steps_per_epoch``, ``epochs``) of the numerical accountants (exact
#: accuracy and its calibration, the PLD ε and its calibration, training): they count in
#: float64, where every integer up to ``2**53`` is exact. The chi-square closed form and its
#: inverse take any count (in log space beyond float64).
MAX_STEP_COUNT = 2**53

__all__ = ["POISSON_ROUNDOFF_PER_STEP", "PoissonSampling", "RandomAllocation", "as_sampling",
           "poisson_delta_allowance"]

#: Allowance, per composed step, for the round-off of dp-accounting's FFT self-composition of
#: a Poisson-subsampled Gaussian PLD: raising an L-point transform to the power ``N`` and
#: transforming back errs by about ``N · log2(L) · 2⁻⁵³`` in each probability (absolute), so
#: ``1e-14`` per step covers transforms up to ``L = 2^90``. Measured: without it, ε at
#: ``δ <= 1e-13`` fell below an independent lower bound (σ = 1.14, q = 0.05, 60 steps).
POISSON_ROUNDOFF_PER_STEP = 1e-14


def _count_text(value: int) -> str:
    """An integer as text, or its number of digits beyond 30 (a one-line message)."""
    return str(value) if abs(value) < 10**30 else f"an integer of {integer_digits(value)} digits"


def poisson_delta_allowance(n_steps: int) -> float:
    """The δ charged for dp-accounting's composition round-off over ``n_steps`` Poisson steps.

    A Poisson ε at ``δ`` is read from the composed PLD at ``δ − allowance`` (and a trade-off
    curve's δ(ε) is raised by it), so the round-off never lowers a printed bound; ``δ`` must
    exceed twice the allowance (and dp-accounting's 1e-15 truncated tail).

    Parameters
    ----------
    n_steps : int
        Composed steps (``steps_per_epoch × epochs``), ``>= 1``.

    Returns
    -------
    float
        ``1e-14 · n_steps`` (:data:`POISSON_ROUNDOFF_PER_STEP`).
    """
    return POISSON_ROUNDOFF_PER_STEP * float(n_steps)


@dataclass(frozen=True)
class RandomAllocation:
    """Random allocation: each record is used at ``k`` uniformly chosen distinct steps of
    each epoch (``k`` out of ``t = steps_per_epoch``), independently of the other records.

    Parameters
    ----------
    k : int, default 1
        Steps per record per epoch, ``1 ≤ k ≤ steps_per_epoch`` (checked by
        :meth:`check`). ``k = 1`` is pacpriv's original scheme.

    Notes
    -----
    Accounting for ``k > 1`` uses the stratification reduction proved in the documentation
    (docs/math.rst, "k out of t"): the one-record pair of ``k``-of-``t`` allocation is a
    garbling (a uniformly random relabelling of the steps) of ``k`` independent
    one-of-``⌊t/k⌋`` allocations, so every certified ``k = 1`` quantity at
    ``(⌊t/k⌋ steps, k·E epochs)`` (:meth:`reduced`) is certified for ``k`` of ``t``.
    """

    k: int = 1
    name: ClassVar[str] = "random_allocation"

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", check_int(self.k, "k", low=1))

    def check(self, steps_per_epoch: int) -> int:
        """``steps_per_epoch`` validated against ``k`` (``k ≤ t``); returns it."""
        t = check_int(steps_per_epoch, "steps_per_epoch", low=1)
        if self.k > t:
            raise ValueError(
                f"`k` (steps per record per epoch) must be <= steps_per_epoch={t}; got "
                f"k={_count_text(self.k)}. Lower k or use more steps per epoch."
            )
        return t

    def reduced(self, steps_per_epoch: int, epochs: int) -> tuple[int, int]:
        """``(⌊t/k⌋, k·E)``: the one-of-``M`` allocation whose certified bounds hold here."""
        t = self.check(steps_per_epoch)
        e = check_int(epochs, "epochs", low=1)
        return t // self.k, self.k * e

    def sampling_rate(self, steps_per_epoch: int) -> float:
        """``k/t``, the probability that a given step uses a given record."""
        return self.k / self.check(steps_per_epoch)

    def to_dict(self) -> dict:
        """JSON-serialisable dict (with the scheme's name)."""
        return {"scheme": self.name, **asdict(self)}


@dataclass(frozen=True)
class PoissonSampling:
    """Poisson subsampling: each record joins each step independently with probability
    ``sampling_rate`` (``t·E`` steps in all).

    Parameters
    ----------
    sampling_rate : float
        ``q`` in (0, 1].
    """

    sampling_rate: float
    name: ClassVar[str] = "poisson"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sampling_rate", check_real(
            self.sampling_rate, "sampling_rate", low=0.0, high=1.0, low_inclusive=False))

    def to_dict(self) -> dict:
        """JSON-serialisable dict (with the scheme's name)."""
        return {"scheme": self.name, **asdict(self)}


Sampling = RandomAllocation | PoissonSampling

#: Shorthand name -> builder from ``(k, steps_per_epoch)``; Poisson runs at rate ``k/t``.
_SHORTHANDS: dict[str, Callable[[int, int], Sampling]] = {
    "random_allocation": lambda k, t: RandomAllocation(k),
    "k_of_t": lambda k, t: RandomAllocation(k),
    "balls_in_bins": lambda k, t: RandomAllocation(k),
    "poisson": lambda k, t: PoissonSampling(RandomAllocation(k).sampling_rate(t)),
}


def as_sampling(sampling: str | Sampling, *, k: int, steps_per_epoch: int) -> Sampling:
    """The sampling spec of a string shorthand or a spec object.

    Parameters
    ----------
    sampling : str or RandomAllocation or PoissonSampling
        ``"random_allocation"`` (aliases ``"k_of_t"``, ``"balls_in_bins"``): k of t;
        ``"poisson"``: Poisson subsampling at rate ``k/t``; or a spec object (then ``k``
        must agree with it, or be 1 for Poisson).
    k, steps_per_epoch : int
        The caller's ``k`` and ``t``.

    Raises
    ------
    TypeError, ValueError
        On an unknown name or object, or a ``k`` that disagrees with the spec.
    """
    if isinstance(sampling, str):
        try:
            build = _SHORTHANDS[sampling]
        except KeyError:
            raise ValueError(f"`sampling` must be one of {sorted(_SHORTHANDS)} or a "
                             f"RandomAllocation / PoissonSampling; got {sampling!r}.") from None
        return build(check_int(k, "k", low=1), steps_per_epoch)
    if isinstance(sampling, RandomAllocation):
        if k not in (1, sampling.k):
            raise TypeError(f"pass k either in `sampling` (k={sampling.k}) or as `k` "
                            f"(k={k}), not both.")
        return sampling
    if isinstance(sampling, PoissonSampling):
        if k != 1:
            raise TypeError("PoissonSampling carries its own sampling_rate: leave k at 1.")
        return sampling
    raise TypeError(f"`sampling` must be a string or a RandomAllocation / PoissonSampling; "
                    f"got {type(sampling).__name__}.")
