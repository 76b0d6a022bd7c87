"""Forward pass of K stacked models without ``vmap``, for the architectures that allow it.

Answering a query with K worlds evaluates every world on the same rows. For a linear layer
that is one batched product ``x Wₖᵀ + bₖ`` for all k at once; element-wise activations act on
the stacked ``(K, n, width)`` tensor unchanged. :func:`stacked_forward` runs ``nn.Linear``,
``nn.Sequential`` of linear layers and element-wise activations, and any module with a
``stacked_forward(params, x)`` method (:class:`pacpriv.ensemble.TanhMLP`) this way, skipping
the per-call cost of ``vmap`` and ``functional_call``; other templates return None (the
caller uses ``vmap``). The result equals the per-model forward to float round-off.
"""

from __future__ import annotations

from pacpriv.ensemble._torch import torch

__all__ = ["stacked_forward"]

Params = dict[str, torch.Tensor]

nn = torch.nn
#: Modules without parameters that act element by element (any shape in, same shape out).
ELEMENTWISE = (
    nn.Identity, nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.SELU, nn.CELU, nn.GELU, nn.SiLU,
    nn.Mish, nn.Sigmoid, nn.Tanh, nn.Softplus, nn.Softsign, nn.Hardtanh, nn.Hardsigmoid,
    nn.Hardswish, nn.LogSigmoid, nn.Tanhshrink,
)


def _linear(params: Params, prefix: str, x: torch.Tensor, has_bias: bool) -> torch.Tensor:
    w = params[prefix + "weight"]
    k, out = w.shape[0], w.shape[1]
    bias = params[prefix + "bias"] if has_bias else None
    if x.ndim == 2:  # the shared query rows: one product with the (K·out, in) weight stack
        flat_bias = None if bias is None else bias.reshape(k * out)
        z = torch.nn.functional.linear(x, w.reshape(k * out, w.shape[2]), flat_bias)
        return z.reshape(x.shape[0], k, out).transpose(0, 1)
    if bias is not None:
        return torch.baddbmm(bias.unsqueeze(1), x, w.transpose(1, 2))
    return torch.bmm(x, w.transpose(1, 2))


def stacked_forward(template: torch.nn.Module, params: Params,
                    x: torch.Tensor) -> torch.Tensor | None:
    """Outputs ``(K, n, out)`` of the K models on the rows ``x (n, in)``, or None.

    Parameters
    ----------
    template : torch.nn.Module
    params : dict of str to torch.Tensor
        Stacked parameters ``(K, *shape)`` keyed as ``template.named_parameters()``.
    x : torch.Tensor of shape (n, in)
    """
    stacked = getattr(template, "stacked_forward", None)
    if callable(stacked):
        return stacked(params, x)
    if x.ndim != 2:
        return None
    if type(template) is nn.Linear:
        return _linear(params, "", x, template.bias is not None)
    if type(template) is not nn.Sequential:
        return None
    layers = list(template.named_children())
    if not all(type(m) is nn.Linear or type(m) in ELEMENTWISE for _, m in layers):
        return None
    h = x
    for name, module in layers:
        if type(module) is nn.Linear:
            h = _linear(params, name + ".", h, module.bias is not None)
        else:
            h = module(h)
    if h.ndim == 2:  # no linear layer: the same output for every model
        k = next(iter(params.values())).shape[0]
        h = h.unsqueeze(0).expand(k, *h.shape)
    return h
