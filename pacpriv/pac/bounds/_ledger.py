"""A ledger of mutual-information budgets spent by successive noisy releases.

Releases ``Y_1, Y_2, ...`` of the same secret subset, each with its own independent Gaussian noise
calibrated to a budget ``v_t``, are conditionally independent given the subset, so
``MI(X; Y_1, ..., Y_T) <= Σ_t v_t`` (chain rule of mutual
information). :class:`PrivacyLedger` adds the budgets up and refuses, *all or nothing*, a release
that would take the sum over a total cap.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, §4 (composition of
   releases with independent noise).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from pacpriv._numbers import format_bound
from pacpriv._validation import check_real
from pacpriv.exceptions import BudgetExceededError
from pacpriv.pac.bounds._posterior import posterior_success_rate

__all__ = ["LedgerEntry", "PrivacyLedger"]

_SLACK = 1e-12  # relative round-off slack of the cap


def _check_prior(prior) -> float:
    return check_real(prior, "prior", low=0.0, high=1.0, low_inclusive=False,
                      high_inclusive=False)


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded release.

    Attributes
    ----------
    mi : float
        Mutual-information budget charged, nats (``>= 0``).
    label : str or None
        Caller's description of the release.
    timestamp : float
        ``time.time()`` (seconds since the epoch, UTC) when it was recorded.
    """

    mi: float
    label: str | None
    timestamp: float

    def to_dict(self) -> dict:
        """JSON-serialisable dictionary of the fields."""
        return {"mi": self.mi, "label": self.label, "timestamp": self.timestamp}


class PrivacyLedger:
    """Cumulative mutual-information budget of releases about one secret (composition adds).

    Parameters
    ----------
    total_budget : float or None, default None
        Cap on the summed budget, nats, ``> 0``; ``None`` records without a cap.
    prior : float or None, default None
        Blind-guess success rate ``p0`` in ``(0, 1)`` of the secret the releases are about
        (``max(q, 1 − q)`` for inclusion probability ``q``). A
        :class:`~pacpriv.pac.wrapper.PacPrivateFunction` sets it from its sampler when it is
        calibrated; see :meth:`use_prior`.

    Notes
    -----
    Budgets are summed with :func:`math.fsum` (correctly rounded). A charge is accepted iff
    ``spent + mi <= total_budget · (1 + 1e-12)``: the relative slack of ``1e-12`` (the same as
    the calibration's certification check) only absorbs decimal round-off, so that e.g. charges
    of 0.2 and 0.1 fit a cap of 0.3. A refused charge leaves the ledger unchanged.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, §4 (composition: budgets add).

    Examples
    --------
    >>> ledger = PrivacyLedger(total_budget=0.1)
    >>> _ = ledger.charge(0.06, label="first")
    >>> round(ledger.remaining, 10)
    0.04
    """

    def __init__(self, total_budget: float | None = None, *, prior: float | None = None) -> None:
        if total_budget is not None:
            total_budget = check_real(total_budget, "total_budget", low=0.0, low_inclusive=False)
        self._total = total_budget
        self._entries: list[LedgerEntry] = []
        self._prior = None if prior is None else _check_prior(prior)

    @property
    def prior(self) -> float | None:
        """Blind-guess prior ``p0`` of the posterior bound (``None`` until known)."""
        return self._prior

    def use_prior(self, prior: float) -> None:
        """Record the blind-guess prior of a release (the wrappers call this when calibrated).

        Functions sharing a ledger release about one secret; if they report different priors,
        the largest is kept (the posterior bound grows with the prior: the safe side).

        Raises
        ------
        TypeError, ValueError
            If ``prior`` is not a real number in ``(0, 1)``.
        """
        p = _check_prior(prior)
        self._prior = p if self._prior is None else max(self._prior, p)

    @property
    def total_budget(self) -> float | None:
        """The cap in nats (``None``: no cap)."""
        return self._total

    @property
    def releases(self) -> list[LedgerEntry]:
        """Recorded releases, oldest first (a copy)."""
        return list(self._entries)

    @property
    def spent(self) -> float:
        """Sum of the charged budgets, nats (an upper bound on the MI of all releases)."""
        return math.fsum(e.mi for e in self._entries)

    @property
    def remaining(self) -> float:
        """``total_budget − spent`` in nats (``inf`` without a cap; never negative)."""
        if self._total is None:
            return math.inf
        return max(self._total - self.spent, 0.0)

    def can_charge(self, mi: float) -> bool:
        """Whether a charge of ``mi`` nats would be accepted (records nothing)."""
        mi = check_real(mi, "mi", low=0.0)
        if self._total is None:
            return True
        return math.fsum([*(e.mi for e in self._entries), mi]) <= self._total * (1.0 + _SLACK)

    def charge(self, mi: float, *, label: str | None = None) -> LedgerEntry:
        """Record a release of budget ``mi`` nats, or refuse it without recording anything.

        Parameters
        ----------
        mi : float
            Budget of the release, nats, ``>= 0`` (finite).
        label : str or None
            Description stored with the entry.

        Returns
        -------
        LedgerEntry

        Raises
        ------
        TypeError, ValueError
            If ``mi`` is not a finite number ``>= 0`` or ``label`` is not a str.
        pacpriv.exceptions.BudgetExceededError
            If ``spent + mi`` would exceed ``total_budget`` (the ledger is left unchanged).
        """
        mi = check_real(mi, "mi", low=0.0)
        if label is not None and not isinstance(label, str):
            raise TypeError(f"`label` must be a str or None; got {type(label).__name__}.")
        if not self.can_charge(mi):
            raise BudgetExceededError(
                f"release of {format_bound(mi)} nats refused: {format_bound(self.spent)} of "
                f"the total budget {format_bound(self._total, side='nearest')} nats is spent, "
                f"{format_bound(self.remaining, side='down')} remain."
            )
        entry = LedgerEntry(mi=mi, label=label, timestamp=time.time())
        self._entries.append(entry)
        return entry

    def posterior_success_bound(self, *, prior: float | None = None) -> float:
        """Posterior-success bound of an adversary seeing every recorded release.

        ``posterior_success_rate(spent, prior=p0)`` ([1]_ Thm 1), with ``p0`` the given
        ``prior`` or else the ledger's own (:attr:`prior`, set by the calibrated wrapper):
        never an assumed ½.

        Raises
        ------
        ValueError
            If no prior is given and the ledger has none, or ``prior`` is outside ``(0, 1)``.
        """

        if prior is None:
            if self._prior is None:
                raise ValueError(
                    "`prior` is required: this ledger has no membership prior yet (calibrate "
                    "a PacPrivateFunction that uses it, or pass prior=max(q, 1 - q) for "
                    "inclusion probability q)."
                )
            prior = self._prior
        return float(posterior_success_rate(self.spent, prior=_check_prior(prior)))

    def to_dict(self) -> dict:
        """JSON-serialisable summary: cap, spent, remaining and every entry."""
        return {
            "total_budget": self._total,
            "prior": self._prior,
            "spent": self.spent,
            "remaining": None if self._total is None else self.remaining,
            "releases": [e.to_dict() for e in self._entries],
        }

    def __repr__(self) -> str:
        return (
            f"PrivacyLedger(total_budget={self._total!r}, spent={format_bound(self.spent)}, "
            f"n_releases={len(self._entries)})"
        )
