"""Clipped per-sample gradient sums for models built of ``nn.Linear`` layers, in one backward.

Private; used by :func:`pacpriv.dpsgd.trainer.train_dpsgd`. For a linear layer
``z = a W^T + b`` applied to example ``i`` with input ``a_i`` (shape ``(T, in)``, ``T = 1`` for
ordinary inputs) and output backprop ``g_i = ∂ℓ_i/∂z_i`` (shape ``(T, out)``), the per-example
gradients are ``∇_W ℓ_i = g_i^T a_i`` and ``∇_b ℓ_i = Σ_t g_{i,t}``. For ``T = 1`` the squared
Frobenius norm factorises, ``‖g_i^T a_i‖² = ‖g_i‖² ‖a_i‖²`` ("ghost clipping", Goodfellow 2015,
*Efficient per-example gradient computations*, arXiv:1510.01799; Li et al. 2022, *Large Language
Models Can Be Strong Differentially Private Learners*, ICLR, §4), so the joint per-example norm
needs no per-example gradient at all, and the clipped sum is one matrix product
``Σ_i f_i g_i^T a_i = (f ∘ g)^T a``. For ``T > 1``, ``‖g_i^T a_i‖² = Σ_{t,s} (g_t·g_s)(a_t·a_s)``
when ``T² <= in·out`` (Li et al. 2022, §4), else the per-example gradients are formed with one
batched product. The backprops ``g`` of every layer come from a single ``torch.autograd.grad``
of ``Σ_i ℓ_i`` with respect to the layers' outputs: exact for any model whose examples do not
interact, which :func:`linear_layers` guarantees by admitting only ``nn.Linear`` layers, known
per-example element-wise modules and ``nn.Sequential`` containers.

The result equals clipping the ``torch.func`` per-sample gradients (up to float round-off).
"""

from __future__ import annotations

import copy

from pacpriv._optional import import_torch

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
    if kind in _PER_ROW:
        return module.dim is not None and module.dim != 0
    if kind is nn.Flatten:
        return module.start_dim >= 1
    return False


def linear_layers(model) -> list | None:
    """The ``nn.Linear`` layers of ``model`` if the single-backward path applies, else None.

    Applies when every module (the root included) is exactly an ``nn.Sequential``, an
    ``nn.Linear`` or a known per-example parameter-free module (subclasses may override
    ``forward`` and are refused), and every trainable parameter is a Linear weight or bias.
    """
    modules = list(model.modules())
    if not all(_module_ok(m) for m in modules):
        return None
    layers = [m for m in modules if type(m) is nn.Linear]
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


class LinearTape:
    """Records each layer's input and output during one forward pass (forward hooks).

    Use as a context manager around training; :meth:`clipped_sums` then consumes one pass.
    """

    def __init__(self, layers) -> None:
        self.layers = layers
        self.records: dict[int, list] = {}
        self.handles: list = []
        self.disabled = False  # set once a pass ran a layer twice: the model needs torch.func

    def __enter__(self):
        for k, layer in enumerate(self.layers):
            self.handles.append(layer.register_forward_hook(self._hook(k)))
        return self

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()
        self.records.clear()

    def _hook(self, k: int):
        def hook(module, inputs, output):
            self.records.setdefault(k, []).append((inputs[0].detach(), output,
                                                   output._version))
        return hook

    def clear(self) -> None:
        self.records.clear()

    def clipped_sums(self, total_loss, *, max_grad_norm: float, eps: float):
        """Clipped per-example gradient sums, per parameter, and the number clipped.

        Returns ``(sums, n_clipped)`` with ``sums`` mapping ``id(param)`` to ``Σ_i f_i ∇ℓ_i``
        (float64: the norms, factors and sums are computed in float64),
        ``f_i = min(1, C / (‖∇ℓ_i‖ + eps))``, or None if some layer ran more than once (its
        per-example gradient is then a sum of products, which this path does not handle); the
        tape then removes its hooks and stays :attr:`disabled`.
        """
        if any(len(v) > 1 for v in self.records.values()):
            self.disabled = True  # the model's structure does not change between steps
            self.__exit__()
            return None
        used = [k for k in range(len(self.layers)) if k in self.records]
        outputs = [self.records[k][0][1] for k in used]
        for k in used:  # an in-place write after the hook would make the gradients wrong
            if self.records[k][0][1]._version != self.records[k][0][2]:
                raise ValueError(
                    f"the output of Linear layer {k} was overwritten in place during forward "
                    "(inplace=True or an in-place op); fix: use the out-of-place form.")
        grads = torch.autograd.grad(total_loss, outputs, allow_unused=True) if outputs else []
        acts, sq = [], None
        for k, g in zip(used, grads, strict=True):
            layer, a = self.layers[k], self.records[k][0][0]
            if g is None:
                continue
            a3 = a.reshape(a.shape[0], -1, a.shape[-1])
            g3 = g.reshape(g.shape[0], -1, g.shape[-1])
            acts.append((k, a3, g3))
            part = self._sq_norms(layer, a3.to(torch.float64), g3.to(torch.float64))
            sq = part if sq is None else sq + part
        if sq is None:
            return {}, 0
        norms = sq.sqrt()
        factor = (max_grad_norm / (norms + eps)).clamp(max=1.0)
        n_clipped = int((norms > max_grad_norm).sum())
        sums = {}
        for k, a3, g3 in acts:  # clipped sums in float64 (see pacpriv.dpsgd._noise)
            layer = self.layers[k]
            gf = g3.to(torch.float64) * factor[:, None, None]
            if layer.weight.requires_grad:
                sums[id(layer.weight)] = (gf.reshape(-1, gf.shape[-1]).T
                                          @ a3.to(torch.float64).reshape(-1, a3.shape[-1]))
            if layer.bias is not None and layer.bias.requires_grad:
                sums[id(layer.bias)] = gf.sum((0, 1))
        return sums, n_clipped

    @staticmethod
    def _sq_norms(layer, a3, g3):
        """Squared per-example gradient norm of one layer's trainable parameters, shape (b,)."""
        b, t = a3.shape[0], a3.shape[1]
        out = a3.new_zeros(b)
        if layer.weight.requires_grad:
            if t == 1:
                out = out + g3[:, 0].pow(2).sum(1) * a3[:, 0].pow(2).sum(1)
            elif t * t <= g3.shape[-1] * a3.shape[-1]:
                # ‖Σ_t g_t a_tᵀ‖² = Σ_{t,s} (g_t·g_s)(a_t·a_s): cheaper than forming g_iᵀ a_i.
                gg = torch.bmm(g3, g3.transpose(1, 2))
                aa = torch.bmm(a3, a3.transpose(1, 2))
                out = out + (gg * aa).sum((1, 2))
            else:
                per = torch.bmm(g3.transpose(1, 2), a3)  # (b, out, in) per-example gradients
                out = out + per.reshape(b, -1).pow(2).sum(1)
        if layer.bias is not None and layer.bias.requires_grad:
            out = out + g3.sum(1).pow(2).sum(1)
        return out
