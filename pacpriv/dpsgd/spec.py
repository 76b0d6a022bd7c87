"""``DPSGDSpec``: a frozen, analytic description of a random-allocation DP-SGD run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pacpriv._numbers import format_bound
from pacpriv._validation import check_int, check_real
from pacpriv.dpsgd.bounds import AccuracyBound, membership_inference_accuracy_bound
from pacpriv.dpsgd.calibration import noise_multiplier_for_accuracy
from pacpriv.dpsgd.exact import ExactAccuracy, exact_membership_inference_accuracy
from pacpriv.dpsgd.sampling import RandomAllocation
from pacpriv.dpsgd.tradeoff import TradeoffCurve, tradeoff_curve
from pacpriv.threat_models import THREAT_MODEL_DPSGD as THREAT_MODEL

__all__ = ["THREAT_MODEL", "DPSGDSpec", "spec_arguments", "spec_triple"]


@dataclass(frozen=True)
class DPSGDSpec:
    """Analytic description of DP-SGD with random allocation (balls-in-bins batches).

    Parameters
    ----------
    noise_multiplier : float
        σ > 0: noise standard deviation divided by the clipping norm C.
    steps_per_epoch : int
        ``M ≥ 1`` steps per epoch; every record is used exactly once per epoch, at a step
        drawn uniformly at random.
    epochs : int
        ``E ≥ 1``.
    dataset_size : int, optional
        Number of training records ``n`` (expected batch size ``n/M``); reporting only.
    max_grad_norm : float, optional
        Clipping norm C (> 0); reporting only (the bounds are scale free).
    k : int, default 1
        Steps per record per epoch: each record is used at ``k`` distinct uniformly chosen
        steps of every epoch (k of t, ``1 ≤ k ≤ steps_per_epoch``; see
        :class:`~pacpriv.dpsgd.RandomAllocation`).

    Notes
    -----
    The one-record dominating pair per epoch is ``P = N(0, σ² I_M)`` versus
    ``Q = (1/M) Σ_i N(e_i, σ² I_M)`` [1]_; E epochs compose. The spec answers the
    membership-inference questions without simulation.

    References
    ----------
    .. [1] L. Chua et al., Balls-and-Bins Sampling for DP-SGD, AISTATS 2025.
    """

    noise_multiplier: float = field(metadata={
        "flag": "--noise-multiplier", "help": "noise multiplier sigma > 0",
        "sweep": "one or more sigma > 0 (several: a table, one row per sigma)"})
    steps_per_epoch: int = field(metadata={"flag": "--steps-per-epoch",
                                           "help": "M, steps per epoch (>= 1)"})
    epochs: int = field(metadata={"flag": "--epochs", "help": "E, number of epochs (>= 1)"})
    dataset_size: int | None = None
    max_grad_norm: float | None = None
    k: int = field(default=1, metadata={
        "flag": "--k", "help": "steps per record per epoch, in [1, M]: each record is used at k "
                               "random "
        "distinct steps of every epoch (k out of t = steps per epoch; default 1)"})

    def __post_init__(self) -> None:
        """Validate the fields (same messages as the functions)."""
        object.__setattr__(
            self,
            "noise_multiplier",
            check_real(self.noise_multiplier, "noise_multiplier", low=0, low_inclusive=False),
        )
        object.__setattr__(
            self, "steps_per_epoch", check_int(self.steps_per_epoch, "steps_per_epoch", low=1)
        )
        object.__setattr__(self, "epochs", check_int(self.epochs, "epochs", low=1))
        object.__setattr__(self, "k", RandomAllocation(self.k).k)
        RandomAllocation(self.k).check(self.steps_per_epoch)
        if self.dataset_size is not None:
            object.__setattr__(
                self, "dataset_size", check_int(self.dataset_size, "dataset_size", low=1)
            )
        if self.max_grad_norm is not None:
            object.__setattr__(
                self,
                "max_grad_norm",
                check_real(self.max_grad_norm, "max_grad_norm", low=0, low_inclusive=False),
            )

    @property
    def total_steps(self) -> int:
        """``M·E``."""
        return self.steps_per_epoch * self.epochs

    @property
    def expected_batch_size(self) -> float | None:
        """``k·dataset_size / M`` (None without a dataset size)."""
        if self.dataset_size is None:
            return None
        return self.k * self.dataset_size / self.steps_per_epoch

    @property
    def allocation(self) -> RandomAllocation:
        """The batch sampler's spec, ``RandomAllocation(k)``."""
        return RandomAllocation(self.k)

    def tradeoff_curve(self, *, fpr=None, tolerance: float = 1e-4) -> TradeoffCurve:
        """Certified trade-off curve (see :func:`pacpriv.dpsgd.tradeoff_curve`)."""
        return tradeoff_curve(noise_multiplier=self.noise_multiplier,
                              steps_per_epoch=self.steps_per_epoch, epochs=self.epochs,
                              k=self.k, fpr=fpr, tolerance=tolerance)

    def get_epsilon(self, delta: float) -> float:
        """ε at ``delta`` (add or remove one record): the smallest sound upper bound of
        :func:`pacpriv.dpsgd.epsilon.epsilon_bound` (the certified PLD of
        :meth:`tradeoff_curve` where it can be built, else a closed form); monotone in σ, M,
        E and δ, ``inf`` only beyond float64."""
        from pacpriv.dpsgd.epsilon import epsilon_bound

        return epsilon_bound(self.noise_multiplier, steps_per_epoch=self.steps_per_epoch,
                             epochs=self.epochs, delta=delta, k=self.k).epsilon

    def membership_inference_accuracy_bound(self) -> AccuracyBound:
        """Chi-square closed-form bound (see :func:`membership_inference_accuracy_bound`).

        The certified exact accuracy (:meth:`exact_membership_inference_accuracy`) is never
        above it and is what ``make_private``'s
        :meth:`~pacpriv.dpsgd.private.PrivateTraining.membership_inference_accuracy_bound`
        reports by default (``method="chi-square"`` gives this number there).
        """
        return membership_inference_accuracy_bound(
            self.noise_multiplier, steps_per_epoch=self.steps_per_epoch, epochs=self.epochs,
            k=self.k,
        )

    def exact_membership_inference_accuracy(self, *, tolerance: float = 1e-4) -> ExactAccuracy:
        """Certified exact accuracy interval (see :func:`exact_membership_inference_accuracy`)."""
        return exact_membership_inference_accuracy(
            self.noise_multiplier,
            steps_per_epoch=self.steps_per_epoch,
            epochs=self.epochs,
            tolerance=tolerance,
            k=self.k,
        )

    def noise_multiplier_for_accuracy(
        self, target_accuracy: float, *, method: str = "closed-form", rtol: float = 1e-3
    ) -> float:
        """σ needed for ``target_accuracy`` with this spec's M and E."""

        return noise_multiplier_for_accuracy(
            target_accuracy,
            steps_per_epoch=self.steps_per_epoch,
            epochs=self.epochs,
            method=method,
            rtol=rtol,
            k=self.k,
        )

    def with_noise_multiplier(self, noise_multiplier: float) -> DPSGDSpec:
        """Copy with another σ."""
        return DPSGDSpec(
            noise_multiplier, self.steps_per_epoch, self.epochs, self.dataset_size,
            self.max_grad_norm, self.k,
        )

    def to_dict(self) -> dict:
        """JSON-serialisable dict of the fields."""
        return asdict(self)

    def report_section(self, *, exact: bool = True, tolerance: float = 1e-4) -> dict:
        """Report section: spec, threat model, closed-form bound and (optionally) exact interval.

        Returns
        -------
        dict
            Keys ``title``, ``mechanism``, ``spec``, ``threat_model``,
            ``membership_inference_accuracy_bound`` (closed form, with ``vacuous``) and, if
            ``exact``, ``exact_membership_inference_accuracy`` (``lower``/``upper``).
        """
        bound = self.membership_inference_accuracy_bound()
        section = {
            "title": "DP-SGD with random allocation (analytic)" if self.k == 1 else
                     f"DP-SGD with random allocation, {self.k} of {self.steps_per_epoch} "
                     "steps per epoch (analytic)",
            "mechanism": "dpsgd-random-allocation",
            "spec": self.to_dict(),
            "threat_model": THREAT_MODEL,
            "membership_inference_accuracy_bound": {
                "accuracy": bound.accuracy,
                "log1p_chi_square": bound.log1p_chi_square,
                "vacuous": bool(bound.vacuous),
                "source": "chi-square closed form (RA-MIA)" if self.k == 1 else
                          "chi-square, hypergeometric overlap (k of t)",
            },
        }
        if exact:
            res = self.exact_membership_inference_accuracy(tolerance=tolerance)
            section["exact_membership_inference_accuracy"] = {
                "lower": res.lower,
                "upper": res.upper,
                "estimate": res.estimate,
                "converged": res.converged,
                "method": res.method,
                "lower_confidence": res.lower_confidence,
            }
        return section

    def to_markdown(self, *, exact: bool = True, tolerance: float = 1e-4) -> str:
        """Markdown rendering of :meth:`report_section`."""
        sec = self.report_section(exact=exact, tolerance=tolerance)
        b = sec["membership_inference_accuracy_bound"]
        lines = [
            f"## {sec['title']}",
            "",
            f"- noise multiplier σ = {self.noise_multiplier:g}",
            f"- steps per epoch M = {self.steps_per_epoch}, epochs E = {self.epochs}",
        ]
        if self.k != 1:
            lines.append(f"- each record is used at k = {self.k} random steps per epoch")
        if self.dataset_size is not None:
            lines.append(
                f"- dataset size n = {self.dataset_size} "
                f"(expected batch size {self.expected_batch_size:g})"
            )
        if self.max_grad_norm is not None:
            lines.append(f"- clipping norm C = {self.max_grad_norm:g}")
        vac = " (vacuous)" if b["vacuous"] else ""
        lines += [
            "",
            f"**Threat model.** {sec['threat_model']}",
            "",
            "| quantity | value |",
            "|---|---|",
            f"| membership-inference accuracy bound (chi-square) | "
            f"{format_bound(b['accuracy'], side='up')}{vac} |",
        ]
        if exact:
            e = sec["exact_membership_inference_accuracy"]
            conf = ("" if e["lower_confidence"] == 1.0 else
                    f" (lower end with confidence {e['lower_confidence']:g})")
            lines.append(
                f"| exact membership-inference accuracy (certified{conf}) | "
                f"[{format_bound(e['lower'], side='down')}, "
                f"{format_bound(e['upper'], side='up')}] |"
            )
        return "\n".join(lines) + "\n"


def spec_arguments(spec: DPSGDSpec | None, **given: Any) -> dict:
    """The DP-SGD arguments a function runs with: a :class:`DPSGDSpec` or the individual ones.

    ``given`` holds the caller's ``noise_multiplier`` / ``steps_per_epoch`` / ``epochs`` (any of
    them). Without ``spec`` they are returned unchanged; with it, each must be left at ``None``
    (else ``TypeError``: one source of truth) and the spec's values are returned, as a
    dp-accounting event description is consumed by every accountant.

    Examples
    --------
    >>> spec_arguments(DPSGDSpec(noise_multiplier=2.0, steps_per_epoch=10, epochs=3),
    ...                steps_per_epoch=None, epochs=None)
    {'steps_per_epoch': 10, 'epochs': 3}
    """
    if spec is None:
        return dict(given)
    if not isinstance(spec, DPSGDSpec):
        raise TypeError(f"`spec` must be a DPSGDSpec or None; got {type(spec).__name__}.")
    clash = sorted(k for k, v in given.items() if v is not None)
    if clash:
        raise TypeError(
            f"pass {', '.join(clash)} either in `spec` or individually, not both."
        )
    return {k: getattr(spec, k) for k in given}


def spec_triple(spec: DPSGDSpec | None, noise_multiplier, steps_per_epoch, epochs) -> tuple:
    """``(noise_multiplier, steps_per_epoch, epochs)`` from ``spec`` or the arguments (not both)."""
    got = spec_arguments(
        spec, noise_multiplier=noise_multiplier, steps_per_epoch=steps_per_epoch, epochs=epochs
    )
    return got["noise_multiplier"], got["steps_per_epoch"], got["epochs"]


def with_max_grad_norm(given: dict, spec: DPSGDSpec | None, where: str) -> dict:
    """``given`` with its ``max_grad_norm``: the keyword, else ``spec.max_grad_norm``.

    Raises
    ------
    TypeError
        If neither gives one, or both give different values (one source of truth).
    """
    out = dict(given)
    if "max_grad_norm" not in out:
        if spec is None or spec.max_grad_norm is None:
            raise TypeError(f"{where}() missing the keyword argument 'max_grad_norm' (the "
                            "clipping norm C > 0, or None for no clipping with σ = 0), or "
                            "spec=DPSGDSpec(..., max_grad_norm=C).")
        out["max_grad_norm"] = spec.max_grad_norm
    elif (spec is not None and spec.max_grad_norm is not None
          and out["max_grad_norm"] != spec.max_grad_norm):
        raise TypeError("pass max_grad_norm either in `spec` or individually, not both.")
    return out
