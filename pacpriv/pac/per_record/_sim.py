"""Trial-level wrapper that lets the PAC engine simulate per-record differences (private).

One trial of the per-record simulation draws a subset ``S_t`` (the engine's sampler and seed
contract) and, for every audited record ``i``, the pair ``f(S_t ∪ {i})``, ``f(S_t ∖ {i})``; one
of the two is ``f(S_t)``, so a trial costs ``1 + k`` evaluations for ``k`` audited records. The
engine runs :func:`pair_trial` on the *index* pool ``arange(n_records)``: the subset it receives
is the index set of ``S_t``, and the wrapper holds the real pool. The flattened output of a
trial is ``[f(S_t), Δ_1, …, Δ_k]`` with ``Δ_i = f(S_t ∪ {i}) − f(S_t ∖ {i})``.

Every evaluation of a trial uses a copy of the same mechanism generator (the trial's mechanism
stream), i.e. the internal randomness ``θ_t`` is common to the pair, as the informed adversary
that knows ``θ`` requires (PAC Privacy, Xiao & Devadas, CRYPTO 2023, §2).

Fast path
---------
A deterministic mechanism may provide ``per_record_differences(pool, mask, records) ->
(f(S), Δ)`` computing the same quantities at once (e.g.
:meth:`mechanisms.stable_logistic.StableLogistic.per_record_differences`, which warm-starts
the flipped problems from ``f(S)``); it is then called once per trial instead of ``1 + k``
evaluations. :func:`distance_trial` returns only the Mahalanobis norms of the differences
under a fixed noise geometry (``k`` numbers per trial instead of ``k·d``).

Block path
----------
A mechanism with the engine's block form (``run_block(pool, masks, *, seeds)``, e.g. the
:mod:`pacpriv.ensemble` mechanisms) evaluates the ``1 + k`` subsets of a trial as blocks of
``block_size`` subsets (``ExecutionOptions(ensemble=False)`` keeps one call per subset); the
rows equal the one-call path to floating-point tolerance, by the block contract.

Record blocks
-------------
Any other black box runs its trials as record blocks on the engine
(:mod:`pacpriv.pac.per_record._units`): each engine unit evaluates ``f(S_t)`` and the pairs of
``B`` audited records with :func:`_differences`, so a trial's ``1 + k`` evaluations spread over
the workers, bit-identical to one unit per trial.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacpriv.pac.engine._blocks import block_size_of
from pacpriv.pac.engine._checkpoint import pool_fingerprint
from pacpriv.pac.engine._checkpoint_words import records_text
from pacpriv.pac.engine._mechanism import (
    accepts_rng,
    as_float64,
    call_mechanism,
    check_output,
    mechanism_fingerprint,
    subset_pool,
)

__all__ = ["PairSpec", "distance_trial", "pair_trial"]


def _mechanism_identity(func: Any) -> dict:
    fp = mechanism_fingerprint(func)
    # callable objects with their own repr (dataclasses) carry their state in it
    if not hasattr(func, "__qualname__") and type(func).__repr__ is not object.__repr__:
        fp["state"] = repr(func)
    return fp


@dataclass(frozen=True)
class PairSpec:
    """The real mechanism, pool and audited records of a per-record simulation.

    Its ``repr`` is a stable digest (mechanism name and source hash, pool hash, records), so
    the engine's checkpoint fingerprint (which includes the ``repr`` of ``functools.partial``
    arguments) identifies the per-record run.
    """

    mechanism: Any
    pool: Any
    records: np.ndarray
    n_records: int
    pass_rng: bool = False
    digest: str = field(default="", compare=False)
    fast: bool = False
    block: int = 0

    @classmethod
    def build(cls, mechanism, pool, records: np.ndarray, n_records: int, *,
              ensemble: bool = True) -> PairSpec:
        """Spec with its digest computed once, in the parent process (``ensemble``: use the
        mechanism's ``run_block`` for the ``1 + k`` evaluations of a trial, if it has one)."""
        ident: dict[str, Any] = {
            "mechanism": _mechanism_identity(mechanism),
            "pool": pool_fingerprint(pool),
            "records": hashlib.sha256(
                np.ascontiguousarray(records, np.int64).tobytes()).hexdigest(),
        }
        fast = callable(getattr(mechanism, "per_record_differences", None))
        block = 0 if fast else block_size_of(mechanism, ensemble)
        ident["block"] = block  # the block path agrees with one call per subset to round-off
        digest = hashlib.sha256(repr(ident).encode()).hexdigest()
        return cls(mechanism, pool, records, n_records, accepts_rng(mechanism), digest, fast,
                   block)

    def __repr__(self) -> str:
        # the audited records' indices (public) in words, so that a refused checkpoint can
        # say which records it audited (_checkpoint_words)
        return f"PerRecordPairs(sha256={self.digest}, records={records_text(self.records)})"


def _differences(spec: PairSpec, subset_index: np.ndarray,
                 rng: np.random.Generator | None) -> np.ndarray:
    """``(1 + k, d)``: row 0 is ``f(S_t)``, row ``1 + j`` is ``Δ`` of ``records[j]``."""
    mask = np.zeros(spec.n_records, dtype=bool)
    mask[np.asarray(subset_index, dtype=np.int64)] = True
    if spec.fast:
        base, diffs = spec.mechanism.per_record_differences(spec.pool, mask, spec.records)
        base = check_output(base, None)
        out = np.empty((1 + spec.records.shape[0], base.shape[0]))
        out[0] = base
        out[1:] = as_float64(diffs)  # pacpriv's cast: "not castable", not "raised"
    elif spec.block and (rng is None or hasattr(rng.bit_generator, "seed_seq")):
        out = _block_differences(spec, mask, rng)
    else:
        base_rng = None if rng is None else copy.deepcopy(rng)

        def run(m: np.ndarray, dim: int | None) -> np.ndarray:
            gen = copy.deepcopy(base_rng) if spec.pass_rng else None
            return check_output(call_mechanism(spec.mechanism, subset_pool(spec.pool, m),
                                               rng=gen, takes_rng=spec.pass_rng), dim)

        base = run(mask, None)
        out = np.empty((1 + spec.records.shape[0], base.shape[0]))
        out[0] = base
        for j, i in enumerate(spec.records):
            flipped = mask.copy()
            flipped[i] = not mask[i]
            other = run(flipped, base.shape[0])
            out[1 + j] = base - other if mask[i] else other - base
    if not np.all(np.isfinite(out)):
        raise ValueError("a per-record difference overflowed to a non-finite value")
    return out


def _block_differences(spec: PairSpec, mask: np.ndarray,
                       rng: np.random.Generator | None) -> np.ndarray:
    """The ``1 + k`` subsets of a trial through ``run_block`` (the engine's block contract,
    :mod:`pacpriv.pac.engine._blocks`), ``spec.block`` subsets a call; every row gets the
    trial's mechanism seed, so the pair shares ``θ_t`` as on the one-call path."""
    recs = spec.records
    masks = np.repeat(mask[None, :], 1 + recs.shape[0], axis=0)
    masks[1 + np.arange(recs.shape[0]), recs] = ~mask[recs]
    seed = None if rng is None else rng.bit_generator.seed_seq
    rows: list[np.ndarray] = []
    for lo in range(0, masks.shape[0], spec.block):
        part = masks[lo:lo + spec.block]
        got = np.asarray(spec.mechanism.run_block(spec.pool, part,
                                                  seeds=[seed] * part.shape[0]))
        if got.ndim != 2 or got.shape[0] != part.shape[0]:
            raise ValueError(f"the mechanism's run_block returned shape {got.shape} for "
                             f"{part.shape[0]} subsets; expected ({part.shape[0]}, d)")
        rows.extend(check_output(r, None if not rows else rows[0].shape[0]) for r in got)
    out = np.asarray(rows, dtype=np.float64)
    sign = np.where(mask[recs], 1.0, -1.0)[:, None]      # in S: f(S) − f(S ∖ {i})
    out[1:] = (out[0][None, :] - out[1:]) * sign
    return out


def pair_trial(spec: PairSpec, subset_index: np.ndarray, rng: np.random.Generator | None = None):
    """``[f(S_t), Δ_1, …, Δ_k]`` for one trial, flattened to shape ``((1 + k) d,)``.

    Raises
    ------
    ValueError
        If an evaluation returns an invalid output (the engine reports it with the trial
        index and seed, under its failure policy).
    """
    return _differences(spec, subset_index, rng).ravel()


def distance_trial(spec: PairSpec, geometry: Any, subset_index: np.ndarray,
                   rng: np.random.Generator | None = None) -> np.ndarray:
    """``[f(S_t), d_1, …, d_k]`` with ``d_j = ‖Δ_j‖`` in the ``geometry``'s ``Σ⁻¹`` norm.

    ``geometry`` is a :class:`~pacpriv.pac.per_record._math.NoiseGeometry` fixed before the
    trials (shape ``(d + k,)`` output).
    """
    rows = _differences(spec, subset_index, rng)
    return np.concatenate([rows[0], np.sqrt(geometry.sq_norm(rows[1:]))])
