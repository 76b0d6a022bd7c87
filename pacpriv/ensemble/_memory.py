"""Memory bound of the ensemble: a per-model estimate and the chunk of models that fits.

The model axis is cut into chunks of ``chunk_size`` models trained together; only one chunk's
working set is alive at a time (plus the K trained parameter vectors). The estimate is
deliberately generous (a factor 3 on activations, 5 parameter-sized temporaries), so a chunk
chosen from it stays within the limit on the CPU; on a GPU the caching allocator adds its own
slack, hence the default of a quarter of the free memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pacpriv.ensemble._torch import torch

__all__ = [
    "DEFAULT_MEMORY_FRACTION",
    "MemoryEstimate",
    "activation_numel",
    "available_memory",
    "choose_chunk_size",
]

#: Default memory limit: this fraction of the available RAM (CPU) or free GPU memory.
DEFAULT_MEMORY_FRACTION = 0.25


def available_memory(device: torch.device) -> int:
    """Bytes available now: free GPU memory (``torch.cuda.mem_get_info``) or available RAM.

    RAM comes from ``psutil.virtual_memory().available`` when psutil is installed, else from
    ``os.sysconf`` (free physical pages, a lower figure).
    """
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is present almost everywhere
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    return int(psutil.virtual_memory().available)


def activation_numel(template: torch.nn.Module, x_example: torch.Tensor) -> int:
    """Elements of all module outputs for one example (forward hooks on one forward pass).

    Parameters
    ----------
    template : torch.nn.Module
    x_example : torch.Tensor of shape (1, ...)
        One input row.

    Returns
    -------
    int
        Sum of the output sizes of every submodule (containers included, an overestimate).
    """
    total = [0]

    def hook(_module, _inputs, output) -> None:
        for t in output if isinstance(output, (tuple, list)) else (output,):
            if isinstance(t, torch.Tensor):
                total[0] += t.numel()

    handles = [m.register_forward_hook(hook) for m in template.modules()]
    try:
        with torch.no_grad():
            template(x_example)
    finally:
        for h in handles:
            h.remove()
    return max(total[0], 1)


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes one model needs while it trains (an upper estimate).

    Attributes
    ----------
    n_parameters : int
        Trainable scalars ``d`` of one model.
    batch_length : int
        Padded rows of the largest batch expected.
    bytes_per_model : int
        ``itemsize·[(5 + n_state)·d + L·(input + 3·activations + 1) + 2·L·d·clip] + 16·L``:
        parameters, gradients, optimiser state and update temporaries; the batch's inputs,
        weights and indices; saved activations and their gradients; with clipping the
        per-example gradients and their scaled copy.
    """

    n_parameters: int
    batch_length: int
    bytes_per_model: int

    @classmethod
    def of(cls, *, n_parameters: int, n_state: int, batch_length: int, input_numel: int,
           activation_numel: int, itemsize: int, per_example_gradients: bool) -> MemoryEstimate:
        """Estimate from the model's sizes (see ``bytes_per_model``)."""
        d, L = n_parameters, max(batch_length, 1)
        scalars = (5 + n_state) * d + L * (input_numel + 3 * activation_numel + 1)
        if per_example_gradients:
            scalars += 2 * L * d
        return cls(n_parameters=d, batch_length=L,
                   bytes_per_model=int(itemsize * scalars + 16 * L))


def choose_chunk_size(estimate: MemoryEstimate, *, memory_limit: int, n_models: int) -> int:
    """Most models per chunk within ``memory_limit`` bytes: ``min(K, ⌊limit / per model⌋)``.

    Raises
    ------
    ValueError
        If a single model's estimate exceeds ``memory_limit`` (the message gives both in MiB).
    """
    per_model = estimate.bytes_per_model
    if per_model > memory_limit:
        raise ValueError(
            f"one model needs about {per_model / 2**20:.1f} MiB while training (d = "
            f"{estimate.n_parameters} parameters, batches of up to {estimate.batch_length} "
            f"rows) but `memory_limit` is {memory_limit / 2**20:.1f} MiB: raise memory_limit "
            "or use smaller batches.")
    return max(1, min(n_models, memory_limit // per_model))
