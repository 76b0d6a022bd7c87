"""Existing torch training settings as ensemble settings (for callers that take torch objects).

The audit and the trainer take a ``torch.optim`` factory and a torch loss module; the ensemble
takes :class:`SGD`/:class:`Adam` specs and a per-example loss. These two functions translate
exactly the settings the ensemble reproduces and refuse the rest (the caller then keeps its
one-model-per-task path).
"""

from __future__ import annotations

from collections.abc import Callable

from pacpriv.ensemble._spec import SGD, Adam, Optimizer
from pacpriv.ensemble._torch import torch

__all__ = ["loss_from_torch", "optimizer_from_torch"]


def optimizer_from_torch(optimizer: torch.optim.Optimizer | Callable) -> Optimizer:
    """The :class:`SGD` or :class:`Adam` spec of a ``torch.optim`` optimizer (or factory).

    Parameters
    ----------
    optimizer : torch.optim.Optimizer or callable
        An optimizer with one parameter group, or a factory ``params -> Optimizer`` (called
        once on a dummy parameter to read its settings).

    Returns
    -------
    SGD or Adam

    Raises
    ------
    ValueError
        If it is another optimizer class (AdamW, RMSprop...), has several parameter groups,
        or uses an option the ensemble does not reproduce (``maximize``, ``amsgrad``, a
        tensor learning rate, decoupled weight decay).
    """
    opt = optimizer
    if not isinstance(opt, torch.optim.Optimizer) and callable(opt):
        opt = opt([torch.nn.Parameter(torch.zeros(1))])
    if not isinstance(opt, torch.optim.Optimizer):
        raise ValueError(f"`optimizer` must be a torch.optim.Optimizer or a factory of one; "
                         f"got {type(optimizer).__name__}.")
    if len(opt.param_groups) != 1:
        raise ValueError("`optimizer` must have one parameter group; got "
                         f"{len(opt.param_groups)}.")
    if type(opt) not in (torch.optim.SGD, torch.optim.Adam):
        raise ValueError(f"`optimizer` must be torch.optim.SGD or torch.optim.Adam; got "
                         f"{type(opt).__name__}.")
    g = opt.param_groups[0]
    if g.get("maximize") or g.get("amsgrad") or g.get("decoupled_weight_decay") or isinstance(
            g["lr"], torch.Tensor):
        raise ValueError("`optimizer` uses an option the ensemble does not reproduce "
                         "(maximize, amsgrad, decoupled weight decay or a tensor learning "
                         "rate).")
    if type(opt) is torch.optim.SGD:
        return SGD(float(g["lr"]), momentum=float(g["momentum"]),
                   dampening=float(g["dampening"]), weight_decay=float(g["weight_decay"]),
                   nesterov=bool(g["nesterov"]))
    beta1, beta2 = (float(b) for b in g["betas"])
    return Adam(float(g["lr"]), beta1=beta1, beta2=beta2, eps=float(g["eps"]),
                weight_decay=float(g["weight_decay"]))


def loss_from_torch(loss_fn: torch.nn.Module) -> str:
    """``"cross_entropy"`` or ``"mse"`` for the torch loss modules the ensemble reproduces.

    Per example, ``train_dpsgd`` evaluates ``loss_fn`` on a batch of one; for
    ``CrossEntropyLoss()`` (no class weights, no label smoothing) that is the example's
    cross-entropy, and for ``MSELoss()`` the mean squared error over its outputs: the
    ensemble's ``"cross_entropy"`` and ``"mse"``.

    Raises
    ------
    ValueError
        For any other loss or option.
    """
    if type(loss_fn) is torch.nn.CrossEntropyLoss and loss_fn.weight is None and (
            loss_fn.label_smoothing == 0.0 and loss_fn.reduction in ("mean", "sum")):
        return "cross_entropy"
    if type(loss_fn) is torch.nn.MSELoss and loss_fn.reduction == "mean":
        return "mse"
    raise ValueError(f"`loss_fn` {type(loss_fn).__name__} with these options has no ensemble "
                     "form; use CrossEntropyLoss() or MSELoss(), or a per-example callable.")
