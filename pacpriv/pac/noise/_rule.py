"""A noise rule is an object: :class:`NoiseRule`, the base of every rule.

A rule says *what* to certify, as an immutable description (the dp-accounting ``DpEvent`` idea):
it owns its parameters and their validation (on construction, plus :meth:`NoiseRule.validate`
before any trial), the label printed beside its bounds, the trials it needs
(:meth:`NoiseRule.trials_needed`), the caveats it adds to a report (:meth:`NoiseRule.notes`) and
its planning step (:meth:`NoiseRule.plan`, from the simulated outputs or their spectrum to a
:class:`~pacpriv.pac.noise.NoisePlan`). The concrete rules live in sibling modules; names such as
``"certified"`` are shorthands for a rule with its default parameters
(:func:`pacpriv.pac.noise.as_rule`).

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 3, Algorithm 1.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from pacpriv._numbers import format_bound
from pacpriv._validation import check_int
from pacpriv.exceptions import CalibrationError
from pacpriv.pac.noise._plan import NoisePlan

__all__ = ["NoiseRule"]

#: One caveat: its text (for the report) and, if the user must see it now, a warning category.
Note = tuple[str, "type[Warning] | None"]


#: CLI flags of the rule parameters that several rules share (field metadata: the CLI adds
#: ``--flag`` from it and names the flag in errors; see ``pacpriv.cli._specs``).
CONFIDENCE_FLAG = {"flag": "--confidence", "help": "confidence 1-gamma in (0, 1) of the rule "
                   "(default 0.95 where the rule has a default; a required minimum otherwise)"}
OUTPUT_BOUND_FLAG = {"flag": "--output-bound", "help": "public bound r > 0 on ||f(X)||_2 "
                                                       "(certified: "
                     "clip radius and minimum noise for constant outputs; Algorithm 1: "
                     "required); a simulated output above it is an error, the release is "
                     "clipped to it"}


def noise_out_of_range(rule: str, mi_budget: float) -> str:
    """The one-line refusal when a rule's noise for ``mi_budget`` leaves float64's range."""
    return (f"rule {rule!r}: the noise for mi_budget={mi_budget!r} nats exceeds float64's range "
            "(the noise variance scales like output variance / mi_budget); raise the budget "
            "or rescale the mechanism's outputs.")


@dataclass(frozen=True, kw_only=True)
class NoiseRule:
    """Base of the noise rules (a frozen, keyword-only dataclass of the rule's parameters).

    Attributes
    ----------
    name : str
        The shorthand name (``"certified"``, ``"anisotropic"``, ...), also ``NoisePlan.rule``.
    source : {"spectrum", "outputs"}
        What :meth:`plan` takes: an :class:`~pacpriv.pac.spectrum.OutputSpectrum`, or the
        ``(n_trials, d)`` simulated outputs.
    needs_eigenvectors : bool
        Whether the noise lives in the eigenbasis of ``Σ`` (else coordinate axes/isotropic).
    safe_when_undersampled : bool
        Whether the guarantee holds with fewer trials than output dimensions.
    certified : bool
        Whether the rule claims ``MI <= claim`` for the *true* covariance with a stated
        confidence (plug-in rules meet the budget for the estimate only).
    min_trials : int
        Fewest trials the rule can work with.
    summary : str
        One line for CLI help and reports.
    """

    name: ClassVar[str] = ""
    source: ClassVar[str] = "spectrum"
    needs_eigenvectors: ClassVar[bool] = True
    safe_when_undersampled: ClassVar[bool] = False
    certified: ClassVar[bool] = False
    min_trials: ClassVar[int] = 2
    summary: ClassVar[str] = ""

    # --- what a rule is -----------------------------------------------------------------------

    def parameters(self) -> dict:
        """The rule's parameters (field name -> value)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def parameter_names(cls) -> tuple[str, ...]:
        """Names of the rule's parameters (its dataclass fields)."""
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    def to_dict(self) -> dict:
        """JSON-serialisable description: ``{"rule": name, **parameters}``."""
        return {"rule": self.name, **self.parameters()}

    def __str__(self) -> str:
        return self.name

    @property
    def output_bound_assumed(self) -> float | None:
        """A public bound ``r >= ||f(X)||₂`` the rule relies on (checked against the trials)."""
        return getattr(self, "output_bound", None)

    # --- before the trials --------------------------------------------------------------------

    def validate(self, *, n_trials: int) -> None:
        """Check, before any trial, that ``n_trials`` trials can serve this rule.

        Raises
        ------
        ValueError
            If ``n_trials`` is below :attr:`min_trials` (or a rule-specific requirement).
        """
        n = check_int(n_trials, "n_trials", low=1)
        if n < self.min_trials:
            raise ValueError(f"`n_trials` must be an integer in [{self.min_trials}, "
                             f"{2**63 - 1}] with rule={self.name!r}, which needs at least "
                             f"{self.min_trials} trials; got {n}.")

    def trials_needed(self, *, dim: int) -> int:
        """Planning step: trials this rule needs for a ``dim``-dimensional output.

        The plug-in rules need more trials than output dimensions (every direction explored);
        certified rules override this with their own planning model.
        """
        return max(self.min_trials, check_int(dim, "dim", low=1) + 1)

    # --- the plan -----------------------------------------------------------------------------

    def plan(self, source: Any, *, mi_budget: float) -> NoisePlan:
        """The noise plan for ``mi_budget`` nats from ``source`` (see :attr:`source`)."""
        v = float(mi_budget)
        with np.errstate(over="ignore"):  # an overflow is refused below, never a raw warning
            plan = self._plan(source, v)
        std = np.asarray(plan.noise_std, dtype=np.float64)
        if not (np.all(np.isfinite(std)) and math.isfinite(plan.residual_std)):
            raise CalibrationError(noise_out_of_range(self.name, v))
        return dataclasses.replace(plan, rule_spec=self)

    def _plan(self, source: Any, mi_budget: float) -> NoisePlan:  # pragma: no cover - abstract
        raise NotImplementedError

    # --- what a plan of this rule claims ------------------------------------------------------

    def is_certified(self, plan: NoisePlan) -> bool:
        """Whether ``plan.mi_claim`` holds for the true covariance with ``plan.confidence``."""
        return bool(getattr(plan.certificate, "certified", False))

    def label(self, plan: NoisePlan) -> str:
        """Headline wording printed beside every bound of ``plan``."""
        return "estimated (plug-in)"

    def notes(self, plan: NoisePlan, *, n_trials: int, dim: int) -> list[Note]:
        """Rule-specific caveats for the report (with a warning category for the user)."""
        return [(
            f"estimated (plug-in): rule {self.name!r} meets the budget for the covariance "
            f"estimated from {n_trials} trials, not for the true one. Spread in the estimated "
            "eigenvalues raises the true MI (measured: the plug-in square-root rule exceeded "
            "the budget in all 200 runs at d = 50 outputs with 100 to 500 trials; "
            "docs/guide/certification.md, benchmarks/coverage.py). rule='certified' holds with "
            "a stated confidence.",
            None,
        )]

    def constant_note(self, plan: NoisePlan) -> str:
        """What the release does when every simulated output was identical."""
        return ("This plug-in rule adds no noise (estimate); use rule='certified' with "
                "output_bound for a certified minimum noise.")

    @staticmethod
    def _shown(x: float, side: str = "up") -> str:
        return format_bound(x, side=side)
