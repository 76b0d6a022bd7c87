"""Train the batch of reference models through the PAC engine (one model per trial).

The attacks need, for every model of the batch, the statistic φ of every candidate record and
population sample. That is a mechanism in the engine's sense -- ``subset -> vector`` -- so the
batch is :func:`pacpriv.pac.engine.simulate` with the complementary-pairs sampler (model
``2k + 1`` trained on the complement of model ``2k``'s Poisson-½ half) and a mechanism that
fits one model on the subset and returns its φ on the evaluation records. The engine then
supplies what a long shadow run needs: one ``SeedSequence`` child per model (results identical
for any ``n_jobs``, backend or resume point), joblib workers, a tqdm bar over models,
checkpoints (resume a killed run), per-model output checks and the reproducibility re-run.

:func:`train_reference_models` is the one internal entry point; a vectorised ensemble trainer
can replace its body without touching the attacks.

A checkpoint of this run holds every model's φ on every record (and the subset masks): like
any engine checkpoint it is as private as the data; delete it after the audit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacpriv._random import RNGLike
from pacpriv._validation import check_int
from pacpriv.pac.engine._options import ExecutionOptions
from pacpriv.pac.engine._simulate import simulate
from pacpriv.pac.samplers import ComplementaryPairsSampler

__all__ = ["ReferenceBatch", "train_reference_models"]

#: φ values this close to 0 are stored as 0 (the engine rejects non-zero magnitudes below
#: 2^-400; a φ of 1e-100 means p(y|x) = ½ to 100 digits).
_ZERO = 1e-100


@dataclass(frozen=True)
class ReferenceBatch:
    """φ of every evaluation record under every model of a batch.

    Attributes
    ----------
    statistics : ndarray of shape (K, n, A)
        Candidate records (the pool), ``A`` queries each.
    population : ndarray of shape (K, n_z, A)
        Population samples (never trained on).
    masks : ndarray of bool, shape (K, n)
        Training masks (complementary pairs).
    simulation : dict
        The engine's public summary (seed, backend, workers, time, resumed models, whether a
        re-run of one model from its seed reproduced it).
    """

    statistics: np.ndarray = field(repr=False)
    population: np.ndarray = field(repr=False)
    masks: np.ndarray = field(repr=False)
    simulation: dict


def _blocks(family: Any) -> bool:
    return bool(getattr(family, "supports_blocks", False))


@dataclass(frozen=True)
class _ReferenceMechanism:
    """``(X, y) subset -> φ`` of the evaluation records under a model fitted on the subset.

    For a family with a block form (``supports_blocks``: ``fit_block``/``statistics_block``)
    it is also an engine block mechanism (``run_block(pool, masks, *, seeds)``, one row per
    subset), and its one-trial form is a block of one with the trial's seed, so both paths
    train each model from the same seed (:func:`pacpriv.ensemble.trial_seed_of`).
    """

    family: Any
    queries: np.ndarray  # (A, n_eval, ...) the evaluation records under each query
    labels: np.ndarray  # (n_eval,)

    def __call__(self, subset, *, rng: np.random.Generator) -> np.ndarray:
        X, y = subset
        if _blocks(self.family):
            from pacpriv.ensemble import trial_seed_of

            return self.run_block((X, y), np.ones((1, len(y)), dtype=bool),
                                  seeds=[trial_seed_of(rng)])[0]
        model = self.family.fit(X, y, rng=rng)
        return self._clean(np.concatenate([np.asarray(
            self.family.statistics(model, q, self.labels), dtype=np.float64)
            for q in self.queries]))

    @property
    def block_size(self) -> int | None:
        """The engine's block (default) for a family with a block form, else 0 (none)."""
        return None if _blocks(self.family) else 0

    def run_block(self, pool, masks, *, seeds) -> np.ndarray:
        """Rows ``φ`` (queries concatenated) of the models trained on ``pool[masks[b]]``."""
        X, y = pool
        models = self.family.fit_block(X, y, np.asarray(masks, dtype=bool), seeds=seeds)
        per_query = [np.asarray(self.family.statistics_block(models, q, self.labels),
                                dtype=np.float64) for q in self.queries]
        return self._clean(np.concatenate(per_query, axis=1))

    @staticmethod
    def _clean(out: np.ndarray) -> np.ndarray:
        out[np.abs(out) < _ZERO] = 0.0
        return out


def _vectorised(mechanism: _ReferenceMechanism, pool, K: int, root, progress: bool) -> dict:
    """The batch in one block, with the engine's masks and per-model seeds (no checkpoint)."""
    import time

    from tqdm.auto import tqdm

    from pacpriv._random import MECHANISM_STREAM, as_seed_sequence, seed_to_dict, stream_seed

    tic = time.perf_counter()
    root = as_seed_sequence(root)
    sampler = ComplementaryPairsSampler()
    n = pool[1].shape[0]
    masks = np.stack([sampler.trial_mask(n, root=root, index=i) for i in range(K)])
    seeds = [stream_seed(root, i, MECHANISM_STREAM) for i in range(K)]
    with tqdm(total=K, disable=not progress, unit="model", desc="reference models") as bar:
        outputs = mechanism.run_block(pool, masks, seeds=seeds)
        bar.update(K)
    if not np.all(np.isfinite(outputs)):
        bad = np.flatnonzero(~np.isfinite(outputs).all(axis=1))
        raise ValueError(f"reference model(s) {bad.tolist()[:5]} returned non-finite "
                         "statistics (training diverged?).")
    return {"outputs": outputs, "masks": masks, "summary": {
        "root_seed": seed_to_dict(root), "n_trials": K, "backend": "pacpriv.ensemble",
        "n_jobs": 1, "elapsed_s": time.perf_counter() - tic, "resumed_trials": 0,
        "reproducible": None,
        "reproducibility_note": "vectorised ensemble path (the engine's masks and seeds)"}}


def train_reference_models(
    family: Any,
    pool: tuple[np.ndarray, np.ndarray],
    *,
    population: tuple[np.ndarray, np.ndarray],
    n_models: int,
    augmentations: Sequence[Callable[[np.ndarray], np.ndarray]] = (),
    rng: RNGLike = None,
    execution: ExecutionOptions | None = None,
) -> ReferenceBatch:
    """Train ``n_models`` models on complementary halves of ``pool`` and score everything.

    Parameters
    ----------
    family : model family
        ``fit`` / ``statistics`` as in :mod:`pacpriv.audit._families`.
    pool : tuple (X, y)
        Candidate records, ``n >= 2``.
    population : tuple (X_z, y_z)
        Population samples (scored, never trained on), ``n_z >= 1``.
    n_models : int
        Even number ``>= 4``.
    augmentations : sequence of callables
        Extra queries ``X -> X'`` (same shape); the record itself is always the first query.
    rng : None, int, SeedSequence or Generator
        Root seed of the engine (model ``i`` uses its child ``i``).
    execution : ExecutionOptions or None
        Workers, progress bar, checkpoint, retries, timeout (never the results).

    Returns
    -------
    ReferenceBatch

    Notes
    -----
    A family with a block form (``supports_blocks``) trains the whole batch as one block
    unless ``execution`` asks for a checkpoint or ``ensemble=False``; the masks and seeds are
    the engine's, so either way each model is trained from the same seed on the same subset.

    Raises
    ------
    ValueError
        If ``n_models`` is odd or below 4, or an augmentation changes the records' shape.
    MechanismError
        If a model fails to train or returns non-finite statistics (the message names the
        model index and its seed).
    """
    K = check_int(n_models, "n_models", low=4)
    if K % 2:
        raise ValueError(f"`n_models` must be even (complementary pairs); got {K}.")
    X, y = (np.asarray(a) for a in pool)
    Xz, yz = (np.asarray(a) for a in population)
    X_eval = np.concatenate([X, Xz])
    queries = [X_eval]
    for i, aug in enumerate(augmentations):
        q = np.asarray(aug(X_eval))
        if q.shape != X_eval.shape:
            raise ValueError(f"augmentation {i} must keep the records' shape {X_eval.shape}; "
                             f"got {q.shape}.")
        queries.append(q)
    mechanism = _ReferenceMechanism(family=family, queries=np.stack(queries),
                                    labels=np.concatenate([y, yz]))
    ex = execution or ExecutionOptions()
    if _blocks(family) and getattr(ex, "ensemble", True) and ex.checkpoint is None:
        done = _vectorised(mechanism, (X, y), K, rng, ex.progress)
        outputs, masks, summary = done["outputs"], done["masks"], done["summary"]
    else:
        sim = simulate(mechanism, (X, y), n_trials=K, sampler=ComplementaryPairsSampler(),
                       rng=rng, execution=ex,
                       mechanism_name=f"pacpriv.audit reference model ({type(family).__name__})")
        outputs, masks, summary = sim.outputs, sim.masks, sim.to_dict()
    A, n = len(queries), X.shape[0]
    stats = np.asarray(outputs).reshape(K, A, n + Xz.shape[0]).transpose(0, 2, 1)
    return ReferenceBatch(
        statistics=np.ascontiguousarray(stats[:, :n]),
        population=np.ascontiguousarray(stats[:, n:]),
        masks=np.asarray(masks, dtype=bool),
        simulation={k: summary[k] for k in ("root_seed", "n_trials", "backend", "n_jobs",
                                            "elapsed_s", "resumed_trials", "reproducible",
                                            "reproducibility_note")},
    )
