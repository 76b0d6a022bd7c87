"""σ for a target ``(ε, δ)``: the smallest noise multiplier whose ε at δ is at most the target.

Users of opacus calibrate with ``get_noise_multiplier(target_epsilon=, target_delta=,
sample_rate=, epochs=)`` and users of dp-accounting with ``calibrate_dp_mechanism``; this is the
same question for pacpriv's two batch samplers, answered from a *pessimistic* privacy-loss
distribution (PLD), so the ε of the returned σ is an upper bound, not an estimate:

* random allocation (``k`` of ``t``, what :func:`pacpriv.dpsgd.trainer.train_dpsgd` runs):
  :func:`pacpriv.dpsgd.epsilon.epsilon_bound`, the smallest of the certified upper chain of
  :func:`pacpriv.dpsgd.tradeoff_curve` (Feldman & Shenfeld's random-allocation PLD, composed
  over the epochs with every discretisation, window and round-off error added on the
  pessimistic side) and two closed-form dominating bounds. It is the very function behind
  ``DPSGDSpec.get_epsilon`` and ``TrainingResult.get_epsilon``, so a run trained at the
  returned σ reports ``get_epsilon(delta) <= target_epsilon``;
* Poisson subsampling at rate ``k/t`` over ``t·E`` steps (opacus' sampler): dp-accounting's
  pessimistic connect-the-dots PLD of the subsampled Gaussian [2]_ (add or remove one record,
  both directions), an upper bound up to dp-accounting's floating-point numerics.

The search runs in ``log σ``: a bracket around a Gaussian-CLT starting guess, then steps at
the root of the line through ``(ln σ, ln ε)`` at the bracket's ends (safeguarded by
bisection) until the largest failing σ and the smallest passing σ are within ``rtol``
(default 0.1%) of each other. The returned σ is the passing end, whose ε was computed (never
interpolated); the evaluated points are checked to be monotone (every failing σ below every
passing σ), and a :class:`~pacpriv.exceptions.PacprivWarning` says so where they are not.

References
----------
.. [1] V. Feldman, M. Shenfeld, Efficient privacy loss accounting for subsampling and random
   allocation, arXiv:2602.17284, 2026.
.. [2] V. Doroshenko et al., Connect the Dots: Tighter Discrete Approximations of Privacy Loss
   Distributions, PETS 2022.
.. [3] J. Dong, A. Roth, W. Su, Gaussian Differential Privacy, JRSSB 2022 (the CLT guess).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass

from scipy import optimize, special

from pacpriv._display import Displayable, Summary
from pacpriv._optional import import_optional
from pacpriv._validation import check_int, check_real
from pacpriv.dpsgd.sampling import (
    MAX_STEP_COUNT,
    PoissonSampling,
    RandomAllocation,
    Sampling,
    as_sampling,
    poisson_delta_allowance,
)

__all__ = ["EpsilonCalibration", "calibrate_epsilon", "epsilon_of", "noise_multiplier_for_epsilon"]

#: σ searched within [_SIGMA_MIN, _SIGMA_MAX]; ε = ∞ below the PLD's range.
_SIGMA_MIN, _SIGMA_MAX = 1e-3, 1e6
#: the certified ε is searched up to 60 nats (pacpriv.dpsgd._exact.loss.epsilon_for_delta)
_EPS_MAX = 50.0
#: the smallest PLD discretisation interval accepted (``tolerance``)
_TOL_MIN = 1e-6
#: dp-accounting's ``self_compose`` truncates this tail mass and charges it to δ: a Poisson
#: ε exists only for δ above it (whatever σ and ``tolerance``)
_POISSON_TAIL_MASS = 1e-15


@dataclass(frozen=True)
class EpsilonCalibration(Displayable):
    """σ calibrated to a target ``(ε, δ)`` (:func:`calibrate_epsilon`).

    Attributes
    ----------
    noise_multiplier : float
        σ: its ε at ``delta`` (``epsilon``) is at most ``target_epsilon``.
    epsilon : float
        ε (nats) of ``noise_multiplier`` at ``delta`` from the PLD named in ``method``.
    lower_noise_multiplier : float or None
        The largest evaluated σ whose ε exceeds the target; ``noise_multiplier`` is at most
        ``(1 + rtol)`` times it (``None``, JSON ``null``, when even σ = 1e-3 reaches the
        target: no failing σ is known).
    target_epsilon, delta : float
    steps_per_epoch, epochs, k : int
    sampling : dict
        The batch sampler (``{"scheme": "random_allocation", "k": k}`` or ``{"scheme":
        "poisson", "sampling_rate": q}``).
    certified : bool
        True for random allocation (pacpriv's certified chain); False for Poisson
        (dp-accounting's pessimistic PLD: an upper bound up to its numerics).
    method : str
    monotone : bool
        Whether every evaluated σ that failed lies below every one that passed.
    n_evaluations : int
    wall_time_s : float
    epsilon_source : str
        The bound that gave ``epsilon`` at the returned σ (random allocation: the
        :attr:`~pacpriv.dpsgd.epsilon.EpsilonBound.source` of ``epsilon_bound``, e.g.
        ``"certified PLD"`` or ``"Gaussian dominance (closed form)"``); the σ was calibrated
        against it, and :meth:`label` names its kind.
    """

    noise_multiplier: float
    epsilon: float
    lower_noise_multiplier: float | None
    target_epsilon: float
    delta: float
    steps_per_epoch: int
    epochs: int
    k: int
    sampling: dict
    certified: bool
    method: str
    monotone: bool
    n_evaluations: int
    wall_time_s: float
    epsilon_source: str = ""

    def label(self) -> tuple[str, str]:
        """``(kind, detail)`` of :mod:`pacpriv.dpsgd.labels` of the ε the σ was calibrated
        against: the certified PLD, a closed form (e.g. Gaussian dominance, where the PLD and
        the Chernoff bounds do not reach) or the Poisson accountant."""
        if not self.certified:
            return "accountant", "dp-accounting pessimistic PLD"
        from pacpriv.dpsgd.epsilon import PLD, epsilon_kind

        return epsilon_kind(self.epsilon_source or PLD)

    def summary(self) -> Summary:
        """Rows shown by ``str(result)`` and in Jupyter."""
        from pacpriv.dpsgd.labels import kind_text, label_rows

        kind, detail = self.label()
        sampling = str(self.sampling.get("scheme", "random_allocation"))
        return Summary(f"DP-SGD noise multiplier for a target epsilon "
                       f"({kind_text(kind, detail=detail)})", [
            ("target epsilon at delta", f"{self.target_epsilon:g} at {self.delta:g}", "plain"),
            ("noise multiplier σ", self.noise_multiplier, "risk"),
            ("epsilon at σ", self.epsilon, "risk"),
            ("sampling", self.sampling["scheme"], "plain"),
            ("steps per epoch t, epochs E, k",
             f"{self.steps_per_epoch}, {self.epochs}, {self.k}", "plain"),
            ("privacy-loss distribution", self.method, "plain"),
            *label_rows(kind, detail=detail, sampling=sampling),
        ])

    def to_dict(self) -> dict:
        """JSON-serialisable dict, with the label fields of
        :func:`pacpriv.dpsgd.labels.bound_fields` (the ε the σ was calibrated against)."""
        from pacpriv.dpsgd.labels import bound_fields

        kind, detail = self.label()
        sampling = str(self.sampling.get("scheme", "random_allocation"))
        return {**asdict(self), **bound_fields(kind, detail=detail, sampling=sampling)}


def _ra_epsilon(sigma: float, delta: float, t: int, e: int, k: int, tol: float) -> float:
    from pacpriv.dpsgd.epsilon import epsilon_bound

    del tol  # the bound's own PLD tolerance: the one get_epsilon uses
    return float(epsilon_bound(sigma, steps_per_epoch=t, epochs=e, delta=delta, k=k).epsilon)


def _poisson_epsilon(sigma: float, delta: float, rate: float, n_steps: int,
                     interval: float) -> float:
    pld = import_optional("dp_accounting.pld.privacy_loss_distribution",
                          "Poisson-sampling epsilon (sampling='poisson')", extra="compare")

    try:
        dist = pld.from_gaussian_mechanism(
            standard_deviation=sigma, sensitivity=1.0, sampling_prob=rate,
            value_discretization_interval=interval, pessimistic_estimate=True,
            use_connect_dots=True,
        ).self_compose(n_steps)
        # read at δ − the composition's round-off allowance: round-off never lowers ε
        eps = float(dist.get_epsilon_for_delta(delta - poisson_delta_allowance(n_steps)))
    except (OverflowError, ZeroDivisionError, MemoryError):
        return math.inf
    return eps if math.isfinite(eps) else math.inf


def _check(target_epsilon, delta, steps_per_epoch, epochs, k, sampling, rtol, tolerance):
    eps = check_real(target_epsilon, "target_epsilon", low=0.0, high=_EPS_MAX,
                     low_inclusive=False)
    d = check_real(delta, "delta", low=0.0, high=1.0, low_inclusive=False,
                   high_inclusive=False)
    t = check_int(steps_per_epoch, "steps_per_epoch", low=1, high=MAX_STEP_COUNT)
    e = check_int(epochs, "epochs", low=1, high=MAX_STEP_COUNT)
    k = check_int(k, "k", low=1, high=t)
    rel = check_real(rtol, "rtol", low=1e-6, high=0.1)
    tol = check_real(tolerance, "tolerance", low=_TOL_MIN, high=1e-2)
    spec = as_sampling(sampling, k=k, steps_per_epoch=t)
    floor = max(_POISSON_TAIL_MASS, 2.0 * poisson_delta_allowance(t * e))
    if isinstance(spec, PoissonSampling) and d <= floor:
        raise ValueError(f"`delta` must be above {floor:.3g} with Poisson sampling over {t * e} "
                         "steps (dp-accounting's PLD composition drops a tail of 1e-15 and errs "
                         "by round-off of about 1e-14 per step, both charged to delta; random "
                         f"allocation has no such floor); got {d:g}.")
    if isinstance(spec, RandomAllocation):
        from pacpriv.dpsgd.exact import MAX_EXACT_STEPS_PER_EPOCH

        spec.check(t)
        if spec.reduced(t, e)[0] > MAX_EXACT_STEPS_PER_EPOCH:
            raise ValueError(f"`steps_per_epoch`/k must be <= {MAX_EXACT_STEPS_PER_EPOCH:.0e} "
                             f"for the certified epsilon; got {t // spec.k}.")
    return eps, d, t, e, rel, tol, spec


def epsilon_of(noise_multiplier: float, delta: float, *, steps_per_epoch: int, epochs: int,
               k: int = 1, sampling: str | Sampling = "random_allocation",
               tolerance: float = 1e-4) -> float:
    """ε at ``delta`` of DP-SGD with noise multiplier σ (the function that
    :func:`noise_multiplier_for_epsilon` inverts); ``inf`` where σ is too small for the PLD.

    Parameters are those of :func:`calibrate_epsilon`, with ``noise_multiplier`` σ > 0.
    """
    sigma = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)
    _, d, t, e, _, tol, spec = _check(1.0, delta, steps_per_epoch, epochs, k, sampling,
                                      1e-3, tolerance)
    return _epsilon_function(spec, d, t, e, tol)[0](sigma)


def _epsilon_function(spec: Sampling, d: float, t: int, e: int,
                      tol: float) -> tuple[Callable[[float], float], str, float, int]:
    """``(σ ↦ ε, method, rate, steps)`` for the sampler."""
    if isinstance(spec, PoissonSampling):
        rate, steps = spec.sampling_rate, t * e
        return (lambda s: _poisson_epsilon(s, d, rate, steps, tol),
                f"dp-accounting PLD (pessimistic, connect-the-dots, interval {tol:g})",
                rate, steps)
    return (lambda s: _ra_epsilon(s, d, t, e, spec.k, tol),
            "certified random-allocation bound (epsilon_bound: PLD chain and closed forms)",
            spec.k / t, t * e)


def _clt_guess(eps: float, delta: float, rate: float, steps: int) -> float:
    """σ from the Gaussian-DP CLT (Dong, Roth & Su 2022, Cor. 2.13 and Thm 3.6): a start."""

    def gap(mu: float) -> float:
        return float(special.ndtr(-eps / mu + mu / 2)
                     - math.exp(eps) * special.ndtr(-eps / mu - mu / 2)) - delta

    try:
        mu = optimize.brentq(gap, 1e-6, 100.0)
    except ValueError:
        return 1.0
    ratio = (mu / (rate * math.sqrt(steps))) ** 2
    return float(min(max(1.0 / math.sqrt(math.log1p(ratio)), 0.05), 1e4))


def calibrate_epsilon(
    target_epsilon: float,
    delta: float,
    *,
    steps_per_epoch: int,
    epochs: int,
    k: int = 1,
    sampling: str | Sampling = "random_allocation",
    rtol: float = 1e-3,
    tolerance: float = 1e-4,
) -> EpsilonCalibration:
    """The smallest σ (within ``rtol``) whose ε at ``delta`` is at most ``target_epsilon``.

    Parameters
    ----------
    target_epsilon : float
        ε in (0, 50], nats (add or remove one record, both directions, as opacus and
        dp-accounting report it).
    delta : float
        δ in (0, 1) (opacus: ``target_delta``).
    steps_per_epoch : int
        ``t ≥ 1`` steps per epoch (opacus: ``1/sample_rate``).
    epochs : int
        ``E ≥ 1``.
    k : int, default 1
        Steps per record per epoch (``k`` of ``t``); for Poisson the rate is ``k/t``.
    sampling : {"random_allocation", "poisson"} or RandomAllocation or PoissonSampling
        The batch sampler (:func:`pacpriv.dpsgd.sampling.as_sampling`). pacpriv's trainer
        and :func:`~pacpriv.dpsgd.make_private` use random allocation; ``"poisson"`` is the
        sampler of opacus' accountants.
    rtol : float, default 1e-3
        Relative width in [1e-6, 0.1] of the final bracket: the returned σ is at most
        ``(1 + rtol)`` times a σ whose ε exceeds the target.
    tolerance : float, default 1e-4
        Poisson: dp-accounting's ``value_discretization_interval`` in [1e-6, 1e-2] (its
        ``PLDAccountant`` default is 1e-4; smaller is tighter and slower, every value an upper
        bound). Random allocation: unused (``epsilon_bound`` at its own tolerance, the one
        ``TrainingResult.get_epsilon`` evaluates).

    Returns
    -------
    EpsilonCalibration
        ``noise_multiplier`` and its ``epsilon`` (≤ target), the bracket and the method.

    Raises
    ------
    TypeError, ValueError
        On invalid arguments (before any work), or when no σ ≤ 1e6 reaches the target under
        the PLD (see Notes).

    Notes
    -----
    Every ε here is an upper bound from a discretised PLD, so its resolution is finite: a
    very small target ε (below roughly the Poisson PLD's discretisation) cannot be certified
    at any σ ≤ 1e6, and a ``ValueError`` says so rather than returning a σ that does not meet
    it. The ``random-allocation`` package of the comparators table (Feldman & Shenfeld's
    reference code) is not used: at the σ returned here for ε = 1 at δ = 1e-5
    (t = 100, E = 10) it reports ε ≈ 1.11 (its RDP/decomposition bounds are looser), and it
    is not the function ``TrainingResult.get_epsilon`` evaluates.

    Examples
    --------
    >>> r = calibrate_epsilon(1.0, 1e-5, steps_per_epoch=10, epochs=2)
    >>> r.epsilon <= 1.0 < epsilon_of(r.lower_noise_multiplier, 1e-5, steps_per_epoch=10,
    ...                                epochs=2)
    True
    """
    start = time.perf_counter()
    eps, d, t, e, rel, tol, spec = _check(target_epsilon, delta, steps_per_epoch, epochs, k,
                                          sampling, rtol, tolerance)
    fn, method, rate, steps = _epsilon_function(spec, d, t, e, tol)
    seen: dict[float, float] = {}

    def ok(sigma: float) -> bool:
        if sigma not in seen:
            seen[sigma] = fn(sigma)
        return seen[sigma] <= eps

    lo, hi = _bracket(ok, _clt_guess(eps, d, rate, steps),
                      advice=_bracket_advice(eps, tol, isinstance(spec, PoissonSampling)))
    if lo > 0.0:
        lo, hi = _shrink(ok, seen, eps, lo, hi, rel)
    passing = [s for s, v in seen.items() if v <= eps]
    failing = [s for s, v in seen.items() if v > eps]
    monotone = not failing or not passing or max(failing) < min(passing)
    if not monotone:
        from pacpriv.exceptions import PacprivWarning

        warnings.warn("the evaluated epsilon was not monotone in sigma (PLD discretisation); "
                      "the returned sigma is still certified at its own epsilon, but a "
                      "smaller one may also reach the target.", PacprivWarning, stacklevel=2)
    certified = isinstance(spec, RandomAllocation)
    source = method
    if certified:  # which bound gave ε at the returned σ (the PLD, a Chernoff or closed form)
        from pacpriv.dpsgd.epsilon import epsilon_bound

        source = epsilon_bound(hi, steps_per_epoch=t, epochs=e, delta=d,
                               k=getattr(spec, "k", k)).source
    return EpsilonCalibration(
        noise_multiplier=hi, epsilon=seen[hi], lower_noise_multiplier=lo if lo > 0 else None,
        target_epsilon=eps,
        delta=d, steps_per_epoch=t, epochs=e, k=getattr(spec, "k", k),
        sampling=spec.to_dict(), certified=certified, method=method,
        monotone=monotone, n_evaluations=len(seen), wall_time_s=time.perf_counter() - start,
        epsilon_source=source,
    )


def _shrink(ok: Callable[[float], bool], seen: dict[float, float], eps: float, lo: float,
            hi: float, rel: float) -> tuple[float, float]:
    """Shrink ``(lo, hi)`` (``lo`` fails, ``hi`` passes) until ``hi <= lo·(1 + rel)``.

    Each step evaluates inside the bracket at the root of the line through ``(ln σ, ln ε)``
    at its two ends, nudged by ``√(1 + rel)`` towards the end that did not move last (so the
    next pass and fail land within ``1 + rel`` of each other once the line is accurate);
    bisection in ``ln σ`` after two steps on the same side, or when the interpolation is
    undefined. Only evaluated points become ends: the bracket is always certified.
    """
    half = math.sqrt(1.0 + rel) * (1.0 - 1e-9)
    same, last = 0, None
    while hi > lo * (1.0 + rel):
        cand = math.sqrt(lo * hi)
        e_lo, e_hi = seen[lo], seen[hi]
        if same < 2 and math.isfinite(e_lo) and e_hi > 0.0 and e_lo > e_hi:
            slope = (math.log(e_hi) - math.log(e_lo)) / (math.log(hi) - math.log(lo))
            root = math.exp(math.log(lo) + (math.log(eps) - math.log(e_lo)) / slope)
            cand = root * half if last == "lo" else root / half if last == "hi" else root
        if not lo < cand < hi:
            cand = math.sqrt(lo * hi)
            if not lo < cand < hi:  # (float resolution)
                break
        side = "hi" if ok(cand) else "lo"
        if side == "hi":
            hi = cand
        else:
            lo = cand
        same = same + 1 if side == last else 0
        last = side
    return lo, hi


def _bracket_advice(eps: float, tol: float, poisson: bool) -> str:
    """What may still reach the target: only values inside the valid ranges are advised
    (`target_epsilon` up to its maximum; `tolerance`, which applies to Poisson's PLD
    discretisation only, down to its floor), so the advice is always actionable."""
    raise_ = ["`target_epsilon` (at most " f"{_EPS_MAX:g})"] if eps < _EPS_MAX else []
    raise_.append("`delta`")
    text = "Raise " + " or ".join(raise_)
    if poisson and tol > _TOL_MIN:
        text += f", or lower `tolerance` (at least {_TOL_MIN:g})"
    elif poisson:
        text += " (`tolerance` is at its floor; random-allocation sampling may reach it)"
    return text + "."


def _bracket(ok: Callable[[float], bool], guess: float, *,
             advice: str = "Raise `target_epsilon` or `delta`.") -> tuple[float, float]:
    """``(lo, hi)`` with ``ok(hi)`` and not ``ok(lo)``, by steps of ×1.25 then doubling;
    ``advice`` ends the error when no σ searched reaches the target."""
    factor = 1.25
    if ok(guess):
        hi = guess
        while True:
            lo = max(hi / factor, _SIGMA_MIN)
            if lo == hi:  # even the smallest σ searched passes: no failing σ known
                return 0.0, hi
            if not ok(lo):
                return lo, hi
            hi, factor = lo, factor * factor
    lo = guess
    while True:
        hi = min(lo * factor, _SIGMA_MAX)
        if ok(hi):
            return lo, hi
        if hi >= _SIGMA_MAX:
            raise ValueError(
                f"no noise_multiplier <= {_SIGMA_MAX:g} reaches the target epsilon at this "
                "delta under the pessimistic PLD: the target lies below what its "
                "discretisation and error terms can certify (very small epsilon, or a delta "
                f"below the certified chain's error over many steps). {advice}")
        lo, factor = hi, factor * factor


def noise_multiplier_for_epsilon(
    target_epsilon: float,
    delta: float,
    *,
    steps_per_epoch: int,
    epochs: int,
    k: int = 1,
    sampling: str | Sampling = "random_allocation",
    rtol: float = 1e-3,
    tolerance: float = 1e-4,
) -> float:
    """σ for a target ``(ε, δ)``: ``calibrate_epsilon(...).noise_multiplier``.

    pacpriv's ``get_noise_multiplier(target_epsilon=, target_delta=, sample_rate=, epochs=)``
    (opacus) with ``steps_per_epoch = 1/sample_rate``; see :func:`calibrate_epsilon` for the
    parameters, what the returned σ certifies and what is raised.

    Examples
    --------
    >>> s = noise_multiplier_for_epsilon(2.0, 1e-5, steps_per_epoch=100, epochs=5,
    ...                                  sampling="poisson", tolerance=1e-3)
    >>> epsilon_of(s, 1e-5, steps_per_epoch=100, epochs=5, sampling="poisson",
    ...            tolerance=1e-3) <= 2.0
    True
    """
    return calibrate_epsilon(target_epsilon, delta, steps_per_epoch=steps_per_epoch,
                             epochs=epochs, k=k, sampling=sampling, rtol=rtol,
                             tolerance=tolerance).noise_multiplier
