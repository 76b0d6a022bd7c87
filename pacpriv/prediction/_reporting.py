"""What a private predictor says about itself: its budget state, report section, wording.

Every number is public (the worlds, the budgets and the transcript are public in the threat
model of Zhu, Sridhar & Devadas, Private Prediction via PAC Privacy, arXiv:2601.14033, 2026;
only ``J`` and the noise are secret). The membership bound is
``posterior_success_rate(spent, prior)`` (Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 1),
certified with no estimation: the world posterior is computed exactly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pacpriv._numbers import format_bound, format_percent
from pacpriv.pac.bounds._posterior import posterior_success_rate
from pacpriv.prediction._seeds import SECRET_FROM_OS
from pacpriv.threat_models import THREAT_MODEL_PREDICTION as THREAT_MODEL

if TYPE_CHECKING:
    import threading
    from contextlib import AbstractContextManager

    from pacpriv.prediction._evaluate import Worlds
    from pacpriv.prediction._settings import Settings
    from pacpriv.prediction._state import StateDir

__all__ = ["BOUND_KIND", "RELEASES", "BoundCache", "BudgetReporting", "budget_state",
           "column_names", "release_of", "section_of", "threat_model"]

#: How the membership bound is obtained: no confidence level, since nothing is estimated (the
#: world posterior is computed exactly from the public worlds and the transcript).
BOUND_KIND = "certified, exact (no estimation)"

#: What each output kind releases (after the free post-processing).
RELEASES = {
    "proba": "noisy class probabilities, projected onto the probability simplex (Euclidean "
             "projection of the noisy answer: post-processing, covered by the same bound)",
    "logits": "noisy scores (decision function or logits; not probabilities)",
    "label": "noisy one-hot votes (exact where every world agrees; not probabilities)",
    "value": "noisy predicted values",
    "callable": "noisy outputs of the output callable",
}


def release_of(output_name: str) -> str:
    """The words for what ``output`` releases (:data:`RELEASES`)."""
    return RELEASES[output_name]


class BoundCache:
    """``posterior_success_rate(n · b, prior)`` by answered count ``n``, in blocks of 256.

    One vectorised bisection gives the bounds of 256 consecutive counts for the cost of one
    scalar call (the bisection is elementwise, so each value is the scalar call's value); a
    server answering one row per request computes one block per 256 requests.
    """

    BLOCK = 256

    def __init__(self, per_query_budget: float, prior: float, max_queries: int) -> None:
        self.per_query_budget = per_query_budget
        self.prior = prior
        self.max_queries = max_queries
        self._values: dict[int, float] = {}

    def __call__(self, n_answered: int) -> float:
        """The certified membership bound after ``n_answered`` rows."""
        if self.prior >= 1.0:
            return 1.0
        n = int(n_answered)
        if n not in self._values:
            if len(self._values) > 64 * self.BLOCK:
                self._values.clear()
            counts = np.arange(n, max(n + 1, min(n + self.BLOCK, self.max_queries + 1)))
            bounds = posterior_success_rate(counts * self.per_query_budget, prior=self.prior)
            self._values.update(zip(counts.tolist(), np.atleast_1d(bounds).tolist(),
                                    strict=True))
        return self._values[n]


def threat_model(secret_randomness: str) -> str:
    """The threat model, with the secret's actual source (OS entropy or a caller seed)."""
    if secret_randomness == SECRET_FROM_OS:
        return THREAT_MODEL
    return THREAT_MODEL.replace(
        "(drawn uniformly from OS entropy)",
        f"(drawn uniformly; here from a {secret_randomness}: anyone with that seed knows J)")


def budget_state(pp: BudgetReporting) -> dict:
    """Public budget state of ``pp`` (JSON-serialisable), as :meth:`PrivatePredictor.budget`."""
    fitted = pp.is_fitted
    n = pp._n_answered  # the caller has just read the ledger (budget())
    spent = n * pp.per_query_budget
    return {
        "n_worlds": pp.n_worlds,
        "per_query_budget": pp.per_query_budget,
        "total_budget": pp.total_budget,
        "spent": spent,
        "remaining": max(0.0, pp.total_budget - spent),
        "n_answered": n,
        "max_queries": pp.max_queries,
        "membership_prior": pp.membership_prior if fitted else None,
        "membership_bound": pp._bound_after(n) if fitted else None,
        "bound_kind": BOUND_KIND,
    }


def section_of(pp: BudgetReporting, facts: dict) -> dict:
    """The report section of ``pp`` from its public ``facts`` (:meth:`PrivatePredictor.to_dict`).

    Worlds, budgets, queries answered, the certified membership bound (rounded up) and the
    threat model in words; never ``J``, the noise seed or any record.
    """
    up = format_percent(facts["membership_bound"], 4)  # rounded up (safe side)
    rows = [
        ("worlds m", facts["n_worlds"]),
        ("world evaluation", facts["world_evaluation"]),
        ("membership prior (best blind guess)", format_bound(facts["membership_prior"])),
        ("records in the private pool", facts["n_records"]),
        ("per-query budget b", f"{facts['per_query_budget']:.6g} nats"),
        ("total budget", f"{facts['total_budget']:.6g} nats ({facts['max_queries']} queries)"),
        ("queries answered", facts["n_answered"]),
        ("MI spent (I(J; answers) <= spent)", f"{format_bound(facts['spent'])} nats"),
        ("noise rule", facts["rule"]),
        ("released per query", facts["release"]),
        ("secret index J and noise", facts["secret_randomness"]),
        ("noise sampler", facts["noise"]),
        ("membership-inference bound", f"{up} — {BOUND_KIND}: the world posterior is "
                                       "computed exactly"),
    ]
    table = "\n".join(["| quantity | value |", "| --- | --- |",
                       *(f"| {k} | {v} |" for k, v in rows)])
    markdown = "\n\n".join([
        f"No adversary can tell whether a record was in the answering model's training "
        f"set with probability above **{up}** after the {facts['n_answered']} queries "
        "answered so far.",
        table,
    ])
    return {"title": "PAC-private prediction (posterior-tracked worlds)",
            "mechanism": "private-prediction", "threat_model": facts["threat_model"],
            "markdown": markdown, "prediction": facts,
            "secret_randomness": facts["secret_randomness"]}


def column_names(output_name: str, classes, d: int) -> list[str]:
    """Names of the ``d`` answer columns: ``P(c)``, ``score(c)``, ``vote(c)`` per class ``c``
    (one ``score`` column for a binary decision function), ``value`` or ``value[i]``,
    ``output[i]`` for a callable output."""
    if classes is not None and output_name in ("proba", "logits", "label") and \
            d == len(classes):
        prefix = {"proba": "P", "logits": "score", "label": "vote"}[output_name]
        return [f"{prefix}({c})" for c in np.asarray(classes).tolist()]
    if output_name == "logits" and d == 1:
        return ["score"]
    base = "value" if output_name == "value" else "output"
    return [base] if d == 1 and base == "value" else [f"{base}[{i}]" for i in range(d)]


class BudgetReporting:
    """Mixin: the budget of a private predictor and what it reports (public facts only)."""

    if TYPE_CHECKING:  # provided by PrivatePredictor
        _n_answered: int
        _log_posterior: np.ndarray
        _settings: Settings
        _prior: float | None
        _bounds: BoundCache | None
        _lock: threading.Lock
        _state: StateDir | None
        _worlds: Worlds | None
        n_records: int | None
        n_worlds: int
        per_query_budget: float
        total_budget: float
        rule: str

        @property
        def is_fitted(self) -> bool: ...

        @property
        def secret_randomness(self) -> str: ...

        @property
        def noise_source(self) -> str: ...

        def _fitted(self) -> tuple[Worlds, np.ndarray, int]: ...

        def _state_lock(self) -> AbstractContextManager: ...

        def _sync(self) -> None: ...

    def _refresh(self) -> None:
        """With a state directory, read the answered count from its ledger: answers given by
        other objects or processes on the same state count (thirteenth new-user pass: a second
        object on one state reported its load-time spend and bound)."""
        if self._state is not None and self.is_fitted:
            with self._lock:
                self._sync()

    @property
    def n_answered(self) -> int:
        """Number of query rows answered so far (on the state's ledger, when there is one)."""
        self._refresh()
        return self._n_answered

    @property
    def spent(self) -> float:
        """MI spent so far, ``n_answered · per_query_budget`` (nats)."""
        return self.n_answered * self.per_query_budget

    @property
    def remaining(self) -> float:
        """``total_budget − spent`` (nats, >= 0)."""
        return max(0.0, self.total_budget - self.spent)

    @property
    def max_queries(self) -> int:
        """Number of query rows ``total_budget`` allows in all."""
        return self._settings.max_queries

    @property
    def log_posterior(self) -> np.ndarray:
        """Current log posterior over worlds; a copy.

        A function of the public worlds and of the noisy answers before any projection, so
        revealing it is covered by the same bound (with ``output="proba"`` it is not computable
        from the projected answers alone)."""
        return self._log_posterior.copy()

    @property
    def membership_prior(self) -> float:
        """Largest blind-guess rate ``max_i max(q_i, 1 − q_i)``, ``q_i`` = fraction of worlds
        holding record ``i`` (exactly ½ for complementary pairs)."""
        self._fitted()
        assert self._prior is not None
        return self._prior

    def bound_after(self, mi: float) -> float:
        """Membership success bound (any inference about ``J`` with a blind guess <= the
        prior) after spending ``mi`` nats."""
        prior = self.membership_prior
        if prior >= 1.0:
            return 1.0
        return float(posterior_success_rate(mi, prior=prior))

    @property
    def membership_bound(self) -> float:
        """Certified bound on membership-inference success after the spend so far.

        ``posterior_success_rate(spent, prior=membership_prior)`` ([PAC] Thm 1), rounded up.
        """
        self._fitted()
        return self._bound_after(self.n_answered)

    def _bound_after(self, n_answered: int) -> float:
        assert self._bounds is not None
        return self._bounds(n_answered)

    def budget(self) -> dict:
        """Public budget state (JSON-serialisable).

        With a state directory, the ledger is read again first (under the directory's lock),
        so the state includes answers given by other processes sharing the directory.
        """
        with self._lock:
            if self._state is not None and self.is_fitted:
                self._sync()
            return budget_state(self)

    def report_section(self) -> dict:
        """Report section (for :func:`pacpriv.report.write_report`): public facts only.

        Worlds, budgets, queries answered, the certified membership bound (rounded up), what
        each answer releases and the threat model in words; never ``J``, the noise seed or
        any record.
        """
        self._fitted()
        return section_of(self, self.to_dict())

    def to_dict(self) -> dict:
        """Public facts for a report: worlds, budgets, queries answered, bound, what each
        answer releases (``release``), how the worlds are evaluated, the threat model and where
        the secret index came from (``secret_randomness``)."""
        return {
            **self.budget(),
            "rule": self.rule,
            "output": self._settings.output_name,
            "release": release_of(self._settings.output_name),
            "world_evaluation": None if self._worlds is None else self._worlds.evaluation,
            "n_records": self.n_records,
            "secret_randomness": self.secret_randomness,
            "noise": self.noise_source,
            "threat_model": threat_model(self.secret_randomness),
            **({} if (prep := getattr(self, "preprocessing", None)) is None else
               {"preprocessing": prep.describe()}),  # public words; a state without: as before
        }
