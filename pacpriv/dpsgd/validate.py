"""Check a model for modules that the DP-SGD trainer cannot handle, before any work.

Per-example gradients (and so the clipping of DP-SGD, Abadi et al. 2016, Algorithm 1) are only
defined when each example's loss depends on that example alone. Modules that normalise over
the batch mix examples; modules that update buffers in place, or that ``torch.func`` cannot
batch, fail deep inside ``vmap`` with a message about in-place operations or shapes.
:func:`validate_model` finds them up front and names the fix, as opacus'
``ModuleValidator.validate`` does (Yousefpour et al. 2021, *Opacus: User-Friendly Differential
Privacy Library in PyTorch*, arXiv:2109.12298, §3).

This module imports torch; it is never imported by ``import pacpriv``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pacpriv._optional import import_torch

torch = import_torch("pacpriv.dpsgd.validate")
nn = torch.nn

__all__ = ["ModuleProblem", "validate_model"]

_NORM_FIX = (
    "replace it with nn.GroupNorm(num_groups, num_channels), nn.LayerNorm(normalized_shape) or "
    "nn.InstanceNorm{d}d(num_features, track_running_stats=False), which normalise each "
    "example on its own"
)
_RNN_FIX = (
    "torch.func has no batching rule for it; write the recurrence with nn.Linear layers "
    "(e.g. opacus.layers.DPRNN / DPGRU / DPLSTM) or use nn.LSTM"
)


@dataclass(frozen=True)
class ModuleProblem:
    """One module the DP-SGD trainer cannot handle.

    Attributes
    ----------
    name : str
        Dotted name as in ``model.named_modules()`` (``""`` for the model itself).
    module_type : str
        Class name, e.g. ``"BatchNorm1d"``.
    reason : str
        Why per-example gradients fail or are wrong with it.
    fix : str
        What to use instead.
    """

    name: str
    module_type: str
    reason: str
    fix: str

    def __str__(self) -> str:
        label = self.name or "<model>"
        return f"{label} ({self.module_type}): {self.reason}; fix: {self.fix}."


def _dims(module) -> str:
    digits = [c for c in type(module).__name__ if c.isdigit()]
    return digits[0] if digits else "1"


def _problem(name: str, module) -> ModuleProblem | None:
    kind = type(module).__name__
    if isinstance(module, nn.modules.batchnorm._BatchNorm):
        return ModuleProblem(
            name, kind,
            "batch normalisation mixes the examples of a batch (each example's output and "
            "gradient depend on the others) and updates running statistics in place",
            _NORM_FIX.format(d=_dims(module)),
        )
    if isinstance(module, nn.modules.instancenorm._InstanceNorm) and module.track_running_stats:
        return ModuleProblem(
            name, kind,
            "track_running_stats=True updates running statistics in place from every example",
            f"use nn.{kind}(num_features, track_running_stats=False) (or nn.GroupNorm / "
            "nn.LayerNorm)",
        )
    if isinstance(module, (nn.RNN, nn.GRU, nn.RNNCell, nn.GRUCell, nn.LSTMCell)):
        return ModuleProblem(name, kind, "per-example gradients fail under torch.vmap",
                             _RNN_FIX)
    return None


def validate_model(model, *, strict: bool = True) -> list[ModuleProblem]:
    """List the modules of ``model`` that per-example-gradient DP-SGD cannot handle.

    Checked kinds: batch normalisation (``nn.BatchNorm1d/2d/3d``, ``nn.SyncBatchNorm`` and the
    lazy variants: mixes examples), instance normalisation with ``track_running_stats=True``
    (in-place running statistics), and the recurrent modules that ``torch.func`` cannot batch
    (``nn.RNN``, ``nn.GRU`` and the ``RNNCell`` / ``GRUCell`` / ``LSTMCell`` cells). Custom
    modules whose ``forward`` mixes examples cannot be detected statically.

    Parameters
    ----------
    model : torch.nn.Module
        The model to check (not modified).
    strict : bool, default True
        Raise if any problem is found; ``False`` only returns the list.

    Returns
    -------
    list of ModuleProblem
        One entry per offending module, in ``named_modules()`` order; empty if the model is fine.

    Raises
    ------
    TypeError
        If ``model`` is not a ``torch.nn.Module``.
    ValueError
        If ``strict`` and a problem is found; the message lists every offending module by name
        with its fix.

    Examples
    --------
    >>> import torch
    >>> from pacpriv.dpsgd.validate import validate_model
    >>> bad = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8))
    >>> [p.name for p in validate_model(bad, strict=False)]
    ['1']
    >>> good = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GroupNorm(2, 8))
    >>> validate_model(good)
    []
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module; got {type(model).__name__}.")
    problems = [p for name, m in model.named_modules() if (p := _problem(name, m)) is not None]
    if strict and problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise ValueError(
            f"`model` has {len(problems)} module(s) that DP-SGD with per-example gradients "
            f"cannot handle:\n{lines}"
        )
    return problems
