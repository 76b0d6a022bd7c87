"""Certified trade-off curves of DP-SGD: the largest true-positive rate of any membership test.

For the one-record pair ``(P, Q)`` (P: the training run without the record, Q: with it), every
test that flags members with false-positive rate α has true-positive rate at most

    β(α) = min(1, min_ε e^ε·α + δ(ε)),     δ(ε) = E_Q[(1 − e^{ε − L})_+],  L = ln dQ/dP,

(Dong, Roth & Su 2022, Prop. 2.12: the minimum over all real ε is the Neyman–Pearson curve of
the pair; any upper bound on δ gives an upper bound on β). :func:`tradeoff_curve` evaluates it
from a pessimistic privacy-loss distribution:

* random allocation (``k`` of ``t``): the upper (dominating) chain of
  :func:`pacpriv.dpsgd.exact_membership_inference_accuracy`, composed E times, with its
  window, round-off and tails added on the pessimistic side (:mod:`pacpriv.dpsgd._exact.loss`);
  ``k > 1`` through the stratification reduction (:class:`~pacpriv.dpsgd.RandomAllocation`):
  certified for every ``k``;
* Poisson subsampling: dp-accounting's pessimistic PLD (connect-the-dots) [3]_.

The same curve gives ``ε`` at any ``δ`` (add-or-remove neighbours, both directions), as
opacus and dp-accounting report it: :meth:`TradeoffCurve.get_epsilon`.

References
----------
.. [1] J. Dong, A. Roth, W. Su, Gaussian Differential Privacy, JRSSB 2022 (trade-off
   functions, Prop. 2.12; Gaussian check ``β = Φ(Φ⁻¹(α) + μ)``).
.. [2] V. Feldman, M. Shenfeld, Efficient privacy loss accounting for subsampling and random
   allocation, arXiv:2602.17284, 2026.
.. [3] V. Doroshenko et al., Connect the Dots: Tighter Discrete Approximations of Privacy
   Loss Distributions, PETS 2022.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from pacpriv._display import Displayable, Summary
from pacpriv._optional import import_optional
from pacpriv._validation import check_int, check_real
from pacpriv.dpsgd import exact as _exact
from pacpriv.dpsgd._exact import composition as _comp
from pacpriv.dpsgd._exact.loss import AtomLoss, GridLoss, epsilon_for_delta, tpr_upper
from pacpriv.dpsgd.labels import bound_fields, label_rows
from pacpriv.dpsgd.sampling import (
    MAX_STEP_COUNT,
    PoissonSampling,
    RandomAllocation,
    Sampling,
    as_sampling,
    poisson_delta_allowance,
)

__all__ = ["TradeoffCurve", "default_fpr_grid", "tradeoff_curve"]

_U = 2.0**-53
#: Q-tail of the chain sent to +∞ (per coordinate / level): far below the smallest FPR (1e-6)
_CURVE_TAIL = 1e-10


def default_fpr_grid() -> np.ndarray:
    """Default false-positive rates: 0, 241 log-spaced points from 1e-6 to 1, and a linear
    grid of step 0.01 (sorted, unique, float64)."""
    return np.unique(np.concatenate(([0.0], np.geomspace(1e-6, 1.0, 241),
                                     np.linspace(0.0, 1.0, 101))))


@dataclass(frozen=True)
class TradeoffCurve(Displayable):
    """Upper bounds on the true-positive rate of every membership test, by false-positive rate.

    Attributes
    ----------
    fpr : ndarray of shape (n,), float64
        False-positive rates α in [0, 1] (ascending).
    tpr : ndarray of shape (n,), float64
        ``β(α) ≥`` the largest true-positive rate of any test at false-positive rate α (one
        record, worst case over datasets), in ``[α, 1]``.
    epsilon : ndarray of shape (n,), float64
        The privacy loss ε (nats) at which ``e^ε α + δ(ε)`` was smallest, per point.
    noise_multiplier : float
    steps_per_epoch, epochs, k : int
        ``t``, ``E`` and the steps per record per epoch (``k`` of ``t``; Poisson: rate k/t).
    sampling : dict
        The sampling spec (``scheme`` and its fields).
    certified : bool
        True for random allocation (a dominating pair, tails and round-off bounded); False for
        Poisson, whose dp-accounting PLD is pessimistic but does not bound its round-off.
    accuracy : float
        ``½ + ½·δ(0)``: the membership-inference accuracy bound of the same PLD (equal priors).
    method : str
    """

    fpr: np.ndarray
    tpr: np.ndarray
    epsilon: np.ndarray
    noise_multiplier: float
    steps_per_epoch: int
    epochs: int
    k: int
    sampling: dict
    certified: bool
    accuracy: float
    method: str
    loss: AtomLoss | GridLoss = field(repr=False, compare=False)

    def tpr_at(self, fpr) -> np.ndarray:
        """``β(α)`` at any false-positive rates (the same minimum over ε; array in, array out)."""
        a = np.asarray(fpr, dtype=np.float64)
        flat = _check_fpr(a.ravel())
        return tpr_upper(self.loss, flat)[0].reshape(a.shape)

    @property
    def type_ii_error(self) -> np.ndarray:
        """``1 − β(α)``, a lower bound on the false-negative rate (the f-DP trade-off
        function, Dong, Roth & Su 2022, Def. 2.1), rounded down."""
        return np.maximum(0.0, (1.0 - self.tpr) * (1.0 - 4 * _U) - _U)

    def to_fdp(self) -> dict:
        """The curve in f-DP form: ``{"alpha", "beta", "tpr", "fpr", ...}`` (JSON-ready).

        ``beta`` is the trade-off function ``f(α) = 1 − β(α)`` (a lower bound on the type II
        error of any test at type I error α; Dong, Roth & Su 2022, Def. 2.1) for the
        membership direction (null: the record is out); ``tpr`` the upper bound ``β(α)``.
        """
        return {
            "alpha": self.fpr.tolist(), "beta": self.type_ii_error.tolist(),
            "fpr": self.fpr.tolist(), "tpr": self.tpr.tolist(),
            "direction": "null: record out (P); alternative: record in (Q)",
            "certified": self.certified, "method": self.method,
            **self._fields(),
        }

    def pld_epsilon(self, delta: float) -> float:
        """ε at ``delta`` from this curve's PLD alone (rounded up; ``inf`` above ε = 60), the
        number :func:`pacpriv.dpsgd.epsilon.epsilon_bound` compares with its closed forms.
        ``delta`` in (0, 1). The larger of the two directions' ε, each the first ε at which
        its own bound holds (see :func:`~pacpriv.dpsgd._exact.loss.epsilon_for_delta`)."""
        return max(self.pld_epsilon_directions(delta))

    def pld_epsilon_directions(self, delta: float) -> tuple[float, float]:
        """``(ε_add, ε_remove)`` at ``delta`` from this curve's PLD: the smallest ε (rounded
        up; ``inf`` above 60) at which the membership (add) and the other (remove) direction's
        bound is ``≤ delta``. ``delta`` in (0, 1)."""
        d = check_real(delta, "delta", low=0.0, high=1.0, low_inclusive=False,
                       high_inclusive=False)
        return (epsilon_for_delta(self.loss, d, direction="add"),
                epsilon_for_delta(self.loss, d, direction="remove"))

    def get_epsilon(self, delta: float) -> float:
        """Smallest ε ≥ 0 (rounded up) such that the run is (ε, δ)-DP for adding or removing
        one record (both directions of the same PLD, as dp-accounting and opacus report it).

        Parameters
        ----------
        delta : float
            δ in (0, 1).

        Returns
        -------
        float
            ε in nats; ``inf`` if even ε = 60 does not reach ``delta``. For random
            allocation, per direction the smallest of this curve's PLD, the closed forms and
            the Chernoff bounds of :func:`pacpriv.dpsgd.epsilon.epsilon_bound` (all sound),
            then the larger direction; so it equals ``epsilon_bound(...).epsilon`` for the
            same σ, t, E, k and δ at the default tolerance wherever that needs no second
            curve (a finer tolerance or a smaller σ's), and is never below it (at ``t = 1``
            the exact Gaussian ε rather than its discretised PLD).
        """
        d = check_real(delta, "delta", low=0.0, high=1.0, low_inclusive=False,
                       high_inclusive=False)
        add, rem = self.pld_epsilon_directions(d)
        if self.sampling.get("scheme") != "random_allocation":
            return max(add, rem)
        from pacpriv.dpsgd._chernoff_epsilon import by_direction
        from pacpriv.dpsgd._closed_epsilon import closed_form_epsilon

        closed = closed_form_epsilon(self.noise_multiplier, self.steps_per_epoch, self.epochs,
                                     self.k, d)
        if closed == 0.0:
            return 0.0
        return by_direction(self.noise_multiplier, self.steps_per_epoch // self.k,
                            self.k * self.epochs, d, add=min(add, closed),
                            remove=min(rem, closed))

    def summary(self) -> Summary:
        """Rows shown by ``str(curve)``: the parameters, a few points and the accuracy."""
        rows: list = [
            ("noise multiplier σ", self.noise_multiplier, "plain"),
            ("steps per epoch t, epochs E, k", f"{self.steps_per_epoch}, {self.epochs}, "
                                               f"{self.k}", "plain"),
            ("sampling", self.sampling["scheme"], "plain"),
            ("accuracy bound (½ + ½δ(0))", self.accuracy, "risk"),
        ]
        for a in (1e-6, 1e-4, 1e-2, 0.1):
            rows.append((f"TPR at FPR {a:g}", float(self.tpr_at(a)), "risk"))
        title = ("DP-SGD membership trade-off curve (certified upper bound)" if self.certified
                 else "DP-SGD membership trade-off curve (accountant upper bound)")
        kind, detail, sampling = self._label()
        return Summary(title, [*rows, *label_rows(kind, detail=detail, sampling=sampling)])

    def _fields(self) -> dict:
        kind, detail, sampling = self._label()
        return bound_fields(kind, detail=detail, sampling=sampling)

    def _label(self) -> tuple[str, str, str]:
        """(kind, detail, sampling) of :mod:`pacpriv.dpsgd.labels` for this curve."""
        scheme = str(self.sampling.get("scheme", "random_allocation"))
        sampling = scheme if scheme in ("poisson", "random_allocation") else "random_allocation"
        return (("certified", "PLD", sampling) if self.certified
                else ("accountant", "dp-accounting pessimistic PLD", sampling))

    def to_dict(self) -> dict:
        """JSON-serialisable dict (arrays as lists; the PLD itself is not included)."""
        return {
            "fpr": self.fpr.tolist(), "tpr": self.tpr.tolist(),
            "epsilon": self.epsilon.tolist(), "noise_multiplier": self.noise_multiplier,
            "steps_per_epoch": self.steps_per_epoch, "epochs": self.epochs, "k": self.k,
            "sampling": self.sampling, "certified": self.certified,
            "accuracy": self.accuracy, "method": self.method,
            **self._fields(),
        }


def _check_fpr(a: np.ndarray) -> np.ndarray:
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"`fpr` must be a non-empty 1-D array; got shape {a.shape}.")
    bad = ~np.isfinite(a) | (a < 0.0) | (a > 1.0)
    if np.any(bad):
        raise ValueError(f"`fpr` must hold false-positive rates in [0, 1]; {int(bad.sum())} "
                         f"of {a.size} values are outside it or not finite.")
    return a


class TooLittleNoiseError(ValueError):
    """σ so small that the privacy-loss distribution cannot be represented: ε = ∞."""


@functools.lru_cache(maxsize=16)
def _random_allocation_loss(sigma: float, steps: int, epochs: int, tol: float) -> AtomLoss:
    """Composed upper-chain PLD of one-of-``steps`` allocation over ``epochs`` epochs."""
    tail = _CURVE_TAIL
    c = float(np.clip(40.0 * math.sqrt(1e-4 / tol), 16.0, 4096.0))
    method = _exact._choose_method(sigma, steps, epochs, tail, c)
    if method == "geometric":
        c = float(np.clip(_exact._GEO_C * (1e-4 / tol) ** 0.25, 24.0, 256.0)) * 2.0
    t_top = _exact._t_top(sigma, steps, epochs, 0.0, tail)
    extended = False
    while True:  # as exact._numeric_once: long double where float64 round-off is visible
        pair, _, eps, kappa, slack, _ = _exact._epoch_pair(
            sigma, steps, epochs, c=c, c_epoch=c, method=method, tail=tail, t_top=t_top,
            upper=True, delta=None, label_range=None, extended=extended, tick=None, tol=tol)
        cost = epochs * (2.0 * eps + kappa + slack)
        if method not in ("linear", "hybrid") or extended or cost <= 0.25 * tol:
            break
        extended = True
    tau = _exact._WINDOW_TAU
    labels = pair.a0 + np.arange(pair.q.size)
    p_epoch = pair.q * np.exp(-labels * pair.delta)  # P^c of the stored Q-law (see AtomLoss)
    lo_p, hi_p = _comp._chernoff_window(p_epoch, pair.a0, epochs, tau)
    lo_q, hi_q = _comp._chernoff_window(pair.q, pair.a0, epochs, tau)
    lo, hi = min(lo_p, lo_q), max(hi_p, hi_q)
    sums = (hi - lo + 1 + 4.0 * epochs + 8.0) * _U * 2.0
    # an l1 error eps per epoch moves the E-fold laws by <= 2E·eps·(1 + eps)^(E−1) (as exact)
    prop = 2.0 * epochs * eps * math.exp(min(700.0, (epochs - 1) * math.log1p(eps)))
    qe = _comp._power(pair.q, pair.a0, epochs, lo, hi)
    err = 6.0 * tau + _comp.power_error_l1(pair.q, epochs, lo, hi) + sums + prop
    sq = float(pair.q.sum())
    q_inf = (sq + pair.q_inf) ** epochs - sq**epochs
    q_inf = q_inf * (1.0 + 4.0 * epochs * _U) + 4.0 * epochs * _U
    pe = _comp._power(p_epoch, pair.a0, epochs, lo, hi)
    err_rev = 6.0 * tau + _comp.power_error_l1(p_epoch, epochs, lo, hi) + sums
    # 1 − P^c(L > −∞) = 1 − sp^E (sp rounded down), and the Q-mass of the chain above one
    sp = math.fsum(p_epoch.tolist()) * (1.0 - 4.0 * _U)
    p_zero = -math.expm1(epochs * math.log(min(sp, 1.0))) + (epochs + 4.0) * _U
    over = math.fsum([*pair.q.tolist(), pair.q_inf, -1.0])
    over = max(over + abs(over) * _U + 1e-300, 0.0)
    excess = prop + math.expm1(epochs * math.log1p(over)) * (1.0 + 8.0 * _U)
    loss = np.arange(lo, hi + 1, dtype=np.float64) * pair.delta
    return AtomLoss(loss=loss, q=qe, q_inf=float(q_inf), err=float(err),
                    method=f"upper chain ({method}), E-fold FFT composition", p=pe,
                    p_zero=float(p_zero), err_reverse=float(err_rev), excess=float(excess),
                    symmetric=method == "gaussian")


@functools.lru_cache(maxsize=16)
def _poisson_loss(sigma: float, rate: float, n_steps: int, tol: float) -> GridLoss:
    pld = import_optional("dp_accounting.pld.privacy_loss_distribution",
                          "the Poisson-sampling trade-off curve", extra="compare")

    interval = float(np.clip(10.0 * tol, 1e-4, 1e-2))
    dist = pld.from_gaussian_mechanism(
        standard_deviation=sigma, sensitivity=1.0, sampling_prob=rate,
        value_discretization_interval=interval, pessimistic_estimate=True,
        use_connect_dots=True,
    ).self_compose(n_steps)
    eps = np.arange(-30.0, 30.0 + interval, interval)
    values = np.asarray(dist.get_delta_for_epsilon(eps), dtype=np.float64)
    values = values + poisson_delta_allowance(n_steps)  # composition round-off, charged
    return GridLoss(eps=eps, values=np.minimum(values, 1.0),
                    method="dp-accounting PLD (pessimistic, connect-the-dots)")


def _loss_of(spec: Sampling, sigma: float, steps: int, epochs: int, tol: float):
    return _LOSS_BUILDERS[type(spec)](spec, sigma, steps, epochs, tol)


_LOSS_BUILDERS = {
    RandomAllocation: lambda s, sigma, t, e, tol: _random_allocation_loss(
        sigma, *s.reduced(t, e), tol),
    PoissonSampling: lambda s, sigma, t, e, tol: _poisson_loss(
        sigma, s.sampling_rate, t * e, tol),
}
_CERTIFIED = {RandomAllocation: True, PoissonSampling: False}


def tradeoff_curve(
    *,
    noise_multiplier: float,
    steps_per_epoch: int,
    epochs: int,
    k: int = 1,
    fpr=None,
    sampling: str | Sampling = "random_allocation",
    tolerance: float = 1e-4,
) -> TradeoffCurve:
    """Upper bound ``β(α)`` on the true-positive rate of any membership test at each FPR α.

    Parameters
    ----------
    noise_multiplier : float
        σ > 0 (noise std / clipping norm).
    steps_per_epoch : int
        ``t ≥ 1`` steps per epoch.
    epochs : int
        ``E ≥ 1``.
    k : int, default 1
        Steps per record per epoch (``k`` of ``t``, ``1 ≤ k ≤ t``); for ``sampling="poisson"``
        the rate is ``k/t`` over ``t·E`` steps.
    fpr : array_like of float, optional
        False-positive rates in [0, 1] (any order, 1-D); default :func:`default_fpr_grid`
        (down to 1e-6).
    sampling : {"random_allocation", "poisson"} or RandomAllocation or PoissonSampling
        The batch sampler (see :func:`pacpriv.dpsgd.sampling.as_sampling`).
    tolerance : float, default 1e-4
        Discretisation target in [1e-6, 1e-2] (the accuracy-scale width of the PLD grids;
        smaller is tighter and slower). The curve is an upper bound at any tolerance.

    Returns
    -------
    TradeoffCurve
        ``tpr[i] ≥`` the largest TPR at ``fpr[i]`` (sorted as given); ``to_fdp()`` for the
        f-DP form, ``get_epsilon(delta)`` for ε.

    Raises
    ------
    TypeError, ValueError
        On invalid arguments (before any work).

    Notes
    -----
    For ``t = 1`` (or ``k = t``) the pair is a Gaussian shift and the curve is
    ``Φ(Φ⁻¹(α) + √(kE)/σ)`` exactly (Dong, Roth & Su 2022, Eq. 2.5); the certified curve lies
    above it, within the discretisation.

    Examples
    --------
    >>> c = tradeoff_curve(noise_multiplier=1.0, steps_per_epoch=1, epochs=1, fpr=[0.05])
    >>> 0.2595 < float(c.tpr[0]) < 0.262    # Φ(Φ⁻¹(0.05) + 1) = 0.25951
    True
    """
    sigma = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)
    t = check_int(steps_per_epoch, "steps_per_epoch", low=1, high=MAX_STEP_COUNT)
    e = check_int(epochs, "epochs", low=1, high=MAX_STEP_COUNT)
    k = check_int(k, "k", low=1, high=t)
    tol = check_real(tolerance, "tolerance", low=1e-6, high=1e-2)
    spec = as_sampling(sampling, k=k, steps_per_epoch=t)
    if isinstance(spec, RandomAllocation):
        spec.check(t)
        k = spec.k
    steps_cap = _exact.MAX_EXACT_STEPS_PER_EPOCH
    if isinstance(spec, RandomAllocation) and spec.reduced(t, e)[0] > steps_cap:
        raise ValueError(f"`steps_per_epoch`/k must be <= {steps_cap:.0e} for the certified "
                         f"curve; got {t // k}.")
    grid = default_fpr_grid() if fpr is None else _check_fpr(
        np.asarray(fpr, dtype=np.float64))
    try:
        with np.errstate(over="raise"):
            loss = _loss_of(spec, sigma, t, e, tol)
    except (ZeroDivisionError, OverflowError, FloatingPointError):
        if sigma >= 1.0:  # the float64 chain fails at huge σ too: not a privacy verdict
            raise ValueError(
                f"noise_multiplier={sigma:g} is too large for the certified privacy-loss "
                "distribution (its atoms underflow float64); the curve is unavailable here. "
                "Use membership_inference_accuracy_bound (the chi-square bound, valid at "
                "every σ).") from None
        raise TooLittleNoiseError(
            f"noise_multiplier={sigma:g} is too small for the certified privacy-loss "
            "distribution (the privacy loss overflows float64): the mechanism is effectively "
            "not private (ε = ∞, TPR ≤ 1 at every FPR).") from None
    tpr, arg = tpr_upper(loss, grid)
    d0 = float(loss.delta(np.array([0.0]))[0])
    accuracy = min(1.0, (0.5 + 0.5 * d0) * (1.0 + 2 * _U))
    return TradeoffCurve(
        fpr=grid, tpr=tpr, epsilon=arg, noise_multiplier=sigma, steps_per_epoch=t, epochs=e,
        k=k, sampling=spec.to_dict(), certified=_CERTIFIED[type(spec)], accuracy=accuracy,
        method=loss.method, loss=loss,
    )
