"""Checks of a DP-SGD run that are not the step itself (issue 35, F1 and F14): the public
normaliser, an optimizer that holds the trainable parameters, and a run that changed nothing.

torch is imported inside the one check that needs it.
"""

from __future__ import annotations

from typing import Any

from pacpriv._validation import check_class_labels, check_int
from pacpriv.dpsgd.sampling import RandomAllocation
from pacpriv.dpsgd.spec import DPSGDSpec

__all__ = ["NoOpTrainingError", "check_changed", "check_class_targets", "check_optimizer_holds",
           "check_training_records", "public_size"]


class NoOpTrainingError(RuntimeError):
    """A private training run changed none of the model's trainable parameters: privacy was
    spent (noise drawn, steps taken) for a model that did not learn -- frozen or detached
    parameters, or an optimizer that does not hold them (issue 35, F14)."""


def check_optimizer_holds(opt: Any, named) -> None:
    """Refuse, before any step, an optimizer that updates none of the trainable parameters."""
    held = {id(p) for group in opt.param_groups for p in group["params"]}
    if not any(id(p) in held for _, p in named):
        raise ValueError("`optimizer` holds none of the model's trainable parameters: DP-SGD "
                         "would spend privacy without changing the model; build it from "
                         "model.parameters().")


def check_changed(before: dict, named, sigma: float, steps: int) -> None:
    """Raise :class:`NoOpTrainingError` if a private run left every trainable parameter as it
    was (bit for bit)."""
    if sigma <= 0 or steps == 0:
        return
    import torch

    if all(torch.equal(before[name], p.detach()) for name, p in named):
        raise NoOpTrainingError(
            f"DP-SGD took {steps} noisy steps but no trainable parameter changed: privacy was "
            "spent for nothing. Check for parameters that are frozen or detached in forward, a "
            "learning rate of 0, or an optimizer that does not hold them.")


def public_size(dataset_size, spec: Any, n: int) -> int:
    """The record count of the divisor ``k·n/t``: a public number the caller declares
    (``dataset_size=`` or ``spec.dataset_size``), so that neighbouring datasets (n and n − 1
    records) train with the same normaliser bit for bit; else the number of records passed."""
    declared = None if spec is None else spec.dataset_size
    if dataset_size is not None:
        size = check_int(dataset_size, "dataset_size", low=1)
        if declared is not None and declared != size:
            raise ValueError(f"`dataset_size`={size} differs from spec.dataset_size="
                             f"{declared}; give one.")
        declared = size
    return n if declared is None else int(declared)


_ALLOCATION_NAMES = ("random_allocation", "k_of_t", "balls_in_bins")


def _allocation_k(allocation, spec: DPSGDSpec | None, steps: int) -> int:
    """``k`` of the batch sampler from ``allocation`` and ``spec`` (one source of truth)."""
    spec_k = 1 if spec is None else spec.k
    if allocation is None or (isinstance(allocation, str) and allocation in _ALLOCATION_NAMES):
        allocation = RandomAllocation(spec_k)
    elif isinstance(allocation, str):
        raise ValueError(f"`allocation` must be a RandomAllocation or one of "
                         f"{list(_ALLOCATION_NAMES)}; got {allocation!r}.")
    if not isinstance(allocation, RandomAllocation):
        raise TypeError("`allocation` must be a RandomAllocation, a string shorthand or None; "
                        f"got {type(allocation).__name__}.")
    if spec is not None and spec.k not in (1, allocation.k):
        raise TypeError(f"pass k either in `spec` (k={spec.k}) or in `allocation` "
                        f"(k={allocation.k}), not both.")
    allocation.check(steps)
    return allocation.k


def check_class_targets(loss_fn: Any, y: Any, where: str, purpose: str) -> None:
    """Refuse, before any step, targets that are not class labels (continuous values, or about
    one record per class) for a classification loss (``CrossEntropyLoss``, ``NLLLoss`` or their
    functional forms): :func:`pacpriv._validation.check_class_labels`. Other losses (e.g. a
    regression's ``MSELoss``), targets not in memory (``y`` None) and 2-D targets pass."""
    import torch

    if y is None or not (isinstance(loss_fn, (torch.nn.CrossEntropyLoss, torch.nn.NLLLoss))
                         or loss_fn in (torch.nn.functional.cross_entropy,
                                        torch.nn.functional.nll_loss)):
        return
    targets = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else y
    check_class_labels(targets, where, purpose)


def check_training_records(records: Any, loss_fn: Any) -> int:
    """The number of records of :func:`pacpriv.dpsgd.train_dpsgd`'s ``(X, y)``: at least one,
    and class labels for a classification loss (:func:`check_class_targets`)."""
    n = len(records)
    if n == 0:
        raise ValueError("`X` must contain at least one record; got 0.")
    check_class_targets(loss_fn, records.y, "`y`", "train_dpsgd (classification loss)")
    return n


def warn_sparse_batches(n_records: int, k: int, steps_per_epoch: int, where: str | None) -> None:
    """Warn (:class:`~pacpriv.exceptions.SparseBatchWarning`) when the expected batch
    ``k·n/t`` of random allocation is below one record: most steps are then empty (pure
    noise); the privacy bound is unaffected. ``where`` (the caller's name) None: no warning
    (internal callers that choose the settings themselves)."""
    expected = k * n_records / steps_per_epoch
    if where is None or expected >= 1.0:
        return
    import warnings

    from pacpriv.exceptions import SparseBatchWarning

    empty = (1.0 - min(k, steps_per_epoch) / steps_per_epoch) ** n_records
    warnings.warn(
        f"{where}: steps_per_epoch {steps_per_epoch} is above the {k * n_records} record "
        f"use(s) per epoch (k = {k} × {n_records} record(s)): the expected batch is "
        f"{expected:.3g} record(s) and about {100 * empty:.0f}% of the steps hold no record "
        f"(each adds pure noise). The privacy bound holds; for useful training use "
        f"steps_per_epoch <= {max(1, k * n_records)}.",
        SparseBatchWarning, stacklevel=3)
