"""Clipped per-sample gradient sums for Linear / convolutional models, in one backward.

Private; used by :func:`pacpriv.dpsgd.trainer.train_dpsgd`. A forward hook records the input
of every ``nn.Linear``, ``nn.Conv1d`` and ``nn.Conv2d`` layer; a single
``torch.autograd.grad`` of ``Σ_i ℓ_i`` with respect to the layers' outputs gives each layer's
per-example backprops ``g_i = ∂ℓ_i/∂z_i`` (exact for any model whose examples do not interact,
which :func:`linear_layers` guarantees by admitting only these layers, known per-example
parameter-free modules (element-wise activations, pooling, flattening) and ``nn.Sequential``
containers). From inputs and backprops, :mod:`pacpriv.dpsgd._layer_clip` computes each
example's gradient norm over all layers ("ghost clipping" for ``nn.Linear``: ``‖g_iᵀ a_i‖² =
‖g_i‖²‖a_i‖²``, Goodfellow 2015, arXiv:1510.01799; Li et al. 2022, ICLR, §4; unfolded patches
for convolutions) and then the clipped sum ``Σ_i f_i ∇ℓ_i`` per parameter, without the
parameter gradients of an ordinary backward pass.

The result equals clipping the ``torch.func`` per-sample gradients (up to float round-off).
"""

from __future__ import annotations

import copy

from pacpriv._optional import import_torch
from pacpriv.dpsgd import _layer_clip
from pacpriv.dpsgd._layer_clip import CONVOLUTIONS, backprops, conv_ok, layer_parts, patches

torch = import_torch("pacpriv.dpsgd.trainer")
nn = torch.nn
F = torch.nn.functional

#: Modules without parameters that act on each example separately (element-wise or per row).
_PER_EXAMPLE = (
    nn.Identity, nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.SELU, nn.CELU, nn.GELU, nn.SiLU,
    nn.Mish, nn.Sigmoid, nn.Tanh, nn.Softplus, nn.Softsign, nn.Hardtanh, nn.Hardsigmoid,
    nn.Hardswish, nn.Hardshrink, nn.Softshrink, nn.Tanhshrink, nn.LogSigmoid, nn.Threshold,
    nn.Dropout,
)
#: Pooling over each example's own positions (never over the batch axis, batched or not).
_POOLS = (
    nn.MaxPool1d, nn.MaxPool2d, nn.AvgPool1d, nn.AvgPool2d, nn.AdaptiveAvgPool1d,
    nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d,
)
_PER_ROW = (nn.Softmax, nn.LogSoftmax)  # per example unless dim is the batch axis (0 / None)

#: Losses whose ``reduction="none"`` output, reduced over the non-batch axes, is the loss of
#: each example evaluated alone (what ``trainer._single_loss`` computes).
_ELEMENTWISE_LOSSES = (
    nn.MSELoss, nn.L1Loss, nn.SmoothL1Loss, nn.HuberLoss, nn.BCELoss, nn.BCEWithLogitsLoss,
)
_CLASS_LOSSES = (nn.CrossEntropyLoss, nn.NLLLoss)


def _module_ok(module) -> bool:
    kind = type(module)
    if kind in (nn.Sequential, nn.Linear) or kind in _PER_EXAMPLE:
        return True
    if kind in _POOLS:
        return not getattr(module, "return_indices", False)
    if kind in CONVOLUTIONS:
        return conv_ok(module)
    if kind in _PER_ROW:
        return module.dim is not None and module.dim != 0
    if kind is nn.Flatten:
        return module.start_dim >= 1
    return False


def linear_layers(model) -> list | None:
    """The Linear / convolution layers of ``model`` if the single-backward path applies.

    Applies when every module (the root included) is exactly an ``nn.Sequential``, an
    ``nn.Linear``, an ``nn.Conv1d`` / ``nn.Conv2d`` with ``groups=1`` and zero padding given as
    numbers, or a known per-example parameter-free module (subclasses may override
    ``forward`` and are refused), and every trainable parameter is such a layer's weight or
    bias; else None (the caller uses ``torch.func``). A model with a convolution and a module
    with ``inplace=True`` (which would overwrite a layer output this path reads) also gets
    None: it keeps the ``torch.func`` path, which handles in-place activations (a Linear-only
    model with one is refused by the trainer instead, naming the fix).
    """
    modules = list(model.modules())
    if not all(_module_ok(m) for m in modules):
        return None
    layers = [m for m in modules if type(m) is nn.Linear or type(m) in CONVOLUTIONS]
    if any(type(m) in CONVOLUTIONS for m in layers) and any(
            getattr(m, "inplace", False) is True for m in modules):
        return None
    owned = [id(p) for m in layers for p in (m.weight, m.bias) if p is not None]
    if len(set(owned)) < len(owned):
        return None  # a parameter shared by two layers: its gradient sums two products
    if any(p.requires_grad and id(p) not in set(owned) for p in model.parameters()):
        return None
    return [m for m in layers if any(p is not None and p.requires_grad
                                     for p in (m.weight, m.bias))]


def batched_losses(loss_fn, out, target):
    """Per-example losses ``(b,)`` from one batched call, or None where that is not exact.

    Equal to ``loss_fn(out[i:i+1], target[i:i+1]).sum()`` for each ``i`` (the per-example
    definition of ``trainer._single_loss``) for the loss modules listed in this module with
    their default per-element weighting; None for anything else (the caller then uses vmap).
    """
    kind = type(loss_fn)
    if out.ndim == 0 or out.shape[0] != target.shape[0]:
        return None
    if kind in _CLASS_LOSSES:
        if loss_fn.weight is not None:
            return None
        if not target.is_floating_point() and bool((target == loss_fn.ignore_index).any()):
            return None  # a single ignored example's "mean" is 0/0: keep the exact definition
    elif kind in _ELEMENTWISE_LOSSES:
        if getattr(loss_fn, "weight", None) is not None or target.shape != out.shape:
            return None
    else:
        return None
    unreduced = copy.copy(loss_fn)
    unreduced.reduction = "none"
    values = unreduced(out, target)
    if values.ndim == 1:
        return values
    flat = values.reshape(values.shape[0], -1)
    return flat.mean(1) if loss_fn.reduction == "mean" else flat.sum(1)


def _cpu_channels_last(x):
    """``x`` in channels-last memory format if it is a 4-D CPU tensor, else ``x``."""
    if isinstance(x, torch.Tensor) and x.ndim == 4 and x.device.type == "cpu":
        return x.contiguous(memory_format=torch.channels_last)
    return x


def _channels_last(module, inputs):
    return (_cpu_channels_last(inputs[0]), *inputs[1:])


class LinearTape:
    """Records each layer's input and output during one forward pass (forward hooks).

    Use as a context manager around training; :meth:`clipped_sums` then consumes one pass.
    Given ``model``, the ``nn.Conv2d`` outputs and the ``nn.MaxPool2d`` inputs of a 4-D CPU
    batch are laid out in channels-last memory format (a copy, the same values): max
    pooling with indices (what autograd needs) is about 10× faster there on CPU, and the
    activations and convolutions between them a little; pooling selects values without
    rounding them (ties go to the first maximum in the window in either layout), so outputs
    and gradients equal the plain layout's up to the convolutions' float round-off.
    """

    def __init__(self, layers, model=None) -> None:
        self.layers = layers
        self.channels_last = model is not None
        self.pools = [] if model is None else [m for m in model.modules()
                                               if type(m) is nn.MaxPool2d]
        self.records: dict[int, list] = {}
        self.handles: list = []
        self.disabled = False  # set once a pass ran a layer twice: the model needs torch.func

    def __enter__(self):
        for k, layer in enumerate(self.layers):
            self.handles.append(layer.register_forward_hook(self._hook(k)))
        for pool in self.pools:
            self.handles.append(pool.register_forward_pre_hook(_channels_last))
        return self

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()
        self.records.clear()

    def _hook(self, k: int):
        def hook(module, inputs, output):
            if self.channels_last and type(module) is nn.Conv2d:
                output = _cpu_channels_last(output)  # the tensor later modules receive
            self.records.setdefault(k, []).append((inputs[0].detach(), output,
                                                   output._version))
            return output
        return hook

    def clear(self) -> None:
        self.records.clear()

    def clipped_sums(self, total_loss, *, max_grad_norm: float, eps: float):
        """Clipped per-example gradient sums, per parameter, and the number clipped.

        Returns ``(sums, n_clipped)`` with ``sums`` mapping ``id(param)`` to ``Σ_i f_i ∇ℓ_i``
        (float64: the norms, factors and sums are computed in float64),
        ``f_i = min(1, C / (‖∇ℓ_i‖ + eps))``, or None if some layer ran more than once (its
        per-example gradient is then a sum of products, which this path does not handle) or a
        convolution got an unbatched input; the tape then removes its hooks and stays
        :attr:`disabled`.
        """
        used = [k for k in range(len(self.layers)) if k in self.records]
        cols = {k: patches(self.layers[k], self.records[k][0][0]) for k in used
                if len(self.records[k]) == 1}
        if len(cols) < len(used) or any(u is None for u in cols.values()):
            self.disabled = True  # the model's structure does not change between steps
            self.__exit__()
            return None
        outputs = [self.records[k][0][1] for k in used]
        for k in used:  # an in-place write after the hook would make the gradients wrong
            if self.records[k][0][1]._version != self.records[k][0][2]:
                raise ValueError(
                    f"the output of layer {k} ({type(self.layers[k]).__name__}) was "
                    "overwritten in place during forward (inplace=True or an in-place op); "
                    "fix: use the out-of-place form.")
        grads = torch.autograd.grad(total_loss, outputs, allow_unused=True) if outputs else []
        summers, sq = [], None
        budget = _layer_clip.MATERIALISE_ELEMENTS  # per-example gradients kept, all layers
        for k, g in zip(used, grads, strict=True):
            if g is None:
                continue
            layer = self.layers[k]
            part, summer, kept = layer_parts(layer, cols[k], backprops(layer, g), budget)
            budget -= kept
            summers.append(summer)
            sq = part if sq is None else sq + part
        if sq is None:
            return {}, 0
        norms = sq.sqrt()
        factor = (max_grad_norm / (norms + eps)).clamp(max=1.0)
        n_clipped = int((norms > max_grad_norm).sum())
        sums = {}
        for summer in summers:  # clipped sums in float64 (see pacpriv.dpsgd._noise)
            sums.update(summer(factor))
        return sums, n_clipped
