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

**Each direction on its own.** ``(ε, δ)``-DP for adding or removing one record asks for
``δ_{Q‖P}(ε) ≤ δ`` (adding: ``P`` → ``Q``) *and* ``δ_{P‖Q}(ε) ≤ δ`` (removing); both are
non-increasing in ε, so with ``ε_add`` any ε at which *some* sound bound on the first holds and
``ε_remove`` likewise for the second, the run is ``(max(ε_add, ε_remove), δ)``-DP. Per
direction the candidates are the PLD's own bound of that direction
(:meth:`~pacpriv.dpsgd.TradeoffCurve.pld_epsilon_directions`: its forward bound has a floor,
the Q-mass sent to +∞, and its reverse bound an ``e^ε``-amplified term, so each passes only
on a range of ε), the two closed forms (they bound both directions) and a Chernoff bound
(:mod:`pacpriv.dpsgd._chernoff_epsilon`): ``δ_{Q‖P}(ε) ≤ c(λ)e^{−λε}E_P[T^{λ+1}]^E`` with exact
integer moments, and ``δ_{P‖Q}(ε) ≤ c(λ)e^{−λε}E_P[T^{−λ}]^E`` with a certified quadrature,
``c(λ) = λ^λ/(1+λ)^{1+λ}``. Where the default PLD's forward floor is above δ, a PLD at the
finer tolerance 1e-6 (floor about 500× lower, ~0.15 s) is tried once; per direction the
smallest ε of every curve is kept (each is sound).
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass

import numpy as np

from pacpriv._validation import check_int, check_real
from pacpriv.dpsgd import _chernoff_epsilon as _chernoff
from pacpriv.dpsgd._closed_epsilon import _chi_square_epsilon, gaussian_epsilon
from pacpriv.dpsgd.labels import bound_fields
from pacpriv.dpsgd.sampling import MAX_STEP_COUNT

__all__ = ["EpsilonBound", "epsilon_bound", "gaussian_epsilon"]

_U = 2.0**-52
PLD = "certified PLD"
GAUSSIAN = "Gaussian dominance (closed form)"
CHI_SQUARE = "chi-square (closed form)"
MEMBERSHIP = "Chernoff bound, adding direction"
REMOVAL = "Chernoff bound, removal direction"


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
        The bound that gave ε (of the direction that binds): ``"certified PLD"``,
        ``"Gaussian dominance (closed form)"``, ``"chi-square (closed form)"``,
        ``"Chernoff bound, adding direction"`` or ``"Chernoff bound, removal
        direction (certified quadrature)"``.
    pld_note : str
        Empty when the PLD answered in both directions; otherwise why it (or one direction)
        is unavailable (the other bounds still answer).
    """

    epsilon: float
    delta: float
    source: str
    pld_note: str = ""

    def to_dict(self) -> dict:
        """JSON-ready dict (``epsilon`` may be ``inf``), with the label fields of
        :func:`pacpriv.dpsgd.labels.bound_fields` (kind from ``source``)."""
        kind, detail = epsilon_kind(self.source)
        return {**asdict(self), **bound_fields(kind, detail=detail)}


def epsilon_kind(source: str) -> tuple[str, str]:
    """``(kind, detail)`` of :mod:`pacpriv.dpsgd.labels` for an :class:`EpsilonBound`'s
    ``source``: ``("certified", "PLD")`` for the certified PLD, else ``("closed-form",
    <the bound's name>)`` (Gaussian dominance, chi-square, a Chernoff bound)."""
    if source.startswith(PLD):
        return "certified", "PLD"
    return "closed-form", source.split(" (closed form)")[0]


def _pld_curve(sigma: float, steps: int, epochs: int, k: int, tol: float = 1e-4):
    from pacpriv.dpsgd.tradeoff import tradeoff_curve

    return tradeoff_curve(noise_multiplier=sigma, steps_per_epoch=steps, epochs=epochs, k=k,
                          fpr=[0.0], tolerance=tol)


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


#: finer PLD tolerance tried once where the default curve's membership bound has a floor
#: (Q-mass sent to +∞, ``δ(+∞)``) above δ; the finer chain's floor is ~500× lower
_FINE_TOL = 1e-6
#: ... only where the default floor is within this factor of δ (the finer floor is at best
#: ~500× lower, sometimes higher) and the default curve is small (the finer one is 3–10×
#: larger: ~0.15 s at 2·10⁴ atoms, 20 s at σ = 0.05)
_FINE_REACH = 1e3
_FINE_MAX_ATOMS = 20_000


def _floor(curve) -> float:
    """The membership bound's floor ``δ(ε)`` at the top of the ε search range."""
    return float(curve.loss.delta(np.array([60.0]))[0])


def _directions(sigma: float, steps: int, epochs: int, k: int, delta: float,
                closed: float, other_add: float) -> tuple[float, float]:
    """``(ε_add, ε_remove)`` from the PLD: each the smallest over the curves tried.

    Extra curves are built only where the PLD must beat the other bounds: the anchor where
    the ε of both directions is above ``closed`` (the closed forms' ε), the finer tolerance
    where the adding direction's is above ``other_add`` (its other bounds' smallest ε).

    Every curve below is a sound bound at σ (the anchor's σ' ≤ σ: more noise is
    post-processing of both laws, in either direction), so per direction the smallest ε of
    any of them is sound. The default curve first; where its membership bound cannot reach
    δ because of its floor, a finer tolerance (its floor is lower; ~0.15 s) once.
    """
    curve = _pld_curve(sigma, steps, epochs, k)
    add, rem = curve.pld_epsilon_directions(delta)
    if max(add, rem) > closed and _coarse(curve):
        anchor = _anchor(sigma, steps, epochs, k)
        if anchor is not None and anchor <= sigma:
            a2, r2 = _pld_curve(anchor, steps, epochs, k).pld_epsilon_directions(delta)
            add, rem = min(add, a2), min(rem, r2)
    if (add > other_add and curve.loss.loss.size <= _FINE_MAX_ATOMS
            and delta < _floor(curve) < _FINE_REACH * delta):
        a2, r2 = _pld_curve(sigma, steps, epochs, k, _FINE_TOL).pld_epsilon_directions(delta)
        add, rem = min(add, a2), min(rem, r2)
    return add, rem


def _pld_epsilon(sigma: float, steps: int, epochs: int, k: int, delta: float,
                 closed: float, other_add: float) -> tuple[float, float, str]:
    """``(ε_add, ε_remove, note)`` of the PLD, ``inf`` (with a note) where unavailable."""
    from pacpriv.dpsgd import exact as _exact
    from pacpriv.dpsgd.tradeoff import TooLittleNoiseError

    cap = _exact.MAX_EXACT_STEPS_PER_EPOCH
    if steps // k > cap:
        ratio = steps // k
        shown = f"{ratio:.3g}" if ratio < 2**1000 else f"an integer of {len(str(ratio))} digits"
        return math.inf, math.inf, (f"PLD unavailable: steps per epoch / k = {shown} is "
                                    f"above its cap {cap:.0e}")
    if max(steps, epochs) > MAX_STEP_COUNT:  # the accountants count in float64
        return math.inf, math.inf, ("PLD unavailable: its step counts are above 2^53, the "
                                    "largest a float64 accountant counts exactly (the closed "
                                    "forms answer)")
    try:
        add, rem = _directions(sigma, steps, epochs, k, delta, closed, other_add)
    except TooLittleNoiseError:
        return (math.inf, math.inf,
                "PLD unavailable: the privacy loss overflows float64 at this sigma")
    except ValueError as exc:
        if "lattice points" in str(exc):
            return (math.inf, math.inf,
                    "PLD unavailable: its composition window is above the memory cap")
        if "flow" in str(exc):  # e.g. E = 10**400: the atoms' masses leave float64
            return (math.inf, math.inf, "PLD unavailable: its privacy-loss atoms under- or "
                    "overflow float64 at these counts (the closed forms answer)")
        return math.inf, math.inf, f"PLD unavailable: {type(exc).__name__}"
    except (MemoryError, OverflowError, FloatingPointError) as exc:
        return math.inf, math.inf, f"PLD unavailable: {type(exc).__name__}"
    if math.isnan(add) or math.isnan(rem) or min(add, rem) < 0.0:
        return math.inf, math.inf, "PLD unavailable: it returned no valid value"
    if math.isinf(add) and math.isinf(rem):
        return add, rem, ("PLD: no epsilon up to 60 reaches this delta (the true epsilon is "
                           "larger, or delta is below the PLD's discretisation floor)")
    if math.isinf(add) or math.isinf(rem):
        which = "adding" if math.isinf(add) else "removal"
        return add, rem, (f"PLD: no epsilon up to 60 reaches this delta in the {which} "
                           "direction (the true epsilon is larger, or delta is below the "
                           "PLD's discretisation floor)")
    return add, rem, ""


def _chernoff_add(sigma: float, steps: int, epochs: int, k: int, delta: float) -> float:
    """The adding direction's Chernoff ε (module docstring) on the reduced one-of-⌊M/k⌋
    pair over ``k·E`` epochs (the pair the PLD certifies)."""
    return _chernoff.membership_epsilon(sigma, steps // k, k * epochs, delta)


def _removal(sigma: float, steps: int, epochs: int, k: int, delta: float) -> float:
    """The removal direction's Chernoff ε on the same reduced pair; ``inf`` where not
    computed."""
    return _chernoff.removal_epsilon(sigma, steps // k, k * epochs, delta)


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
    closed = [(gaussian_epsilon(mu, d), GAUSSIAN),
              (_chi_square_epsilon(sigma, steps, n_ep, k, d), CHI_SQUARE)]
    best = min(closed, key=lambda c: c[0])
    if not pld:
        return EpsilonBound(epsilon=best[0], delta=d, source=best[1],
                            pld_note="PLD not computed (closed forms only)")
    if best[0] == 0.0:
        return EpsilonBound(epsilon=0.0, delta=d, source=best[1], pld_note="")
    # each direction on its own: the closed forms bound both, the PLD and the Chernoff bound
    # one each; the run is (ε, δ)-DP for add or remove at the larger of the two
    fwd = min([*closed, (_chernoff_add(sigma, steps, n_ep, k, d), MEMBERSHIP)],
              key=lambda c: c[0])
    add, rem, note = _pld_epsilon(sigma, steps, n_ep, k, d, best[0], fwd[0])
    fwd = min((add, PLD), fwd, key=lambda c: c[0])
    rev = min([(rem, PLD), *closed], key=lambda c: c[0])
    if rev[0] > fwd[0]:  # the removal quadrature (~0.1–0.7 s) only where it can matter
        rev = min(rev, (_removal(sigma, steps, n_ep, k, d), REMOVAL), key=lambda c: c[0])
    eps, source = max(fwd, rev, key=lambda c: c[0])
    if math.isinf(eps) and note.startswith("PLD unavailable"):  # never "certified PLD" for ∞
        source = best[1]
        note = (note.replace(" (the closed forms answer)", "")
                + "; the closed forms overflow float64 too: no finite bound")
    return EpsilonBound(epsilon=eps, delta=d, source=source, pld_note=note)
