"""Gradients of a group of models in one call: ``vmap`` over models of ``grad`` (torch.func).

* plain: ``∇_θ (Σ_i w_i ℓ_i(θ)) / divisor`` for each model, the per-example losses weighted by
  the padding mask (model ensembling with ``torch.func``: ``stack_module_state``,
  ``functional_call``, ``vmap``; PyTorch tutorial "Model ensembling");
* clipped: per-example gradients by a ``vmap`` over examples inside the ``vmap`` over models,
  each clipped to ``C`` jointly over all parameters, ``g_i·min(1, C/(‖g_i‖₂ + 10⁻⁶))``, then
  summed (Abadi et al., Deep Learning with Differential Privacy, CCS 2016, Algorithm 1; the
  norm is computed as in :func:`pacpriv.dpsgd.trainer.privatize_gradients`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from pacpriv.ensemble._torch import torch

__all__ = [
    "CLIP_EPS", "FuncGradients", "LossArg", "checked_losses", "draw_noise", "resolve_loss",
]

#: opacus' stabiliser in the clipping factor (the same as ``train_dpsgd``).
CLIP_EPS = 1e-6

PerExampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
LossArg = str | PerExampleLoss
Params = dict[str, torch.Tensor]

functional_call = torch.func.functional_call
grad = torch.func.grad
vmap = torch.func.vmap


def _cross_entropy(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(out, target, reduction="none")


def _mse(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if out.shape != target.shape:
        raise ValueError(f"with loss='mse', `y` must have the model's output shape per record; "
                         f"got outputs {tuple(out.shape[1:])} and targets "
                         f"{tuple(target.shape[1:])}.")
    sq = torch.nn.functional.mse_loss(out, target, reduction="none")
    return sq.reshape(sq.shape[0], -1).mean(1)


_LOSSES: dict[str, PerExampleLoss] = {"cross_entropy": _cross_entropy, "mse": _mse}


def resolve_loss(loss: LossArg) -> PerExampleLoss:
    """The per-example loss ``(outputs (b, ...), targets (b, ...)) -> (b,)``.

    ``"cross_entropy"`` (integer class targets), ``"mse"`` (mean over each example's output
    elements, so the batch mean equals ``torch.nn.MSELoss()``), or a callable returning one
    loss per example.

    Raises
    ------
    TypeError
        If ``loss`` is a torch loss *module* (its reduction hides the per-example losses) or
        neither a known name nor callable.
    ValueError
        If it is an unknown name.
    """
    if isinstance(loss, str):
        if loss not in _LOSSES:
            raise ValueError(f"`loss` must be one of {sorted(_LOSSES)} or a callable; got "
                             f"{loss!r}.")
        return _LOSSES[loss]
    if isinstance(loss, torch.nn.modules.loss._Loss):
        raise TypeError("`loss` must return one loss per example: pass 'cross_entropy', 'mse' "
                        f"or a callable such as lambda out, t: F.cross_entropy(out, t, "
                        f"reduction='none'); got the module {type(loss).__name__}.")
    if not callable(loss):
        raise TypeError(f"`loss` must be a name or a callable; got {type(loss).__name__}.")
    return loss


class FuncGradients:
    """Gradients of any template by ``torch.func`` (the general path).

    Parameters
    ----------
    template : torch.nn.Module
        The architecture (its own parameters are not used).
    loss : callable
        Per-example loss.
    """

    def __init__(self, template: torch.nn.Module, loss: PerExampleLoss) -> None:
        self.template = template
        self.loss = loss
        self.buffers = {k: v.detach() for k, v in template.named_buffers()}

    def pool(self, X: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The pool as it is gathered from: ``(X, y)``."""
        return X, y

    def gather(self, pool: tuple[torch.Tensor, ...], index: torch.Tensor, g: int,
               length: int) -> tuple[torch.Tensor, ...]:
        """Rows ``index`` (flat, ``g·length``) as ``x (g, length, ...)``, ``y (g, length, ...)``."""
        X, y = pool
        return (X.index_select(0, index).reshape(g, length, *X.shape[1:]),
                y.index_select(0, index).reshape(g, length, *y.shape[1:]))

    def gradients(self, params: Params, data: tuple[torch.Tensor, ...],
                  weight: torch.Tensor) -> Params:
        """``∇ Σ_i w_i ℓ_i`` of each of ``g`` models.

        Parameters
        ----------
        params : dict of str to torch.Tensor
            Stacked parameters, shapes ``(g, *shape)``.
        data : tuple
            From :meth:`gather`.
        weight : torch.Tensor of shape (g, L)
            ``1/divisor`` for a real row, 0 for padding.

        Returns
        -------
        dict of str to torch.Tensor
            Gradients, shapes ``(g, *shape)``.
        """
        template, buffers, loss = self.template, self.buffers, self.loss

        def objective(p: Params, xb: torch.Tensor, yb: torch.Tensor,
                      wb: torch.Tensor) -> torch.Tensor:
            out = functional_call(template, (p, buffers), (xb,))
            return (checked_losses(loss(out, yb), xb.shape[0]) * wb).sum()

        x, y = data
        return vmap(grad(objective))(params, x, y, weight)

    def clipped_sums(self, params: Params, data: tuple[torch.Tensor, ...],
                     weight: torch.Tensor, max_grad_norm: float) -> Params:
        """``Σ_i w_i · clip_C(∇ℓ_i)`` of each model (``w``: 1 real row, 0 padding).

        Returns
        -------
        dict of str to torch.Tensor
            Clipped sums, shapes ``(g, *shape)`` (no noise, no division).
        """
        template, buffers, loss = self.template, self.buffers, self.loss

        def one(p: Params, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
            out = functional_call(template, (p, buffers), (xi.unsqueeze(0),))
            return checked_losses(loss(out, yi.unsqueeze(0)), 1).sum()

        x, y = data
        per_example = vmap(vmap(grad(one), in_dims=(None, 0, 0)))(params, x, y)
        g, length = x.shape[0], x.shape[1]
        per_tensor = [torch.linalg.vector_norm(t.reshape(g, length, -1), dim=2)
                      for t in per_example.values()]
        norms = torch.linalg.vector_norm(torch.stack(per_tensor, dim=2), dim=2)
        factor = (max_grad_norm / (norms + CLIP_EPS)).clamp(max=1.0) * weight
        return {name: torch.einsum("gi,gi...->g...", factor, t)
                for name, t in per_example.items()}


def checked_losses(values: torch.Tensor, b: int) -> torch.Tensor:
    """``values`` if it holds one loss per example (shape ``(b,)``), else a ValueError."""
    if values.shape != (b,):
        raise ValueError(f"`loss` must return one value per example, shape ({b},); got shape "
                         f"{tuple(values.shape)}.")
    return values


def draw_noise(generators: Sequence[torch.Generator | None], like: Params, *, std: float
               ) -> Params:
    """``N(0, std²)`` noise for each model, drawn from its own CPU generator.

    Model ``k``'s draws are ``torch.normal(0, std, size=shape, generator=generators[k])`` for
    each parameter in order, exactly as ``train_dpsgd`` draws one step's noise; ``None``
    (a model that sits the step out) gets zeros and consumes nothing.

    Parameters
    ----------
    generators : sequence of torch.Generator or None
        One per model of the chunk.
    like : dict of str to torch.Tensor
        Stacked tensors ``(k, *shape)`` giving shapes, dtype and device.
    std : float
        ``σ·C``.
    """
    first = next(iter(like.values()))
    dtype, device = first.dtype, first.device
    out = {name: torch.zeros(t.shape, dtype=dtype) for name, t in like.items()}
    for k, gen in enumerate(generators):
        if gen is None:
            continue
        for name, t in like.items():
            out[name][k] = torch.normal(0.0, std, size=tuple(t.shape[1:]), generator=gen,
                                        dtype=dtype)
    return {name: t.to(device) for name, t in out.items()}


def as_index(values: np.ndarray, device: torch.device) -> torch.Tensor:
    """An int64 index tensor on ``device``."""
    return torch.as_tensor(values, dtype=torch.int64, device=device)
