"""DP-SGD with random allocation for any ``torch.nn.Module`` and loss (torch).

One step of :func:`train_dpsgd` on the batch B_t chosen by random allocation
(:mod:`pacpriv.dpsgd.allocation`) is

    g_t = ( Σ_{i ∈ B_t} clip_C(∇ℓ(θ; x_i, y_i)) + N(0, σ² C² I) ) / (n / M),
    θ <- optimizer.step(θ, g_t),

with clip_C(g) = g · min(1, C / (‖g‖₂ + 10⁻⁶)) over all trainable parameters jointly (as in
opacus), σ = ``noise_multiplier``, C = ``max_grad_norm``, n records and M = ``steps_per_epoch``.
The division is by the *expected* batch size n/M, never the realised ``|B_t|`` (which depends on
the allocation and would leak it); empty steps still add noise and take a step. ``n`` should be
a public constant the caller declares (``dataset_size=``), so that neighbouring datasets share
the normaliser. A private run that changes no trainable parameter raises
:class:`NoOpTrainingError` (privacy spent for nothing). This is the
mechanism whose membership-inference accuracy is bounded in [1]_.

Two exact ways to the clipped sum, chosen per model (opacus is not needed at runtime):

* models of ``nn.Linear``, ``nn.Conv1d`` / ``nn.Conv2d`` layers, element-wise activations,
  pooling and ``nn.Sequential``: one batched forward and one backward to the layer outputs;
  per-example norms from each layer's inputs and backprops (``‖g_iᵀ a_i‖² = ‖g_i‖²‖a_i‖²``
  for Linear: "ghost clipping", Goodfellow 2015, arXiv:1510.01799; Li et al., ICLR 2022, §4;
  unfolded patches for convolutions), then the clipped sums (``pacpriv.dpsgd._ghost``);
* any other model: per-sample gradients with ``torch.func`` (``vmap`` of ``grad``).

Both equal the per-example loop up to float round-off. :func:`validate_model` rejects models
that mix examples (BatchNorm...) before any work.

This module imports torch; it is never imported by ``import pacpriv``.

References
----------
.. [1] Membership-inference accuracy bound for DP-SGD with random allocation (RA-MIA,
   CWI / VU Amsterdam), Sec. 3.
.. [2] M. Abadi et al., Deep Learning with Differential Privacy, CCS 2016, Algorithm 1.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from pacpriv._optional import import_torch
from pacpriv._random import (
    ALLOCATION_STREAM,
    GRADIENT_NOISE_STREAM,
    RNGLike,
    as_seed_sequence,
    seed_to_dict,
    trial_seed,
)
from pacpriv._validation import check_int, check_real, keyword_fields
from pacpriv.dpsgd._ghost import LinearTape, batched_losses, linear_layers
from pacpriv.dpsgd._noise import arithmetic, check_noise_range, check_precision, noisy_average
from pacpriv.dpsgd._records import as_records, as_tensors
from pacpriv.dpsgd._trainer_checks import (
    NoOpTrainingError,
    _allocation_k,
    check_changed,
    check_optimizer_holds,
    check_training_records,
    public_size,
    warn_sparse_batches,
)
from pacpriv.dpsgd._training_result import TrainingResult
from pacpriv.dpsgd.allocation import random_allocation, secure_generator, torch_generator
from pacpriv.dpsgd.bounds import membership_inference_accuracy_bound
from pacpriv.dpsgd.sampling import MAX_STEP_COUNT, RandomAllocation
from pacpriv.dpsgd.spec import DPSGDSpec, spec_triple, with_max_grad_norm
from pacpriv.dpsgd.targets import settings_target
from pacpriv.dpsgd.validate import ModuleProblem, inplace_modules, probe_model, validate_model

torch = import_torch("pacpriv.dpsgd.trainer")
functional_call, grad_and_value, vmap = (
    torch.func.functional_call, torch.func.grad_and_value, torch.func.vmap
)

__all__ = [
    "ModuleProblem",
    "NoOpTrainingError",
    "TrainingResult",
    "model_losses",
    "per_sample_gradients",
    "privatize_gradients",
    "train_dpsgd",
    "validate_model",
]

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
OptimizerArg = None | torch.optim.Optimizer | Callable[..., torch.optim.Optimizer]
_CLIP_EPS = 1e-6  # opacus' stabiliser: clipped norms are strictly below C


def _trainable(model: torch.nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Detached trainable parameters for ``functional_call``, and each entry's canonical name.

    A parameter shared by several *modules* gets one entry per owning module (its partial
    gradients are summed under its first name, as in ``named_parameters()``); a module
    registered under several names gets one entry. ``tie_weights=True`` is avoided: it restores
    a module registered twice with the detached tensor instead of its ``Parameter``.
    """
    modules = dict(model.named_modules(remove_duplicate=False))
    params: dict = {}
    canonical: dict = {}
    first: dict = {}
    seen: set = set()
    for k, p in model.named_parameters(remove_duplicate=False):
        owner, _, attr = k.rpartition(".")
        key = (id(modules[owner]), attr)
        if not p.requires_grad or key in seen:
            continue
        seen.add(key)
        params[k] = p.detach()
        canonical[k] = first.setdefault(id(p), k)
    return params, canonical


def _single_loss(loss_fn: LossFn, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    # ``out`` already has a batch axis of length one; "mean", "sum" and "none" reductions
    # all give the example's loss ℓ_i.
    return loss_fn(out, target.unsqueeze(0)).sum()


def per_sample_gradients(
    model: torch.nn.Module, loss_fn: LossFn, X: torch.Tensor, y: torch.Tensor
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Per-example gradients of ``loss_fn(model(x_i), y_i)`` via ``torch.func``.

    Parameters
    ----------
    model : torch.nn.Module
        Any module without cross-example layers (no BatchNorm); dropout is allowed
        (``vmap(randomness="different")``).
    loss_fn : callable
        ``loss_fn(output, target) -> Tensor``; evaluated on batches of size one, so any
        reduction works.
    X : torch.Tensor of shape (b, ...)
    y : torch.Tensor of shape (b, ...)
        Batch; ``b = 0`` is allowed (empty step).

    Returns
    -------
    grads : dict of str to torch.Tensor
        For every trainable parameter ``name``, a tensor of shape ``(b, *param.shape)``.
    losses : torch.Tensor of shape (b,)
        Per-example losses at the current parameters.

    Raises
    ------
    ValueError
        If the model has modules that mix examples or that ``torch.func`` cannot batch
        (:func:`validate_model`).
    """
    validate_model(model)
    params, canonical = _trainable(model)
    b = X.shape[0]
    if b == 0:
        zeros = {k: p.new_zeros((0, *p.shape)) for k, p in params.items() if canonical[k] == k}
        return zeros, next(iter(params.values())).new_zeros(0)

    def loss_one(p, x, t):
        out = functional_call(model, p, (x.unsqueeze(0),), tie_weights=False)
        return _single_loss(loss_fn, out, t)

    fn = vmap(grad_and_value(loss_one), in_dims=(None, 0, 0), randomness="different")
    grads, losses = fn(params, X, y)
    merged: dict[str, torch.Tensor] = {}
    for k, g in grads.items():  # a shared parameter's gradient sums over its owners
        c = canonical[k]
        merged[c] = g if c not in merged else merged[c] + g
    return merged, losses.detach()


def privatize_gradients(
    per_sample: Mapping[str, torch.Tensor],
    *,
    max_grad_norm: float | None,
    noise_multiplier: float,
    expected_batch_size: float,
    generator: torch.Generator | None,
) -> tuple[dict[str, torch.Tensor], int]:
    """Clip per-sample gradients to C, sum, add N(0, σ²C²) and divide by n/M.

    Parameters
    ----------
    per_sample : mapping of str to torch.Tensor
        Per-example gradients, each of shape ``(b, *param.shape)`` (``b`` may be 0).
    max_grad_norm : float or None
        C > 0; the joint L2 norm over all tensors is clipped to at most C. ``None``: no
        clipping (then ``noise_multiplier`` must be 0).
    noise_multiplier : float
        σ >= 0.
    expected_batch_size : float
        Divisor n/M > 0 (the expected, not the realised, batch size).
    generator : torch.Generator or None
        CPU generator for the noise (required when σ > 0); noise is drawn on the CPU and
        moved to each tensor's device.

    Returns
    -------
    grads : dict of str to torch.Tensor
        Noisy averaged gradient, one tensor of shape ``param.shape`` per entry, generated in
        the iteration order of ``per_sample``.
    n_clipped : int
        Number of examples whose gradient norm exceeded C.
    """
    if noise_multiplier > 0 and (max_grad_norm is None or generator is None):
        raise ValueError("noise_multiplier > 0 requires max_grad_norm and a noise generator.")
    tensors = list(per_sample.values())
    b = tensors[0].shape[0]
    if max_grad_norm is None:
        factor = None
        n_clipped = 0
    else:  # norms, factors and the clipped sums in float64 (see pacpriv.dpsgd._noise)
        per_tensor = [
            torch.linalg.vector_norm(g.reshape(b, math.prod(g.shape[1:])), dim=1,
                                     dtype=torch.float64) for g in tensors
        ]
        norms = torch.linalg.vector_norm(torch.stack(per_tensor, dim=1), dim=1)
        factor = (max_grad_norm / (norms + _CLIP_EPS)).clamp(max=1.0)
        n_clipped = int((norms > max_grad_norm).sum())
    summed = {
        name: g.sum(0) if factor is None else torch.einsum("i,i...->...", factor,
                                                           g.to(torch.float64))
        for name, g in per_sample.items()
    }
    out = noisy_average(summed, max_grad_norm=max_grad_norm, noise_multiplier=noise_multiplier,
                        expected_batch_size=expected_batch_size, generator=generator)
    return {k: out[k].to(per_sample[k].dtype) for k in out}, n_clipped


def _per_example_losses(loss_fn: LossFn, outputs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``loss_fn`` of each example alone, shape (b,): one batched call where exact, else vmap."""
    if outputs.shape[0] == 0:
        return outputs.new_zeros(0)
    losses = batched_losses(loss_fn, outputs, y)
    if losses is not None:
        return losses
    return vmap(lambda o, t: _single_loss(loss_fn, o.unsqueeze(0), t))(outputs, y)


def _plain_step(model, loss_fn, xb, yb, expected) -> tuple[dict[str, torch.Tensor], float]:
    """Non-private gradient Σ_i ∇ℓ_i / (n/M) by batched autograd (zeros on an empty step)."""
    named = [(k, p) for k, p in model.named_parameters() if p.requires_grad]
    if xb.shape[0] == 0:
        return {k: torch.zeros_like(p) for k, p in named}, 0.0
    losses = _per_example_losses(loss_fn, model(xb), yb)
    grads = torch.autograd.grad(losses.sum() / expected, [p for _, p in named])
    return {k: g for (k, _), g in zip(named, grads, strict=True)}, float(losses.detach().sum())


def _linear_step(model, loss_fn, xb, yb, tape: LinearTape, max_grad_norm: float):
    """Clipped per-example gradient sums of a Linear / conv model in one backward (``_ghost``).

    Returns ``(sums by parameter name, n_clipped, loss sum)``, or None when the forward pass
    ran a layer twice (the caller then uses :func:`per_sample_gradients`).
    """
    named = [(k, p) for k, p in model.named_parameters() if p.requires_grad]
    if xb.shape[0] == 0:
        return {k: torch.zeros_like(p) for k, p in named}, 0, 0.0
    tape.clear()
    try:
        losses = _per_example_losses(loss_fn, model(xb), yb)
        found = tape.clipped_sums(losses.sum(), max_grad_norm=max_grad_norm, eps=_CLIP_EPS)
    finally:
        tape.clear()
    if found is None:
        return None
    sums, n_clipped = found
    summed = {k: sums[id(p)] if id(p) in sums else torch.zeros_like(p) for k, p in named}
    return summed, n_clipped, float(losses.detach().sum())


def _private_step(model, loss_fn, xb, yb, tape, *, C, sigma, expected, generator, step=None):
    """One DP-SGD gradient: clipped sum + noise (float64), over the expected batch size."""
    use_tape = tape is not None and not tape.disabled
    found = _linear_step(model, loss_fn, xb, yb, tape, C) if use_tape else None
    if found is not None:
        summed, n_clipped, loss = found
        grads = noisy_average(summed, max_grad_norm=C, noise_multiplier=sigma,
                              expected_batch_size=expected, generator=generator, step=step)
        dtypes = {k: p.dtype for k, p in model.named_parameters()}
        return {k: g.to(dtypes[k]) for k, g in grads.items()}, n_clipped, loss
    per_sample, losses = per_sample_gradients(model, loss_fn, xb, yb)
    grads, n_clipped = privatize_gradients(
        per_sample, max_grad_norm=C, noise_multiplier=sigma,
        expected_batch_size=expected, generator=generator,
    )
    return grads, n_clipped, float(losses.sum())


def _make_optimizer(optimizer: OptimizerArg, model: torch.nn.Module) -> torch.optim.Optimizer:
    if optimizer is None:
        return torch.optim.SGD(model.parameters(), lr=0.1)
    if isinstance(optimizer, torch.optim.Optimizer):
        return optimizer
    if callable(optimizer):
        built = optimizer(model.parameters())
        if isinstance(built, torch.optim.Optimizer):
            return built
    raise TypeError(
        "`optimizer` must be None, a torch.optim.Optimizer or a callable params -> Optimizer; "
        f"got {type(optimizer).__name__}."
    )


#: The DP-SGD settings :func:`train_dpsgd` takes as keywords (or in ``spec``).
TRAINER_KEYWORDS = ("noise_multiplier", "steps_per_epoch", "epochs", "max_grad_norm",
                    "allocation", "dataset_size")



def train_dpsgd(
    model: torch.nn.Module,
    loss_fn: LossFn,
    X,
    y=None,
    *,
    spec: DPSGDSpec | None = None,
    optimizer: OptimizerArg = None,
    rng: RNGLike = None,
    secure_noise: bool = False,
    allow_low_precision: bool = False,
    progress: bool = False,
    **settings: Any,
) -> TrainingResult:
    """Train ``model`` in place with DP-SGD under random allocation (k of t).

    The DP-SGD settings come either in ``spec`` (a :class:`~pacpriv.dpsgd.DPSGDSpec`, as a
    dp-accounting event describes a mechanism once for every accountant) or as the keywords
    ``noise_multiplier``, ``steps_per_epoch``, ``epochs``, ``max_grad_norm`` and
    ``allocation`` (``settings``); ``max_grad_norm`` is required unless ``spec`` gives it.
    Instead of ``noise_multiplier`` (and without ``spec``) a target may be given:
    ``target_accuracy`` (σ from :func:`~pacpriv.dpsgd.calibrate_noise_multiplier`, the
    certified exact accuracy) or ``target_epsilon`` with ``delta`` (σ from
    :func:`~pacpriv.dpsgd.calibrate_epsilon`); the result records the target.

    Parameters
    ----------
    model : torch.nn.Module
        Model with at least one trainable parameter and no cross-example layers.
    loss_fn : callable
        ``loss_fn(output, target) -> Tensor`` (e.g. ``torch.nn.CrossEntropyLoss()``), called on
        batches of one example, so its reduction does not matter.
    X : array-like, torch.Tensor of shape (n, ...), or torch.utils.data.Dataset
        Features (floating arrays are cast to the model's dtype and device), or a map-style
        Dataset whose items are pairs ``(x, y)`` (then ``y`` is None; each step's batch is
        collated with ``default_collate``).
    y : array-like or torch.Tensor of shape (n, ...), optional
        Targets (integer class labels stay integer); required unless ``X`` is a Dataset.
    noise_multiplier : float
        σ >= 0. σ = 0 gives no noise (not private).
    target_accuracy : float
        Instead of σ: a membership-inference accuracy in (½, 1) that the run's certified
        exact accuracy (``result.exact_membership_inference_accuracy().upper``) meets.
    target_epsilon, delta : float
        Instead of σ: ε in (0, 50] at δ in (0, 1) that ``result.get_epsilon(delta)`` meets.
    steps_per_epoch : int
        t >= 1 steps per epoch.
    epochs : int
        E >= 1.
    max_grad_norm : float or None
        Clipping norm C > 0. ``None`` disables clipping (requires σ = 0): plain minibatch
        training with the same random-allocation batching and the same divisor.
    optimizer : torch.optim.Optimizer, callable or None
        An optimizer over ``model.parameters()``, or a factory ``params -> Optimizer``.
        Default ``torch.optim.SGD(lr=0.1)``. It receives the privatised gradient in ``.grad``.
    rng : None, int, SeedSequence or Generator
        Seed (SPEC 7). Child 0 seeds the allocation generator, child 1 the noise generator;
        model initialisation is the caller's business. ``None`` (the default, and what a
        deployment must use) draws fresh OS entropy that is **not recorded**: the result's
        ``seed`` is None and ``randomness`` is ``"fresh OS entropy (not recorded)"``, so
        nothing returned regenerates the allocation or the noise. A caller-given ``rng``
        is recorded in ``seed`` (``randomness`` ``"caller-seeded (not for production)"``):
        it regenerates the allocation and, unless ``secure_noise``, the noise, so whoever
        holds the result, the initial model and the data can recompute the training; use
        it for tests and experiments only.
    secure_noise : bool, default False
        Reseed the noise generator from the OS CSPRNG (:mod:`secrets`) at every step. This
        protects against an adversary who learns a caller-given ``rng`` (from a log, a config
        or the result's ``seed``) and would otherwise regenerate and subtract the noise; with
        ``rng=None`` the seed is never recorded, so it adds nothing there. It does **not**
        make the noise cryptographically secure: the generator is still torch's Mersenne
        Twister. Nor does it hide the allocation, which still comes from ``rng``; the bound
        of [1]_ assumes the allocation is secret, so deploy with ``rng=None``.
    progress : bool, default False
        Show a tqdm progress bar over steps.
    spec : DPSGDSpec, optional
        Instead of ``noise_multiplier``, ``steps_per_epoch``, ``epochs`` (see
        ``spec_arguments``); its ``k`` sets the allocation and its ``dataset_size``, when
        given, the public record count of the divisor ``k·n/t`` (the guarantee treats the
        divisor as public; without a spec it is the number of records passed).
    allocation : RandomAllocation or str, optional
        The batch sampler: ``RandomAllocation(k)`` (each record at ``k`` uniformly chosen
        distinct steps of every epoch; Feldman & Shenfeld 2025) or the shorthands
        ``"random_allocation"`` / ``"k_of_t"`` (then ``k`` comes from ``spec``, default 1).
        Default: ``RandomAllocation(spec.k)`` or ``RandomAllocation(1)``.
    dataset_size : int, optional
        The public record count ``N`` of the normaliser ``k·N/t`` that divides every noisy
        sum (or ``spec.dataset_size``). Declare it: the guarantee treats the normaliser as
        public, and with it neighbouring datasets (n and n − 1 records) are trained with the
        same normaliser bit for bit (opacus #571, #819). Without it the number of records
        passed is used, which differs between neighbours by one.
    allow_low_precision : bool, default False
        Train float16 / bfloat16 models (refused otherwise: their rounding breaks what the
        certificate describes). Noise is generated and added in float64 either way.

    Returns
    -------
    TrainingResult
        With the run's certified chi-square membership bound, ``get_epsilon(delta)``,
        ``exact_membership_inference_accuracy()`` and ``tradeoff_curve()``.

    Raises
    ------
    TypeError
        If ``model`` is not a module, ``loss_fn`` is not callable, ``optimizer`` or
        ``allocation`` is invalid, or ``y`` is missing (or given with a Dataset).
    ValueError
        Before any training step: a scalar out of range, σ > 0 without clipping, no trainable
        parameter, float16/bfloat16 parameters without ``allow_low_precision``, a clipping
        norm whose noisy updates overflow the parameter dtype, or modules that DP-SGD cannot
        handle: cross-example or un-batchable layers (:func:`validate_model`), a ``forward``
        that changes parameters or buffers (found by a probe pass on a copy of the model:
        running statistics, ``nn.Embedding(max_norm=...)``), and, for Linear-only models
        (single-backward path), modules with ``inplace=True`` or outputs overwritten in
        place. Every message names the module and a fix.
    FloatingPointError
        If a step's noisy gradient is not finite (NaN/inf from the loss or model); that
        update is not applied.

    Notes
    -----
    Arithmetic: per-example norms, clipping factors, clipped sums and the Gaussian noise are
    computed in float64 and the noisy average is rounded to the parameter dtype afterwards
    (:mod:`pacpriv.dpsgd._noise`; floating-point noise attacks, Mironov CCS 2012); the
    result's ``arithmetic`` states it. The divisor is the expected batch size ``k·n/t``.
    """
    found = settings_target(model, spec, settings, _allocation_k)  # σ from a target, first
    given = with_max_grad_norm(keyword_fields(settings, TRAINER_KEYWORDS, where="train_dpsgd",
                                              owner="DPSGDSpec"), spec, "train_dpsgd")
    result = _train_dpsgd(model, loss_fn, X, y, optimizer=optimizer, rng=rng,
                          secure_noise=secure_noise, progress=progress, spec=spec,
                          allow_low_precision=allow_low_precision, **given)
    return result if found is None else dataclasses.replace(result, **found)


def _checked_settings(model, loss_fn, noise_multiplier, steps_per_epoch, epochs, max_grad_norm,
                      spec: DPSGDSpec | None, allocation
                      ) -> tuple[float, int, int, int, float | None]:
    """``(sigma, M, E, k, C)`` of a run, checked (the argument checks of ``train_dpsgd``)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module; got {type(model).__name__}.")
    if not callable(loss_fn):
        raise TypeError(f"`loss_fn` must be callable; got {type(loss_fn).__name__}.")
    noise_multiplier, steps_per_epoch, epochs = spec_triple(
        spec, noise_multiplier, steps_per_epoch, epochs
    )
    validate_model(model)
    sigma = check_real(noise_multiplier, "noise_multiplier", low=0.0)
    M = check_int(steps_per_epoch, "steps_per_epoch", low=1, high=MAX_STEP_COUNT)
    E = check_int(epochs, "epochs", low=1, high=MAX_STEP_COUNT)  # as make_private (13th pass)
    k = _allocation_k(allocation, spec, M)
    C = None
    if max_grad_norm is not None:
        C = check_real(max_grad_norm, "max_grad_norm", low=0.0, low_inclusive=False)
    elif sigma > 0:
        raise ValueError(
            f"`max_grad_norm` must be a positive number when noise_multiplier > 0 "
            f"(noise has std noise_multiplier * max_grad_norm); got None with "
            f"noise_multiplier={sigma!r}."
        )
    return sigma, M, E, k, C


def _one_step(model, loss_fn, batch, named, opt, tape, *, C: float | None, sigma: float,
              expected: float, noise_gen, secure_noise: bool, step: int) -> tuple[int, float]:
    """One optimizer step on ``batch``: ``(records clipped, loss)``; plain when ``C`` is None."""
    xb, yb = batch
    if C is None:
        grads, loss = _plain_step(model, loss_fn, xb, yb, expected)
        clipped = 0
    else:
        gen = secure_generator() if secure_noise and sigma > 0 else noise_gen
        grads, clipped, loss = _private_step(
            model, loss_fn, xb, yb, tape, C=C, sigma=sigma, expected=expected,
            generator=gen, step=step)
    for name, p in named:
        p.grad = grads[name].detach()
    opt.step()
    return clipped, loss


def _train_dpsgd(
    model: torch.nn.Module,
    loss_fn: LossFn,
    X,
    y=None,
    *,
    noise_multiplier: float | None = None,
    steps_per_epoch: int | None = None,
    epochs: int | None = None,
    max_grad_norm: float | None,
    optimizer: OptimizerArg = None,
    rng: RNGLike = None,
    secure_noise: bool = False,
    progress: bool = False,
    spec: DPSGDSpec | None = None,
    allocation: RandomAllocation | str | None = None,
    allow_low_precision: bool = False,
    dataset_size: int | None = None,
    warn_where: str | None = "train_dpsgd",
) -> TrainingResult:
    """:func:`train_dpsgd` with every setting as a keyword (validated; no warnings at None)."""
    sigma, M, E, k, C = _checked_settings(model, loss_fn, noise_multiplier, steps_per_epoch,
                                          epochs, max_grad_norm, spec, allocation)
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("`model` must have at least one trainable parameter.")
    check_precision(model, allow_low_precision=bool(allow_low_precision))
    records = as_records(model, X, y)
    n = check_training_records(records, loss_fn)  # >= 1 record; class labels for a CE loss
    # the divisor must not depend on which records are present (docs: k_of_t, Theorem 1):
    # a spec's dataset_size is a public number; else the number of records passed
    n_public = public_size(dataset_size, spec, n)
    expected = k * n_public / M
    warn_sparse_batches(n, k, M, warn_where)
    dtype = next(p for p in model.parameters() if p.requires_grad).dtype
    if C is not None:
        check_noise_range(noise_multiplier=sigma, max_grad_norm=C, n_records=n,
                          expected_batch_size=expected, dtype=dtype)
    layers = None if C is None else linear_layers(model)
    _refuse_probed(model, records, ghost=bool(layers))
    opt = _make_optimizer(optimizer, model)
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    check_optimizer_holds(opt, named)
    before = {name: p.detach().clone() for name, p in named}
    root = as_seed_sequence(rng)  # rng=None: OS entropy, kept only in this frame
    alloc_gen = torch_generator(trial_seed(root, ALLOCATION_STREAM))
    noise_gen = torch_generator(trial_seed(root, GRADIENT_NOISE_STREAM))
    from tqdm.auto import tqdm

    was_training = model.training
    model.train()
    sizes: list[int] = []
    n_clipped = 0
    epoch_losses = []
    tape = LinearTape(layers, model) if layers else None
    start = time.perf_counter()
    with tqdm(total=M * E, disable=not progress, desc="DP-SGD") as bar, \
            (tape if tape is not None else contextlib.nullcontext()):
        for _ in range(E):
            loss_sum = 0.0
            for idx in random_allocation(n, steps_per_epoch=M, generator=alloc_gen, k=k):
                batch = records.batch(idx)
                sizes.append(int(idx.numel()))
                clipped, loss = _one_step(model, loss_fn, batch, named, opt, tape, C=C,
                                          sigma=sigma, expected=expected, noise_gen=noise_gen,
                                          secure_noise=secure_noise, step=len(sizes) - 1)
                n_clipped += clipped
                loss_sum += loss
                bar.update()
            epoch_losses.append(loss_sum / (n * k))
    model.train(was_training)
    for p in model.parameters():
        p.grad = None
    check_changed(before, named, sigma if C is not None else 0.0, len(sizes))
    bound = None
    if C is not None and sigma > 0:
        bound = float(membership_inference_accuracy_bound(
            sigma, steps_per_epoch=M, epochs=E, k=k).accuracy)
    return TrainingResult(
        noise_multiplier=sigma,
        steps_per_epoch=M,
        epochs=E,
        max_grad_norm=C,
        n_records=n,
        expected_batch_size=expected,
        n_steps=M * E,
        n_empty_steps=sum(size == 0 for size in sizes),
        min_batch_size=min(sizes),
        max_batch_size=max(sizes),
        clipped_fraction=None if C is None else n_clipped / (n * E * k),
        epoch_losses=tuple(epoch_losses),
        secure_noise=bool(secure_noise),
        # an OS-entropy root would regenerate the secret allocation and noise: never returned
        seed=None if rng is None else seed_to_dict(root),
        wall_time_s=time.perf_counter() - start,
        randomness="fresh OS entropy (not recorded)" if rng is None
        else "caller-seeded (not for production)",
        k=k,
        membership_inference_accuracy_bound=bound,
        arithmetic=arithmetic(dtype),
    )


def _refuse_probed(model, records, *, ghost: bool) -> None:
    """Refuse (before training) what a probe forward pass on a copy of the model finds."""
    report = probe_model(model, records.probe())
    problems = list(report.state)
    if ghost:  # the single-backward clipping path reads layer outputs
        problems += inplace_modules(model) + list(report.overwritten)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise ValueError(f"`model` has {len(problems)} module(s) that DP-SGD cannot train "
                         f"correctly:\n{lines}")


def model_losses(
    model: torch.nn.Module, loss_fn: LossFn, X, y, *, batch_size: int = 4096
) -> np.ndarray:
    """Per-example losses ``loss_fn(model(x_i), y_i)`` in eval mode, without gradients.

    Parameters
    ----------
    model : torch.nn.Module
    loss_fn : callable
        As in :func:`train_dpsgd` (evaluated per example; any reduction).
    X, y : array-like or torch.Tensor of shape (n, ...)
    batch_size : int, default 4096
        Forward-pass chunk size (memory only; results do not depend on it).

    Returns
    -------
    numpy.ndarray of shape (n,), float64
        Per-example losses (input to :func:`pacpriv.audit.loss_threshold_attack`).
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module; got {type(model).__name__}.")
    batch_size = check_int(batch_size, "batch_size", low=1)
    X, y = as_tensors(model, X, y)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            chunks = [
                _per_example_losses(loss_fn, model(X[i : i + batch_size]), y[i : i + batch_size])
                for i in range(0, X.shape[0], batch_size)
            ]
    finally:
        model.train(was_training)
    if not chunks:
        return np.zeros(0)
    return torch.cat(chunks).detach().cpu().to(torch.float64).numpy()
