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


@dataclass(frozen=True)
class _ReferenceMechanism:
    """``(X, y) subset -> φ`` of the evaluation records under a model fitted on the subset."""

    family: Any
    queries: np.ndarray  # (A, n_eval, ...) the evaluation records under each query
    labels: np.ndarray  # (n_eval,)

    def __call__(self, subset, *, rng: np.random.Generator) -> np.ndarray:
        X, y = subset
        model = self.family.fit(X, y, rng=rng)
        out = np.concatenate([np.asarray(self.family.statistics(model, q, self.labels),
                                         dtype=np.float64) for q in self.queries])
        out[np.abs(out) < _ZERO] = 0.0
        return out


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
    sim = simulate(mechanism, (X, y), n_trials=K, sampler=ComplementaryPairsSampler(), rng=rng,
                   options=execution or ExecutionOptions(),
                   mechanism_name=f"pacpriv.audit reference model ({type(family).__name__})")
    A, n = len(queries), X.shape[0]
    stats = np.asarray(sim.outputs).reshape(K, A, n + Xz.shape[0]).transpose(0, 2, 1)
    summary = sim.to_dict()
    return ReferenceBatch(
        statistics=np.ascontiguousarray(stats[:, :n]),
        population=np.ascontiguousarray(stats[:, n:]),
        masks=np.asarray(sim.masks, dtype=bool),
        simulation={k: summary[k] for k in ("root_seed", "n_trials", "backend", "n_jobs",
                                            "elapsed_s", "resumed_trials", "reproducible",
                                            "reproducibility_note")},
    )
