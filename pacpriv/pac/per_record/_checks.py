"""Input checks of the per-record analysis (private; a leaf of :mod:`pacpriv.pac.per_record`)."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from pacpriv._numbers import format_bound
from pacpriv._validation import check_real
from pacpriv.pac.per_record._math import bernstein_floor
from pacpriv.pac.samplers import PoissonSampler, Sampler, as_sampler

__all__ = ["check_certifiable", "check_records", "check_sampler"]


def check_sampler(sampler: Sampler | str | None) -> PoissonSampler:
    """Return the sampler if it declares independent memberships (``independent_memberships``)
    at a ``sampling_rate`` in (0, 1); else raise with the sampler's own reason (``dependence``).

    Raises
    ------
    ValueError
        For fixed-size, complementary-pairs or any other sampler, or a rate of 0 or 1.
    """
    smp = as_sampler(sampler) if sampler is None or isinstance(sampler, (Sampler, str)) else None
    if smp is None or not smp.independent_memberships or not hasattr(smp, "sampling_rate"):
        why = (smp.dependence if smp is not None and not smp.independent_memberships else
               f"independent Bernoulli memberships at a declared `sampling_rate` are required; "
               f"got {type(sampler).__name__}.")
        raise ValueError("`sampler` must draw independent memberships for the per-record "
                         f"analysis; {why} Use PoissonSampler(sampling_rate).")
    rated = cast(PoissonSampler, smp)  # a sampler declaring independent memberships at a rate
    check_real(rated.sampling_rate, "sampling_rate", low=0.0, high=1.0, low_inclusive=False,
               high_inclusive=False)
    return rated


def check_records(records: Any, n_records: int) -> np.ndarray:
    """Audited record indices: ``None`` = all; else distinct ints in ``[0, n_records)``.

    Raises
    ------
    TypeError, ValueError
        If ``records`` is not a 1-D sequence of distinct in-range integers.
    """
    if records is None:
        return np.arange(n_records, dtype=np.int64)
    arr = np.asarray(records)
    if arr.dtype == bool or arr.ndim != 1 or arr.size == 0 or (
        arr.dtype.kind not in "iu"
    ):
        raise TypeError(
            "`records` must be None or a non-empty 1-D sequence of integer record indices; "
            f"got {arr.dtype} array of shape {arr.shape}."
        )
    if arr.min() < 0 or arr.max() >= n_records:
        bad = int(arr[(arr < 0) | (arr >= n_records)][0])
        raise ValueError(f"`records` must be indices in [0, {n_records - 1}]; got {bad}.")
    if np.unique(arr).size != arr.size:
        raise ValueError("`records` must not repeat an index.")
    return arr.astype(np.int64)


def _check_confidence(confidence) -> float:
    return check_real(confidence, "confidence", low=0.0, high=1.0, low_inclusive=False,
                      high_inclusive=False)


def _check_target(target_accuracy, baseline: float) -> float:
    return check_real(target_accuracy, "target_accuracy", low=baseline, high=1.0,
                      low_inclusive=False, high_inclusive=False)


def check_certifiable(target: float, n_cert: int, n_audited: int, baseline: float,
                      confidence: float) -> None:
    """Raise ``ValueError`` if ``target`` is not above the smallest certifiable bound.

    The empirical-Bernstein bound is at least
    ``baseline + 7 (1 − baseline) ln(2k/γ) / (3(n − 1))`` for ``k`` audited records and ``n``
    certification trials, whatever the noise (Maurer & Pontil 2009, Thm 4).
    """
    floor = bernstein_floor(n_cert, low=baseline, high=1.0,
                            delta=(1.0 - confidence) / n_audited)
    if not target > floor:
        raise ValueError(
            f"`target_accuracy` = {target!r} cannot be certified: with {n_cert} certification "
            f"trials, {n_audited} audited records and confidence {confidence!r} the smallest "
            f"certifiable per-record upper bound is {format_bound(floor)} (even with infinite "
            "noise). "
            "Increase `n_trials`, audit fewer records or raise the target."
        )


