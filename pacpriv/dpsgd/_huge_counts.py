"""The closed-form chi-square bound at counts beyond the float64 range, in log space.

``steps_per_epoch`` or ``epochs`` may be any positive Python integer (``10**400``): the bound
``½ + ¼·sqrt((1 + (e^{1/σ²} − 1)/M)^E − 1)`` is defined for every ``M, E``. Counts above
``2**1000`` cannot be float64s, so ``ln(1 + χ²) = E·ln(1 + (e^x − 1)/M)`` (``x = 1/σ²``) is
evaluated through ``ln E``, ``ln M`` (exact for Python integers via :func:`math.log`) and
``ln(e^x − 1)``; each step rounds towards a larger ``ln(1 + χ²)`` (the safe side).
"""

from __future__ import annotations

import math
import numbers

__all__ = ["HUGE_COUNT", "is_huge_count", "log_log1p_chi_square"]

#: Counts above this are handled here (``float`` would overflow or lose all precision margin).
HUGE_COUNT = 2**1000


def is_huge_count(value) -> bool:
    """A positive integer (not a bool) above :data:`HUGE_COUNT`."""
    return (isinstance(value, numbers.Integral) and not isinstance(value, bool)
            and int(value) > HUGE_COUNT)


def _log_expm1(log_x: float) -> float:
    """``ln(e^x − 1)`` from ``ln x``, rounded up (no overflow for huge ``x``, none for tiny)."""
    if log_x < -30.0:  # e^x − 1 = x(1 + x/2 + ...) <= x·e^x, and x < 1e-13
        return log_x + math.exp(log_x) + 1e-15
    x = math.exp(log_x) if log_x < 709.0 else math.inf
    if x > 30.0:  # ln(e^x − 1) = x + ln(1 − e^{−x}) < x
        return x
    return math.log(math.expm1(x)) * (1.0 + 1e-15) + 1e-300


def log_log1p_chi_square(sigma: float, steps_per_epoch: int, epochs: int) -> float:
    """``ln ln(1 + χ²)`` of ``E`` epochs of ``M`` steps at noise multiplier ``sigma``, rounded up.

    ``ln(1 + (e^x − 1)/M) = softplus(t)``, ``t = ln(e^x − 1) − ln M``; for ``t < −30``,
    ``ln softplus(t) <= t`` (``ln(1 + y) <= y``).
    """
    log_x, log_m, log_e = -2.0 * math.log(sigma), math.log(steps_per_epoch), math.log(epochs)
    # each logarithm is within an ulp or two of its value; their sum can then be off by a few
    # ulps of the largest term: cover it (absolute, in ln ln(1 + χ²)) with room
    slack = 8.0 * 2.0**-52 * (abs(log_x) + abs(log_m) + abs(log_e) + 30.0)
    t = _log_expm1(log_x) - log_m
    if t < -30.0:
        log_per_epoch = t
    elif t > 30.0:
        log_per_epoch = math.log(t + math.exp(-t)) if math.isfinite(t) else math.inf
    else:
        log_per_epoch = math.log(math.log1p(math.exp(t)))
    return log_e + log_per_epoch + slack


def log_space_noise_multiplier(target_accuracy: float, steps_per_epoch: int,
                               epochs: int) -> float:
    """The closed-form σ for ``target_accuracy`` at counts beyond float64, rounded up (a larger
    σ only lowers the bound): ``σ = 1/sqrt(ln(1 + M·expm1(ln(1 + 16(a − ½)²)/E)))``.

    Raises
    ------
    ValueError
        If that σ exceeds the float64 range (``E`` astronomically larger than ``M``).
    """
    adv = target_accuracy - 0.5
    log_m, log_e = math.log(steps_per_epoch), math.log(epochs)
    log_z = math.log(math.log1p(16.0 * adv * adv)) - log_e
    # expm1(z) >= z and ln(1 + e^w) >= w: each lower value only raises σ (the safe side)
    log_em1 = log_z if log_z < -30.0 else math.log(math.expm1(math.exp(log_z)))
    log_w = log_em1 + log_m - 8.0 * 2.0**-52 * (abs(log_z) + log_m + log_e + 30.0)
    if log_w > 30.0:
        log_x = math.log(log_w)
    elif log_w < -30.0:
        log_x = log_w + math.log1p(-math.exp(log_w))  # ln ln(1 + u) >= ln u + ln(1 − u)
    else:
        log_x = math.log(math.log1p(math.exp(log_w)))
    if -0.5 * log_x > 709.0:
        raise ValueError(
            "the noise multiplier for `target_accuracy` at these `steps_per_epoch` and "
            "`epochs` exceeds the float64 range (epochs astronomically above steps_per_epoch).")
    return math.exp(-0.5 * log_x) * (1.0 + 1e-12)
