"""Record blocks: a per-record trial's ``1 + k`` evaluations as engine units (private).

A per-record trial ``t`` evaluates ``f(S_t)`` and, for each of the ``k`` audited records,
``f(S_t ⊕ {i})`` (:mod:`pacpriv.pac.per_record._sim`). For a black-box mechanism these ``1 + k``
calls are split into **record blocks** of ``B`` records (``ExecutionOptions(record_block=B)``,
default :data:`DEFAULT_RECORD_BLOCK`); the engine runs unit ``u = t·m + j`` (``m = ⌈k/B⌉``
blocks a trial) as one of its trials, so the blocks of one trial run on different workers
(joblib, Dask, Ray), the progress bar advances per block and a checkpoint holds whole blocks.

Seeds
-----
Unit ``u`` takes the root seed and ``u`` from the mechanism seed the engine hands it
(``stream_seed(root, u, MECHANISM_STREAM)``, :mod:`pacpriv._random`), and evaluates trial
``t = ⌊u/m⌋``: its subset is the sampler's mask of trial ``t`` and every evaluation gets a copy
of trial ``t``'s mechanism generator ``stream_seed(root, t, MECHANISM_STREAM)`` — exactly the
subset and generator of the one-unit-per-trial path. Each unit recomputes ``f(S_t)`` (``m``
extra calls a trial) to form its differences, so nothing but ``d + B·w`` numbers leaves a unit
(``w = d`` for differences, 1 for distances). Hence the outputs are **bit-identical for any
``n_jobs``, backend, batch size and record block** (tested), and every unit's ``f(S_t)`` must
agree bit for bit (else the run is marked not reproducible).

The engine's own pool and sampler are a two-record stand-in (the unit draws its trial's subset
itself), so its stored masks stay ``m·T × 2``; the result carries the real ``T × n`` masks.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, §2 and Alg. 1.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from pacpriv._random import MECHANISM_STREAM, RNGLike, seed_to_dict, stream_seed
from pacpriv.exceptions import MechanismError, NotReproducibleWarning
from pacpriv.pac.bounds._prior import resolve_membership_prior
from pacpriv.pac.engine._options import ExecutionOptions
from pacpriv.pac.engine._simulate import SimulationResult, simulate
from pacpriv.pac.engine._trial import EMPTY_SUBSET_NOTE
from pacpriv.pac.per_record._sim import PairSpec, _differences, distance_trial, pair_trial
from pacpriv.pac.samplers import PoissonSampler, Sampler

__all__ = ["DEFAULT_RECORD_BLOCK", "UnitSpec", "run_pairs", "unit_trial"]

#: Records per block unless ``ExecutionOptions(record_block=...)`` sets it.
DEFAULT_RECORD_BLOCK = 64
#: The engine's stand-in pool and sampler on the unit path (module notes).
_STAND_IN = np.arange(2, dtype=np.int64)
_STAND_IN_SAMPLER = PoissonSampler(0.5)


@dataclass(frozen=True)
class UnitSpec:
    """One per-record run on the unit path: the pairs, the real sampler, the blocking and
    (distances) the noise geometry. Hashed whole into the checkpoint fingerprint."""

    pair: PairSpec
    sampler: Sampler
    block: int
    n_parts: int
    geometry: Any = None

    @property
    def width(self) -> int:
        """Numbers per record in a unit's output: 1 (a distance) or 0 (``d``, differences)."""
        return 1 if self.geometry is not None else 0

    def __repr__(self) -> str:
        return f"PerRecordBlocks({self.pair!r}, block={self.block}, parts={self.n_parts})"


def record_block(execution: ExecutionOptions, k: int) -> int:
    """Records per block: the option, else :data:`DEFAULT_RECORD_BLOCK`, at most ``k``."""
    size = getattr(execution, "record_block", None) or DEFAULT_RECORD_BLOCK
    return max(1, min(int(size), k))


def _unit_of(rng: Any) -> tuple[np.random.SeedSequence, int]:
    """``(root, u)`` from the engine's mechanism generator of unit ``u`` (module notes)."""
    seq = getattr(getattr(rng, "bit_generator", None), "seed_seq", None)
    key: tuple[int, ...] = tuple(getattr(seq, "spawn_key", ()))
    if not isinstance(seq, np.random.SeedSequence) or len(key) < 2 \
            or key[-1] != MECHANISM_STREAM:
        raise TypeError("a record-block unit needs the engine's mechanism generator "
                        "(stream_seed(root, unit, MECHANISM_STREAM))")
    root = np.random.SeedSequence(seq.entropy, spawn_key=tuple(key[:-2]),
                                  pool_size=seq.pool_size)
    return root, int(key[-2])


def unit_trial(spec: UnitSpec, subset_index: np.ndarray, rng: Any = None) -> np.ndarray:
    """Unit ``u``'s flattened ``[f(S_t), rows of records[jB:(j+1)B] (zero-padded to B)]``.

    ``subset_index`` (the engine's stand-in subset) is ignored: trial ``t``'s subset is drawn
    here from the real sampler. A row is ``Δ`` (``d`` numbers) or, with a geometry, ``‖Δ‖``.

    Raises
    ------
    ValueError
        If an evaluation returns an invalid output (reported by the engine).
    """
    root, unit = _unit_of(rng)
    t, j = divmod(unit, spec.n_parts)
    pair = spec.pair
    mask = spec.sampler.trial_mask(pair.n_records, root=root, index=t)
    gen = np.random.default_rng(stream_seed(root, t, MECHANISM_STREAM))
    part = dataclasses.replace(pair, records=pair.records[j * spec.block:(j + 1) * spec.block])
    rows = _differences(part, np.flatnonzero(mask), gen)
    base, diffs = rows[0], rows[1:]
    if spec.geometry is not None:
        diffs = np.sqrt(spec.geometry.sq_norm(diffs))[:, None]
    out = np.zeros((spec.block, diffs.shape[1]))
    out[:diffs.shape[0]] = diffs
    return np.concatenate([base, out.ravel()])


def _reassemble(spec: UnitSpec, sim: SimulationResult, n_trials: int) -> tuple[np.ndarray, bool]:
    """``(T, d + k·w)`` rows in the one-unit-per-trial layout, and whether every unit's
    ``f(S_t)`` agreed bit for bit. Copies block by block: no temporary of the whole outputs."""
    m, B, k = spec.n_parts, spec.block, spec.pair.records.shape[0]
    out = np.asarray(sim.outputs).reshape(n_trials, m, sim.dim)
    ref = sim.reference  # stored relative to unit 0 below float64
    w = spec.width or sim.dim // (1 + B)
    d = sim.dim - B * w
    res = np.empty((n_trials, d + k * w))
    agree = True
    for j in range(m):
        part = out[:, j, :].astype(np.float64)
        if ref is not None:
            part += ref
        if j == 0:
            res[:, :d] = part[:, :d]
        else:
            agree = agree and bool(np.array_equal(part[:, :d], res[:, :d]))
        nb = min(B, k - j * B)
        res[:, d + j * B * w:d + (j * B + nb) * w] = part[:, d:d + nb * w]
    return res, agree


def _block_error(err: MechanismError, spec: UnitSpec, root: dict) -> MechanismError:
    """The engine's error about unit ``u``, told as trial ``t``, record block ``j``."""
    unit = int(err.trial_index)
    t, j = divmod(unit, spec.n_parts)
    seed = seed_to_dict(np.random.SeedSequence(root["entropy"],
                                               spawn_key=(*root["spawn_key"], t)))
    # the engine's masks here are its stand-in's: whether trial t's subset was empty is the
    # real sampler's answer (fourteenth new-user pass: a full subset was called empty)
    real = spec.sampler.trial_mask(spec.pair.n_records, root=np.random.SeedSequence(**root),
                                   index=t)
    empty = "" if real.any() else EMPTY_SUBSET_NOTE
    where = (f"trial {t}{empty}, record block {j} of {spec.n_parts} (blocks of {spec.block} "
             f"audited records; trial seed {seed}; replay with "
             "numpy.random.SeedSequence(**seed))")
    text = str(err)  # (the engine says nothing of empty subsets here: `stand_in_pool`)
    engine_words = (f"trial {unit} (trial seed {err.seed}; replay with "
                    "numpy.random.SeedSequence(**seed))")
    text = (text.replace(engine_words, where) if engine_words in text
            else f"{text} (per-record run: unit {unit} is {where})")
    return MechanismError(text, trial_index=t, seed=seed)


def _simulate_quietly(func, pool, **kwargs) -> SimulationResult:
    """:func:`simulate`, its warnings re-issued as the caller's (a not-reproducible warning
    names the user's mechanism, not the wrapper)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim = simulate(func, pool, **kwargs)
    for w in caught:
        if issubclass(w.category, NotReproducibleWarning):
            warnings.warn(str(w.message), NotReproducibleWarning, stacklevel=4)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return sim


def run_pairs(pair: PairSpec, *, sampler: Sampler, n_trials: int, rng: RNGLike,
              execution: ExecutionOptions, mechanism_name: str,
              geometry: Any = None) -> SimulationResult:
    """Simulate a per-record run; rows ``[f(S_t), Δ_1 … Δ_k]`` (or ``[f(S_t), ‖Δ_1‖ …]`` with
    ``geometry``) of shape ``(T, d + k·w)``, on whichever path the mechanism allows.

    A mechanism with ``per_record_differences`` or a block form (``run_block``) runs one
    engine trial per trial; a black box runs record blocks (module notes).

    Raises
    ------
    MechanismError, CheckpointError
        As :func:`~pacpriv.pac.engine.simulate` (a unit's failure named by trial and block).
    ValueError
        If the sampler's declared rate is contradicted by its own masks
        (:func:`~pacpriv.pac.bounds.resolve_membership_prior`).
    """
    n = pair.n_records
    if pair.fast or pair.block:
        func = (functools.partial(pair_trial, pair) if geometry is None
                else functools.partial(distance_trial, pair, geometry))
        sim = _simulate_quietly(func, np.arange(n, dtype=np.int64), n_trials=n_trials,
                                sampler=sampler, rng=rng, execution=execution,
                                mechanism_name=mechanism_name)
        # the declared rate is the per-record prior: refused when the masks contradict it
        resolve_membership_prior(sampler, sim.masks, n_records=n)
        return sim
    k = int(pair.records.shape[0])
    block = record_block(execution, k)
    spec = UnitSpec(pair, sampler, block, math.ceil(k / block), geometry)
    try:
        unit = functools.partial(unit_trial, spec)
        unit.stand_in_pool = True  # type: ignore[attr-defined]  # (no "empty subset" words)
        sim = _simulate_quietly(unit, _STAND_IN,
                                n_trials=n_trials * spec.n_parts, sampler=_STAND_IN_SAMPLER,
                                rng=rng, execution=execution, mechanism_name=mechanism_name)
    except MechanismError as err:
        root = getattr(err, "seed", None)
        if not isinstance(root, dict):
            raise
        # the unit seed's key ends with the unit index: the root is the key without it
        parent = {"entropy": root["entropy"], "spawn_key": list(root["spawn_key"])[:-1]}
        raise _block_error(err, spec, parent) from err.__cause__
    outputs, agree = _reassemble(spec, sim, n_trials)
    reproducible, note = sim.reproducible, sim.reproducibility_note
    if not agree:
        reproducible = False
        note = ("not reproducible: the record blocks of one trial computed different "
                "f(S_t) from the same seed (randomness outside `rng`)")
        warnings.warn(f"Mechanism {mechanism_name} is {note}.", NotReproducibleWarning,
                      stacklevel=3)
    root = np.random.SeedSequence(**sim.root_seed)
    masks = np.stack([sampler.trial_mask(n, root=root, index=t) for t in range(n_trials)])
    resolve_membership_prior(sampler, masks, n_records=n)  # (as above)
    return dataclasses.replace(
        sim, outputs=outputs, masks=masks, sampler=sampler.to_dict(), n_trials=n_trials,
        n_records=n, dim=int(outputs.shape[1]), membership_prior=sampler.membership_prior(n),
        resumed_trials=sim.resumed_trials // spec.n_parts, reference=None,
        reproducible=reproducible, reproducibility_note=note)
