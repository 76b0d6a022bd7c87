"""The arithmetic of DP-SGD's noisy step: float64 noise, dtype checks, overflow refusal (torch).

Private helper of :mod:`pacpriv.dpsgd.trainer`. Floating-point noise leaks: adding a
floating-point Gaussian sample to two neighbouring sums leaves patterns in the low-order bits
that tell them apart (Mironov, *On Significance of the Least Significant Bits for Differential
Privacy*, CCS 2012; in float16, sums 0 and 2⁻¹² are told apart by the last mantissa bit, in
float32 sums 2⁻²⁵ apart). So the clipped sums, the noise and their sum are computed in
float64, and the noisy average is rounded to the parameters' dtype only afterwards (a
post-processing of the float64 release). The certificate assumes exact Gaussian noise on
exactly clipped sums; the float64 round-off (relative ~1e-16) and the discreteness of the
float64 sampler are not accounted for (:data:`ARITHMETIC`).
"""

from __future__ import annotations

import math

from pacpriv._optional import import_torch

torch = import_torch("pacpriv.dpsgd.trainer")

__all__ = ["ARITHMETIC", "arithmetic", "check_noise_range", "check_precision", "noisy_average"]

#: What every certificate of the trainer assumes about its arithmetic.
ARITHMETIC = (
    "per-example norms, clipping factors, clipped sums, Gaussian noise (torch.normal, "
    "float64) and the noisy sum in float64, rounded to the parameter dtype afterwards "
    "(post-processing); the certificate assumes exact real Gaussian noise on exactly clipped "
    "sums: float64 round-off (relative ~1e-16) and the discreteness of the float64 sampler "
    "(Mironov, CCS 2012) are not accounted for"
)
_LOW = ("float16", "bfloat16")
_TAIL_SD = 40.0  # |N(0, 1)| > 40 has probability < 1e-340: beyond any float64 sample


def arithmetic(dtype) -> str:
    """:data:`ARITHMETIC` with the gradients' dtype named."""
    return f"gradients in {str(dtype).removeprefix('torch.')}; " + ARITHMETIC


def check_precision(model, *, allow_low_precision: bool) -> None:
    """Refuse float16 / bfloat16 parameters unless the caller opted in (before any work)."""
    low = sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters()
                  if p.requires_grad and str(p.dtype).removeprefix("torch.") in _LOW})
    if low and not allow_low_precision:
        raise ValueError(
            f"`model` has {', '.join(low)} parameters: their per-example gradients, norms and "
            "updates are rounded so coarsely that clipping and the privacy accounting no longer "
            "describe what is computed (Mironov, CCS 2012). Use float32 or float64 "
            "(model.float()), or pass allow_low_precision=True to train anyway (noise is still "
            "generated and added in float64)."
        )


def check_noise_range(*, noise_multiplier: float, max_grad_norm: float, n_records: int,
                      expected_batch_size: float, dtype) -> None:
    """Refuse a noise std or update size that overflows float64 or the parameter dtype.

    Every coordinate of a noisy average is at most ``C·(n + 40σ)/(expected batch size)`` in
    magnitude (a batch holds at most n records, each clipped to C). It must stay below the
    square root of the dtype's largest finite value (1.3e154 in float64, 1.8e19 in float32,
    255 in float16), so that the next forward pass, which multiplies the updated weights by
    inputs, stays finite: beyond it the noise is all the model would hold anyway.
    """
    big = math.sqrt(float(torch.finfo(dtype).max))
    std = noise_multiplier * max_grad_norm
    bound = max_grad_norm * (n_records + _TAIL_SD * noise_multiplier) / expected_batch_size
    if not (math.isfinite(std) and math.isfinite(bound) and bound < big):
        name = str(dtype).removeprefix("torch.")
        raise ValueError(
            f"`max_grad_norm`={max_grad_norm!r} with noise_multiplier={noise_multiplier!r} "
            f"overflows: a step's noisy average can reach {bound:.3g} per coordinate, beyond "
            f"what {name} keeps finite through the next forward pass ({big:.3g}), and the "
            "model would become NaN. Use a clipping norm of the gradients' scale (e.g. 0.1 to "
            "10) or float64 parameters."
        )


def noisy_average(summed, *, max_grad_norm, noise_multiplier, expected_batch_size, generator,
                  step: int | None = None):
    """``(Σ + N(0, σ²C²)) / (expected batch size)`` per tensor, in float64, then cast back.

    Noise is drawn in float64 on the CPU generator in the iteration order of ``summed``.
    Raises ``FloatingPointError`` (naming the step and tensor) if a result is not finite, so
    a non-finite update is never applied.
    """
    out = {}
    for name, total in summed.items():
        acc = total.detach().to(torch.float64)
        if noise_multiplier > 0:
            noise = torch.normal(0.0, noise_multiplier * max_grad_norm, size=acc.shape,
                                 generator=generator, dtype=torch.float64)
            acc = acc + noise.to(acc.device)
        avg = (acc / expected_batch_size).to(total.dtype)
        if not bool(torch.isfinite(avg).all()):
            where = "" if step is None else f" at step {step}"
            raise FloatingPointError(
                f"the noisy gradient of {name!r}{where} is not finite (the loss or the model "
                "produced NaN/inf); the update was not applied and the model holds the "
                "parameters of the previous step."
            )
        out[name] = avg
    return out
