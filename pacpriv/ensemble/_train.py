"""The vectorised trainer: K models on K subsets of one pool, in chunks that fit in memory.

Shadow and reference models are trained in bulk because membership audits need many of them
(Carlini et al., Membership Inference Attacks From First Principles, IEEE S&P 2022, Sec. IV);
here they are trained as one program: parameters stacked with
``torch.func.stack_module_state``, gradients by ``vmap`` of ``grad`` of ``functional_call``
(:mod:`pacpriv.ensemble._gradients`), updates by functional optimisers
(:mod:`pacpriv.ensemble._optim`). Every model sees exactly the batches, noise draws and
optimiser steps of :func:`pacpriv.ensemble.train_reference` run with its seed.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import numpy as np

from pacpriv._random import RNGLike, trial_seed
from pacpriv._validation import check_class_labels
from pacpriv.ensemble._closed_form import closed_form_for
from pacpriv.ensemble._ensemble import Ensemble
from pacpriv.ensemble._gradients import (
    FuncGradients,
    PerExampleLoss,
    as_index,
    draw_noise,
    resolve_loss,
)
from pacpriv.ensemble._init import initialise, prepare_template
from pacpriv.ensemble._inputs import (
    as_data,
    as_masks,
    as_seeds,
    check_chunk_size,
    check_init,
    check_memory_limit,
)
from pacpriv.ensemble._memory import (
    DEFAULT_MEMORY_FRACTION,
    MemoryEstimate,
    activation_numel,
    available_memory,
    choose_chunk_size,
)
from pacpriv.ensemble._optim import init_state, optimizer_step
from pacpriv.ensemble._schedule import Schedule, subsets_of
from pacpriv.ensemble._spec import (
    INIT_STREAM,
    NOISE_STREAM,
    FullBatch,
    RandomAllocation,
    Shuffled,
    TrainingSpec,
)
from pacpriv.ensemble._torch import resolve_device, resolve_dtype, torch, torch_generator

__all__ = ["estimate_memory", "train_ensemble"]

Params = dict[str, torch.Tensor]


def train_ensemble(
    model: torch.nn.Module,
    X,
    y,
    masks,
    *,
    seeds: Sequence[np.random.SeedSequence] | RNGLike,
    training: TrainingSpec,
    init: str | Ensemble = "seeded",
    dtype: str | torch.dtype = "float32",
    device: str | torch.device = "cpu",
    memory_limit: float | None = None,
    chunk_size: int | None = None,
    progress: bool = False,
) -> Ensemble:
    """Train K copies of ``model``, copy ``k`` on the records where ``masks[k]`` is true.

    Equal, to float round-off, to K calls of :func:`pacpriv.ensemble.train_reference` with the
    same seeds, whatever ``chunk_size`` (or ``memory_limit``): each model's batches, noise and
    steps come from its own seed; only the floating-point summation order of the batched
    kernels depends on the chunk, and a rerun with the same chunks is bit-identical.

    Parameters
    ----------
    model : torch.nn.Module
        The architecture (never modified). Examples must not interact: no batch
        normalisation, no dropout.
    X : array-like or torch.Tensor of shape (n_records, ...)
        The pool's features (cast to ``dtype``).
    y : array-like or torch.Tensor of shape (n_records, ...)
        Targets: integer class labels (kept int64) or floats (cast to ``dtype``).
    masks : array-like of shape (K, n_records), bool or 0/1
        Row ``k`` selects model ``k``'s subset; subsets may differ in size and be empty (an
        empty subset trains nothing: the model keeps its initialisation).
    seeds : sequence of K numpy.random.SeedSequence, or a root seed
        Model ``k``'s seed (children: 0 batch order, 1 noise, 2 initialisation; see
        :mod:`pacpriv.ensemble._spec`); an int or SeedSequence root gives children ``0..K-1``.
    training : TrainingSpec
        Optimiser, epochs, batching, reduction, clipping and noise.
    init : {"seeded", "shared"} or Ensemble, default "seeded"
        ``"seeded"``: model ``k`` drawn with torch's default laws from child 2 of its seed
        (:func:`pacpriv.ensemble._init.initialise`); ``"shared"``: every model starts from
        ``model``'s current parameters (a public initialisation); an :class:`Ensemble` of K
        models of this architecture: model ``k`` starts from its model ``k`` (for instance
        ``Ensemble.from_modules`` of modules built the caller's way).
    dtype : {"float32", "float64"}, default "float32"
        Training precision (no mixed precision).
    device : {"cpu", "cuda", "cuda:i"} or torch.device, default "cpu"
    memory_limit : float, optional
        Bytes the working set may take; default a quarter of the available RAM (CPU) or of the
        free memory of the GPU. Sets the chunk of models trained together.
    chunk_size : int, optional
        Models per chunk, overriding ``memory_limit`` (results agree to round-off).
    progress : bool, default False
        A tqdm bar over models.

    Returns
    -------
    Ensemble
        The K trained models, parameters of shape ``(K, *shape)``.

    Raises
    ------
    TypeError
        If ``model``, ``training`` (and its ``loss``) or ``seeds`` is of the wrong type.
    ValueError
        If the data, masks, seeds, device, dtype, memory limit or model are invalid (the
        message names the argument), or one model does not fit in ``memory_limit``.

    Examples
    --------
    Four logistic regressions on four random halves, and model 2 trained alone:

    >>> import numpy as np, torch
    >>> from pacpriv.ensemble import SGD, Shuffled, TrainingSpec, train_reference
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(30, 3)), rng.integers(0, 2, size=30)
    >>> masks = rng.random((4, 30)) < 0.5
    >>> spec = TrainingSpec(SGD(0.1, momentum=0.9), epochs=5, batching=Shuffled(4))
    >>> seeds = np.random.SeedSequence(0).spawn(4)
    >>> ens = train_ensemble(torch.nn.Linear(3, 2), X, y, masks, seeds=seeds,
    ...                      training=spec, dtype="float64")
    >>> ens.flat_parameters().shape
    (4, 8)
    >>> alone = train_reference(torch.nn.Linear(3, 2), X, y, masks[2], seed=seeds[2],
    ...                         training=spec, dtype="float64")
    >>> w = alone.weight.detach().numpy()
    >>> bool(np.abs(ens.module(2).weight.detach().numpy() - w).max() < 1e-12)
    True
    """
    if not isinstance(training, TrainingSpec):
        raise TypeError(f"`training` must be a pacpriv.ensemble.TrainingSpec; got "
                        f"{type(training).__name__}.")
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    template = prepare_template(model, dtype=dt, device=dev)
    loss_fn = resolve_loss(training.loss)
    limit, chunk = check_memory_limit(memory_limit), check_chunk_size(chunk_size)
    Xt, yt = as_data(X, y, dtype=dt, device=dev)
    if isinstance(training.loss, str) and training.loss == "cross_entropy" and yt.ndim == 1:
        check_class_labels(yt.cpu().numpy(), "`y`", "train_ensemble (cross-entropy loss)")
    member = as_masks(masks, Xt.shape[0])
    n_models = member.shape[0]
    seed_list = as_seeds(seeds, n_models)
    init = _check_init(init, template, n_models)
    subsets = subsets_of(member)
    if chunk is None:
        estimate = estimate_memory(template, Xt, training=training,
                                   largest_subset=max(s.size for s in subsets))
        if limit is None:
            limit = int(DEFAULT_MEMORY_FRACTION * available_memory(dev))
        chunk = choose_chunk_size(estimate, memory_limit=limit, n_models=n_models)
    chunk = min(chunk, n_models)
    from tqdm.auto import tqdm

    trainer = _ChunkTrainer(template, Xt, yt, training, loss_fn)
    out = {name: torch.empty((n_models, *p.shape), dtype=dt, device=dev)
           for name, p in template.named_parameters()}
    with tqdm(total=n_models, disable=not progress, desc="ensemble", unit="model") as bar:
        for start in range(0, n_models, chunk):
            stop = min(n_models, start + chunk)
            params = _initial(template, seed_list[start:stop], init, start)
            params = trainer.train(params, subsets[start:stop], seed_list[start:stop])
            for name, value in params.items():
                out[name][start:stop] = value
            bar.update(stop - start)
    return Ensemble(template=template, parameters=out, chunk_size=chunk)


def estimate_memory(template: torch.nn.Module, X: torch.Tensor, *, training: TrainingSpec,
                    largest_subset: int) -> MemoryEstimate:
    """Per-model working set of a training (see :class:`~pacpriv.ensemble.MemoryEstimate`).

    The largest batch is set by the batching: the largest subset (full batch), the batch size
    (shuffled), or ``e + 4√e + 8`` rows with ``e = n/M`` the expected size of a random
    allocation step (a Binomial(n, 1/M) size about 4 standard deviations above its mean; a
    rarer larger step is absorbed by the estimate's generous factors).
    """
    n = max(int(largest_subset), 1)
    batching = training.batching
    if isinstance(batching, Shuffled):
        rows = min(n, batching.batch_size)
    elif isinstance(batching, RandomAllocation):
        e = n / batching.steps_per_epoch
        rows = min(n, math.ceil(e + 4 * math.sqrt(e) + 8))
    else:
        rows = n
    return MemoryEstimate.of(
        n_parameters=sum(p.numel() for p in template.parameters()),
        n_state=training.optimizer.n_state, batch_length=rows,
        input_numel=int(X[0].numel()), activation_numel=activation_numel(template, X[:1]),
        itemsize=X.element_size(), per_example_gradients=training.clipping is not None)


def _check_init(init, template: torch.nn.Module, n_models: int) -> str | Ensemble:
    if not isinstance(init, Ensemble):
        return check_init(init)
    shapes = {n: tuple(p.shape) for n, p in template.named_parameters()}
    given = {n: tuple(p.shape[1:]) for n, p in init.parameters.items()}
    if given != shapes or init.n_models != n_models:
        raise ValueError(f"`init` must be an Ensemble of {n_models} models with the template's "
                         f"parameters; got {init.n_models} models of "
                         f"{'the same' if given == shapes else 'another'} architecture.")
    return init


def _initial(template: torch.nn.Module, seeds: Sequence[np.random.SeedSequence],
             init: str | Ensemble, start: int) -> Params:
    """Stacked initial parameters of models ``start .. start + len(seeds) - 1``, model axis
    first (the layout of ``torch.func.stack_module_state``)."""
    if isinstance(init, Ensemble):
        ref = next(iter(template.parameters()))
        return {n: p[start:start + len(seeds)].to(dtype=ref.dtype, device=ref.device).clone()
                for n, p in init.parameters.items()}
    if init == "shared":
        return {name: p.detach().unsqueeze(0).repeat(len(seeds), *([1] * p.ndim))
                for name, p in template.named_parameters()}
    model = copy.deepcopy(template)  # re-drawn in place for each seed
    draws: dict[str, list[torch.Tensor]] = {name: [] for name, _ in model.named_parameters()}
    for seed in seeds:
        initialise(model, torch_generator(trial_seed(seed, INIT_STREAM)))
        for name, p in model.named_parameters():
            draws[name].append(p.detach().clone())
    return {name: torch.stack(values) for name, values in draws.items()}


class _ChunkTrainer:
    """Trains one chunk of models: the step loop of :func:`train_ensemble`."""

    def __init__(self, template: torch.nn.Module, X: torch.Tensor, y: torch.Tensor,
                 training: TrainingSpec, loss: PerExampleLoss) -> None:
        self.training = training
        self.engine = closed_form_for(template, loss, X[:1]) or FuncGradients(template, loss)
        self.pool = self.engine.pool(X, y)
        self.device, self.dtype = X.device, X.dtype

    def train(self, params: Params, subsets: list[np.ndarray],
              seeds: Sequence[np.random.SeedSequence]) -> Params:
        training = self.training
        state = init_state(training.optimizer, params)
        schedule = Schedule(training.batching, subsets, seeds)
        clipping = training.clipping
        sigma = 0.0 if clipping is None else clipping.noise_multiplier
        noise_gens = [torch_generator(trial_seed(s, NOISE_STREAM)) if sub.size and sigma > 0
                      else None for sub, s in zip(subsets, seeds, strict=True)]
        full = isinstance(training.batching, FullBatch)
        batch = None  # full batches: each subset is gathered once, for every step
        for _ in range(training.epochs):
            plan = schedule.epoch()
            for j in range(plan.n_steps):
                active = plan.active[:, j]
                divisor = self._divisors(plan.counts[:, j], active, schedule.sizes)
                if batch is None or not full:
                    batch = self._gather(*plan.step(j))
                data, weight, weight_np = batch
                if clipping is None:
                    scaled = torch.as_tensor(weight_np / divisor[:, None], dtype=self.dtype,
                                             device=self.device)
                    grads = self.engine.gradients(params, data, scaled)
                else:
                    grads = self.engine.clipped_sums(params, data, weight,
                                                     clipping.max_grad_norm)
                    if sigma > 0:
                        noise = draw_noise([g if a else None for g, a in
                                            zip(noise_gens, active, strict=True)],
                                           params, std=sigma * clipping.max_grad_norm)
                        grads = {k: g + noise[k] for k, g in grads.items()}
                    grads = {k: g / _broadcast(divisor, g) for k, g in grads.items()}
                params = optimizer_step(training.optimizer, params, grads, state, active)
        return params

    def _divisors(self, counts: np.ndarray, active: np.ndarray, sizes: np.ndarray
                  ) -> np.ndarray:
        """Each model's divisor: n/M (random allocation), |batch| (mean) or 1; 1 if idle."""
        batching = self.training.batching
        if isinstance(batching, RandomAllocation):
            div = sizes / batching.steps_per_epoch
        elif self.training.reduction == "mean":
            div = counts.astype(np.float64)
        else:
            div = np.ones(counts.shape[0])
        return np.where(~active | (div == 0), 1.0, div)

    def _gather(self, index: np.ndarray, weight: np.ndarray
                ) -> tuple[tuple, torch.Tensor, np.ndarray]:
        """The engine's data for a ``(k, L)`` index block, and its weights."""
        k, length = index.shape
        flat = as_index(index.reshape(-1), self.device)
        return (self.engine.gather(self.pool, flat, k, length),
                torch.as_tensor(weight, dtype=self.dtype, device=self.device), weight)


def _broadcast(values: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    shape = (values.shape[0],) + (1,) * (like.ndim - 1)
    return torch.as_tensor(values, dtype=like.dtype, device=like.device).reshape(shape)
