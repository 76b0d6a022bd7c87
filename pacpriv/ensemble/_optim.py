"""Functional SGD and Adam over stacked parameters, one step count per model.

Every tensor has a leading model axis of length ``k``. A step updates only the models marked
``active`` (a model with fewer batches in an epoch, or an empty subset, sits a step out), so
each model follows exactly the sequence of :class:`torch.optim.SGD` / :class:`torch.optim.Adam`
steps that a sequential training of it would take. The arithmetic is torch's single-tensor
implementation, operation by operation (``add(alpha=)``, ``lerp``, ``addcmul``, the
``addcdiv`` order ``θ + (value·m)/denom``), so the results agree to float round-off.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pacpriv.ensemble._spec import SGD, Adam, Optimizer
from pacpriv.ensemble._torch import torch

__all__ = ["OptimizerState", "init_state", "optimizer_step"]

Params = dict[str, torch.Tensor]


@dataclass
class OptimizerState:
    """Per-model optimiser state (mutable; private to one chunk of models).

    Attributes
    ----------
    steps : numpy.ndarray of shape (k,), int64
        Steps each model has taken.
    buffers : dict of str to dict of str to torch.Tensor
        ``buffers[name][param]``: ``"momentum"`` (SGD) or ``"exp_avg"``/``"exp_avg_sq"``
        (Adam), each of the parameter's stacked shape.
    """

    steps: np.ndarray
    buffers: dict[str, Params]


def init_state(optimizer: Optimizer, params: Params) -> OptimizerState:
    """Zero state for ``params`` (stacked, model axis first)."""
    k = next(iter(params.values())).shape[0]
    names: tuple[str, ...]
    if isinstance(optimizer, Adam):
        names = ("exp_avg", "exp_avg_sq")
    else:
        names = ("momentum",) if optimizer.momentum > 0 else ()
    buffers = {b: {n: torch.zeros_like(p) for n, p in params.items()} for b in names}
    return OptimizerState(steps=np.zeros(k, dtype=np.int64), buffers=buffers)


def _per_model(values: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    """A (k, 1, ..., 1) tensor in ``like``'s dtype and device, to broadcast over a parameter."""
    shape = (values.shape[0],) + (1,) * (like.ndim - 1)
    return torch.as_tensor(values, dtype=like.dtype).reshape(shape).to(like.device)


def _where(active: torch.Tensor | None, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """``new`` for the active models, ``old`` for the others (all active: ``new``)."""
    if active is None:
        return new
    return torch.where(active.reshape((active.shape[0],) + (1,) * (new.ndim - 1)), new, old)


def optimizer_step(optimizer: Optimizer, params: Params, grads: Params, state: OptimizerState,
                   active: np.ndarray) -> Params:
    """One step of every active model; returns the new parameters and updates ``state``.

    Parameters
    ----------
    optimizer : SGD or Adam
    params, grads : dict of str to torch.Tensor
        Stacked parameters and gradients, shapes ``(k, *shape)``.
    state : OptimizerState
        Updated in place (buffers replaced, ``steps`` incremented for active models).
    active : numpy.ndarray of shape (k,), bool
        Models that take this step; the others keep parameters and state unchanged.

    Returns
    -------
    dict of str to torch.Tensor
        The new stacked parameters.
    """
    if not active.any():
        return params
    device = next(iter(params.values())).device
    act = None if active.all() else torch.as_tensor(active, device=device)
    if isinstance(optimizer, SGD):
        out = _sgd(optimizer, params, grads, state, act)
    else:
        out = _adam(optimizer, params, grads, state, act)
    state.steps = state.steps + active.astype(np.int64)
    return out


def _sgd(opt: SGD, params: Params, grads: Params, state: OptimizerState,
         act: torch.Tensor | None) -> Params:
    out = {}
    first = state.steps == 0
    for name, p in params.items():
        d = grads[name]
        if opt.weight_decay != 0:
            d = d.add(p, alpha=opt.weight_decay)
        if opt.momentum != 0:
            buf = state.buffers["momentum"][name]
            new_buf = (buf * opt.momentum).add(d, alpha=1 - opt.dampening)
            if first.any():  # a model's first step: the buffer is the gradient itself
                new_buf = _where(torch.as_tensor(first, device=p.device), d, new_buf)
            state.buffers["momentum"][name] = _where(act, new_buf, buf)
            d = d.add(new_buf, alpha=opt.momentum) if opt.nesterov else new_buf
        out[name] = _where(act, p.add(d, alpha=-opt.learning_rate), p)
    return out


def _adam(opt: Adam, params: Params, grads: Params, state: OptimizerState,
          act: torch.Tensor | None) -> Params:
    step = (state.steps + 1).astype(np.float64)
    # torch: Python floats bias_correction = 1 - beta ** step, step_size = lr / bc1
    bc1 = np.array([1 - opt.beta1 ** s for s in step])
    bc2_sqrt = np.array([(1 - opt.beta2 ** s) ** 0.5 for s in step])
    neg_step_size = -(opt.learning_rate / bc1)
    out = {}
    for name, p in params.items():
        g = grads[name]
        if opt.weight_decay != 0:
            g = g.add(p, alpha=opt.weight_decay)
        m_old = state.buffers["exp_avg"][name]
        v_old = state.buffers["exp_avg_sq"][name]
        m = torch.lerp(m_old, g, 1 - opt.beta1)
        v = torch.addcmul(v_old * opt.beta2, g, g, value=1 - opt.beta2)
        denom = (v.sqrt() / _per_model(bc2_sqrt, p)).add(opt.eps)
        new = p + (_per_model(neg_step_size, p) * m) / denom
        state.buffers["exp_avg"][name] = _where(act, m, m_old)
        state.buffers["exp_avg_sq"][name] = _where(act, v, v_old)
        out[name] = _where(act, new, p)
    return out
