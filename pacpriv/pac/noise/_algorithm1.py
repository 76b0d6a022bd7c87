"""Algorithm 1 of Xiao & Devadas (CRYPTO 2023) as a noise rule: :class:`Algorithm1`.

Claims ``MI <= v + β`` with probability ``>= 1 − γ`` over the simulation, with ``1 − γ`` from a
conservative matrix-Bernstein count (:mod:`pacpriv.pac.noise._confidence`): the paper's exact
sample-count theorem was not available to us. Formulas: docs/math.rst, Gaussian noise.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Algorithm 1.
.. [2] J. A. Tropp. User-friendly tail bounds for sums of random matrices. Found. Comput.
   Math. 12(4), 2012, Thm 1.4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacpriv._numbers import format_bound
from pacpriv._validation import check_real
from pacpriv.exceptions import CalibrationError, UndersampledWarning
from pacpriv.pac.noise import _rules
from pacpriv.pac.noise._confidence import confidence_for_trials, trials_for_confidence
from pacpriv.pac.noise._plan import NoisePlan
from pacpriv.pac.noise._rule import CONFIDENCE_FLAG, OUTPUT_BOUND_FLAG, NoiseRule, Note

__all__ = ["Algorithm1", "algorithm1_rule"]

_NAME = "algorithm1"


def algorithm1_rule(lam: np.ndarray, mult: np.ndarray, *, n_held: int, mi_budget: float,
                    c: float, beta: float, output_bound: float, dim: int,
                    complement_unresolved: bool):
    """Algorithm 1 of [1]_ as implemented by the authors' group (docs/math.rst, Gaussian noise).

    ``j0`` = number of eigenvalues ``> c``; if the smallest consecutive gap among the first
    ``j0`` eigenvalues exceeds ``r·sqrt(d·c) + 2c`` (vacuously true when ``j0 <= 1``) the
    square-root rule runs on ``λ + 10·c·v/β`` in **every** direction (held and complement),
    else the isotropic rule ``(Σλ + d·c)/(2v)``. When the complement's eigenvalues are not
    resolved individually and could exceed ``c`` (``complement_unresolved``) the gap test cannot
    be run and the isotropic branch is taken (safe side).

    The first ``n_held`` entries of ``lam`` are the held eigenvalues (descending); a further
    entry, if any, is the complement group. Returns ``(variances, isotropic: bool, details)``.
    """
    lam_held = lam[:n_held]
    j0 = int(np.sum(lam_held > c))
    gaps = -np.diff(lam_held[:j0])
    min_gap = float(np.min(gaps)) if gaps.size else math.inf
    threshold = output_bound * math.sqrt(dim * c) + 2.0 * c
    inflation = 10.0 * c * mi_budget / beta
    details: dict[str, Any] = {"j0": j0, "min_gap": None if gaps.size == 0 else min_gap,
               "gap_threshold": threshold,
               "inflation": inflation}
    if min_gap > threshold and not complement_unresolved:
        details["branch"] = "anisotropic"
        return _rules.square_root_rule(lam + inflation, mult, mi_budget), False, details
    details["branch"] = "isotropic"
    iso = (float(np.sum(mult * lam)) + dim * c) / (2.0 * mi_budget)
    return np.full_like(lam, iso), True, details


@dataclass(frozen=True, kw_only=True)
class Algorithm1(NoiseRule):
    """Algorithm 1 of Xiao & Devadas (CRYPTO 2023) with its parameters, usable as ``rule=``.

    Square-root rule on ``λ + 10·c·v/β`` in every direction if the eigen-gaps exceed
    ``r·sqrt(d·c) + 2c``, else isotropic ``(Σλ + d·c)/(2v)``; claims ``MI <= v + β`` with
    probability ``>= confidence`` over the simulation ([1]_, with the conservative
    matrix-Bernstein confidence of [2]_).

    Parameters
    ----------
    c : float
        Eigenvalue / estimation-error threshold ``c > 0`` (variance units).
    beta : float
        Slack ``β > 0`` in nats (the claim is ``MI <= v + β``).
    output_bound : float
        Public bound ``r > 0`` with ``||f(X)||₂ <= r`` (an assumption, checked against every
        simulated output).
    confidence : float, optional
        Required ``1 − γ`` in ``(0, 1)``: a run whose trials certify less is refused (before any
        trial when even a 1-dimensional output could not reach it).

    Raises
    ------
    ValueError
        If ``c``, ``beta`` or ``output_bound`` is missing or not positive, or ``confidence``
        lies outside ``(0, 1)``.

    Examples
    --------
    >>> Algorithm1(c=1e-3, beta=0.25, output_bound=1.0).parameters()["beta"]
    0.25
    """

    c: float | None = field(default=None, metadata={
        "flag": "--c", "help": "Algorithm 1 eigenvalue threshold c > 0"})
    beta: float | None = field(default=None, metadata={
        "flag": "--beta", "help": "Algorithm 1 slack beta in nats"})
    output_bound: float | None = field(default=None, metadata=OUTPUT_BOUND_FLAG)
    confidence: float | None = field(default=None, metadata=CONFIDENCE_FLAG)

    name = _NAME
    certified = True
    summary = ("Algorithm 1 of Xiao & Devadas (MI <= v + β, conservative matrix-Bernstein "
               "confidence)")

    def __post_init__(self) -> None:
        for field_name in ("c", "beta", "output_bound"):
            value = getattr(self, field_name)
            if value is None:
                raise ValueError(f"rule={_NAME!r} needs `{field_name}`; got None.")
            check_real(value, field_name, low=0.0, low_inclusive=False)
        if self.confidence is not None:
            check_real(self.confidence, "confidence", low=0.0, high=1.0, low_inclusive=False,
                       high_inclusive=False)

    def validate(self, *, n_trials: int) -> None:
        """Also: a requested ``confidence`` must be reachable with ``n_trials`` for ``d = 1``
        (the matrix-Bernstein confidence only falls as ``d`` grows)."""
        super().validate(n_trials=n_trials)
        if self.confidence is None:
            return
        best = confidence_for_trials(n_trials, c=float(self.c),  # type: ignore[arg-type]
                                     output_bound=float(self.output_bound),  # type: ignore[arg-type]
                                     dim=1)
        if best < float(self.confidence):
            raise ValueError(
                f"`n_trials`={n_trials} cannot certify confidence={self.confidence!r} for "
                f"rule={_NAME!r} with c={self.c!r} and output_bound={self.output_bound!r} even "
                f"for a 1-dimensional output (at most {best:.6g}): raise `n_trials` "
                "(pacpriv.pac.noise.trials_for_confidence) or lower `confidence`.")

    def trials_needed(self, *, dim: int) -> int:
        """Trials for the requested confidence (default 0.95) at dimension ``dim``."""
        return trials_for_confidence(confidence=self.confidence or 0.95, c=self.c,  # type: ignore[arg-type]
                                     output_bound=self.output_bound, dim=dim)  # type: ignore[arg-type]

    def _plan(self, source, mi_budget: float) -> NoisePlan:
        c, beta, r = float(self.c), float(self.beta), float(self.output_bound)  # type: ignore[arg-type]
        v, d = mi_budget, source.dim
        lam, mult, n_comp = _rules._groups(source)
        # complement eigenvalues are each <= min(tail, smallest held): if that exceeds c,
        # some of them may count towards j0 and their gaps are unknown
        k_held = source.n_components
        ceiling = source.tail_variance if k_held == 0 else min(
            source.tail_variance, float(lam[k_held - 1]))
        unresolved = n_comp > 0 and ceiling > c
        s2, iso, details = algorithm1_rule(
            lam, mult, n_held=k_held, mi_budget=v, c=c, beta=beta,
            output_bound=r, dim=d, complement_unresolved=unresolved,
        )
        conf = 1.0 if source.n_trials is None else confidence_for_trials(
            source.n_trials, c=c, output_bound=r, dim=d)
        details.update(c=c, beta=beta, output_bound=r, certified_confidence=conf)
        if self.confidence is not None and conf < self.confidence:
            raise CalibrationError(
                f"n_trials={source.n_trials} certifies confidence {conf:.6g} < requested "
                f"{self.confidence!r} (conservative matrix Bernstein, see trials_for_confidence)."
            )
        return _rules._spectrum_plan(self.name, source, lam, mult, n_comp, v, s2, iso, details,
                                     claim=v + beta, conf=conf)

    # --- what a plan claims -------------------------------------------------------------------

    def is_certified(self, plan: NoisePlan) -> bool:
        """Certified when the matrix-Bernstein confidence is positive (0 with too few trials)."""
        return bool(plan.confidence and plan.confidence > 0)

    def label(self, plan: NoisePlan) -> str:
        if not self.is_certified(plan):
            return "estimated (Algorithm 1 with too few trials: confidence not certified)"
        if plan.confidence is not None and plan.confidence >= 1.0:
            return "exact (known covariance, no estimation; MI <= v + β)"
        conf = format_bound(plan.confidence, 4, side="down")
        return f"certified (1−γ >= {conf}, MI <= v + β)"

    def notes(self, plan: NoisePlan, *, n_trials: int, dim: int) -> list[Note]:
        if plan.confidence is None or plan.confidence >= 1.0:
            return []
        return [(
            f"Algorithm 1 claims MI <= {format_bound(plan.mi_claim)} nats only with probability "
            f">= {format_bound(plan.confidence, side='down')} over the simulation (conservative "
            f"matrix-Bernstein count for {n_trials} trials); the posterior bound inherits that "
            "condition. Use pacpriv.pac.noise.trials_for_confidence to choose n_trials.",
            UndersampledWarning,
        )]

    def constant_note(self, plan: NoisePlan) -> str:
        return ("Algorithm 1 still adds its inflation 10·c·v/β in every direction; use "
                "rule='certified' with output_bound for a release clipped to the seen value.")
