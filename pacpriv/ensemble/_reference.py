"""The sequential reference: one model, one subset, plain autograd and ``torch.optim``.

:func:`train_reference` is the definition the vectorised trainer is tested against: the same
seeds give the same batches, noise and initialisation, and the result of
:func:`pacpriv.ensemble.train_ensemble` equals K calls of it to float round-off. It is written
independently of the ensemble's functional code (``torch.optim.SGD``/``Adam``, one
``torch.autograd.grad`` per batch, a Python loop over examples for clipping), and with random
allocation and clipping it performs the steps of :func:`pacpriv.dpsgd.trainer.train_dpsgd`.
"""

from __future__ import annotations

import numpy as np

from pacpriv._random import trial_seed
from pacpriv.ensemble._gradients import (
    CLIP_EPS,
    LossArg,
    PerExampleLoss,
    checked_losses,
    resolve_loss,
)
from pacpriv.ensemble._init import initialise, prepare_template
from pacpriv.ensemble._inputs import as_data, as_masks, check_init
from pacpriv.ensemble._schedule import batch_positions
from pacpriv.ensemble._spec import (
    BATCH_STREAM,
    INIT_STREAM,
    NOISE_STREAM,
    SGD,
    FullBatch,
    RandomAllocation,
    TrainingSpec,
)
from pacpriv.ensemble._torch import resolve_device, resolve_dtype, torch, torch_generator

__all__ = ["train_reference"]


def train_reference(
    model: torch.nn.Module,
    X,
    y,
    mask,
    *,
    seed: np.random.SeedSequence,
    training: TrainingSpec,
    loss: LossArg = "cross_entropy",
    init: str = "seeded",
    dtype: str | torch.dtype = "float32",
    device: str | torch.device = "cpu",
) -> torch.nn.Module:
    """Train one copy of ``model`` on ``X[mask], y[mask]``, one step at a time.

    Per epoch the subset is cut into batches (``FullBatch``: all of it; ``Shuffled(b)``:
    ``torch.randperm`` slices; ``RandomAllocation(M)``: random allocation) drawn from child 0
    of ``seed``. Each batch's gradient is ``∇ Σ_i ℓ_i / divisor`` (divisor ``|B|`` for
    ``"mean"``, 1 for ``"sum"``, ``n/M`` for random allocation); with clipping it is
    ``(Σ_i clip_C(∇ℓ_i) + N(0, σ²C²I)) / divisor``, the noise from child 1 of ``seed``
    (Abadi et al., CCS 2016, Algorithm 1). The gradient goes to ``torch.optim.SGD`` or
    ``torch.optim.Adam``. An empty subset, or ``epochs = 0``, returns the initial model.

    Parameters
    ----------
    model : torch.nn.Module
        The architecture (never modified).
    X, y : array-like or torch.Tensor of shape (n_records, ...)
        The pool.
    mask : array-like of shape (n_records,), bool or 0/1
        The subset.
    seed : numpy.random.SeedSequence
        The model's seed (child 0 batches, 1 noise, 2 initialisation).
    training : TrainingSpec
    loss : {"cross_entropy", "mse"} or callable, default "cross_entropy"
    init : {"seeded", "shared"}, default "seeded"
    dtype : {"float32", "float64"}, default "float32"
    device : {"cpu", "cuda"} or torch.device, default "cpu"

    Returns
    -------
    torch.nn.Module
        The trained copy.

    Raises
    ------
    TypeError, ValueError
        As :func:`pacpriv.ensemble.train_ensemble`.
    """
    if not isinstance(training, TrainingSpec):
        raise TypeError(f"`training` must be a pacpriv.ensemble.TrainingSpec; got "
                        f"{type(training).__name__}.")
    if not isinstance(seed, np.random.SeedSequence):
        raise TypeError(f"`seed` must be a numpy SeedSequence; got {type(seed).__name__}.")
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    net = prepare_template(model, dtype=dt, device=dev)
    loss_fn = resolve_loss(loss)
    if check_init(init) == "seeded":
        initialise(net, torch_generator(trial_seed(seed, INIT_STREAM)))
    Xt, yt = as_data(X, y, dtype=dt, device=dev)
    member = as_masks(np.asarray(mask)[None, :], Xt.shape[0], name="mask")[0]
    subset = torch.as_tensor(np.flatnonzero(member), device=dev)
    Xs, ys = Xt[subset], yt[subset]
    n = int(subset.numel())
    if n == 0 or training.epochs == 0:
        return net
    params = list(net.parameters())
    opt = _optimizer(training, params)
    batch_gen = torch_generator(trial_seed(seed, BATCH_STREAM))
    noise_gen = torch_generator(trial_seed(seed, NOISE_STREAM))
    for _ in range(training.epochs):
        gen = None if isinstance(training.batching, FullBatch) else batch_gen
        for positions in batch_positions(n, training.batching, gen):
            idx = torch.as_tensor(positions, dtype=torch.int64, device=dev)
            grads = _batch_gradient(net, loss_fn, Xs[idx], ys[idx], training, n, noise_gen)
            for p, g in zip(params, grads, strict=True):
                p.grad = g.detach()
            opt.step()
    for p in params:
        p.grad = None
    return net


def _optimizer(training: TrainingSpec, params: list) -> torch.optim.Optimizer:
    o = training.optimizer
    if isinstance(o, SGD):
        return torch.optim.SGD(params, lr=o.learning_rate, momentum=o.momentum,
                               dampening=o.dampening, weight_decay=o.weight_decay,
                               nesterov=o.nesterov)
    return torch.optim.Adam(params, lr=o.learning_rate, betas=(o.beta1, o.beta2), eps=o.eps,
                            weight_decay=o.weight_decay)


def _divisor(training: TrainingSpec, n: int, b: int) -> float:
    if isinstance(training.batching, RandomAllocation):
        return n / training.batching.steps_per_epoch
    return float(b) if training.reduction == "mean" else 1.0


def _batch_gradient(net: torch.nn.Module, loss: PerExampleLoss, xb: torch.Tensor,
                    yb: torch.Tensor, training: TrainingSpec, n: int,
                    noise_gen: torch.Generator) -> list[torch.Tensor]:
    params = list(net.parameters())
    b = xb.shape[0]
    divisor = _divisor(training, n, b)
    clipping = training.clipping
    if clipping is None:
        if b == 0:
            return [torch.zeros_like(p) for p in params]
        return list(torch.autograd.grad(checked_losses(loss(net(xb), yb), b).sum() / divisor,
                                        params))
    total = [torch.zeros_like(p) for p in params]
    for i in range(b):  # the definition: one example at a time
        g = torch.autograd.grad(checked_losses(loss(net(xb[i:i + 1]), yb[i:i + 1]), 1).sum(),
                                params)
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t) for t in g]))
        factor = (clipping.max_grad_norm / (norm + CLIP_EPS)).clamp(max=1.0)
        total = [s + factor * t for s, t in zip(total, g, strict=True)]
    if clipping.noise_multiplier > 0:
        std = clipping.noise_multiplier * clipping.max_grad_norm
        total = [s + torch.normal(0.0, std, size=tuple(s.shape), generator=noise_gen,
                                  dtype=s.dtype).to(s.device) for s in total]
    return [s / divisor for s in total]

