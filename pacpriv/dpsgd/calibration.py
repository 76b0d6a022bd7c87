"""Noise calibration for random-allocation DP-SGD: σ for a target membership-inference accuracy.

Two rules: the closed-form inverse of the chi-square bound (``method="closed-form"``, about a
microsecond) and the smallest σ whose *certified upper* exact accuracy is at most the target
(``method="exact"``). Calibration is one-sided on purpose: after the root search the answer is
verified on the safe side and nudged up if needed.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings
from dataclasses import asdict, dataclass

import numpy as np
from scipy import special

from pacpriv._display import Displayable, Summary
from pacpriv._validation import check_array_real, check_int, check_real
from pacpriv.dpsgd._search import search_root
from pacpriv.dpsgd.bounds import (
    closed_form_noise_multiplier,
)
from pacpriv.dpsgd.exact import (
    ExactAccuracy,
    exact_membership_inference_accuracy,
    warm_accuracy,
)
from pacpriv.dpsgd.labels import bound_fields, label_rows
from pacpriv.dpsgd.sampling import MAX_STEP_COUNT
from pacpriv.exceptions import CalibrationError, PacprivWarning

__all__ = ["NoiseCalibration", "calibrate_noise_multiplier", "noise_multiplier_for_accuracy"]


@dataclass(frozen=True)
class NoiseCalibration(Displayable):
    """Result of calibrating σ to the exact (certified) accuracy.

    Attributes
    ----------
    noise_multiplier : float
        Certified σ: the exact accuracy at this σ is at most ``target_accuracy``.
    closed_form_noise_multiplier : float
        σ from the chi-square closed form for the same target.
    noise_saving : float
        ``1 − noise_multiplier / closed_form_noise_multiplier`` (fraction of noise saved).
    lower_noise_multiplier : float or None
        A σ at which the certified *lower* accuracy exceeds the target: no accountant knowing
        only (M, E, σ) can certify anything at or below it. The exact root lies in
        ``(lower_noise_multiplier, noise_multiplier]``. ``None`` (JSON ``null``, shown as
        "unknown") where no such σ is known (``k > 1``).
    target_accuracy : float
    steps_per_epoch, epochs : int
    accuracy : ExactAccuracy
        The certified interval at ``noise_multiplier`` (``accuracy.upper ≤ target``).
    n_evaluations : int
        Exact-accuracy evaluations used.
    wall_time_s : float
    k : int
        Steps per record per epoch (k of t). For ``k > 1`` σ is the smaller of the k-of-t
        chi-square inverse and the exact calibration of one-of-``⌊t/k⌋`` over ``k·E`` epochs
        (both certified, docs/math.rst "k out of t"); ``accuracy`` is the k-of-t interval
        (its lower end deterministic, or Monte Carlo at ``accuracy.lower_confidence``) and
        ``lower_noise_multiplier`` is ``None`` (unknown).
    """

    noise_multiplier: float
    closed_form_noise_multiplier: float
    noise_saving: float
    lower_noise_multiplier: float | None
    target_accuracy: float
    steps_per_epoch: int
    epochs: int
    accuracy: ExactAccuracy
    n_evaluations: int
    wall_time_s: float
    k: int = 1

    def summary(self) -> Summary:
        """Rows shown by ``str(result)`` and in Jupyter."""
        return Summary("DP-SGD noise multiplier calibrated to the exact accuracy (certified)", [
            ("target accuracy", self.target_accuracy, "plain"),
            ("noise multiplier σ", self.noise_multiplier, "plain"),
            ("closed-form σ", self.closed_form_noise_multiplier, "plain"),
            ("noise saving vs closed form", self.noise_saving, "plain"),
            ("largest σ known to fail the target", "unknown"
             if self.lower_noise_multiplier is None else self.lower_noise_multiplier, "lower"),
            ("certified accuracy at σ (upper)", self.accuracy.upper, "risk"),
            ("steps per epoch M", self.steps_per_epoch, "plain"),
            ("epochs E", self.epochs, "plain"),
            *label_rows("certified", detail="exact"),  # σ is deterministic: no confidence
        ])

    def to_dict(self) -> dict:
        """JSON-serialisable dict, with the label fields of
        :func:`pacpriv.dpsgd.labels.bound_fields` (the σ's calibration, certified exact)."""
        out = asdict(self)
        out["accuracy"] = self.accuracy.to_dict()
        # the σ is deterministic: a Monte Carlo confidence belongs to the accuracy's lower end
        return {**out, **bound_fields("certified", detail="exact")}


def calibrate_noise_multiplier(
    target_accuracy: float,
    *,
    steps_per_epoch: int,
    epochs: int,
    rtol: float = 1e-3,
    tolerance: float | None = None,
    k: int = 1,
) -> NoiseCalibration:
    """Smallest σ (to relative tolerance ``rtol``) whose certified exact accuracy ≤ target.

    Parameters
    ----------
    target_accuracy : float
        Target membership-inference accuracy in (½, 1).
    steps_per_epoch, epochs : int
        ``M ≥ 1``, ``E ≥ 1``.
    rtol : float, default 1e-3
        Relative tolerance on σ, in ``[1e-6, 0.1]``: the returned σ is certified and at most
        ``(1 + rtol)`` times the smallest σ the certified upper bound could accept.
    tolerance : float, optional
        Width of the exact-accuracy intervals; default ``(target − ½)·rtol`` clipped to
        ``[1e-7, 1e-4]``.
    k : int, default 1
        Steps per record per epoch (k of t, ``k ≤ steps_per_epoch``); see
        :class:`NoiseCalibration`.

    Returns
    -------
    NoiseCalibration

    Raises
    ------
    CalibrationError
        If no bracket is found (should not happen: the closed form is always safe).

    Notes
    -----
    The closed-form σ is a safe starting point (the certified upper is capped by the
    chi-square bound). The search runs secant steps on ``Φ⁻¹`` of the interval midpoints in
    ``log σ`` at a coarse tolerance, then evaluates the public
    :func:`~pacpriv.dpsgd.exact_membership_inference_accuracy` (its own grids: the interval
    a user re-checking at ``tolerance`` gets) at the located root times ``(1 + rtol/2)``: that
    σ is returned when its upper end is at most the target and a Newton step from it puts the
    root at most ``0.8·rtol`` below; otherwise the Newton root times ``(1 + rtol/2)`` is
    verified the same way, nudged up by ``rtol/4`` steps until ``upper ≤ target`` holds; a
    bisection in ``log σ`` takes over if the secant steps fail. The
    evaluations that only locate the root start from the grid of the nearest earlier one
    (the method of the final tolerance, the resolution scaled to the tolerance), which skips
    most grid refinements; every evaluation is certified on its own, so this changes the time
    only (issue-29 grid, M ≤ 1e4, E ≤ 1e3: ``benchmarks/dpsgd_calibration.py --issue29``;
    every σ certified and within 0.1% of the exact root). Searches with a tolerance below
    1e-4 (targets near ½) start 3% below the Gaussian-limit root and aim their first tight
    grid at half the tolerance. The two cells over 1 s before (measured on 2 shared cores at
    load 5–7, four runs each against the former code in the same run): (M 1e4, E 1e3,
    target 0.6) 0.62–0.74 s CPU (was 1.26–1.55: one public attempt on the linear lattice,
    whose first grid now comes from a width prediction, and no failed float64 passes),
    (1e4, 1, 0.51) 0.81–1.13 s (was 1.14–1.42).
    """
    target = check_real(
        target_accuracy, "target_accuracy", low=0.5, high=1.0, low_inclusive=False,
        high_inclusive=False,
    )
    steps = check_int(steps_per_epoch, "steps_per_epoch", low=1, high=MAX_STEP_COUNT)
    n_epochs = check_int(epochs, "epochs", low=1, high=MAX_STEP_COUNT)
    rel = check_real(rtol, "rtol", low=1e-6, high=0.1)
    tol = _search_tolerance(target, rel) if tolerance is None else tolerance
    start = time.perf_counter()
    if check_int(k, "k", low=1, high=steps) != 1:
        return _calibrate_k_of_t(target, steps, n_epochs, k, rel, tol, start)
    return _also_at_default_tolerance(_calibrate(target, steps, n_epochs, rel, tol, start), rel)


#: The exact-accuracy tolerance a user checks with by default.
_DEFAULT_TOLERANCE = 1e-4


def _search_tolerance(target: float, rel: float) -> float:
    """``(target − ½)·rtol`` clipped to ``[1e-7, 1e-4]``; within rounding of 1e-4 it is 1e-4
    (0.1·1e-3 is 9.999999999999998e-05 in floating point, which used to cost one more
    evaluation at the default tolerance, see :func:`_also_at_default_tolerance`)."""
    tol = float(np.clip((target - 0.5) * rel, 1e-7, _DEFAULT_TOLERANCE))
    return _DEFAULT_TOLERANCE if tol >= _DEFAULT_TOLERANCE * (1.0 - 1e-9) else tol


def _also_at_default_tolerance(cal: NoiseCalibration, rel: float) -> NoiseCalibration:
    """The returned σ is certified at the search's tolerance; re-checking it with the default
    (wider) tolerance must not put the certified upper end above the target either, so σ is
    nudged up by ``rtol/4`` steps until both hold (safe side: more noise)."""
    from dataclasses import replace

    if cal.accuracy.tolerance >= _DEFAULT_TOLERANCE:
        return cal
    sigma, target, extra = cal.noise_multiplier, cal.target_accuracy, 0

    def upper(s: float) -> float:
        return float(exact_membership_inference_accuracy(
            s, steps_per_epoch=cal.steps_per_epoch, epochs=cal.epochs,
            tolerance=_DEFAULT_TOLERANCE).upper)

    while upper(sigma) > target:
        sigma *= 1.0 + rel / 4
        extra += 1
    if sigma == cal.noise_multiplier:
        return cal
    acc = exact_membership_inference_accuracy(
        sigma, steps_per_epoch=cal.steps_per_epoch, epochs=cal.epochs,
        tolerance=cal.accuracy.tolerance)
    cf = cal.closed_form_noise_multiplier
    return replace(cal, noise_multiplier=sigma, accuracy=acc, noise_saving=1.0 - sigma / cf,
                   n_evaluations=cal.n_evaluations + extra + 1)


def _calibrate_k_of_t(target: float, steps: int, n_epochs: int, k: int, rel: float, tol: float,
                      start: float) -> NoiseCalibration:
    """k of t: the smaller certified σ of the chi-square and the stratified reduction."""
    from pacpriv.dpsgd.k_of_t import k_of_t_noise_multiplier

    red = _calibrate(target, steps // k, k * n_epochs, rel, tol, start)
    sigma_chi = k_of_t_noise_multiplier(target, steps_per_epoch=steps, epochs=n_epochs, k=k)
    sigma = min(red.noise_multiplier, sigma_chi)
    with warnings.catch_warnings():  # the Monte-Carlo lower end is reported, not needed here
        warnings.simplefilter("ignore", PacprivWarning)
        acc = exact_membership_inference_accuracy(
            sigma, steps_per_epoch=steps, epochs=n_epochs, k=k, tolerance=tol)
    return NoiseCalibration(
        noise_multiplier=sigma, closed_form_noise_multiplier=sigma_chi,
        noise_saving=1.0 - sigma / sigma_chi, lower_noise_multiplier=None,
        target_accuracy=target, steps_per_epoch=steps, epochs=n_epochs, accuracy=acc,
        n_evaluations=red.n_evaluations + 1, wall_time_s=time.perf_counter() - start, k=k,
    )


#: warm start: the first grid aims at this fraction of the tolerance
_WARM_AIM = 0.75
#: ... assuming widths shrink like c^-1.8 (measured 1.7 geometric, 2.0 linear at M = 1e4)
_WARM_ORDER = 1.8
#: ... and at this fraction for the tight evaluations of a search tolerance below 1e-4 (targets
#: near ½): from the coarse grids to the tight ones the widths fell like c^-1.3 there
#: (geometric, (0.51, M 1e4, E 1)), and that first tight evaluation runs before the public one
_WARM_AIM_NEAR_HALF = 0.5


def _warm_start(cache: dict, sigma: float, tol_e: float, tol: float) -> dict:
    """Grid of the next evaluation from the nearest earlier one (private, see
    :func:`pacpriv.dpsgd.exact.warm_accuracy`): the method is chosen as for the search's final
    tolerance ``tol`` (the coarse evaluations then use the method of the tight ones), and the
    resolution is the nearest evaluation's scaled by ``(width / (a·tol_e))^(1/1.8)`` (``a =
    0.75``; 0.5 at the search's own tolerance below 1e-4), so that the ladder of refinements
    is mostly skipped. Only the grids change: every
    evaluation is certified on its own."""
    start: dict = {"method_tol": tol}
    best = None
    for (s, t), r in cache.items():
        d = r.details
        if "c" not in d or "extra" not in d:
            continue
        dist = (t != tol_e, abs(math.log(s / sigma)))  # same tolerance first, then nearest
        if best is None or dist < best[0]:
            best = (dist, d)
    if best is not None:
        d = best[1]
        width = 0.5 * (d["tv_upper_numerical"] - d["tv_lower_numerical"])
        aim = _WARM_AIM_NEAR_HALF if tol_e == tol < _DEFAULT_TOLERANCE else _WARM_AIM
        ratio = max(width, 1e-300) / (aim * tol_e)
        f = float(np.clip(ratio ** (1.0 / _WARM_ORDER), 0.25, 4.0))
        # within the range of the public function's first grids (16 … 4096 points per unit)
        start.update(method=d["method"], c=float(np.clip(d["c"] * f, 16.0, 4096.0)),
                     c_epoch=float(np.clip(d["c_epoch"] * f, 16.0, 4096.0)), extra=d["extra"])
    return start


def _model_root(x0: float, z0: float, z_target: float, steps: int) -> float:
    """Root in log σ if ``Φ⁻¹(accuracy)`` scales like the Gaussian-limit μ(σ) (docs/math.rst),
    from the point ``(x0, z0)`` = (log σ, Φ⁻¹(upper))."""
    ratio = (z_target / z0) ** 2 if z0 > 0 else 4.0
    if steps == 1:
        return x0 - 0.5 * math.log(ratio)
    inv_var = math.exp(-2.0 * x0)
    log_em1 = math.log(math.expm1(inv_var)) if inv_var < 700 else inv_var
    new = math.log1p(math.exp(min(700.0, log_em1 + math.log(ratio))))
    return -0.5 * math.log(new)


def _start(target: float, steps: int, n_epochs: int, sigma_cf: float, tol: float) -> float:
    """First σ of the search: ``0.84·σ_cf``; for a search tolerance below 1e-4 (targets near
    ½) 3% below the root of the Gaussian limit ``Φ(μ/2) = target`` with ``μ² = E·ln(1 + χ²)``,
    ``χ² = (e^{1/σ²} − 1)/M`` (within 1.4% of the exact root at every issue-29 cell at target
    0.51, where ``0.84·σ_cf`` is 4–9% off; 3% apart keeps the first secant well conditioned)."""
    if tol >= _DEFAULT_TOLERANCE * (1.0 - 1e-9):
        return 0.84 * sigma_cf
    mu = 2.0 * float(special.ndtri(target))
    em1 = math.expm1(mu * mu / n_epochs) * steps
    if not 0.0 < em1 < math.inf:
        return 0.84 * sigma_cf
    return min(0.97 / math.sqrt(math.log1p(em1)), sigma_cf)


def _bisect(evaluate, target: float, lo: float | None, hi: float,
            rel: float) -> tuple[float, float]:
    """The bracket ``(lo, hi)`` closed to ``hi/lo − 1 <= rel`` by bisection in log σ: where the
    secant steps did not close it (e.g. a flat or kinked upper end at an extreme target)."""
    if lo is None:
        lo = hi
        while evaluate(lo).upper <= target:
            if lo < 1e-3:
                raise CalibrationError(
                    f"no bracket for target_accuracy={target} below sigma={hi:g}")
            lo *= 0.5
    for _ in range(200):
        if hi / lo - 1.0 <= rel:
            break
        mid = math.sqrt(lo * hi)
        if evaluate(mid).upper > target:
            lo = mid
        else:
            hi = mid
    return lo, hi


def _calibrate(target: float, steps: int, n_epochs: int, rel: float, tol: float,
               start: float, guess: float | None = None) -> NoiseCalibration:
    """Safeguarded secant search in ``log σ`` on ``upper(σ) − target`` (see the caller)."""
    sigma_cf = float(closed_form_noise_multiplier(target, steps_per_epoch=steps, epochs=n_epochs))
    cache: dict[tuple[float, float], ExactAccuracy] = {}

    cold: set[float] = set()

    def evaluate(sigma: float, tol_e: float = tol) -> ExactAccuracy:
        """Warm-started grids: only to locate the root (see :func:`_warm_start`)."""
        if (sigma, tol_e) not in cache:
            cache[(sigma, tol_e)] = warm_accuracy(
                sigma, steps, n_epochs, tol_e, _warm_start(cache, sigma, tol_e, tol))
        return cache[(sigma, tol_e)]

    def certify(sigma: float) -> ExactAccuracy:
        """The public evaluation (its own grids): the returned σ's interval is the one a user
        re-checking at the search's tolerance gets."""
        if sigma not in cold:
            cold.add(sigma)
            cache[(sigma, tol)] = exact_membership_inference_accuracy(
                sigma, steps_per_epoch=steps, epochs=n_epochs, tolerance=tol)
        return cache[(sigma, tol)]

    # The closed form is certified (the upper end is capped by the chi-square bound), so
    # (0, σ_cf] brackets the root from the start.
    hi, lo = sigma_cf, None
    step = math.log1p(rel)
    z_target = float(special.ndtri(target))
    points: list[tuple[float, float]] = []  # (log σ, Φ⁻¹(upper)): nearly linear near the root

    def model_root(x0: float, z0: float) -> float:
        return _model_root(x0, z0, z_target, steps)

    x = math.log(guess if guess is not None else _start(target, steps, n_epochs, sigma_cf, tol))
    found = search_root(target, sigma_cf, rel, tol, evaluate, model_root, x, certify)
    if found is not None:  # certified by its own evaluation (see pacpriv.dpsgd._search)
        hi, result = found
        return _calibration(target, steps, n_epochs, hi, sigma_cf, result, cache, start)
    for _ in range(60):
        sigma = math.exp(x)
        res = evaluate(sigma)
        if res.upper > target:
            lo = sigma if lo is None else max(lo, sigma)
        else:
            hi = min(hi, sigma)
        if 0.5 < res.upper < 1.0:
            points.append((x, float(special.ndtri(res.upper))))
        if lo is not None and (hi, tol) in cache and hi / lo - 1.0 <= rel:
            break
        a_ = math.log(lo) if lo is not None else -math.inf
        b_ = math.log(hi)
        if b_ - a_ <= step:
            x = b_  # bracket already tight: certify hi itself
            continue
        z_of = dict(points)
        if (lo is not None and (hi, tol) in cache and a_ in z_of and b_ in z_of
                and z_of[a_] != z_of[b_]):
            za, zb = z_of[a_], z_of[b_]  # regula falsi on the bracket ends
            root = a_ + (z_target - za) * (b_ - a_) / (zb - za)
        elif points:
            root = model_root(*min(points, key=lambda pz: abs(pz[1] - z_target)))
        else:
            root = x + math.log(0.8)
        # next point just beyond the predicted root, on the side whose end is still far
        x = root + 0.45 * step if b_ - root > 0.5 * step else root - 0.45 * step
        if lo is not None:
            margin = 0.05 * (b_ - a_)
            x = min(max(x, a_ + margin), b_ - margin)
        elif x >= b_:
            x = b_ + math.log(0.9)
    else:
        lo, hi = _bisect(evaluate, target, lo, hi, rel)
    result = certify(hi)
    while result.upper > target:  # one-sided verification (cannot loop long: chi-square cap)
        hi *= 1.0 + rel / 4
        result = certify(hi)
    return _calibration(target, steps, n_epochs, hi, sigma_cf, result, cache, start)


def _calibration(target, steps, n_epochs, sigma, sigma_cf, result, cache,
                 start) -> NoiseCalibration:
    """The :class:`NoiseCalibration` of a certified ``sigma`` (``result`` evaluated there);
    its ``lower_noise_multiplier`` is the largest σ evaluated whose certified *lower*
    accuracy exceeds the target, or ``None`` where none was (never a σ that merely failed to
    certify, never a 0 that means "unknown")."""
    below = [s for (s, _), r in cache.items() if r.lower > target]
    return NoiseCalibration(
        noise_multiplier=sigma,
        closed_form_noise_multiplier=sigma_cf,
        noise_saving=1.0 - sigma / sigma_cf,
        lower_noise_multiplier=max(below) if below else None,
        target_accuracy=target,
        steps_per_epoch=steps,
        epochs=n_epochs,
        accuracy=result,
        n_evaluations=len(cache),
        wall_time_s=time.perf_counter() - start,
    )


def noise_multiplier_for_accuracy(
    target_accuracy,
    *,
    steps_per_epoch,
    epochs,
    method: str = "closed-form",
    rtol: float = 1e-3,
    k: int = 1,
):
    """σ needed for a target membership-inference accuracy (random-allocation DP-SGD).

    Parameters
    ----------
    target_accuracy : float or array_like
        Target accuracy in (½, 1).
    steps_per_epoch, epochs : int or array_like of int
        ``M ≥ 1``, ``E ≥ 1`` (broadcast).
    method : {"closed-form", "exact"}, default "closed-form"
        ``"closed-form"``: ``σ = 1/sqrt(ln(1 + M((1 + 16(a − ½)²)^{1/E} − 1)))``, the exact
        inverse of the chi-square bound [1]_ (vectorised, ~1 µs). ``"exact"``: the smallest σ
        (relative tolerance ``rtol``) whose certified exact accuracy is ≤ target, see
        :func:`calibrate_noise_multiplier`; arrays broadcast like the closed form, each distinct
        element is searched once, the previous target's σ seeding the next search.
    rtol : float, default 1e-3
        Relative tolerance of the exact search.
    k : int, default 1
        Steps per record per epoch (k of t): ``"closed-form"`` then inverts the k-of-t
        chi-square bound by a root find, ``"exact"`` calibrates as
        :func:`calibrate_noise_multiplier` with ``k``.

    Returns
    -------
    float or ndarray
        σ; scalars in, float out.

    Raises
    ------
    TypeError, ValueError
        On invalid input or an unknown ``method``.

    References
    ----------
    .. [1] Membership-inference accuracy bound for DP-SGD with random allocation
       (docs/math.rst, Random allocation).

    Examples
    --------
    >>> round(noise_multiplier_for_accuracy(0.75, steps_per_epoch=1, epochs=100), 6)
    12.011224
    """
    if method == "closed-form":
        return closed_form_noise_multiplier(
            target_accuracy, steps_per_epoch=steps_per_epoch, epochs=epochs, k=k
        )
    if method != "exact":
        raise ValueError(f"`method` must be 'closed-form' or 'exact'; got {method!r}.")
    # validate (and broadcast) with the closed form's checks, then calibrate each distinct
    # (target, M, E) once (shared work across repeated cells). Every search starts as a
    # scalar call does, so an array gives elementwise the scalar calls' σ (a search started
    # from a neighbour's σ ends at a different, equally certified, point within rtol)
    closed_form_noise_multiplier(target_accuracy, steps_per_epoch=steps_per_epoch, epochs=epochs)
    for value, name in ((steps_per_epoch, "steps_per_epoch"), (epochs, "epochs")):
        if isinstance(value, numbers.Integral):  # the exact numerics count in float64 (W5)
            check_int(value, name, low=1, high=MAX_STEP_COUNT)
        else:
            check_array_real(value, name, low=1, high=MAX_STEP_COUNT, integer=True)
    rel = check_real(rtol, "rtol", low=1e-6, high=0.1)
    k = check_int(k, "k", low=1)
    a, m, e = np.broadcast_arrays(
        np.asarray(target_accuracy, dtype=float), np.asarray(steps_per_epoch),
        np.asarray(epochs),
    )
    keys = sorted({(int(mv), int(ev), float(av))
                   for av, mv, ev in zip(a.ravel(), m.ravel(), e.ravel(), strict=True)})
    found: dict = {}
    for mv, ev, av in keys:
        tol = _search_tolerance(av, rel)
        if k == 1:
            res = _also_at_default_tolerance(
                _calibrate(av, mv, ev, rel, tol, time.perf_counter(), guess=None), rel)
        else:
            res = calibrate_noise_multiplier(av, steps_per_epoch=mv, epochs=ev, rtol=rel, k=k)
        found[(mv, ev, av)] = res.noise_multiplier
    out = np.empty(a.shape)
    for idx in np.ndindex(a.shape):
        out[idx] = found[(int(m[idx]), int(e[idx]), float(a[idx]))]
    return out.item() if out.ndim == 0 else out
