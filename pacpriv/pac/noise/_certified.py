"""The certified noise rule (the default) and its asymptotic twin: :class:`Certified`,
:class:`AsymptoticT`.

Both fix the noise shape (square-root rule) and a clip from part of the trials and certify the
scale from the others (:func:`pacpriv.pac.noise.certify_noise`): ``Certified`` with a rigorous
bound on the clipped release (``MI <= v`` with probability ``>= 1 − γ`` over the simulation),
``AsymptoticT`` with a Student-t bound and no clip (an approximation, labelled estimated).

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 3.
.. [2] I. Waudby-Smith, A. Ramdas. Estimating means of bounded random variables by betting.
   J. R. Stat. Soc. B 86(1), 2024.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal

from pacpriv._numbers import format_bound
from pacpriv._validation import check_real
from pacpriv.exceptions import UndersampledWarning
from pacpriv.pac.noise._certificate import certify_noise
from pacpriv.pac.noise._plan import NoisePlan
from pacpriv.pac.noise._planning import InflationUnreachable, trials_for_inflation
from pacpriv.pac.noise._rule import CONFIDENCE_FLAG, OUTPUT_BOUND_FLAG, NoiseRule, Note

__all__ = ["AsymptoticT", "Certified"]


def _check_confidence(value: float) -> float:
    conf = check_real(value, "confidence", low=0.0, high=1.0, low_inclusive=False,
                      high_inclusive=False)
    if conf < 0.5:
        import warnings

        from pacpriv.exceptions import VacuousBoundWarning

        warnings.warn(f"confidence = {conf:.3g}: the certificate then fails with probability "
                      f"γ = {1 - conf:.3g} over the simulation, worse than a coin flip; the "
                      "printed bound is labelled with this 1−γ. Use 0.9 or more (default "
                      "0.95).", VacuousBoundWarning, stacklevel=3)
    return conf


def _check_shape_fraction(value: float) -> float:
    return check_real(value, "shape_fraction", low=0.0, high=1.0, low_inclusive=False,
                      high_inclusive=False)


@dataclass(frozen=True, kw_only=True)
class Certified(NoiseRule):
    """The default rule: ``MI <= v`` for the true covariance of the released (clipped)
    mechanism with probability ``>= confidence`` over the simulation.

    Parameters
    ----------
    confidence : float, default 0.95
        ``1 − γ`` in ``(0, 1)``.
    shape_fraction : float, optional
        Fraction of the trials that fix the noise shape and the clip, in ``(0, 1)``. Default
        (None): about ``0.45·sqrt(d + 1.2)·m^0.7`` of the ``m`` trials, at most half while
        ``d <= m/4`` and up to ``m − max(32, m/8)`` when ``d >= 3m/4``
        (:func:`~pacpriv.pac.noise._shape.shape_cap`).
    output_bound : float, optional
        Public bound ``r >= ||f(X)||₂`` (an assumption, checked against every simulated output):
        a tighter clip, and a certified minimum noise when the outputs never varied.
    clip_margin : float, default 1
        Multiplier ``>= 1`` of the clip radius set from the shape trials.
    clip_probability : float, default 0.02
        Target fraction of clipped outputs that sets the clip radius, in ``(0, 1)``.
    shrinkage : "cv" or float, default "cv"
        Shrinkage of the noise shape towards isotropic: chosen by cross-validation inside the
        shape trials, or a fixed weight in ``[0, 1]``.
    scaling : {"log-det", "trace"}, default "log-det"
        Scale bound: the log-det bound at ``d`` equal eigenvalues, or the trace bound.
    target_inflation : float or None, default 1.2
        Planning: warn (``UndersampledWarning``) when ``n_trials`` is below what the planning
        model (:func:`~pacpriv.pac.noise.trials_for_inflation`) needs for a noise power within
        this factor of the oracle square-root rule (``> 1``; None: no check).

    Raises
    ------
    ValueError
        If a parameter is out of its range.

    Examples
    --------
    >>> Certified().confidence, Certified(confidence=0.99).name
    (0.95, 'certified')
    """

    confidence: float = field(default=0.95, metadata=CONFIDENCE_FLAG)
    shape_fraction: float | None = None
    output_bound: float | None = field(default=None, metadata=OUTPUT_BOUND_FLAG)
    clip_margin: float = 1.0
    clip_probability: float = 0.02
    shrinkage: str | float = "cv"
    scaling: str = "log-det"
    target_inflation: float | None = field(default=1.2, metadata={
        "flag": "--target-inflation", "help": "warn when --trials is below what this noise power "
        "over the oracle square-root rule needs (> 1; default 1.2; see 'pacpriv pac trials')"})

    name = "certified"
    source = "outputs"
    safe_when_undersampled = True
    certified = True
    min_trials = 6
    summary = ("square-root shape from part of the trials, scale certified (1−γ) by a betting "
               "bound on every other trial (predictable bets, Ville); clipped release")

    def __post_init__(self) -> None:
        _check_confidence(self.confidence)
        if self.shape_fraction is not None:
            _check_shape_fraction(self.shape_fraction)
        check_real(self.clip_probability, "clip_probability", low=0.0, high=1.0,
                   low_inclusive=False, high_inclusive=False)
        if isinstance(self.shrinkage, str):
            if self.shrinkage != "cv":
                raise ValueError(f"shrinkage must be 'cv' or a weight in [0, 1], got "
                                 f"{self.shrinkage!r}")
        else:
            check_real(self.shrinkage, "shrinkage", low=0.0, high=1.0)
        if self.scaling not in ("log-det", "trace"):
            raise ValueError(f"scaling must be 'log-det' or 'trace', got {self.scaling!r}")
        if self.output_bound is not None:
            check_real(self.output_bound, "output_bound", low=0.0, low_inclusive=False)
        check_real(self.clip_margin, "clip_margin", low=1.0)
        if self.target_inflation is not None:
            check_real(self.target_inflation, "target_inflation", low=1.0,
                       low_inclusive=False)

    def _plan(self, source, mi_budget: float) -> NoisePlan:
        # (a RelativeOutputs source brings its reference and the pipeline's shared Gram)
        return certify_noise(source, mi_budget=mi_budget, confidence=self.confidence,
                             shape_fraction=self.shape_fraction,
                             output_bound=self.output_bound, clip_margin=self.clip_margin,
                             clip_probability=self.clip_probability,
                             shrinkage=self.shrinkage, scaling=self.scaling,
                             method="betting")

    def trials_needed(self, *, dim: int) -> int:
        """The planning model's trials for a noise power within ``target_inflation`` (1.2 if
        None) of the oracle (:func:`~pacpriv.pac.noise.trials_for_inflation`)."""
        return trials_for_inflation(dim, target_inflation=self.target_inflation or 1.2,
                                    confidence=self.confidence,
                                    shape_fraction=self.shape_fraction,
                                    clip_margin=self.clip_margin,
                                    clip_probability=self.clip_probability)

    def label(self, plan: NoisePlan) -> str:
        if self.is_certified(plan):
            return f"certified (1−γ = {format_bound(plan.confidence, side='down')})"
        return "estimated (plug-in)"

    def notes(self, plan: NoisePlan, *, n_trials: int, dim: int) -> list[Note]:
        cert = plan.certificate
        if cert is None or not cert.certified:
            return []
        gamma = float(Decimal(1) - Decimal(repr(float(cert.confidence))))  # 1 − 0.95 = 0.05
        notes: list[Note] = [(
            f"certified (1−γ = {format_bound(cert.confidence, side='down')}): with probability "
            f">= {format_bound(cert.confidence, side='down')} over the simulation, MI <= "
            f"{format_bound(plan.mi_claim)} nats for the released (clipped) mechanism; "
            f"{cert.n_shape} trials fixed the noise shape and the clip, the other "
            f"{cert.n_certificate} certified its scale ({cert.method} bound, γ = "
            f"{format_bound(gamma)}); the certificate cost {format_bound(cert.inflation, 3)}x "
            f"the plug-in noise power; {cert.n_clipped} of the {cert.n_trials} simulated "
            "outputs it used were clipped.",
            None,
        )]
        if cert.n_clipped > 0.05 * cert.n_trials and not cert.constant:
            notes.append((
                f"{cert.n_clipped} of {cert.n_trials} simulated outputs fell outside the release "
                "clip (an ellipsoid fixed by the shape trials): a secret output outside it is "
                "released shrunk towards the centre. More trials reduce this.",
                None,
            ))
        if self.target_inflation is not None and not cert.constant:
            try:
                need = trials_for_inflation(dim, target_inflation=self.target_inflation,
                                            confidence=cert.confidence)
            except InflationUnreachable as err:  # a note after the work, never a crash
                notes.append((
                    f"target_inflation = {self.target_inflation!r} is below what the planning "
                    f"model (trials_for_inflation) reaches at d = {dim} (smallest "
                    f"{err.smallest}); no trial count is planned for it. The certificate "
                    "holds.", UndersampledWarning))
                return notes
            if cert.n_trials < need:
                pairs = (f" (the certificate uses one member of each complementary pair: "
                         f"{cert.n_trials} independent trials of the {n_trials} run)"
                         if cert.n_trials < n_trials else "")
                notes.append((
                    f"n_trials = {cert.n_trials}{pairs} is below the {need} trials that the "
                    f"planning model (trials_for_inflation) needs for a noise power within "
                    f"{self.target_inflation:g}x the oracle square-root rule at d = {dim}; the "
                    "certificate holds, at the cost of more noise.",
                    UndersampledWarning,
                ))
        return notes

    def constant_note(self, plan: NoisePlan) -> str:
        if plan.clip_radius == 0.0:
            return ("The certified release is clipped to the seen value (a constant, so the "
                    "release carries no information); give output_bound for a noisy release "
                    "that keeps the mechanism's other outputs.")
        return "The certified rule adds the minimum noise that output_bound supports."


@dataclass(frozen=True, kw_only=True)
class AsymptoticT(NoiseRule):
    """As :class:`Certified`, but a Student-t bound and no clip: asymptotic, **not** certified.

    Parameters
    ----------
    confidence : float, default 0.95
        Nominal ``1 − γ`` in ``(0, 1)`` (exact only for Gaussian summands).
    shape_fraction : float, default 0.5
        Fraction of the trials that fix the noise shape, in ``(0, 1)``.
    """

    confidence: float = field(default=0.95, metadata=CONFIDENCE_FLAG)
    shape_fraction: float = 0.5

    name = "asymptotic-t"
    source = "outputs"
    safe_when_undersampled = True
    min_trials = 6
    summary = "as 'certified' but a Student-t bound and no clip (asymptotic, not certified)"

    def __post_init__(self) -> None:
        _check_confidence(self.confidence)
        _check_shape_fraction(self.shape_fraction)

    def _plan(self, source, mi_budget: float) -> NoisePlan:
        return certify_noise(source, mi_budget=mi_budget, confidence=self.confidence,
                             shape_fraction=self.shape_fraction, method="student-t")

    def trials_needed(self, *, dim: int) -> int:
        return max(self.min_trials, 2 * math.ceil(dim / self.shape_fraction) + 2)

    def label(self, plan: NoisePlan) -> str:
        return f"estimated (asymptotic, 1−γ ≈ {plan.confidence:g}, not certified)"

    def notes(self, plan: NoisePlan, *, n_trials: int, dim: int) -> list[Note]:
        return [(
            f"estimated (asymptotic): rule {self.name!r} uses a Student-t bound without a "
            "bound on the outputs; it is not certified and may understate heavy tails.",
            None,
        )]

    def constant_note(self, plan: NoisePlan) -> str:
        return ("This asymptotic rule adds no noise (estimate); use rule='certified' with "
                "output_bound for a certified minimum noise.")
