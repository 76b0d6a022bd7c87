"""The model template: checks, a private copy in the ensemble's dtype, seeded initialisation.

A *template* is any ``torch.nn.Module`` whose forward treats examples independently. The
ensemble never trains the template itself: it copies it (:func:`prepare_template`) and keeps the
K models' parameters stacked along a leading model axis (``torch.func.stack_module_state``).
"""

from __future__ import annotations

import copy
import math

import numpy as np

from pacpriv._random import trial_seed
from pacpriv.ensemble._spec import INIT_STREAM
from pacpriv.ensemble._torch import torch, torch_generator

__all__ = ["initialise", "parameter_names", "prepare_template", "seeded_parameters"]


def prepare_template(model: torch.nn.Module, *, dtype: torch.dtype,
                     device: torch.device) -> torch.nn.Module:
    """A checked deep copy of ``model`` in ``dtype`` on ``device``, in training mode.

    Raises
    ------
    TypeError
        If ``model`` is not a ``torch.nn.Module``.
    ValueError
        If it has no parameter, a frozen parameter (``requires_grad=False``), a module that
        mixes examples (batch normalisation) or draws random numbers (dropout with ``p > 0``):
        their training would not be a function of the seeds alone.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module; got {type(model).__name__}.")
    params = list(model.parameters())
    if not params:
        raise ValueError("`model` must have at least one parameter.")
    if not all(p.requires_grad for p in params):
        raise ValueError("every parameter of `model` must be trainable (requires_grad=True); "
                         "frozen parameters are not supported by the ensemble trainer.")
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            raise ValueError(f"`model` has {type(module).__name__} at {name or 'the root'!r}: "
                             "batch normalisation mixes examples; use GroupNorm or LayerNorm.")
        if isinstance(module, torch.nn.modules.dropout._DropoutNd) and module.p > 0:
            raise ValueError(f"`model` has {type(module).__name__}(p={module.p}) at "
                             f"{name or 'the root'!r}: dropout draws from torch's global "
                             "generator; remove it (or set p=0).")
    out = copy.deepcopy(model).to(device=device, dtype=dtype)
    out.train()
    return out


def parameter_names(template: torch.nn.Module) -> list[str]:
    """Names of the trainable parameters in ``named_parameters()`` order (the output order)."""
    return [name for name, _ in template.named_parameters()]


def initialise(module: torch.nn.Module, generator: torch.Generator) -> None:
    """Re-draw ``module``'s parameters in place from ``generator``, with torch's default laws.

    ``Linear`` and convolutions: weights ``kaiming_uniform_(a=√5)`` (uniform on
    ``±1/sqrt(fan_in)``), biases uniform on ``±1/sqrt(fan_in)``; ``Embedding``: ``N(0, 1)``;
    ``LayerNorm``/``GroupNorm``: ones and zeros -- each module's ``reset_parameters`` law, but
    drawn from ``generator`` instead of torch's global generator (He et al., ICCV 2015).

    Raises
    ------
    ValueError
        If a module holding parameters is of another kind (its law is unknown here): pass
        ``init="shared"`` with parameters initialised by the caller instead.
    """
    init = torch.nn.init
    with torch.no_grad():
        for name, sub in module.named_modules():
            own = list(sub.parameters(recurse=False))
            if not own:
                continue
            if isinstance(sub, (torch.nn.Linear, torch.nn.modules.conv._ConvNd)):
                values = _cpu_like(sub.weight)
                init.kaiming_uniform_(values, a=math.sqrt(5), generator=generator)
                sub.weight.copy_(values)
                if sub.bias is not None:
                    fan_in, _ = init._calculate_fan_in_and_fan_out(sub.weight)
                    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
                    values = _cpu_like(sub.bias)
                    init.uniform_(values, -bound, bound, generator=generator)
                    sub.bias.copy_(values)
            elif isinstance(sub, torch.nn.Embedding):
                values = _cpu_like(sub.weight)
                init.normal_(values, generator=generator)
                sub.weight.copy_(values)
            elif isinstance(sub, (torch.nn.LayerNorm, torch.nn.GroupNorm)):
                for p in own:
                    p.fill_(1.0 if p is getattr(sub, "weight", None) else 0.0)
            else:
                raise ValueError(
                    f"`init='seeded'` cannot initialise {type(sub).__name__} at "
                    f"{name or 'the root'!r} (its initial distribution is unknown to the "
                    "ensemble); initialise the template yourself and pass init='shared'.")


def _cpu_like(t: torch.Tensor) -> torch.Tensor:
    # draws come from a CPU generator, so a CUDA model gets the CPU path's exact values
    return torch.empty(t.shape, dtype=t.dtype, device="cpu")


def seeded_parameters(template: torch.nn.Module,
                      seed: np.random.SeedSequence) -> dict[str, torch.Tensor]:
    """Parameters of one model initialised from child :data:`INIT_STREAM` of ``seed``.

    Returns
    -------
    dict of str to torch.Tensor
        Detached tensors keyed as ``template.named_parameters()``, on the template's device.
    """
    model = copy.deepcopy(template)
    initialise(model, torch_generator(trial_seed(seed, INIT_STREAM)))
    return {k: v.detach() for k, v in model.named_parameters()}
