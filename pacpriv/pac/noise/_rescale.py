"""Exact power-of-two rescaling of the outputs for the rules that read them.

The certificate squares whitened distances and sums their squares again (betting variances),
so outputs of magnitude ~1e80 or more overflow float64 inside it, and outputs below ~1e-70 meet
its absolute floors, although the noise the rule asks for is representable. Every rule is
scale-equivariant: the outputs times ``c`` need the noise times ``c``. With ``c = 2^k`` the
product is exact in binary floating point (no rounding) as long as nothing becomes subnormal or
overflows, so :func:`plan_rescaled` runs the rule on ``outputs · 2^-k`` (largest magnitude in
``[1/2, 1)``) and multiplies the plan's scale back by ``2^k`` — the same plan, bit for bit, as
the rule would give on the outputs in exact arithmetic at a comfortable scale.

The engine keeps every non-zero output within ``[2^-400, 2^400]`` in magnitude
(:data:`pacpriv.pac.engine._mechanism.MIN_OUTPUT_MAGNITUDE`), so ``|k| <= 401`` and the
rescaled values stay within float64's normal range (``>= 2^-802``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from pacpriv.pac.noise._certificate import Certificate, RelativeOutputs, split_source
from pacpriv.pac.noise._plan import NoisePlan

__all__ = ["COMFORT_EXPONENT", "output_exponent", "plan_rescaled"]

#: Outputs whose largest magnitude lies in ``[2^-64, 2^64]`` are planned as they are (no copy).
COMFORT_EXPONENT = 64

#: Certificate fields in the outputs' units (``¹``) and squared units (``²``).
_LINEAR = ("clip_radius", "output_bound")
_SQUARED = ("summand_bound", "mean_summand", "upper_bound", "plugin_trace", "kappa",
            "kappa_plugin")

_BLOCK = 4096


def _max_abs(rows: Any) -> float:
    """Largest finite magnitude of ``rows`` read in row blocks (bounded memory on a memmap)."""
    top = 0.0
    for start in range(0, rows.shape[0], _BLOCK):
        block = np.asarray(rows[start:start + _BLOCK])
        if block.size:  # (two reductions: no block-sized temporary)
            top = max(top, float(block.max()), -float(block.min()))
    return top


def output_exponent(source: Any) -> int:
    """The ``k`` that :func:`plan_rescaled` divides the outputs by (``2^k``); 0 when the
    largest magnitude (rows and reference) lies within ``[2^-64, 2^64]`` or is 0."""
    rows, reference = split_source(source)
    top = _max_abs(rows)
    if reference is not None and reference.size:
        top = max(top, float(np.max(np.abs(reference))))
    if top == 0.0 or not math.isfinite(top):
        return 0
    if 2.0**-COMFORT_EXPONENT <= top <= 2.0**COMFORT_EXPONENT:
        return 0
    return math.frexp(top)[1]  # top = m · 2^k with m in [1/2, 1)


def _scaled(a: np.ndarray, k: int) -> np.ndarray:
    """``a · 2^-k`` in float64; raises ``ValueError`` where it would not be exact."""
    out = np.ldexp(np.asarray(a, dtype=np.float64), -k)
    tiny = np.finfo(np.float64).tiny
    if np.any((out != 0) & (np.abs(out) < tiny)) or not np.all(np.isfinite(out)):
        raise ValueError("the outputs cannot be rescaled exactly")  # mixed scales, see caller
    return out


def _unscale_plan(plan: NoisePlan, k: int, rule: Any) -> NoisePlan:
    """The plan for outputs ``2^k`` times those it was made for (exact)."""
    changes: dict[str, Any] = {
        "noise_std": np.ldexp(np.asarray(plan.noise_std, dtype=np.float64), k),
        "residual_std": math.ldexp(float(plan.residual_std), k),
        "rule_spec": rule,
    }
    changes["noise_std"].setflags(write=False)
    if plan.clip_center is not None:
        centre = np.ldexp(np.asarray(plan.clip_center, dtype=np.float64), k)
        centre.setflags(write=False)
        changes["clip_center"] = centre
    cert = plan.certificate
    if isinstance(cert, Certificate):
        cert = dataclasses.replace(cert, **_unscale_fields(cert, k))
        changes["certificate"] = cert
        changes["details"] = {**plan.details, "certificate": cert.to_dict()}
    # (mi_bound, mi_claim, the basis and the plan's Σ_B-whitened clip radius are scale-free)
    return dataclasses.replace(plan, **changes)


def _unscale_fields(cert: Any, k: int) -> dict[str, Any]:
    """The certificate's unit-bearing fields times ``2^k`` (linear) or ``4^k`` (squared)."""
    out: dict[str, Any] = {}
    for power, names in ((1, _LINEAR), (2, _SQUARED)):
        for name in names:
            value = getattr(cert, name, None)
            if value is not None:
                with np.errstate(over="ignore"):  # a diagnostic beyond float64 reads +inf
                    out[name] = float(np.ldexp(float(value), power * k))
    return out


def plan_rescaled(rule: Any, source: Any, *, mi_budget: float) -> NoisePlan:
    """``rule.plan(source, mi_budget=...)`` on the outputs rescaled by an exact power of two.

    Parameters
    ----------
    rule : NoiseRule
        A rule whose :attr:`~pacpriv.pac.noise.NoiseRule.source` is ``"outputs"``; a public
        ``output_bound`` it assumes is rescaled with the outputs.
    source : ndarray of shape (n_trials, d) or RelativeOutputs
        The independent trials' outputs (float32 rows relative to a reference allowed).
    mi_budget : float
        Budget in nats.

    Returns
    -------
    NoisePlan
        The rule's plan in the outputs' own units (noise std, clip centre and the certificate's
        unit-bearing diagnostics multiplied back by ``2^k``), ``rule_spec`` the given rule.

    Raises
    ------
    ValueError
        As ``rule.plan``; or when the outputs cannot be rescaled exactly (coordinates whose
        magnitudes are more than float64's range apart).
    """
    k = output_exponent(source)
    if k == 0:
        return rule.plan(source, mi_budget=mi_budget)
    rows, reference = split_source(source)
    scaled_rows = _scaled(rows, k)
    scaled: Any = (scaled_rows if reference is None
                   else RelativeOutputs(scaled_rows, _scaled(reference, k)))
    bound = rule.output_bound_assumed
    # (a bound beyond 2^1000 after rescaling is replaced by 2^1000: a weaker assumption, so
    # never less noise; the bound is at least the largest output norm, so it never underflows)
    inner = rule
    if bound is not None:
        r = 2.0**1000 if math.log2(float(bound)) - k >= 1000 else math.ldexp(float(bound), -k)
        inner = dataclasses.replace(rule, output_bound=r)
    plan = inner.plan(scaled, mi_budget=mi_budget)
    return _unscale_plan(plan, k, rule)
