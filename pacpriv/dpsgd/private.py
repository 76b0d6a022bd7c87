"""Your own torch model, optimizer and training loop, made private in one call (torch).

``make_private(module, optimizer, data_loader, ...)`` is pacpriv's answer to opacus'
``PrivacyEngine.make_private``: it returns a :class:`PrivateTraining` whose ``data_loader``
yields random-allocation batches and whose ``step(x, y)`` replaces ``loss.backward();
optimizer.step()`` in the user's loop::

    private = make_private(model, optimizer, loader, loss_fn=loss_fn, target_epsilon=3.0,
                           delta=1e-5, max_grad_norm=1.0, epochs=5)
    for epoch in range(5):
        for x, y in private.data_loader:
            private.step(x, y)            # per-sample clip, noise, optimizer.step()
    private.get_epsilon(1e-5), private.membership_inference_accuracy_bound()

Every piece is the trainer's (:mod:`pacpriv.dpsgd.trainer`): the batches come from
:func:`~pacpriv.dpsgd.allocation.random_allocation` on a generator of the allocation stream,
the clipped sums from the single-backward path for Linear / convolutional models
(:mod:`pacpriv.dpsgd._ghost`) or ``torch.func`` per-sample gradients otherwise, the noise from
the float64 noisy average of :mod:`pacpriv.dpsgd._noise`, and the refusals of
:mod:`pacpriv.dpsgd.validate` run before anything else. With the same ``rng`` a
``make_private`` loop and :func:`~pacpriv.dpsgd.trainer.train_dpsgd` produce the same
parameters (tested).

The accountant advances with every step: the released gradients are a post-processing of the
epochs (allocations) that at least one step used, so the certified bounds of that many epochs
hold; an epoch left early counts whole.

This module imports torch; it is never imported by ``import pacpriv``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from pacpriv._optional import import_torch
from pacpriv._random import (
    ALLOCATION_STREAM,
    GRADIENT_NOISE_STREAM,
    RNGLike,
    as_seed_sequence,
    trial_seed,
)
from pacpriv._validation import check_int, check_real
from pacpriv.dpsgd._ghost import LinearTape, linear_layers
from pacpriv.dpsgd._noise import check_noise_range, check_precision
from pacpriv.dpsgd._records import Records, as_records
from pacpriv.dpsgd._trainer_checks import check_class_targets, warn_sparse_batches
from pacpriv.dpsgd.allocation import random_allocation, torch_generator
from pacpriv.dpsgd.sampling import MAX_STEP_COUNT
from pacpriv.dpsgd.spec import DPSGDSpec
from pacpriv.dpsgd.targets import noise_for_target
from pacpriv.dpsgd.trainer import LossFn, _private_step, _refuse_probed
from pacpriv.dpsgd.validate import validate_model
from pacpriv.exceptions import BudgetExceededError

torch = import_torch("pacpriv.dpsgd.private")

__all__ = ["PrivateDataLoader", "PrivateTraining", "make_private"]


def _is_batch(given, yielded) -> bool:
    """``given`` is ``yielded`` (the loader's object), or a ``.to(device/dtype)`` copy of it:
    the same shape and equal values once ``yielded`` is converted the same way."""
    if given is yielded:
        return True
    if not (isinstance(given, torch.Tensor) and isinstance(yielded, torch.Tensor)):
        return False
    if given.shape != yielded.shape:
        return False
    with torch.no_grad():
        return bool(torch.equal(yielded.to(device=given.device, dtype=given.dtype),
                                given.detach()))


class PrivateDataLoader:
    """Random-allocation batches ``(x, y)``: one ``for`` loop over it is one epoch.

    Every record is in exactly one of the ``steps_per_epoch`` batches of an epoch, each batch
    chosen uniformly and secretly (a batch may be empty: ``x`` then has 0 rows). After
    ``epochs`` passes iterating raises :class:`~pacpriv.exceptions.BudgetExceededError`.
    """

    def __init__(self, records: Records, *, steps_per_epoch: int, epochs: int,
                 generator: Any, owner: PrivateTraining) -> None:
        self._records, self._generator, self._owner = records, generator, owner
        self.steps_per_epoch, self.epochs = steps_per_epoch, epochs
        self.epochs_drawn = 0

    def __len__(self) -> int:
        return self.steps_per_epoch

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        if self.epochs_drawn >= self.epochs:
            raise BudgetExceededError(
                f"the privacy budget covers {self.epochs} epoch(s) and all were drawn; make "
                "a new make_private call (with its own budget) to train further.")
        self.epochs_drawn += 1
        batches = random_allocation(len(self._records), steps_per_epoch=self.steps_per_epoch,
                                    generator=self._generator)
        for idx in batches:
            self._owner._pending = int(idx.numel())
            self._owner._epoch = self.epochs_drawn
            batch = self._records.batch(idx)
            self._owner._batch = batch
            yield batch
            if self._owner._pending is not None:
                raise RuntimeError(
                    "every batch of a private data loader must be used by exactly one "
                    "private.step(x, y) before the next one is drawn (the accounting counts "
                    "each step of the allocation).")


class PrivateTraining:
    """What :func:`make_private` returns: the loader to iterate and the private step.

    Attributes
    ----------
    module : torch.nn.Module
        The user's model (trained in place).
    optimizer : torch.optim.Optimizer
        The user's optimizer; call :meth:`step`, never ``optimizer.step()`` directly (that
        would apply whatever non-private gradient ``.grad`` holds).
    data_loader : PrivateDataLoader
    noise_multiplier, max_grad_norm : float
    steps_per_epoch, epochs, n_records : int
    targets : dict
        ``target_accuracy``, ``target_epsilon`` and ``delta`` σ was calibrated to (None where
        not given).
    steps_taken : int
        Private steps taken so far.
    """

    def __init__(self, module, optimizer, loss_fn, records: Records, *, sigma: float, C: float,
                 steps_per_epoch: int, epochs: int, targets: dict, rng: RNGLike) -> None:
        self.module, self.optimizer, self.loss_fn = module, optimizer, loss_fn
        self.noise_multiplier, self.max_grad_norm = sigma, C
        self.steps_per_epoch, self.epochs = steps_per_epoch, epochs
        self.n_records, self.targets = len(records), targets
        self.steps_taken = 0
        self._pending: int | None = None
        self._batch: tuple | None = None  # the (x, y) the loader yielded for this step
        self._epoch = 0  # the allocation (epoch) the waiting batch comes from
        self._epochs_used: set[int] = set()
        self._expected = len(records) / steps_per_epoch
        root = as_seed_sequence(rng)  # rng=None: OS entropy, never stored
        self.data_loader = PrivateDataLoader(
            records, steps_per_epoch=steps_per_epoch, epochs=epochs, owner=self,
            generator=torch_generator(trial_seed(root, ALLOCATION_STREAM)))
        self._noise = torch_generator(trial_seed(root, GRADIENT_NOISE_STREAM))
        layers = linear_layers(module)
        self._tape = LinearTape(layers, module) if layers else None
        self._named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]

    def step(self, x, y) -> float:
        """One DP-SGD step on the batch the data loader just yielded.

        Clips every example's gradient of ``loss_fn(module(x_i), y_i)`` to
        ``max_grad_norm``, sums, adds ``N(0, σ²C²)`` per coordinate (float64), divides by the
        expected batch size ``n/t``, writes it to ``.grad`` and calls ``optimizer.step()``.
        ``x`` and ``y`` must be the objects the loader yielded for this step, or copies of
        them moved or cast with ``.to(...)`` (same rows, equal values after the same
        conversion): the accounting covers only the random-allocation batches, so any other
        tensors are refused.

        Returns
        -------
        float
            The summed per-example loss of the batch (before the update; 0 for an empty one).

        Raises
        ------
        RuntimeError
            If no batch is waiting (each yielded batch takes exactly one step), or ``x`` has
            a different number of rows than it, or ``x`` / ``y`` are not the loader's batch
            (nor a ``.to(...)`` copy of it).
        FloatingPointError
            If the noisy gradient is not finite (the update is not applied).
        """
        if self._pending is None:
            raise RuntimeError("private.step(x, y) must follow one batch of "
                               "private.data_loader (each batch takes exactly one step).")
        if int(x.shape[0]) != self._pending or int(y.shape[0]) != self._pending:
            raise RuntimeError(f"private.step got {int(x.shape[0])} rows; the batch drawn "
                               f"has {self._pending} (pass the loader's batch).")
        assert self._batch is not None
        if not (_is_batch(x, self._batch[0]) and _is_batch(y, self._batch[1])):
            raise RuntimeError("private.step(x, y) takes the x, y that private.data_loader "
                               "yielded for this step (or their .to(device/dtype) copies); "
                               "got other tensors, which the privacy accounting does not "
                               "cover.")
        tape = self._tape
        if tape is not None:
            tape.__enter__()
        try:
            grads, _, loss = _private_step(
                self.module, self.loss_fn, x, y, tape, C=self.max_grad_norm,
                sigma=self.noise_multiplier, expected=self._expected, generator=self._noise,
                step=self.steps_taken)
        finally:
            if tape is not None:
                tape.__exit__(None, None, None)
        for name, p in self._named:
            p.grad = grads[name].detach()
        self.optimizer.step()
        for _, p in self._named:
            p.grad = None  # the noisy gradient is released; nothing else stays in .grad
        self._pending, self._batch = None, None
        self._epochs_used.add(self._epoch)
        self.steps_taken += 1
        return float(loss)

    @property
    def epochs_started(self) -> int:
        """Epochs (allocations drawn by the loader) with at least one step taken: the steps
        so far are a post-processing of those epochs, so their certified bounds cover them
        (an epoch left early still counts whole)."""
        return len(self._epochs_used)

    def spec(self) -> DPSGDSpec:
        """The steps so far as a :class:`~pacpriv.dpsgd.DPSGDSpec` (the epochs started; at
        least one)."""
        return DPSGDSpec(self.noise_multiplier, self.steps_per_epoch,
                         max(self.epochs_started, 1), self.n_records, self.max_grad_norm)

    def get_epsilon(self, delta: float) -> float:
        """ε at ``delta`` of the steps so far (certified random-allocation PLD, add or remove
        one record; 0 before the first step), as opacus' ``get_epsilon(delta)``."""
        if self.steps_taken == 0:
            check_real(delta, "delta", low=0.0, high=1.0, low_inclusive=False,
                       high_inclusive=False)
            return 0.0
        return self.spec().get_epsilon(delta)

    def membership_inference_accuracy_bound(self, method: str = "exact") -> float:
        """Certified upper bound on the membership-inference accuracy of the steps so far
        (equal priors, worst case over datasets); ½ before any step.

        Parameters
        ----------
        method : {"exact", "chi-square"}, default "exact"
            ``"exact"``: the upper end of
            :func:`~pacpriv.dpsgd.exact_membership_inference_accuracy` (the tightest
            certified number; seconds at most). ``"chi-square"``: the closed form
            ``1/2 + 1/4·sqrt((1+(e^{1/σ²}-1)/M)^E - 1)`` of
            :func:`pacpriv.dpsgd.membership_inference_accuracy_bound`, which is what
            :meth:`DPSGDSpec.membership_inference_accuracy_bound
            <pacpriv.dpsgd.DPSGDSpec.membership_inference_accuracy_bound>` returns (never
            below the exact one).

        Raises
        ------
        ValueError
            If ``method`` is not one of the two.
        """
        if method not in ("exact", "chi-square"):
            raise ValueError(f"`method` must be 'exact' or 'chi-square'; got {method!r}.")
        if self.steps_taken == 0:
            return 0.5
        if method == "chi-square":
            return float(self.spec().membership_inference_accuracy_bound().accuracy)
        return _exact_upper(self.noise_multiplier, self.steps_per_epoch, self.epochs_started)


@functools.lru_cache(maxsize=64)
def _exact_upper(sigma: float, steps: int, epochs: int) -> float:
    from pacpriv.dpsgd.exact import exact_membership_inference_accuracy

    return float(exact_membership_inference_accuracy(sigma, steps_per_epoch=steps,
                                                     epochs=epochs).upper)


def make_private(
    module,
    optimizer,
    data_loader,
    *,
    loss_fn: LossFn,
    max_grad_norm: float,
    epochs: int,
    noise_multiplier: float | None = None,
    target_accuracy: float | None = None,
    target_epsilon: float | None = None,
    delta: float | None = None,
    steps_per_epoch: int | None = None,
    rng: RNGLike = None,
) -> PrivateTraining:
    """Make the user's module, optimizer and data loader train with DP-SGD in their own loop.

    Parameters
    ----------
    module : torch.nn.Module
        The model (float32 or float64; no cross-example layers such as BatchNorm).
    optimizer : torch.optim.Optimizer
        Over trainable parameters of ``module`` only; it receives the noisy gradient.
    data_loader : torch.utils.data.DataLoader or map-style Dataset
        The training records, ``dataset[i] -> (x, y)``. Only its dataset is used: batches are
        re-drawn by random allocation (as opacus replaces the sampler by Poisson sampling).
    loss_fn : callable
        ``loss_fn(output, target) -> Tensor``, evaluated on one example at a time (its
        reduction does not matter); needed for the per-example gradients.
    max_grad_norm : float
        Clipping norm C > 0 (joint L2 norm over all trainable parameters).
    epochs : int
        ``E`` in [1, 2**53] (as ``steps_per_epoch``: the accountants count in float64): the
        budget; the loader yields ``E`` epochs, then refuses.
    noise_multiplier : float, optional
        σ > 0. Exactly one of ``noise_multiplier``, ``target_accuracy``, ``target_epsilon``.
    target_accuracy : float, optional
        Membership-inference accuracy in (½, 1): σ is the smallest whose certified exact
        accuracy after ``E`` epochs is at most it
        (:func:`~pacpriv.dpsgd.calibrate_noise_multiplier`).
    target_epsilon, delta : float, optional
        ε in (0, 50] at δ in (0, 1): σ from :func:`~pacpriv.dpsgd.calibrate_epsilon`
        (random allocation, certified).
    steps_per_epoch : int, optional
        ``t ≥ 1`` batches per epoch; default ``len(data_loader)`` (required for a Dataset).
    rng : None, int, SeedSequence or Generator
        ``None`` (deployment): fresh OS entropy for the allocation and the noise, never
        stored. A seed makes both reproducible (tests only: whoever knows it can subtract
        the noise).

    Returns
    -------
    PrivateTraining
        ``data_loader`` to iterate, ``step(x, y)`` per batch, ``get_epsilon(delta)`` and
        ``membership_inference_accuracy_bound()`` of the steps so far.

    Raises
    ------
    TypeError
        If ``module``, ``optimizer``, ``data_loader`` or ``loss_fn`` has the wrong type, or
        the optimizer holds parameters outside ``module``.
    ValueError
        Before anything runs: a setting out of range, no or several targets, float16 /
        bfloat16 parameters, a clipping norm that overflows, or modules that DP-SGD cannot
        train (:func:`~pacpriv.dpsgd.trainer.validate_model`, a probe forward pass on a
        copy: running statistics, in-place outputs), each named with a fix.

    References
    ----------
    .. [1] M. Abadi et al., Deep Learning with Differential Privacy, CCS 2016, Algorithm 1.
    .. [2] V. Feldman, M. Shenfeld, Privacy Amplification by Random Allocation, 2025.
    """
    dataset = _checked_inputs(module, optimizer, data_loader, loss_fn)
    if steps_per_epoch is None:
        if dataset is data_loader:
            raise TypeError("give `steps_per_epoch` when `data_loader` is a Dataset.")
        steps_per_epoch = len(data_loader)
        if steps_per_epoch < 1:  # not "`steps_per_epoch` ... got 0", never passed (#420)
            empty = len(dataset) == 0 if hasattr(dataset, "__len__") else False
            raise ValueError(
                "`data_loader` has no batch (len(data_loader) = 0, the default of "
                "`steps_per_epoch`): " + ("its dataset is empty; give at least one record."
                                          if empty else "its batch_size exceeds its records "
                                          "with drop_last=True; pass `steps_per_epoch` "
                                          "(batches per epoch, >= 1)."))
    t = check_int(steps_per_epoch, "steps_per_epoch", low=1, high=MAX_STEP_COUNT)
    e = check_int(epochs, "epochs", low=1, high=MAX_STEP_COUNT)
    C = check_real(max_grad_norm, "max_grad_norm", low=0.0, low_inclusive=False)
    if noise_multiplier is not None:
        check_real(noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)
    validate_model(module)
    check_precision(module, allow_low_precision=False)
    records = as_records(module, dataset, None)
    if len(records) == 0:
        raise ValueError("`data_loader` must hold at least one record; got 0.")
    labels = records.y
    if labels is None and isinstance(dataset, torch.utils.data.TensorDataset):
        labels = dataset.tensors[-1] if len(dataset.tensors) >= 2 else None  # (x, y) pairs
    check_class_targets(loss_fn, labels, "the label tensor of `data_loader`",
                        "make_private (classification loss)")
    dtype = next(p for p in module.parameters() if p.requires_grad).dtype
    layers = linear_layers(module)
    _refuse_probed(module, records, ghost=bool(layers))
    sigma, targets = noise_for_target(
        noise_multiplier=noise_multiplier, target_accuracy=target_accuracy,
        target_epsilon=target_epsilon, delta=delta, steps_per_epoch=t, epochs=e)
    check_noise_range(noise_multiplier=sigma, max_grad_norm=C, n_records=len(records),
                      expected_batch_size=len(records) / t, dtype=dtype)
    warn_sparse_batches(len(records), 1, t, "make_private")
    return PrivateTraining(module, optimizer, loss_fn, records, sigma=sigma, C=C,
                           steps_per_epoch=t, epochs=e, targets=targets, rng=rng)


def _checked_inputs(module, optimizer, data_loader, loss_fn):
    """The dataset of ``data_loader``, after the type checks (before any work)."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"`module` must be a torch.nn.Module; got {type(module).__name__}.")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("`optimizer` must be a torch.optim.Optimizer; got "
                        f"{type(optimizer).__name__}.")
    if not callable(loss_fn):
        raise TypeError(f"`loss_fn` must be callable; got {type(loss_fn).__name__}.")
    trainable = {id(p) for p in module.parameters() if p.requires_grad}
    if not trainable:
        raise ValueError("`module` must have at least one trainable parameter.")
    outside = sum(id(p) not in trainable for g in optimizer.param_groups for p in g["params"])
    if outside:
        raise TypeError(f"`optimizer` holds {outside} parameter(s) that are not trainable "
                        "parameters of `module`: their updates would not be private. Build "
                        "it over module.parameters().")
    if isinstance(data_loader, torch.utils.data.DataLoader):
        dataset = data_loader.dataset
    elif isinstance(data_loader, torch.utils.data.Dataset):
        dataset = data_loader
    else:
        raise TypeError("`data_loader` must be a torch DataLoader or a map-style Dataset; got "
                        f"{type(data_loader).__name__}.")
    if isinstance(dataset, torch.utils.data.IterableDataset) or not hasattr(dataset, "__len__"):
        raise TypeError("`data_loader` must read a map-style Dataset (dataset[i] -> (x, y)); "
                        "an iterable-style one cannot be allocated to batches.")
    return dataset
