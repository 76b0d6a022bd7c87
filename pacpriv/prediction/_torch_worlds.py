"""Declarative torch worlds: a model factory, a training spec and a loss (needs pacpriv[torch]).

A free-form training function (:class:`pacpriv.pac.engine.TorchMechanism`) can only be run
world by world. :class:`TorchFit` says *what* to train instead -- the architecture, the
optimiser, epochs and batching (:class:`pacpriv.ensemble.TrainingSpec`) and the loss -- so the
same worlds can be trained two ways with the same seeds:

* vectorised (the default, ``ExecutionOptions(ensemble=True)``): all ``m`` worlds at once by
  :func:`pacpriv.ensemble.train_ensemble`, world ``j`` on its mask;
* per world (``ExecutionOptions(ensemble=False)``): the PAC engine runs one world per task, each
  trained by the sequential reference :func:`pacpriv.ensemble.train_reference` (plain autograd
  and ``torch.optim``).

World ``j`` is trained from the engine's mechanism seed of trial ``j``
(``stream_seed(world_seed, j, MECHANISM_STREAM)``; children 0 batch order, 1 gradient noise,
2 initialisation), on the mask the sampler draws for trial ``j``; both paths therefore give the
same masks and, up to floating-point summation order, the same parameters.

This module imports torch only inside its functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pacpriv._random import MECHANISM_STREAM, stream_seed
from pacpriv._validation import check_real

__all__ = ["LOSSES", "TorchFit", "fit_torch_ensemble"]

#: Built-in losses (``"cross_entropy"``: integer class labels ``0..K-1``; ``"mse"``).
LOSSES = ("cross_entropy", "mse")
_INITS = ("seeded", "shared")
_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class TorchFit:
    """Train one torch model per world from a declarative spec (vectorised by default).

    Parameters
    ----------
    model_factory : callable
        ``model_factory() -> torch.nn.Module``, the architecture: a module-level function
        (it is pickled by name into the state directory and to worker processes). Examples must
        not interact (no batch normalisation, no dropout). It is called with torch's global
        generator seeded 0 (and restored afterwards), so its own initial values are public and
        reproducible.
    training : pacpriv.ensemble.TrainingSpec
        Optimiser (SGD or Adam), epochs, batching, reduction, optional per-example clipping.
    loss : {"cross_entropy", "mse"} or callable, default "cross_entropy"
        Per-example loss; ``"cross_entropy"`` needs integer labels ``0..K-1`` (the classes of
        the worlds are then ``0..K-1``). A callable ``loss(outputs, targets) -> (b,)`` must be
        module-level (picklable).
    init : {"seeded", "shared"}, default "seeded"
        ``"seeded"``: world ``j`` starts from torch's default initialisation drawn from child 2
        of its seed; ``"shared"``: every world starts from ``model_factory()``'s values.
    dtype : {"float32", "float64"}, default "float32"
        Training and answering precision.
    memory_limit : float, optional
        Bytes the vectorised trainer may use (default: a quarter of the available memory);
        sets how many worlds train together, never the result.

    Raises
    ------
    TypeError, ValueError
        For an argument of the wrong type or value (named in the message).

    Notes
    -----
    The world's output in the engine (and in ``worlds.npz``) is its parameter vector
    ``concat(p.reshape(-1) for p in model.parameters())`` in float64, the layout of
    :class:`~pacpriv.pac.engine.TorchMechanism`.

    Examples
    --------
    >>> from pacpriv.ensemble import SGD, TrainingSpec
    >>> import torch
    >>> def linear():
    ...     return torch.nn.Linear(4, 2)
    >>> spec = TorchFit(linear, TrainingSpec(SGD(0.5), epochs=20))
    >>> spec.init, spec.dtype
    ('seeded', 'float32')
    """

    model_factory: Callable[[], Any]
    training: Any
    loss: str | Callable = "cross_entropy"
    init: str = "seeded"
    dtype: str = "float32"
    memory_limit: float | None = None

    def __post_init__(self) -> None:
        if not callable(self.model_factory):
            raise TypeError("`model_factory` must be a callable returning a torch.nn.Module; "
                            f"got {type(self.model_factory).__name__}.")
        from pacpriv.ensemble._spec import TrainingSpec

        if not isinstance(self.training, TrainingSpec):
            raise TypeError("`training` must be a pacpriv.ensemble.TrainingSpec; got "
                            f"{type(self.training).__name__}.")
        if isinstance(self.loss, str):
            if self.loss not in LOSSES:
                raise ValueError(f"`loss` must be one of {LOSSES} or a callable; got "
                                 f"{self.loss!r}.")
        elif not callable(self.loss):
            raise TypeError(f"`loss` must be one of {LOSSES} or a callable; got "
                            f"{type(self.loss).__name__}.")
        if self.init not in _INITS:
            raise ValueError(f"`init` must be one of {_INITS}; got {self.init!r}.")
        if self.dtype not in _DTYPES:
            raise ValueError(f"`dtype` must be one of {_DTYPES}; got {self.dtype!r}.")
        if self.memory_limit is not None:
            check_real(self.memory_limit, "memory_limit", low=1.0)

    def template(self) -> Any:
        """``model_factory()`` in :attr:`dtype`, built with torch's global generator seeded 0
        (restored afterwards).

        Raises
        ------
        TypeError
            If the factory returns something other than a ``torch.nn.Module``.
        """
        from pacpriv._optional import import_torch

        torch = import_torch("torch worlds (TorchFit)")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = self.model_factory()
        if not isinstance(model, torch.nn.Module):
            raise TypeError("`model_factory` must return a torch.nn.Module; got "
                            f"{type(model).__name__}.")
        return model.to(dtype=getattr(torch, self.dtype))

    def _arrays(self, pool) -> tuple[np.ndarray, np.ndarray]:
        if not (isinstance(pool, tuple) and len(pool) == 2):
            raise ValueError("TorchFit trains on a supervised pool: a tuple (X, y); got "
                             f"{type(pool).__name__}.")
        X, y = np.asarray(pool[0]), np.asarray(pool[1])
        if self.loss == "cross_entropy":
            integral = np.issubdtype(y.dtype, np.integer) or (
                np.issubdtype(y.dtype, np.floating) and bool(np.all(y == np.round(y))))
            if not integral or (y.size and y.min() < 0):
                raise ValueError("with loss='cross_entropy' the labels `y` must be class "
                                 "indices 0..K-1 (non-negative integers).")
            y = y.astype(np.int64)
        return X, y

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """One world, trained alone (the per-world engine path).

        Parameters
        ----------
        subset : tuple (X, y)
            The world's records.
        rng : numpy.random.Generator, SeedSequence or None
            The engine's trial generator; its seed is the world's seed
            (:func:`pacpriv.ensemble.trial_seed_of`).

        Returns
        -------
        ndarray of shape (n_parameters,), float64
        """
        from pacpriv.ensemble import train_reference, trial_seed_of
        from pacpriv.ensemble._torch import torch

        X, y = self._arrays(subset)
        model = train_reference(self.template(), X, y, np.ones(X.shape[0], dtype=bool),
                                seed=trial_seed_of(rng), training=self.training,
                                loss=self.loss, init=self.init, dtype=self.dtype)
        with torch.no_grad():
            flat = [p.detach().reshape(-1).to(torch.float64) for p in model.parameters()]
        return torch.cat(flat).numpy()

    def run_block(self, pool, masks, *, seeds, device: str = "cpu",
                  progress: bool = False) -> np.ndarray:
        """All worlds of a block at once: row ``b`` trained on ``pool[masks[b]]`` with
        ``seeds[b]`` (the block contract of :class:`pacpriv.ensemble.EnsembleMechanism`).

        Returns
        -------
        ndarray of shape (B, n_parameters), float64
        """
        from pacpriv.ensemble import train_ensemble

        X, y = self._arrays(pool)
        return train_ensemble(self.template(), X, y, masks, seeds=list(seeds),
                              training=replace(self.training, loss=self.loss), init=self.init,
                              dtype=self.dtype, device=device, memory_limit=self.memory_limit,
                              progress=progress).flat_parameters()

    def to_dict(self) -> dict:
        """Public description (for fingerprints and reports)."""
        from pacpriv.pac.samplers import callable_fingerprint

        return {"model_factory": callable_fingerprint(self.model_factory),
                "training": self.training.to_dict(),
                "loss": self.loss if isinstance(self.loss, str)
                else callable_fingerprint(self.loss),
                "init": self.init, "dtype": self.dtype}


def fit_torch_ensemble(fitter: TorchFit, pool, *, n_worlds: int, sampler,
                       world_seed: np.random.SeedSequence, device: str = "cpu",
                       progress: bool = False) -> dict:
    """Fit all worlds of a :class:`TorchFit` in one vectorised training.

    World ``j``'s mask is the engine's ``sampler.trial_mask(n, root=world_seed, index=j)`` and
    its seed ``stream_seed(world_seed, j, MECHANISM_STREAM)``: the masks and seeds of
    :func:`pacpriv.pac.simulate` run with ``rng=world_seed`` (the per-world path).

    Returns
    -------
    dict
        ``{"masks": (m, n) bool, "digests": None, "params": (m, P) float64}``.

    Raises
    ------
    MechanismError
        If a world's trained parameters are not finite (names the world and its seed).
    """
    from pacpriv._random import seed_to_dict, trial_seed
    from pacpriv.exceptions import MechanismError

    n_records = (pool[0] if isinstance(pool, tuple) else pool).shape[0]
    sampler.check_pool(n_records)
    masks = np.stack([sampler.trial_mask(n_records, root=world_seed, index=j)
                      for j in range(n_worlds)])
    seeds = [stream_seed(world_seed, j, MECHANISM_STREAM) for j in range(n_worlds)]
    params = fitter.run_block(pool, masks, seeds=seeds, device=device, progress=progress)
    bad = np.flatnonzero(~np.all(np.isfinite(params), axis=1))
    if bad.size:
        j = int(bad[0])
        seed = seed_to_dict(trial_seed(world_seed, j))
        raise MechanismError(
            f"TorchFit world {j} trained to non-finite parameters ({bad.size} of {n_worlds} "
            f"worlds; trial seed {seed}): lower the learning rate or clip the gradients.",
            trial_index=j, seed=seed)
    return {"masks": masks.astype(bool), "digests": None, "params": params}
