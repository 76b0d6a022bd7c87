"""Per-example gradient norms and clipped sums of one layer from its inputs and backprops.

Private; used by :class:`pacpriv.dpsgd._ghost.LinearTape`. A layer ``z = W ⋆ a + b`` whose
examples do not interact has, for example ``i``, the weight gradient ``∇_W ℓ_i = g_iᵀ u_i``,
where ``g_i = ∂ℓ_i/∂z_i`` (shape ``(T, out)`` after moving the channel axis last) and ``u_i``
(shape ``(T, D)``) holds the ``T`` input patches the layer multiplies by ``W``: the input rows of
a ``nn.Linear`` (``D = in``) or the unfolded receptive fields of a convolution
(``D = in·k₁·k₂``, :func:`torch.nn.functional.unfold`, as in opacus' conv grad sampler;
Yousefpour et al. 2021, arXiv:2109.12298). The bias gradient is ``Σ_t g_{i,t}``.

For each layer :func:`layer_parts` returns the squared per-example norm of its trainable
parameters' gradients (float64, shape ``(b,)``) and a function that, given the clipping
factors ``f`` (float64, ``(b,)``), returns the clipped sums ``Σ_i f_i ∇ℓ_i`` (float64). Three
ways, chosen per layer by cost:

* ``T = 1`` (ordinary ``nn.Linear``): ``‖g_iᵀ u_i‖² = ‖g_i‖²‖u_i‖²`` and the sum
  ``(f ∘ g)ᵀ u``, with no per-example gradient formed (Goodfellow 2015, arXiv:1510.01799);
* per-example gradients formed with one batched product when they fit in
  :data:`MATERIALISE_ELEMENTS` (fewest operations: the sum is then one matrix-vector product);
* otherwise the Gram ("ghost") norm ``Σ_{t,s} (g_t·g_s)(u_t·u_s)`` (Li et al. 2022, *Large
  Language Models Can Be Strong Differentially Private Learners*, ICLR, §4) or the
  per-example gradients in chunks, whichever costs fewer operations, and the sum as one
  contraction ``(f ∘ g)ᵀ u`` over examples and positions.

Norms, factors and sums are float64. Per-example products of ``nn.Linear`` layers are float64;
a convolution's per-example gradients are formed in the model's dtype (as ``torch.func``
forms them on the general path) and converted to float64 before their norms and sums.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pacpriv._optional import import_torch

torch = import_torch("pacpriv.dpsgd.trainer")
nn = torch.nn
F = torch.nn.functional

#: Convolutions whose per-example gradients this module forms (groups = 1, zero padding).
CONVOLUTIONS = (nn.Conv1d, nn.Conv2d)
#: Most per-example gradient elements (over the batch and all layers of one step) kept at once.
MATERIALISE_ELEMENTS = 1 << 24
_F64 = torch.float64

Summer = Callable[[Any], dict]  # float64 factors (b,) -> {id(parameter): clipped sum}


def conv_ok(module) -> bool:
    """Whether :func:`layer_parts` handles this convolution exactly (else: ``torch.func``)."""
    return (module.groups == 1 and module.padding_mode == "zeros"
            and not isinstance(module.padding, str))


def patches(layer, a):
    """``(u, hwc)``: the ``(b, T, D)`` patches the layer's weight multiplies, or None.

    ``hwc`` is True when ``D`` is ordered (k₁, k₂, in) rather than the weight's (in, k₁, k₂)
    (a channels-last input: copying its windows in that order is faster). None when the
    input is not batched as the layer expects (an unbatched convolution input would mix the
    examples of the batch as channels).
    """
    if type(layer) is nn.Linear:
        return a.reshape(a.shape[0], -1, a.shape[-1]), False
    two = type(layer) is nn.Conv2d
    if a.ndim != (4 if two else 3):
        return None
    if not two:  # a length-L signal as a 1 x L image
        a = a.unsqueeze(2)
    grab = (lambda v: tuple(v)) if two else (lambda v: (1, v[0]))
    kernel, stride, dilation = grab(layer.kernel_size), grab(layer.stride), grab(layer.dilation)
    pad = tuple(layer.padding) if two else (0, layer.padding[0])
    if dilation != (1, 1):
        cols = F.unfold(a, kernel, dilation=dilation, padding=pad, stride=stride)
        return cols.transpose(1, 2), False  # (b, T, in·k₁·k₂)
    if any(pad):
        a = F.pad(a, (pad[1], pad[1], pad[0], pad[0]))
    # strided windows (b, in, T₁, T₂, k₁, k₂), then one copy to (b, T, D): F.unfold's
    # columns, transposed, at a fraction of im2col's cost on CPU
    view = a.unfold(2, kernel[0], stride[0]).unfold(3, kernel[1], stride[1])
    hwc = two and a.shape[1] > 1 and not a.is_contiguous() and a.is_contiguous(
        memory_format=torch.channels_last)
    order = (0, 2, 3, 4, 5, 1) if hwc else (0, 2, 3, 1, 4, 5)
    return view.permute(order).reshape(a.shape[0], -1, a.shape[1] * kernel[0] * kernel[1]), hwc


def backprops(layer, g):
    """The layer's output gradient as ``(b, T, out)``."""
    if type(layer) is nn.Linear:
        return g.reshape(g.shape[0], -1, g.shape[-1])
    return g.reshape(g.shape[0], g.shape[1], -1).transpose(1, 2)


def _as_weight(flat, weight, hwc: bool):
    if not hwc:
        return flat.reshape(weight.shape)
    out, c, k1, k2 = weight.shape
    return flat.reshape(out, k1, k2, c).permute(0, 3, 1, 2).contiguous()


def layer_parts(layer, found, g, budget: int) -> tuple[Any, Summer, int]:
    """Squared per-example norms ``(b,)`` (float64), the clipped-sum function of one layer and
    the number of per-example gradient elements it keeps (at most ``budget``).

    ``found``: :func:`patches`' ``(u, hwc)`` with ``u`` of shape ``(b, T, D)``; ``g``:
    ``(b, T, out)`` backprops (:func:`backprops`).
    """
    u, hwc = found
    weight, bias = layer.weight, layer.bias
    train_w = weight.requires_grad
    train_b = bias is not None and bias.requires_grad
    b, t, d = u.shape
    out = g.shape[-1]
    if type(layer) is nn.Linear:
        u, g = u.to(_F64), g.to(_F64)
    sq = torch.zeros(b, dtype=_F64, device=u.device)
    per = bias_per = None
    if train_b:  # per-example bias gradients Σ_t g_t, (b, out)
        bias_per = (g[:, 0] if t == 1 else g.sum(1)).to(_F64)
        sq = sq + bias_per.pow(2).sum(1)
    if train_w:
        if t == 1:
            sq = sq + g[:, 0].to(_F64).pow(2).sum(1) * u[:, 0].to(_F64).pow(2).sum(1)
        elif b * out * d <= budget:
            per = torch.bmm(g.transpose(1, 2), u).reshape(b, -1).to(_F64)  # (b, out·D)
            sq = sq + torch.linalg.vector_norm(per, dim=1).square()
        else:
            sq = sq + _large_norms(u, g)

    def summer(factor):
        sums = {}
        if train_w:
            if per is not None:
                flat = factor @ per
            else:  # Σ_i f_i g_iᵀ u_i as one contraction over examples and positions
                gf = g.to(_F64) * factor[:, None, None]
                flat = gf.reshape(-1, out).T @ u.to(_F64).reshape(-1, d)
            sums[id(weight)] = _as_weight(flat, weight, hwc)
        if bias_per is not None:
            sums[id(bias)] = factor @ bias_per
        return sums

    return sq, summer, 0 if per is None else per.numel()


def _large_norms(u, g):
    """``‖g_iᵀ u_i‖²`` without all per-example gradients at once: the Gram form or the
    per-example gradients, whichever costs fewer operations, over chunks of examples whose
    temporaries stay within :data:`MATERIALISE_ELEMENTS`."""
    b, t, d = u.shape
    out = g.shape[-1]
    gram = t * t * (out + d) <= t * out * d
    size = t * t if gram else out * d
    step = max(1, MATERIALISE_ELEMENTS // size)
    parts = []
    for i in range(0, b, step):
        gi, ui = g[i:i + step], u[i:i + step]
        if gram:  # ‖Σ_t g_t u_tᵀ‖² = Σ_{t,s} (g_t·g_s)(u_t·u_s)
            gg = torch.bmm(gi, gi.transpose(1, 2)).to(_F64)
            uu = torch.bmm(ui, ui.transpose(1, 2)).to(_F64)
            parts.append((gg * uu).sum((1, 2)))
        else:
            per = torch.bmm(gi.transpose(1, 2), ui).reshape(-1, out * d).to(_F64)
            parts.append(torch.linalg.vector_norm(per, dim=1).square())
    return torch.cat(parts)
