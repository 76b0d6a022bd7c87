"""Exact membership-inference accuracy of random-allocation DP-SGD, with a certified interval.

The best accuracy of any membership-inference attack (equal priors, worst case over datasets,
one record added or removed) against the dominating pair of random allocation is
``½ + ½·TV(P^⊗E, Q^⊗E)`` with ``P = N(0, σ² I_M)`` and ``Q = (1/M) Σ_i N(e_i, σ² I_M)``
[1]_ [2]_. It has no closed form for ``M > 1``; :func:`exact_membership_inference_accuracy`
returns a two-sided interval that provably contains it.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings

import numpy as np
from scipy import special

from pacpriv._validation import check_array_real, check_int, check_real
from pacpriv.dpsgd._exact import composition as _comp
from pacpriv.dpsgd._exact import geometric as _geo
from pacpriv.dpsgd._exact import hybrid as _hybrid
from pacpriv.dpsgd._exact import ladder as _ladder
from pacpriv.dpsgd._exact import lattice as _pld
from pacpriv.dpsgd._exact import screens as _screens
from pacpriv.dpsgd._exact_accuracy import ExactAccuracy
from pacpriv.dpsgd.bounds import membership_inference_accuracy_bound
from pacpriv.exceptions import PacprivWarning

_U = 2.0**-53

__all__ = ["ExactAccuracy", "exact_membership_inference_accuracy"]

_TAIL = 1e-13  # Q-tail of one coordinate's W sent to +inf (upper) / merged (lower)
_WINDOW_TAU = 1e-15  # Chernoff bound on the mass outside the E-fold FFT window, per side
_GEO_C = 40.0  # grid points per unit of ln T on the geometric grid (first attempt)
_MAX_ATTEMPT_S = _ladder.MAX_ATTEMPT_S  # no refinement predicted to take longer (CPU s)
_GEO_MIN_SPREAD = 0.15  # sd of ln T per epoch above which the geometric grid is used
_LINEAR_MAX_POINTS = 2**20  # linear coordinate lattice size beyond which the geometric grid is used
_LINEAR_SLOW_POINTS = 2**17  # ... and beyond which it is used for M <= _GEO_PREFERRED_MAX_STEPS
_GEO_PREFERRED_MAX_STEPS = 10**5
#: ... and, for M <= _GEO_PREFERRED_MAX_STEPS and a spread of at least _GEO_MODERATE_SPREAD,
#: where the linear lattice's float64 round-off, multiplied by E, would need long-double FFTs
#: (found by its float64 pass, see _exact.ladder): measured on the issue-29 grid, (σ 0.7, M 1e3,
#: E 1e3) 4.6 s linear against 0.44 s geometric, (0.98, 1e3, 1e3) 1.9 s against 0.6 s; where
#: the spread is smaller the geometric grid needs c > 1000 and is no faster
_GEO_MODERATE_SPREAD = 0.03
#: hybrid (geometric grid, then linear lattice for the top levels): large M, concentrated T
_HYBRID_MIN_STEPS = 2**17
_HYBRID_MAX_SPREAD = 0.05
_HYBRID_MAX_SIGMA = 2.2  # lighter coordinate tails: the linear lattice alone is as good
_HYBRID_MAX_POINTS = 2**20  # largest linear lattice at the switch from the geometric grid


def _t_top(sigma: float, steps: int, epochs: int, extra: float, tail: float) -> float:
    """Likelihood ratio beyond which an epoch is treated as "identifying" (tightness only).

    ``E = 1``: ``(T − 1)_+`` is linear above 1, so ``e`` suffices. Otherwise the level where
    one coordinate's Q-tail ``Q(W > M·t)`` is ``tail/E`` (the epochs beyond it cost at most
    about ``tail`` of TV), times ``e^{1 + extra}``.
    """
    if epochs == 1:
        return math.exp(1.0 + extra)
    s = 1.0 / sigma
    z = float(-special.ndtri(tail / epochs))
    ln_t = 0.5 * s * s + s * z - math.log(steps)
    return math.exp(min(40.0, max(ln_t, 0.0) + 1.0 + extra))


def _coordinate_tail(tail: float, epochs: int) -> float:
    """Q-tail of one coordinate sent to +inf: it costs at most about ``E·tail_c`` of TV."""
    return max(_TAIL, 12.5 * tail / epochs)


def _linear_points(sigma: float, steps: int, epochs: int, tail: float, c: float) -> float:
    """Size of the linear coordinate lattice.

    See :func:`pacpriv.dpsgd._exact.lattice.epoch_lattice`.
    """
    s = 1.0 / sigma
    t_top = _t_top(sigma, steps, epochs, 0.0, tail)
    h = _pld.lattice_base(sigma, steps) / c
    z = float(-special.ndtri(_coordinate_tail(tail, epochs)))
    ln_cap = min(0.5 * s * s + s * z, math.log(steps * t_top) + 1.0)
    return math.exp(min(ln_cap, 60.0)) / h


def _long_fallback(sigma: float, steps: int) -> bool:
    """Whether a linear lattice that would need long-double FFTs gives way to the geometric
    grid (see ``_GEO_MODERATE_SPREAD``)."""
    return (steps <= _GEO_PREFERRED_MAX_STEPS
            and _ladder.spread(sigma, steps) >= _GEO_MODERATE_SPREAD)


def _choose_method(sigma: float, steps: int, epochs: int, tail: float, c: float) -> str:
    """``"gaussian"`` (M = 1), ``"linear"`` (light tails), ``"geometric"`` (heavy tails) or
    ``"hybrid"`` (large M: geometric grid for the small blocks, linear lattice on top)."""
    if steps == 1:
        return "gaussian"
    spread = _ladder.spread(sigma, steps)
    if spread >= _GEO_MIN_SPREAD:
        return "geometric"
    if steps >= _HYBRID_MIN_STEPS and spread < _HYBRID_MAX_SPREAD and sigma <= _HYBRID_MAX_SIGMA:
        return "hybrid"
    points = _linear_points(sigma, steps, epochs, tail, c)
    if points > _LINEAR_MAX_POINTS:
        return "geometric"
    # a long linear lattice with a heavy coordinate tail needs long-double FFTs (slow, see
    # _numeric_once); up to M ~ 1e5 the geometric grid reaches the tolerance much faster
    if points > _LINEAR_SLOW_POINTS and steps <= _GEO_PREFERRED_MAX_STEPS:
        return "geometric"
    return "linear"


#: lower chain, E >= 1e4: factor on the Q-mass of the top tail merged at every level
_LOWER_TOP_Q_FACTOR = 1e3


def _lower_min_dln(sigma: float, steps: int, epochs: int) -> float:
    """Lower chain: coordinate cells narrower than this in ln W are grouped (a garbling).

    Wider groups have smaller relative round-off ``κ`` (the cell masses' error is set by
    their edges), which the E-fold product multiplies by E. A group of width ``d`` in ln W
    loses about ``d²/12`` of one coordinate's variance relative to ``Var W`` for σ ≤ 1 and
    ``(σd)²/12`` for σ > 1 (``ln W`` has sd ``1/σ``), so the width is ``d₀·min(1, 1/σ)``:
    ``d₀ = 0.03`` for E ≥ 1e5 (relative loss 7.5e-5; measured at (0.5, 1e8, 1e6): TV 1e-5
    lower, its round-off bound 2.7e-5 smaller), 0.01 for large M or E ≥ 1e4, else 0 (the
    z-width ``_pld._LOWER_MIN_DZ`` only).
    """
    if epochs >= 10**5:
        base = 0.03
    elif steps >= _HYBRID_MIN_STEPS or epochs >= 10**4:
        base = _geo.LOWER_MIN_DLN_LARGE_M
    else:
        return 0.0
    return base * min(1.0, 1.0 / sigma)


def _epoch_pair(sigma, steps, epochs, *, c, c_epoch, method, tail, t_top, upper, delta,
                label_range, extended, tick, tol=1e-4):
    """One chain's epoch pair on the log lattice, its round-off terms and Δ.

    Returns ``(pair, n_coord, eps, kappa, looseness, delta)``: ``eps`` is the l1 round-off
    bound of the epoch pair, ``kappa`` the relative scale of the lower chain (see
    :attr:`.lattice._Lattice.kappa`); ``looseness`` (upper chain, not part of the
    bound) is the round-off slack already added to ``q_inf`` plus the size of the FFT noise
    carried through the doubling, which float64 turns into a (valid) upward bias: it selects
    long double.
    """
    if method == "gaussian":
        delta = delta or (1.0 / sigma) / c_epoch
        pair = _comp.single_step_pair(sigma, delta=delta, upper=upper)
        eps = (16.0 + 4.0 * _pld.sum_error_factor(pair.p.size) + 8.0 / (sigma * delta)) * _U
        return pair, 0, eps, 0.0, 0.0, delta
    top_q = max(1e-14, tail / (epochs * 2 * (_levels(steps) + 1)))
    chain_top_q = top_q  # both chains choose the mixed grid alike (see _hybrid.epoch_hybrid)
    if not upper and epochs >= 10**4:
        # lower chain: the top tail is merged (a garbling, valid at any threshold), i.e. its
        # likelihood ratios are replaced by their mean, which costs far less TV than its
        # Q-mass (measured: TV unchanged to 1e-9 at (0.5, 1e8, 1e6)); shorter lattices have
        # smaller FFT round-off, which the E-fold product multiplies
        top_q = min(top_q * _LOWER_TOP_Q_FACTOR, max(top_q, 1e-10))
    min_dln = _lower_min_dln(sigma, steps, epochs)
    if method == "geometric":
        lat = _geo.epoch_geo(sigma, steps, epochs, c=c, upper=upper, tail=tail, tick=tick)
    elif method == "hybrid":
        lat = _hybrid.epoch_hybrid(
            sigma, steps, epochs, c=c, max_points=_HYBRID_MAX_POINTS, upper=upper, tail=tail,
            t_top=t_top, top_q=top_q, tick=tick, extended=extended, tol=tol, min_dln=min_dln,
            mixed_top_q=chain_top_q,
        )
    else:
        # Q-mass sent to +inf costs at most E·(mass) of TV (top_q: ~1e-2 of tol)
        lat = _pld.epoch_lattice(
            sigma, steps, c=c, upper=upper, tail=_coordinate_tail(tail, epochs), t_top=t_top,
            top_q=top_q, tick=tick, extended=extended, min_dln=min_dln, direct=epochs > 1,
        )
    n_coord = lat.p.size
    eps = lat.err
    if delta is None:
        lr = lat.lr()
        pos = (lr > 0) & (lat.p > 0)
        w = lat.p[pos] / lat.p[pos].sum()
        ln = np.log(lr[pos])
        sd = math.sqrt(max(float(np.dot(w, (ln - np.dot(w, ln)) ** 2)), 1e-300))
        delta = max(sd / c_epoch, 1e-9)
    pair = _comp.to_log_lattice(lat, delta=delta, ln_range=60.0, upper=upper, labels=label_range)
    eps += pair.binning_err  # binning sums (non-negative terms), see to_log_lattice
    noise = float(getattr(lat, "noise_l1", 0.0))
    return pair, n_coord, eps, float(lat.kappa), float(lat.slack) + noise, delta


def _numeric_once(
    sigma, steps, epochs, *, c, c_epoch, extra, direction, method, tail, tol, tick,
    long_fallback: bool = False, start_extended: tuple[bool, bool] = (False, False),
) -> dict | None:
    """One discretisation at resolution ``c``: certified TV bounds and their error terms.
    ``long_fallback``: return None instead of redoing a chain in long double (the caller
    then uses the geometric grid, see :mod:`._exact.ladder`); ``start_extended``: the
    (upper, lower) linear chain starts in long double (a coarser attempt's needed it; the
    lower also where the upper did). Either precision is certified (see ``ladder.refine``)."""
    t_top = _t_top(sigma, steps, epochs, extra, tail)
    out: dict = {"c": c, "c_epoch": c_epoch, "t_top": t_top, "method": method}
    delta = None
    label_range = None
    for upper in (True, False):
        # hybrid with many epochs: the lower chain's κ (times E) needs long double anyway
        extended = (method == "hybrid" and not upper and epochs >= 10**5) or (
            method == "linear" and start_extended[not upper])
        while True:
            pair, n_coord, eps, kappa, slack, delta = _epoch_pair(
                sigma, steps, epochs, c=c, c_epoch=c_epoch, method=method, tail=tail,
                t_top=t_top, upper=upper, delta=delta, label_range=label_range,
                extended=extended, tick=tick, tol=tol,
            )
            # float64 FFT round-off, amplified by the M-fold and E-fold products, too wide for
            # the tolerance: redo the chain's convolutions in long double
            cost = epochs * (2.0 * eps + kappa + slack)
            if method not in ("linear", "hybrid") or extended or cost <= 0.25 * tol:
                break
            if long_fallback and method == "linear":
                return None
            extended = True
        if upper and method != "gaussian":
            label_range = (pair.a0, pair.a0 + pair.p.size - 1)
            start_extended = (True, start_extended[1] or extended)  # the lower chain follows
        tv, err, rnd = _comp.compose_tv(pair, epochs, direction=direction, tau=_WINDOW_TAU)
        # an l1 error eps in one epoch's P- and Q-laws moves TV of the E-fold products by at
        # most 2·E·eps·(1 + eps)^(E−1) (telescoping over epochs; TV is 1-Lipschitz in l1)
        prop = 2.0 * epochs * eps * math.exp(min(700.0, (epochs - 1) * math.log1p(eps)))
        # lower chain: the certified pair has its likelihood ratios scaled by (1 − κ) per
        # epoch, which lowers TV = Σ (q_E − p_E)_+ by at most (1 − (1 − κ)^E)·Σ q_E
        scale = 0.0
        if not upper and kappa > 0:
            sq = float(pair.q.sum()) * (1.0 + 4.0 * pair.q.size * _U)
            scale = -math.expm1(epochs * math.log1p(-kappa)) * math.exp(
                min(700.0, epochs * math.log(max(sq, 1e-300))))
        key = "upper" if upper else "lower"
        out[f"tv_{key}"] = float(tv)
        out[f"window_error_{key}"] = float(err)
        out[f"roundoff_{key}"] = float(rnd + prop + scale)
        out[f"roundoff_parts_{key}"] = {"power": float(rnd), "epoch": float(prop),
                                        "scale": float(scale)}
        out[f"epoch_lattice_size_{key}"] = int(n_coord)
        out[f"log_lattice_size_{key}"] = int(pair.p.size)
        out[f"extended_precision_{key}"] = extended
        if upper:
            out["roundoff_noise_upper"] = float(epochs * slack)
        else:
            out["kappa_lower"] = float(kappa)
        if tick is not None:
            tick()
    out["delta"] = delta
    tv_lo = out["tv_lower"] - out["window_error_lower"] - out["roundoff_lower"]
    tv_up = out["tv_upper"] + out["window_error_upper"] + out["roundoff_upper"]
    out["tv_lower_numerical"] = max(0.0, tv_lo)
    out["tv_upper_numerical"] = min(1.0, tv_up)
    return out


#: Largest ``steps_per_epoch`` the exact method accepts (every lattice is capped, so memory
#: stays bounded; beyond 1e8 use the chi-square bound).
MAX_EXACT_STEPS_PER_EPOCH = 10**8


def _levels(steps: int) -> int:
    return max(1, steps.bit_length() - 1)


_DEFAULT_TOL = 1e-4  # tolerance whose grids also run when a tighter one misses (_scalar)


def _scalar(sigma: float, steps: int, n_epochs: int, tol: float, direction: str,
            refinements: int, bar, warm: dict | None = None) -> dict:
    """Certified interval for one (σ, M, E); ``bar`` is a tqdm bar (or None).

    A tolerance below the default that is not met also runs the default's grids and returns
    the intersection of the two certified intervals (itself certified): asking for more
    precision never gives a wider interval than the default (the tighter grids alone can hit
    the time cap at a coarser point than the default's).
    """
    tight = _scalar_once(sigma, steps, n_epochs, tol, direction, refinements, bar, warm)
    if tol >= _DEFAULT_TOL or tight["upper"] - tight["lower"] <= tol:
        return tight
    base = _scalar_once(sigma, steps, n_epochs, _DEFAULT_TOL, direction, refinements, bar)
    lower = max(base["lower"], tight["lower"])
    upper = max(lower, min(base["upper"], tight["upper"]))
    narrower = tight if tight["upper"] - tight["lower"] <= base["upper"] - base["lower"] else base
    details = dict(narrower["details"])
    details["wall_time_s"] = base["details"]["wall_time_s"] + tight["details"]["wall_time_s"]
    details["intersected_with_default_tolerance"] = True
    return {"lower": lower, "upper": upper, "details": details}


def _scalar_once(sigma: float, steps: int, n_epochs: int, tol: float, direction: str,
                 refinements: int, bar, warm: dict | None = None) -> dict:
    """One pass of :func:`_scalar` with the grids of tolerance ``tol``.

    ``warm`` (private, see :func:`warm_accuracy`): the method is chosen as for the
    tolerance ``warm["method_tol"]`` and, where ``warm["method"]`` is that method, the first
    attempt uses ``warm``'s resolution (``c``, ``c_epoch``, ``extra``). Any grid gives a
    certified interval, so this only changes the width and the time.
    """
    start = time.perf_counter()
    chi2 = float(membership_inference_accuracy_bound(
        sigma, steps_per_epoch=steps, epochs=n_epochs).accuracy)
    tv_lo, tv_up_m1, screen = _screens.screen(sigma, steps, n_epochs)
    lower = 0.5 + 0.5 * tv_lo
    upper = min(chi2, 0.5 + 0.5 * tv_up_m1)
    details: dict = {"screen": screen, "chi_square_accuracy": chi2}
    details["method"] = "screen"
    details["upper_numerical"] = upper
    best = None
    if upper - lower > tol:
        tail = min(1e-6, 1e-2 * tol)
        c = float(np.clip(40.0 * math.sqrt(1e-4 / tol), 16.0, 4096.0))
        method = _choose_method(sigma, steps, n_epochs, tail, c)
        if warm is not None:
            t_m = float(warm["method_tol"])
            method = _choose_method(sigma, steps, n_epochs, min(1e-6, 1e-2 * t_m),
                                    float(np.clip(40.0 * math.sqrt(1e-4 / t_m), 16.0, 4096.0)))
        details["method"] = method
        if method == "geometric":
            c = float(np.clip(_GEO_C * (1e-4 / tol) ** 0.25, 24.0, 256.0))
        c_epoch, extra = float(np.clip(40.0 * math.sqrt(1e-4 / tol), 16.0, 4096.0)), 0.0
        if method == "linear":  # c = c_epoch raised where the predicted width misses tol
            c = c_epoch = _ladder.linear_first_c(sigma, steps, n_epochs, tol, c)
        if (warm is not None and warm.get("method") == "geometric" and method == "linear"
                and _long_fallback(sigma, steps)):  # an earlier evaluation fell back
            method = "geometric"
        if warm is not None and warm.get("method") == method:
            c, c_epoch, extra = warm["c"], warm["c_epoch"], warm["extra"]
        tick = None
        if bar is not None:
            bar.total = (bar.total or 0) + 2 * (_levels(steps) + 1) * (refinements + 1)

            def tick():
                bar.update(1)

        best, method = _ladder.refine(
            _numeric_once, (sigma, steps, n_epochs), tol=tol, direction=direction,
            refinements=refinements, tick=tick, method=method, grid=(c, c_epoch, extra),
            bounds=(lower, upper), tail=tail,
            fallback=method == "linear" and _long_fallback(sigma, steps),
            geo_c=float(np.clip(_GEO_C * (1e-4 / tol) ** 0.25, 24.0, 256.0)))
        details["method"] = method
        assert best is not None  # the loop runs at least once (refinements >= 0)
        lower, upper = best[0], best[1]
        details.update({k: (v.item() if isinstance(v, np.generic) else v)
                        for k, v in best[2].items()})
        details["upper_numerical"] = 0.5 + 0.5 * best[2]["tv_upper_numerical"]
    # safe-side clipping: lower in [½, 1]; upper <= 1 and never below lower
    lower = float(min(max(lower, 0.5), 1.0))
    upper = float(max(lower, min(upper, 1.0)))
    details["wall_time_s"] = time.perf_counter() - start
    return {"lower": lower, "upper": upper, "details": details}


def _one_blas_thread():
    """One BLAS thread for the grids (``threadpoolctl``): the direct convolutions are long
    ``ddot`` calls that a threaded BLAS splits, and on a busy machine its spinning threads
    cost up to 20x the CPU time (measured on 2 shared cores at load 12: 3.8 s against 0.23 s
    for one evaluation at σ 0.98, M 1e3, E 1e3). It also makes the summation order, hence
    the last bits of the bounds, independent of the machine's core count."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


_METHOD = (
    "certified: chi-square and M=1 upper bounds, spike-count and sum lower bounds; where "
    "they leave a gap, the PLD of the Gaussian-vs-mixture pair (exp-space linear, "
    "geometric or hybrid lattice, M-fold doubling, connect-the-dots (upper) / garbling "
    "(lower), "
    "E-fold FFT composition, delta at epsilon=0) with derived round-off bounds "
    "(q_inf slack in the upper chain, likelihood-ratio scale in the lower chain)"
)


def warm_accuracy(sigma: float, steps: int, epochs: int, tol: float,
                  warm: dict | None) -> ExactAccuracy:
    """Private (calibration): the scalar interval of the public function, ``direction="add"``
    and the default refinements, with an optional ``warm`` start (see :func:`_scalar_once`):
    the same certificate, only the first grid differs. Validated inputs only."""
    from tqdm import tqdm

    with tqdm(total=0, desc="exact accuracy", unit="step", delay=2.0, disable=None,
              leave=False) as bar, _one_blas_thread():
        r = _scalar(float(sigma), int(steps), int(epochs), tol, "add", 4, bar, warm)
    width = r["upper"] - r["lower"]
    if width > tol:
        warnings.warn(f"exact accuracy interval width {width:.3g} exceeds tolerance {tol:g}; "
                      "the interval is still certified, only wider", PacprivWarning,
                      stacklevel=2)
    return ExactAccuracy(
        lower=r["lower"], upper=r["upper"], estimate=0.5 * (r["lower"] + r["upper"]),
        tolerance=tol, converged=bool(width <= tol), noise_multiplier=float(sigma),
        steps_per_epoch=int(steps), epochs=int(epochs), direction="add", method=_METHOD,
        details=r["details"])


def _checked_grid(noise_multiplier, steps_per_epoch, epochs) -> tuple:
    """``(σ, M, E)`` as arrays (0-d for scalars), validated; M at most
    :data:`MAX_EXACT_STEPS_PER_EPOCH`."""
    scalar_in = all(
        isinstance(v, numbers.Real) and not isinstance(v, bool)
        for v in (noise_multiplier, steps_per_epoch, epochs)
    )
    if scalar_in:
        sigma_a = np.asarray(check_real(noise_multiplier, "noise_multiplier", low=0,
                                        low_inclusive=False))
        # the grid numerics count in float64: counts up to 2**53 (exact integers there)
        steps_a = np.asarray(check_int(steps_per_epoch, "steps_per_epoch", low=1, high=2**53))
        epochs_a = np.asarray(check_int(epochs, "epochs", low=1, high=2**53))
    else:
        sigma_a = check_array_real(noise_multiplier, "noise_multiplier", low=0,
                                   low_inclusive=False)
        steps_a = check_array_real(steps_per_epoch, "steps_per_epoch", low=1, integer=True)
        epochs_a = check_array_real(epochs, "epochs", low=1, integer=True)
    if np.any(steps_a > MAX_EXACT_STEPS_PER_EPOCH):
        raise ValueError(
            f"`steps_per_epoch` must be <= {MAX_EXACT_STEPS_PER_EPOCH:.0e} for the exact method; "
            f"got {int(np.max(steps_a))}. Use the chi-square bound "
            "(membership_inference_accuracy_bound) for larger M."
        )
    return sigma_a, steps_a, epochs_a


def exact_membership_inference_accuracy(
    noise_multiplier: float | np.ndarray,
    *,
    steps_per_epoch: int | np.ndarray,
    epochs: int | np.ndarray,
    tolerance: float = 1e-4,
    direction: str = "add",
    max_refinements: int = 4,
    progress: bool | None = None,
    k: int = 1,
) -> ExactAccuracy:
    """Certified interval for the exact membership-inference accuracy of random allocation.

    Parameters
    ----------
    noise_multiplier : float
        σ > 0 (noise std / clipping norm).
    steps_per_epoch : int
        ``M ≥ 1`` steps per epoch; each record is used once per epoch at a random step.
    epochs : int
        ``E ≥ 1``.
    tolerance : float, default 1e-4
        Target width of the interval (absolute, accuracy units), in ``[1e-8, 0.5]``. The grids
        are refined up to ``max_refinements`` times until it is met.
    direction : {"add", "remove"}, default "add"
        Evaluate ``TV`` as ``E_Q[(1 − e^{−L})_+]`` (add: privacy loss ``L = ln dQ/dP``) or as
        ``E_P[(1 − e^{L})_+]`` plus the mass defect (remove). TV is symmetric: both agree.
    max_refinements : int, default 4
        Maximum number of grid refinements.
    progress : bool or None, default None
        A tqdm bar on stderr for evaluations still running after 2 s: ``None`` only when
        stderr is a terminal, ``True`` always, ``False`` never.
    k : int, default 1
        Steps per record per epoch (k of t; scalars only for ``k > 1``, then ``upper`` is
        deterministic and ``lower`` deterministic (the lower k-of-t chain) or certified
        Monte Carlo at ``lower_confidence``, see :func:`pacpriv.dpsgd.k_of_t.k_of_t_interval`).

    Returns
    -------
    ExactAccuracy
        ``lower ≤ ½ + ½·TV(P^⊗E, Q^⊗E) ≤ upper``.

    Raises
    ------
    TypeError, ValueError
        On invalid arguments, and for ``steps_per_epoch > MAX_EXACT_STEPS_PER_EPOCH`` (1e8).

    Warns
    -----
    PacprivWarning
        If the width is still above ``tolerance`` after the refinements (extreme σ, M, E).

    Notes
    -----
    Write ``T = (1/M) Σ_i W_i`` for one epoch's likelihood ratio ``dQ/dP`` under P, where the
    ``W_i = exp(y_i/σ − 1/(2σ²))`` are i.i.d. mean-one log-normals; then
    ``TV = E_P[(Π_e T_e − 1)_+]``. Two discretised pairs are computed:

    1. *Coordinate*: ``W`` is put on a linear lattice in "exp space" ([3]_). For the upper
       bound each cell's mass is split to the cell's two ends keeping its P-mass and its mean
       (connect-the-dots, [4]_), the far tail is split to the last node and ``+∞``; for the
       lower bound each cell is one outcome (quantisation = data processing).
    2. *Epoch*: the M-fold sum ``S = Σ W_i`` by binary doubling with FFT convolutions; the
       lattice is coarsened as ``S`` spreads (half/half splits, resp. merging pairs); tails are
       moved to the pessimistic side (up / ``+∞``, resp. merged).
    3. *Privacy loss*: ``ln T`` is put on a lattice of step Δ (splits in T-space, resp. binning
       by the exact ``ln(q/p)`` of each outcome), composed E times by one FFT power over a
       window whose outside mass is Chernoff-bounded, and ``TV = δ(ε = 0)`` is read off.

    Heavy coordinate tails (small σ) use a geometric grid ``x_k = e^{k/c}`` for steps 1–2
    instead ([3]_), refined by exact embedding towards the top levels: a split at a level of
    blocks of ``m`` coordinates adds about ``(m/M)/(4c²)`` to the variance of ``T``, so only
    the last levels need the fine step; it is also used (M ≤ 1e5, spread of ``ln T`` per epoch
    ≥ 0.03) where the linear lattice's float64 round-off, times E, would need long-double
    FFTs. For large M with a concentrated ``T`` (σ ≤ 2.2,
    ``M ≥ 2^17``) the doubling starts on the geometric grid and moves to the linear lattice
    once a block's range, its Q-tail cut as at every level, fits it ("hybrid"): the upper chain
    splits each geometric node to the two lattice nodes around it keeping its mean (weights
    rounded up), the lower chain merges nodes (a garbling). Where that switch comes so late
    that the geometric grid would need more than 4096 points per unit of ln x (very heavy
    tails at large M, e.g. σ ≈ 0.4, M ≥ 1e7), the top levels instead run on a *mixed* grid:
    each block is a bulk sub-law on a short linear lattice (up to ``m + 16·sqrt(m)·sd(W)``)
    plus a tail sub-law on a coarse geometric grid; bulk ⊕ bulk is a linear convolution whose
    part above the cap joins the tail, and the parts with a tail are geometric pair sums with
    the bulk projected onto that grid (tail values that fall below the cap return to the
    bulk). Each projection is a mean-preserving split (upper) or a nearest-node garbling
    (lower) of one part of a mixture, so both certificates carry over.

    Every upper-chain step is an increase in the increasing-convex order of the likelihood
    ratio (Blackwell-dominating pair) and every lower-chain step is a garbling (equivalently,
    a conditional expectation of the likelihood ratio: a decrease in the convex order), so
    ``lower ≤ exact ≤ upper``; the window error is added on the pessimistic side.
    Mean-preserving splits make the error second order in the cell widths, so the width
    shrinks like ``1/c²`` in the grid resolution ``c``. Tails are never dropped. For
    ``M = 1`` the pair is a Gaussian shift and ``ln T`` is discretised directly; the exact
    value is ``Φ(sqrt(E)/(2σ))``.

    *Round-off* is part of the certificate, with bounds derived for the operations used
    (cell masses from ``ndtr`` with a per-cell error model checked against mpmath; FFT
    convolutions and the E-fold FFT power by Higham's bound, Thm 24.2; sums of non-negative
    terms by ``γ_n``). An l1 error in a block of ``m`` coordinates would be multiplied by
    ``M/m`` through the doubling and by ``E`` through the epochs, so it is used only where it
    is small; instead

    * upper chain: the stored block law is read as normalised and its round-off is turned
      into Q-mass at ``+∞`` (``q_inf``) that restores the increasing-convex-order bound at
      every level (stop-loss transform); ``q_inf`` of a combined block is the mean of its
      parts' (exactly one step is shifted under Q), so nothing is multiplied by ``M/m``;
    * lower chain: relative errors of the masses and conditional means ``q/p`` (cell masses,
      direct convolutions of the first levels, geometric-grid sums) are absorbed by scaling
      the likelihood ratios by ``1 − κ`` (a convex-order decrease), which lowers the E-fold
      TV by at most ``(1 − (1 − κ)^E)·ΣQ``; only the FFT convolutions of the later levels
      carry an l1 error (computed in long double when it would be visible);
    * results are clipped to ``[½, 1]`` on the safe side.

    Cheap certified screens (chi-square and ``M = 1`` upper bounds, spike-count and sum
    lower bounds) return without discretising when they already meet ``tolerance``.

    Small blocks (``64·m ≤ M``, ``E > 1``) are convolved directly in both chains: an FFT's
    round-off floor, times the ``M/m`` blocks, would otherwise cut the upper chain's top tail
    to ``+∞`` (Q-mass that the E-fold product multiplies by E). At ``E ≥ 1e4`` the lower
    chain merges more of each level's top tail and groups coordinate cells more coarsely
    (both garblings: only tightness is traded, for smaller round-off).

    Round-off allowances are derived from the computation actually run (each is multiplied
    by E): in the geometric grid's pair sums, the near pairs (runs of one offset shorter than
    6 distances) are FIR dot products of a few terms, and the far pairs (runs growing like
    ``c/κ``) window sums read from dyadic tables, ``O(log L)`` operations per output and a
    relative round-off of ``(log₂L + popcount L)·u`` (no subtraction; in the upper chain the
    mean-keeping split of a run errs only by moving mass within its cell, a few ``u`` of the
    stop-loss transform per unit value), with the sums over columns in long double (not
    ``D ≈ c ln c`` terms: about 1.7× faster at c ≈ 400–900), the coordinate's mean
    and moved masses are long-double dot products, and the binning into the log lattice is
    charged the largest number of terms per label (not the lattice size).

    Measured on the issue's grid (σ ∈ [0.05, 4], M ≤ 1e8, E ≤ 1e6; 289 cells, an independent
    audit of 137, σ from 0.5 to 3.5 at M = 1e8, E = 1e6, and σ 0.3–1.5 × M 1e6–1e8 ×
    E 1e5–1e6): peak memory below 1.2 GB, every interval within ``[½, 1]`` and the default
    tolerance 1e-4 met with no warning. The heavy-tailed band (σ between 0.35 and 0.45,
    M ≥ 1e7, E ≥ 1e5), where the geometric grid's capped resolution used to leave intervals
    up to 4.7e-4 wide, now takes the mixed grid: (0.4, 1e8, 1e6) in 11 s, 9.1e-5 wide, around
    an independent value 0.8720716 (an auditor's Laplace-transform computation, 1e-10); the
    slowest cells measured take about 20 s. Refinements stop when the predicted CPU time of the
    next one exceeds ``_MAX_ATTEMPT_S`` (120 s; CPU time, so the result does not depend on
    the machine's load); a tighter ``tolerance`` there ends with a (certified, wider)
    interval and a warning.

    References
    ----------
    .. [1] Membership-inference accuracy bound for DP-SGD with random allocation (CWI / VU
       Amsterdam): exact expression, docs/math.rst, Random allocation.
    .. [2] L. Chua et al., Balls-and-Bins Sampling for DP-SGD, AISTATS 2025 (dominating pair).
    .. [3] V. Feldman, M. Shenfeld, Efficient privacy loss accounting for subsampling and
       random allocation, arXiv:2602.17284, 2026.
    .. [4] V. Doroshenko et al., Connect the Dots: Tighter Discrete Approximations of Privacy
       Loss Distributions, PETS 2022.
    """
    sigma_a, steps_a, epochs_a = _checked_grid(noise_multiplier, steps_per_epoch, epochs)
    tol = check_real(tolerance, "tolerance", low=1e-8, high=0.5)
    refinements = check_int(max_refinements, "max_refinements", low=0, high=20)
    if direction not in ("add", "remove"):
        raise ValueError(f"`direction` must be 'add' or 'remove'; got {direction!r}.")
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(f"`progress` must be None or a bool; got {progress!r}.")
    if check_int(k, "k", low=1, high=max(1, int(np.min(steps_a)))) != 1:  # k <= M (W5)
        from pacpriv.dpsgd.k_of_t import exact_result

        return exact_result(sigma_a, steps_a, epochs_a, k, tol,
                            exact_membership_inference_accuracy)
    sigma_b, steps_b, epochs_b = np.broadcast_arrays(sigma_a, steps_a, epochs_a)
    # share work: each distinct (σ, M, E) is evaluated once
    keys = {
        (float(sv), int(mv), int(ev))
        for sv, mv, ev in zip(sigma_b.ravel(), steps_b.ravel(), epochs_b.ravel(), strict=True)
    }
    from tqdm import tqdm

    results: dict = {}
    # the bar appears only if the evaluation is still running after 2 s (``delay``)
    with tqdm(total=0, desc="exact accuracy", unit="step", delay=2.0,
              disable=None if progress is None else not progress, leave=False) as bar, \
            _one_blas_thread():
        for key in sorted(keys, key=lambda k: (k[1], k[2], -k[0])):
            results[key] = _scalar(*key, tol, direction, refinements, bar)
    lower = np.empty(sigma_b.shape)
    upper = np.empty(sigma_b.shape)
    per_point = []
    for idx in np.ndindex(sigma_b.shape):
        r = results[(float(sigma_b[idx]), int(steps_b[idx]), int(epochs_b[idx]))]
        lower[idx], upper[idx] = r["lower"], r["upper"]
        per_point.append(r["details"])
    converged = upper - lower <= tol
    if not np.all(converged):
        widths = upper - lower
        where = ""
        if widths.ndim:  # the widest interval's index (plain ints) and how many miss
            worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(widths)), widths.shape))
            where = (f" at index {worst} ({int(np.count_nonzero(~converged))} of "
                     f"{converged.size} intervals wider than the tolerance)")
        warnings.warn(
            f"exact accuracy interval width {float(np.max(widths)):.3g} exceeds "
            f"tolerance {tol:g}{where}; the interval is still certified, only wider",
            PacprivWarning,
            stacklevel=2,
        )
    method = _METHOD
    if sigma_b.ndim == 0:
        details = per_point[0]
        return ExactAccuracy(
            lower=float(lower), upper=float(upper), estimate=0.5 * float(lower + upper),
            tolerance=tol, converged=bool(converged), noise_multiplier=float(sigma_b),
            steps_per_epoch=int(steps_b), epochs=int(epochs_b), direction=direction,
            method=method, details=details,
        )
    return ExactAccuracy(
        lower=lower, upper=upper, estimate=0.5 * (lower + upper), tolerance=tol,
        converged=converged, noise_multiplier=sigma_b.astype(np.float64),
        steps_per_epoch=steps_b.astype(np.int64), epochs=epochs_b.astype(np.int64),
        direction=direction, method=method, details={"points": per_point},
    )

