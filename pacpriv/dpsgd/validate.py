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

__all__ = ["ModuleProblem", "inplace_modules", "probe_model", "validate_model"]

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
    if getattr(module, "max_norm", None) is not None and isinstance(
            module, (nn.Embedding, nn.EmbeddingBag)):
        return ModuleProblem(
            name, kind,
            "max_norm renormalises the weight in place during forward (a parameter changed "
            "outside the optimizer, from the examples of the batch)",
            f"use nn.{kind}(..., max_norm=None) and, if needed, renormalise the rows after "
            "each optimizer step (post-processing of the private model)",
        )
    return None


def validate_model(model, *, strict: bool = True) -> list[ModuleProblem]:
    """List the modules of ``model`` that per-example-gradient DP-SGD cannot handle.

    Checked kinds: batch normalisation (``nn.BatchNorm1d/2d/3d``, ``nn.SyncBatchNorm`` and the
    lazy variants: mixes examples), instance normalisation with ``track_running_stats=True``
    (in-place running statistics), the recurrent modules that ``torch.func`` cannot batch
    (``nn.RNN``, ``nn.GRU`` and the ``RNNCell`` / ``GRUCell`` / ``LSTMCell`` cells), and
    ``nn.Embedding`` / ``nn.EmbeddingBag`` with ``max_norm`` (renormalises its weight in
    place). What a custom ``forward`` does (buffer or parameter updates, in-place writes to
    layer outputs) is found by :func:`probe_model` on a copy of the model; modules with
    ``inplace=True`` by :func:`inplace_modules`.

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


_INPLACE_FIX = ("construct it with inplace=False (a model that trains with inplace=True "
                "trains identically without it)")


def inplace_modules(model) -> list[ModuleProblem]:
    """Modules of any type whose ``inplace`` attribute is True.

    They overwrite their input, i.e. the previous layer's output, which the single-backward
    clipping path (:mod:`pacpriv.dpsgd._ghost`) reads: the gradients would be wrong.
    (``torch.func`` per-sample gradients handle them correctly.)
    """
    return [ModuleProblem(name, type(m).__name__,
                          "inplace=True overwrites the previous layer's output, which "
                          "per-example clipping from layer outputs reads (wrong gradients)",
                          _INPLACE_FIX)
            for name, m in model.named_modules() if getattr(m, "inplace", False) is True]


@dataclass(frozen=True)
class ProbeReport:
    """What one probe forward pass found (see :func:`probe_model`)."""

    state: list  # parameters / buffers changed by forward: refused on every path
    overwritten: list  # module outputs overwritten in place: refused on the ghost path


def _tensors(model) -> dict[str, tuple[int, int]]:
    """``name -> (id, version)`` of every parameter and buffer (``_version`` counts in-place
    writes, including those under ``torch.no_grad``)."""
    out = {}
    for kind, items in (("parameter", model.named_parameters(remove_duplicate=False)),
                        ("buffer", model.named_buffers(remove_duplicate=False))):
        for name, t in items:
            out[f"{kind} {name}"] = (id(t), t._version)
    return out


def _owner(model, qualified: str) -> tuple[str, str]:
    """``("module name", "ModuleType")`` owning ``"parameter a.b.weight"``."""
    name = qualified.split(" ", 1)[1].rpartition(".")[0]
    return name, type(model.get_submodule(name)).__name__


def probe_model(model, X_probe) -> ProbeReport:
    """Run one forward pass on a copy of ``model`` and report what its ``forward`` changes.

    Detected for any module, whatever its type:

    * a parameter or buffer written in place or re-bound during ``forward`` (running
      statistics, ``max_norm`` renormalisation, counters): DP-SGD's state would then depend
      on the examples outside the noisy update (an un-noised leak), and under ``torch.func``
      the write fails or escapes as a batched tensor;
    * a module's output overwritten in place by a later operation (``x.relu_()``, ``+=``,
      ``inplace=True``): per-example clipping from layer outputs reads the overwritten
      values and gives wrong gradients.

    Parameters
    ----------
    model : torch.nn.Module
        Not modified (a deep copy is probed; if the model cannot be copied, its parameters
        and buffers are saved and restored around the probe).
    X_probe : torch.Tensor
        A small batch of inputs (one or two records).

    Returns
    -------
    ProbeReport
        ``state`` (parameter or buffer changes) and ``overwritten`` (outputs overwritten).
    """
    import copy

    try:
        probe = copy.deepcopy(model)
        restore = None
    except Exception:  # uncopyable (e.g. a non-leaf tensor attribute): probe in place
        probe = model
        restore = {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()}
    before = _tensors(probe)
    outputs: list = []
    handles = [m.register_forward_hook(
        lambda mod, _inp, out, _n=name: outputs.append((_n, mod, out, getattr(
            out, "_version", None)))) for name, m in probe.named_modules()]
    try:
        probe.train()
        with torch.enable_grad():
            probe(X_probe)
    finally:
        for h in handles:
            h.remove()
        if restore is not None:
            with torch.no_grad():
                model.load_state_dict(restore)
    state = []
    after = _tensors(probe)
    for key, (ident, version) in before.items():
        if key not in after or after[key][0] != ident or after[key][1] != version:
            name, kind = _owner(probe, key)
            what = key.split(" ", 1)
            state.append(ModuleProblem(
                name, kind,
                f"forward changes its {what[0]} {what[1]!r} (in place or by re-binding), "
                "so the model keeps information from the examples outside the noisy update",
                "compute it without state (a constant buffer, or statistics of each example "
                "alone), or update it from the privatised model after each step",
            ))
    seen: set = set()
    overwritten = []
    for name, mod, out, version in outputs:
        if version is not None and out._version != version and name not in seen:
            seen.add(name)
            overwritten.append(ModuleProblem(
                name, type(mod).__name__,
                "its output is overwritten in place by a later operation, which per-example "
                "clipping from layer outputs reads (wrong gradients)",
                "use the out-of-place form in the next operation (x = x.relu() instead of "
                "x.relu_(), inplace=False, x = x + y instead of x += y)",
            ))
    return ProbeReport(state=state, overwritten=overwritten)
