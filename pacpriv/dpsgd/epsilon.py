"""ε at δ for random-allocation DP-SGD: the smallest of several sound upper bounds.

The certified privacy-loss distribution (PLD) of :func:`pacpriv.dpsgd.tradeoff_curve` is the
tightest bound, but it cannot always be built (steps per epoch above its cap, a loss too large
for float64) and at very large σ its discretisation dominates (it stays an upper bound, but
it no longer falls with σ). Every bound below is an upper bound on ε for adding *or* removing
one record, so their minimum is one too:

* **PLD** — ``tradeoff_curve(...).get_epsilon(δ)`` (certified; ``inf`` above ε = 60);
* **Gaussian dominance** — per epoch the random-allocation pair ``(Q, P)`` is a mixture of
  Gaussian shifts ``N(e_S, σ²I)`` against ``N(0, σ²I)`` over the step sets ``S`` (``|S| = k``),
  so by joint convexity of the hockey-stick divergence every direction is dominated by the
  Gaussian pair with ``μ = √k/σ``; dominating pairs compose (Zhu, Dong & Wang 2022, Thm. 10),
  so the run is dominated by ``μ = √(kE)/σ``, whose ε is exact in closed form
  (Balle & Wang 2018, Thm. 8: ``δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)``);
* **chi-square** — with ``L = dQ/dP`` and ``χ² = E_P[(L − 1)²]`` the closed form of
  :func:`pacpriv.dpsgd.log1p_chi_square`, Chebyshev gives
  ``δ_{Q‖P}(ε) ≤ χ²/(e^ε − 1)`` and ``δ_{P‖Q}(ε) = E_P[(1 − e^ε L)_+] ≤ χ²/(1 − e^{−ε})``, and
  ``δ(ε) ≤ TV ≤ ½√χ²`` for every ε ≥ 0. Hence ε = 0 when ``½√χ² ≤ δ``, else
  ``ε ≤ −ln(1 − χ²/δ)`` when ``χ² < δ``.

The two closed forms are monotone in σ, M, E and δ, cost O(1) and answer at any valid input;
the PLD is used where it can be built and is then the minimum only where it is tighter.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass

from scipy import special

from pacpriv._validation import check_int, check_real

__all__ = ["EpsilonBound", "epsilon_bound", "gaussian_epsilon"]

_U = 2.0**-52
PLD = "certified PLD"
GAUSSIAN = "Gaussian dominance (closed form)"
CHI_SQUARE = "chi-square (closed form)"


@dataclass(frozen=True)
class EpsilonBound:
    """ε (nats) at ``delta`` for adding or removing one record, and where it comes from.

    Attributes
    ----------
    epsilon : float
        An upper bound on the true ε, ``≥ 0``; ``inf`` only when the true ε exceeds float64
        (σ below about 1e-154) — never NaN.
    delta : float
    source : str
        The bound that gave the minimum: ``"certified PLD"``, ``"Gaussian dominance (closed
        form)"`` or ``"chi-square (closed form)"``.
    pld_note : str
        Empty when the PLD was computed; otherwise why it is unavailable (the other bounds
        still answer).
    """

    epsilon: float
    delta: float
    source: str
    pld_note: str = ""

    def to_dict(self) -> dict:
        """JSON-ready dict (``epsilon`` may be ``inf``)."""
        return asdict(self)


def _gauss_ok(eps: float, mu: float, log_delta: float) -> bool:
    """Whether ``δ_μ(ε) ≤ δ`` for the Gaussian pair of shift μ, with its float round-off.

    In log space, so that δ down to the smallest subnormal is resolved:
    ``δ_μ(ε) = Φ(a)·(1 − e^{ε + ln Φ(b) − ln Φ(a)})``, ``a = μ/2 − ε/μ``, ``b = −μ/2 − ε/μ``.
    """
    log_a = float(special.log_ndtr(mu / 2.0 - eps / mu))
    diff = eps + float(special.log_ndtr(-mu / 2.0 - eps / mu)) - log_a
    factor = -math.expm1(min(diff, 0.0)) + 16.0 * _U  # 1 − e^diff, plus its round-off
    return log_a + math.log(factor) + 16.0 * _U * (1.0 + abs(log_a)) <= log_delta


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest ε ≥ 0 (rounded up) with ``δ_μ(ε) ≤ delta`` for the Gaussian pair of shift μ.

    Balle & Wang, Improving the Gaussian Mechanism for Differential Privacy, ICML 2018, Thm. 8.
    ``mu = inf`` gives ``inf``.
    """
    if not math.isfinite(mu):
        return math.inf
    log_delta = math.log(delta)
    if mu <= 0.0 or _gauss_ok(0.0, mu, log_delta):
        return 0.0
    hi = mu * mu / 2.0 + mu * (math.sqrt(2.0 * -log_delta) + 2.0)
    while not _gauss_ok(hi, mu, log_delta):
        hi *= 2.0
        if not math.isfinite(hi):
            return math.inf
    lo = 0.0
    for _ in range(200):
        if hi - lo <= 1e-12 * hi:
            break
        mid = 0.5 * (lo + hi)
        if _gauss_ok(mid, mu, log_delta):
            hi = mid
        else:
            lo = mid
    return hi


def _chi_square_epsilon(sigma: float, steps: int, epochs: int, k: int, delta: float) -> float:
    from pacpriv.dpsgd.bounds import log1p_chi_square

    l1p = float(log1p_chi_square(sigma, steps_per_epoch=steps, epochs=epochs, k=k))
    chi2 = math.expm1(l1p) * (1.0 + 16.0 * _U) if l1p < 700.0 else math.inf
    if 0.5 * math.sqrt(chi2) * (1.0 + 4.0 * _U) <= delta:
        return 0.0
    if chi2 < delta:
        return -math.log1p(-chi2 / delta) * (1.0 + 8.0 * _U)
    return math.inf


def _pld_curve(sigma: float, steps: int, epochs: int, k: int):
    from pacpriv.dpsgd.tradeoff import tradeoff_curve

    return tradeoff_curve(noise_multiplier=sigma, steps_per_epoch=steps, epochs=epochs, k=k,
                          fpr=[0.0])


def _coarse(curve) -> bool:
    """True where the PLD's grid is geometric: coarse near zero loss, so ε stays loose."""
    return "geometric" in curve.loss.method


@functools.lru_cache(maxsize=64)
def _anchor(sigma: float, steps: int, epochs: int, k: int) -> float | None:
    """The largest σ' ≤ σ (to a relative 1e-6) where the PLD's grid is fine, or None.

    ε is non-increasing in σ (more noise is post-processing), so the PLD at σ' bounds ε at
    every σ ≥ σ'; using it beyond the point where the grid turns coarse keeps ε monotone.
    """
    lo = 2.0 ** math.ceil(math.log2(sigma))  # a fixed grid: one anchor for every σ above it
    for _ in range(80):
        lo /= 2.0
        if lo < 0.05:
            return None
        curve = _pld_curve(lo, steps, epochs, k)
        if not _coarse(curve):
            break
    else:
        return None
    hi = 2.0 * lo
    while hi / lo > 1.0 + 1e-6:
        mid = math.sqrt(lo * hi)
        if _coarse(_pld_curve(mid, steps, epochs, k)):
            hi = mid
        else:
            lo = mid
    return lo


def _pld_epsilon(sigma: float, steps: int, epochs: int, k: int, delta: float,
                 closed: float) -> tuple[float, str]:
    from pacpriv.dpsgd import exact as _exact
    from pacpriv.dpsgd.tradeoff import TooLittleNoiseError

    cap = _exact.MAX_EXACT_STEPS_PER_EPOCH
    if steps // k > cap:
        ratio = steps // k
        shown = f"{ratio:.3g}" if ratio < 2**1000 else f"an integer of {len(str(ratio))} digits"
        return math.inf, (f"PLD unavailable: steps per epoch / k = {shown} is above its "
                          f"cap {cap:.0e}")
    try:
        curve = _pld_curve(sigma, steps, epochs, k)
        eps = float(curve.get_epsilon(delta))
        if _coarse(curve) and eps > closed:
            anchor = _anchor(sigma, steps, epochs, k)
            if anchor is not None and anchor <= sigma:
                eps = min(eps, float(_pld_curve(anchor, steps, epochs, k).get_epsilon(delta)))
    except TooLittleNoiseError:
        return math.inf, "PLD unavailable: the privacy loss overflows float64 at this sigma"
    except ValueError as exc:
        if "lattice points" in str(exc):
            return math.inf, "PLD unavailable: its composition window is above the memory cap"
        return math.inf, f"PLD unavailable: {type(exc).__name__}"
    except (MemoryError, OverflowError, FloatingPointError) as exc:
        return math.inf, f"PLD unavailable: {type(exc).__name__}"
    if math.isnan(eps) or eps < 0.0:
        return math.inf, "PLD unavailable: it returned no valid value"
    if math.isinf(eps):
        return math.inf, "PLD: epsilon above its search range (60)"
    return eps, ""


def epsilon_bound(noise_multiplier: float, *, steps_per_epoch: int, epochs: int,
                  delta: float, k: int = 1, pld: bool = True) -> EpsilonBound:
    """ε at ``delta`` (add or remove one record) of random-allocation DP-SGD, never understated.

    Parameters
    ----------
    noise_multiplier : float
        σ > 0 (finite).
    steps_per_epoch, epochs : int
        ``M ≥ 1`` and ``E ≥ 1`` (any size: the closed forms answer where the PLD cannot).
    delta : float
        δ in (0, 1).
    k : int, default 1
        Steps per record per epoch (``1 ≤ k ≤ M``).
    pld : bool, default True
        Also evaluate the certified PLD (seconds; tighter). ``False``: closed forms only (O(1)).

    Returns
    -------
    EpsilonBound
        The minimum of the sound bounds of the module docstring; non-increasing in σ, M and δ,
        non-decreasing in E for the closed forms (the PLD is used only where it is smaller).

    Raises
    ------
    TypeError, ValueError
        On an invalid argument, before any work.
    """
    sigma = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)
    steps = check_int(steps_per_epoch, "steps_per_epoch", low=1)
    n_ep = check_int(epochs, "epochs", low=1)
    k = check_int(k, "k", low=1, high=steps)
    d = check_real(delta, "delta", low=0.0, high=1.0, low_inclusive=False,
                   high_inclusive=False)
    # μ = sqrt(k·E)/σ in log space (E may be any Python int, 10**400 included); rounded up
    log_mu = 0.5 * (math.log(k) + math.log(n_ep)) - math.log(sigma)
    mu = math.exp(log_mu) * (1.0 + 4.0 * _U) if log_mu < 709.0 else math.inf
    candidates = [(gaussian_epsilon(mu, d), GAUSSIAN),
                  (_chi_square_epsilon(sigma, steps, n_ep, k, d), CHI_SQUARE)]
    note = "PLD not computed (closed forms only)"
    if pld and min(candidates)[0] > 0.0:
        eps, note = _pld_epsilon(sigma, steps, n_ep, k, d, min(candidates)[0])
        candidates.append((eps, PLD))
    elif pld:
        note = ""
    eps, source = min(candidates, key=lambda c: c[0])
    return EpsilonBound(epsilon=eps, delta=d, source=source, pld_note=note)
