"""torch for the ensemble package: the import, generators from seeds, device and dtype checks.

torch is imported through :func:`pacpriv._optional.import_torch` (an ImportError naming the
fix when it is missing); ``import pacpriv`` never imports this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pacpriv._optional import import_torch
from pacpriv._random import torch_generator

if TYPE_CHECKING:
    import torch
else:
    torch = import_torch("pacpriv.ensemble")

__all__ = ["resolve_device", "resolve_dtype", "torch", "torch_generator"]

_DTYPES = {"float32": "float32", "float64": "float64"}


def resolve_device(device: str | torch.device) -> torch.device:
    """``"cpu"``, ``"cuda"`` or ``"cuda:i"`` as a :class:`torch.device`, checked to exist.

    Raises
    ------
    TypeError
        If ``device`` is neither a string nor a ``torch.device``.
    ValueError
        If it is another kind of device, or CUDA is asked for but unavailable (a CPU build of
        torch, or no visible GPU), or the index is out of range.
    """
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"`device` must be 'cpu', 'cuda' or a torch.device; got "
                        f"{type(device).__name__}.")
    try:
        dev = torch.device(device)
    except RuntimeError as err:
        raise ValueError(f"`device` must be 'cpu' or 'cuda[:index]'; got {device!r}.") from err
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise ValueError(f"`device` must be 'cpu' or 'cuda[:index]'; got {device!r}.")
    if not torch.cuda.is_available():
        raise ValueError(f"`device` is {device!r} but CUDA is unavailable "
                         "(torch.cuda.is_available() is False: a CPU build of torch or no "
                         "visible GPU); use device='cpu'.")
    count = torch.cuda.device_count()
    index = 0 if dev.index is None else dev.index
    if index >= count:
        raise ValueError(f"`device` is {device!r} but only {count} CUDA device(s) are visible.")
    return torch.device("cuda", index)


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """``"float32"`` (the default everywhere: no mixed precision) or ``"float64"``.

    Raises
    ------
    ValueError
        If ``dtype`` is another type (half precision and bfloat16 are not supported).
    """
    if dtype in (torch.float32, torch.float64):
        return dtype  # type: ignore[return-value]
    if isinstance(dtype, str) and dtype in _DTYPES:
        return getattr(torch, _DTYPES[dtype])
    raise ValueError(f"`dtype` must be 'float32' or 'float64'; got {dtype!r}.")
