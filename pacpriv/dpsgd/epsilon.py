"""ε at δ for random-allocation DP-SGD: the smallest of several sound upper bounds.

The certified privacy-loss distribution (PLD) of :func:`pacpriv.dpsgd.tradeoff_curve` is the
tightest bound, but it cannot always be built (steps per epoch above its cap, a loss too large
for float64) and at very large σ its discretisation dominates (it stays an upper bound, but
it no longer falls with σ). Every bound below is an upper bound on ε for adding *or* removing
one record, so their minimum is one too:

* **PLD** — ``tradeoff_curve(...).pld_epsilon(δ)`` (certified; ``inf`` above ε = 60);
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

from pacpriv._validation import check_int, check_real
from pacpriv.dpsgd._closed_epsilon import _chi_square_epsilon, gaussian_epsilon

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
        eps = float(curve.pld_epsilon(delta))
        if _coarse(curve) and eps > closed:
            anchor = _anchor(sigma, steps, epochs, k)
            if anchor is not None and anchor <= sigma:
                eps = min(eps, float(_pld_curve(anchor, steps, epochs, k).pld_epsilon(delta)))
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
    if k * n_ep < 2**1000:
        mu = math.sqrt(k * n_ep) / sigma if sigma > 1e-150 else math.inf
    else:  # μ = sqrt(k·E)/σ in log space (E any Python int, 10**400 included); rounded up
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
