"""The public settings of a private predictor, validated once, and their ``config.json`` form.

:class:`Settings` is what :class:`~pacpriv.prediction.PrivatePredictor` checks before any work
(the world count, the budgets, the output kind, the noise rule) and what its state directory
records; ``PrivatePredictor(...)`` builds it from the arguments and ``PrivatePredictor.load``
from the stored config, and both hand it to the same private initialiser.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pacpriv._validation import check_int, check_real
from pacpriv.pac.noise._rule import NoiseRule
from pacpriv.pac.samplers import Sampler, callable_fingerprint
from pacpriv.prediction._evaluate import OUTPUTS
from pacpriv.prediction._noise import NOISE_RULES, smallest_grid_budget

__all__ = ["BUDGET_TOLERANCE", "CLASSIFIER_OUTPUTS", "Settings", "check_query_floor",
           "output_dim", "output_fingerprint"]

#: Relative slack when comparing the spend with ``total_budget`` (absorbs ``n·b`` round-off; the
#: reported bound always uses the actual spend ``n_answered · per_query_budget``).
BUDGET_TOLERANCE = 1e-12

#: Outputs whose coordinates are the classes (``predict`` gives labels, ``classes_`` is set).
CLASSIFIER_OUTPUTS = ("proba", "logits", "label")


def output_dim(output: str | Callable, y) -> int | None:
    """The number ``d`` of released coordinates per query row, from the pool's labels ``y``
    before any world is fitted: the classes for ``"proba"``/``"label"``, 1 for two-class
    ``"logits"`` (else the classes), ``y``'s columns for ``"value"``; None when the labels do
    not say (a callable output, no labels)."""
    import numpy as np

    if y is None or not isinstance(output, str):
        return None
    y = np.asarray(y)
    if output == "value":
        return 1 if y.ndim == 1 else int(y.shape[1])
    n_classes = int(np.unique(y).size)
    if output == "logits" and n_classes == 2:
        return 1
    return n_classes


def check_query_floor(per_query_budget: float, d: int, *, name: str = "`per_query_budget`",
                      output: str = "") -> None:
    """Refuse a per-query budget that the grid release of ``d`` coordinates cannot meet (every
    query would fail): it must exceed
    :func:`~pacpriv.prediction._noise.smallest_grid_budget` ``(d)``.

    Raises
    ------
    ValueError
        Naming ``name``, the floor (rounded up) and the value received.
    """
    from pacpriv._numbers import format_bound

    smallest = smallest_grid_budget(int(d))
    if not per_query_budget > smallest:
        kind = f" ({output})" if output else ""
        raise ValueError(
            f"{name} {per_query_budget:g} nats is too small for the grid release of {d} output "
            f"coordinate(s){kind}: every query would fail; use more than "
            f"{format_bound(smallest, 3, side='up')} nats.")


def output_fingerprint(output: str | Callable) -> Any:
    """The output kind for fingerprints: its name, or a callable's name and source hash."""
    return output if isinstance(output, str) else callable_fingerprint(output)


#: The most worlds a predictor fits (each world is one fitted model; a million fits is far past
#: any useful posterior, and the limit keeps a typo from starting an unbounded run).
MAX_WORLDS = 10**6


@dataclass(frozen=True)
class Settings:
    """Validated public settings of a predictor.

    Attributes
    ----------
    n_worlds : int
        ``m >= 2`` (even for complementary pairs).
    per_query_budget : float
        ``b > 0`` nats per answered row.
    total_budget : float
        Cap on the spend, ``>= b`` nats.
    output : {"proba", "logits", "value", "label"} or callable
    rule : {"anisotropic", "exact-mi", "isotropic"}
        The name (a rule object ``Anisotropic()``, ``ExactMI()`` or ``Isotropic()`` is
        stored by its name).
    """

    n_worlds: int
    per_query_budget: float
    total_budget: float
    output: str | Callable
    rule: str

    @classmethod
    def checked(cls, *, n_worlds, per_query_budget, total_budget, output, rule,
                sampler: Sampler) -> Settings:
        """Validate the arguments of ``PrivatePredictor(...)``.

        Raises
        ------
        TypeError, ValueError
            Naming the argument, the allowed range and the value received.
        """
        m = check_int(n_worlds, "n_worlds", low=2, high=MAX_WORLDS)
        k = sampler.trials_per_draw  # worlds drawn together (2: complementary pairs)
        if m % k:
            raise ValueError(f"`n_worlds` must be a multiple of {k} for the sampler "
                             f"{sampler.name!r} (its worlds are drawn {k} at a time: every "
                             f"record in exactly its share of them); got {m}.")
        b = check_real(per_query_budget, "per_query_budget", low=0.0, low_inclusive=False)
        check_query_floor(b, 1)  # at least one coordinate; fit() checks the actual d
        try:  # the floor is the per-query budget, whatever is wrong (0, negative, NaN, low)
            total = check_real(total_budget, "total_budget", low=b)
        except ValueError as err:  # its "got ..." shows the value as every range check does
            got = str(err).rsplit("; got ", 1)[-1].rstrip(".")
            raise ValueError(f"`total_budget` must be a finite number of nats in [{b:g}, inf): "
                             f"at least `per_query_budget` ({b:g} nats: one answer spends that "
                             f"much); got {got}.") from None
        if not (callable(output) or (isinstance(output, str) and output in OUTPUTS)):
            raise ValueError(f"`output` must be one of {OUTPUTS} or a callable (model, X) -> "
                             f"(n, d); got {output!r}.")
        if isinstance(rule, NoiseRule) and rule.name in NOISE_RULES and not rule.parameters():
            rule = rule.name  # Anisotropic(), ExactMI(), Isotropic(): their names
        if not isinstance(rule, str) or rule not in NOISE_RULES:
            objects = ", ".join(f"{c.__name__}()" for c in NOISE_RULES.values())
            raise ValueError(f"`rule` must be one of {', '.join(NOISE_RULES.names())} or "
                             f"{objects} (exact per-query covariance: no estimation rule "
                             f"applies); got {rule!r}.")
        return cls(n_worlds=m, per_query_budget=b, total_budget=total, output=output, rule=rule)

    @classmethod
    def from_config(cls, config: dict, output: str | Callable) -> Settings:
        """The settings a state directory recorded (``output`` from its evaluator file)."""
        return cls(n_worlds=int(config["n_worlds"]),
                   per_query_budget=float(config["per_query_budget"]),
                   total_budget=float(config["total_budget"]), output=output,
                   rule=str(config["rule"]))

    @property
    def max_queries(self) -> int:
        """Query rows ``total_budget`` allows in all."""
        return math.floor(self.total_budget / self.per_query_budget * (1.0 + BUDGET_TOLERANCE))

    @property
    def output_name(self) -> str:
        """The output's name, ``"callable"`` for a callable."""
        return self.output if isinstance(self.output, str) else "callable"

    @property
    def estimator_type(self) -> str | None:
        """``"classifier"`` (proba, logits, label), ``"regressor"`` (value), None (callable)."""
        if not isinstance(self.output, str):
            return None
        return "classifier" if self.output in CLASSIFIER_OUTPUTS else "regressor"

    def fingerprint(self) -> dict:
        """The part of a state's fingerprint these settings decide."""
        return {"n_worlds": self.n_worlds, "per_query_budget": self.per_query_budget,
                "total_budget": self.total_budget, "rule": self.rule,
                "output": output_fingerprint(self.output)}

    def to_config(self) -> dict:
        """The keys of ``config.json`` these settings decide."""
        return {"n_worlds": self.n_worlds, "per_query_budget": self.per_query_budget,
                "total_budget": self.total_budget, "rule": self.rule,
                "output": self.output_name}
