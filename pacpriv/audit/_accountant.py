"""The accountant's ε of a DP-SGD run with random allocation (for the one-run audit).

Two certified upper bounds on ε(δ), the smaller reported:

* **Random-allocation PLD** (Feldman & Shenfeld, arXiv:2602.17284, package ``pld-accounting``):
  the dominating discretisation (``BoundType.DOMINATES``) of the privacy-loss distribution of
  ``E`` epochs of ``M`` steps, each record used at one random step per epoch. Optional: used
  when the package is installed (extra ``compare``).
* **No amplification**: each epoch's dominating pair ``N(0, σ²I_M)`` vs the mixture
  ``(1/M) Σ_i N(e_i, σ²I_M)`` (RA-MIA) has every hockey-stick divergence at most that of one
  Gaussian shift ``N(0, σ²)`` vs ``N(1, σ²)`` (the divergence is jointly convex), so ``E`` epochs
  are ``μ``-GDP with ``μ = √E/σ`` (Dong, Roth & Su, JRSSB 2022, Cor. 2.13), whose exact
  ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)`` (Balle & Wang, ICML 2018, Thm 8) is inverted by
  bisection, rounded up.
"""

from __future__ import annotations

import contextlib
import io
import math

from scipy import special

from pacpriv._validation import check_int, check_real

__all__ = ["dpsgd_epsilon", "gaussian_epsilon"]

#: Loss discretisation for ``pld-accounting`` (the package default 0.01 takes minutes; a
#: coarser dominating grid stays an upper bound, only looser).
PLD_LOSS_DISCRETIZATION = 0.05


def _gaussian_delta(eps: float, mu: float) -> float:
    """``Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``, the second term in log space (no overflow)."""
    second = math.exp(min(eps + float(special.log_ndtr(-eps / mu - mu / 2)), 700.0))
    return float(special.ndtr(-eps / mu + mu / 2)) - second


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest ε (rounded up) with ``δ_μ(ε) <= delta`` for μ-GDP (Balle & Wang, Thm 8).

    Parameters
    ----------
    mu : float
        ``μ > 0``.
    delta : float
        In (0, 1).
    """
    mu = check_real(mu, "mu", low=0.0, low_inclusive=False)
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_inclusive=False,
                       high_inclusive=False)
    if _gaussian_delta(0.0, mu) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while _gaussian_delta(hi, mu) > delta:
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:  # pragma: no cover - δ_μ(ε) -> 0 as ε grows
            return math.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _gaussian_delta(mid, mu) > delta else (lo, mid)
    return hi * (1.0 + 1e-9)  # nudged up past the round-off of the δ formula


def _pld_epsilon_here(sigma: float, steps: int, epochs: int, delta: float) -> float:
    """ε(δ) of ``pld-accounting``'s dominating random-allocation PLD (ImportError if absent)."""
    from PLD_accounting import (
        AllocationSchemeConfig,
        BoundType,
        PrivacyParams,
        gaussian_allocation_pld,
    )

    with contextlib.redirect_stdout(io.StringIO()):
        pld = gaussian_allocation_pld(
            params=PrivacyParams(sigma=sigma, num_steps=steps, num_epochs=epochs),
            config=AllocationSchemeConfig(loss_discretization=PLD_LOSS_DISCRETIZATION),
            bound_type=BoundType.DOMINATES,
        )
        return float(pld.get_epsilon_for_delta(delta))


def _pld_epsilon(sigma: float, steps: int, epochs: int, delta: float,
                 timeout: float | None) -> tuple[float | None, str]:
    """The PLD ε in its own process under ``timeout`` s (small σ can take minutes), or
    ``(None, why not)``."""
    from pacpriv.dpsgd.comparators import _run_limited

    status, value, _ = _run_limited(_pld_epsilon_here, (sigma, steps, epochs, delta), timeout)
    if status == "ok" and math.isfinite(float(value)):
        return float(value), ""
    return None, f"random-allocation PLD {status}"


def dpsgd_epsilon(noise_multiplier: float, *, steps_per_epoch: int, epochs: int,
                  delta: float, timeout: float | None = 60.0) -> tuple[float, str]:
    """``(ε, label)``: a certified upper bound on ε(δ) of random-allocation DP-SGD.

    Parameters
    ----------
    noise_multiplier : float
        σ >= 0 (σ = 0: not private, ε = inf).
    steps_per_epoch, epochs : int
        M >= 1 and E >= 1.
    delta : float
        δ in (0, 1).
    timeout : float or None, default 60
        Seconds the PLD accountant may run (in its own process; None: no limit); past it the
        no-amplification bound is used.

    Returns
    -------
    (float, str)
        The smaller of the available bounds (see the module docstring) and which it is.
    """
    sigma = check_real(noise_multiplier, "noise_multiplier", low=0.0)
    M = check_int(steps_per_epoch, "steps_per_epoch", low=1)
    E = check_int(epochs, "epochs", low=1)
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_inclusive=False,
                       high_inclusive=False)
    if sigma == 0:
        return math.inf, "not private (σ = 0)"
    gdp = gaussian_epsilon(math.sqrt(E) / sigma, delta)
    pld, why = _pld_epsilon(sigma, M, E, delta, timeout) if M > 1 else (None, "")
    if pld is not None and pld < gdp:
        return pld, ("certified upper bound: random-allocation PLD (Feldman & Shenfeld, "
                     "pld-accounting, dominating)")
    return gdp, ("certified upper bound: E-fold Gaussian mechanism without amplification "
                 "(Balle & Wang 2018, Thm 8)" + (f"; {why}" if why else ""))
