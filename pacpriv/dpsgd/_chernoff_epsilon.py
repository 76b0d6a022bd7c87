"""A certified Chernoff bound on ε for the *removal* direction of random allocation, O(grid).

Private helper of :mod:`pacpriv.dpsgd.epsilon`. Notation as there: per epoch
``P = N(0, σ²I_M)`` (record out), ``Q = (1/M) Σ_i N(e_i, σ²I_M)`` (record in), ``T = dQ/dP``;
over ``E`` epochs ``T = Π_e T_e`` with independent epochs under ``P``. With ``z ~ N(0, 1)``
coordinates and ``w_i = z_i/σ − 1/(2σ²)``, ``T_e = A = (1/M) Σ_i e^{w_i}``.

The removal direction is ``δ'(ε) = sup_S P(S) − e^ε Q(S) = E_P[(1 − e^ε T)_+]``. For every
``λ > 0``, ``(1 − x)_+ ≤ c(λ)·x^{−λ}`` on ``x > 0`` with ``c(λ) = λ^λ/(1 + λ)^{1+λ}`` (the
maximum of ``(1 − x)x^λ``), hence (Chernoff; the moment is ``exp(λ·D_{λ+1}(P‖Q))``)

    δ'(ε) ≤ c(λ)·e^{−λε}·m(λ)^E,      m(λ) = E_P[A^{−λ}],

so ``ε' = min_λ (ln c(λ) + E·ln m(λ) − ln δ)/λ`` certifies ``δ'(ε') ≤ δ``. The moment is
computed with an *upper* Riemann bound, never an estimate: by ``x^{−λ} = Γ(λ)^{−1} ∫ t^{λ−1}
e^{−tx} dt`` and independence of the coordinates,

    m(λ) = M^λ/Γ(λ) · ∫_ℝ e^{λu} φ(e^u)^M du,      φ(s) = E[exp(−s·e^{w})],

with ``φ`` decreasing in ``s``: ``φ(e^u)`` is bounded above on a grid in ``w`` (``exp(−s e^w)``
is decreasing in ``w``, so each cell takes its left end), each ``u``-cell takes ``φ`` at its
left end and integrates ``e^{λu}`` exactly, ``u < −U`` uses ``φ ≤ 1``, and ``u ≥ u_end`` uses
``φ(e^u) ≤ Φ(−x) + exp(−e^{u/2}) ≤ e^{−x²/2}`` (``x = σu/2 − 1/(2σ) ≥ 0``; checked at
``u_end``), a Gaussian integral in closed form. Every sum has non-negative terms; the float
round-off is covered by a relative slack. ``M = 1`` gives ``ln m = λ(λ+1)/(2σ²)``, the
Gaussian's moment (a test).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special

__all__ = ["by_direction", "membership_epsilon", "removal_epsilon"]

_H = 0.01  # grid step in u and w (nats)
_LOW, _HIGH = -25.0, 6.0  # u + w window where exp(−e^{u+w}) is evaluated (1 below, ~0 above)
_U_LEFT = 40.0
_LAMBDAS = np.geomspace(0.25, 400.0, 96)
_MAX_M = 10**5
_U_RIGHT = 160.0
_MAX_POINTS = 60_000
_SLACK = 1e-9  # relative, on φ and on m (sums of ≤ 1e5 non-negative float64 terms)


def _phi_upper(sigma: float, u: np.ndarray) -> np.ndarray:
    """Upper bounds on ``φ(e^u)`` at the grid points ``u = a·_H`` (``a`` integers)."""
    k = np.arange(round(_LOW / _H), round(_HIGH / _H) + 1)  # u + w = k·_H
    g = np.exp(-np.exp(k * _H))  # decreasing in k
    a = np.rint(u / _H).astype(np.int64)
    # cell j of w (left end w_j = (k_j − a)·_H): mass Φ(z(w_{j+1})) − Φ(z(w_j)), z = σw + 1/(2σ)
    w = (np.arange(k[0] - a[-1], k[-1] - a[0] + 2) * _H)
    z = sigma * w + 0.5 / sigma
    cdf = special.ndtr(z)
    sf = special.ndtr(-z)
    mass = np.where(z[:-1] < 0.0, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:])
    mass = np.maximum(mass, 0.0)
    off = (k[0] - a) - (k[0] - a[-1])  # index of w_{k_0 − a} in w
    body = np.correlate(mass, g, "valid")[off]  # Σ_j mass[off + j]·g[j], direct sums
    below = cdf[off]  # w below the window: exp(·) ≤ 1
    above = sf[off + k.size] * g[-1]  # w above: exp(·) ≤ g at the window's top
    return np.minimum((body + below + above) * (1.0 + _SLACK), 1.0)


def _tail_ok(sigma: float, u_end: float) -> bool:
    """``exp(−e^{u/2}) ≤ ½e^{−x²/2}`` and ``x ≥ 0`` for every ``u ≥ u_end`` (see module)."""
    return (u_end >= 4.0 and sigma * u_end / 2.0 >= 0.5 / sigma
            and u_end / 2.0 >= math.log(sigma**2 * u_end**2 / 8.0 + math.log(2.0)))


@functools.lru_cache(maxsize=32)
def _log_moments(sigma: float, steps: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(λ, upper bound on ln m(λ))`` over the λ grid, or None where the grid is too large."""
    if steps == 1:  # a Gaussian shift: the exact moment
        return _LAMBDAS, _LAMBDAS * (_LAMBDAS + 1.0) / (2.0 * sigma**2) * (1 + _SLACK)
    c = 1.0 / sigma**2
    a2 = steps * sigma**2 / 8.0
    # past u_end the closed-form tail is small for the λ grid (capped: larger λ only loosen)
    u_end = min(max(c + _LAMBDAS[-1] / (2.0 * a2) + 12.0 / math.sqrt(2.0 * a2), 8.0), _U_RIGHT)
    while not _tail_ok(sigma, u_end):
        u_end *= 1.5
    n = math.ceil((u_end + _U_LEFT) / _H)
    if n > _MAX_POINTS:
        return None
    u = (np.arange(n + 1) + round(-_U_LEFT / _H)) * _H  # grid points, last = u_end
    with np.errstate(divide="ignore"):
        log_phi = np.log(_phi_upper(sigma, u[:-1]))
    lam = _LAMBDAS[:, None]
    # ∫_cell e^{λu} du = e^{λ u_a}·expm1(λh)/λ, times φ(e^{u_a})^M
    cells = lam * u[None, :-1] + np.log(np.expm1(lam * _H) / lam) + steps * log_phi[None, :]
    left = -lam * _U_LEFT - np.log(lam)  # u < −U: φ ≤ 1
    ue = float(u[-1])
    shift = ue - c - lam / (2.0 * a2)
    right = (lam * c + lam**2 / (4.0 * a2) + 0.5 * math.log(math.pi / a2)
             + special.log_ndtr(-math.sqrt(2.0 * a2) * shift))
    log_int = special.logsumexp(np.concatenate((cells, left, right), axis=1), axis=1)
    lam1 = _LAMBDAS
    log_m = lam1 * math.log(steps) - special.gammaln(lam1) + log_int
    return lam1, log_m + _SLACK * (1.0 + np.abs(log_m)) + 1e-12


def removal_epsilon(sigma: float, steps: int, epochs: int, delta: float) -> float:
    """Smallest ε on the λ grid with the Chernoff bound ``δ'(ε) ≤ delta`` (removal only).

    Parameters are checked by the caller: σ > 0, ``steps = M ≥ 1`` (one of ``M`` per epoch),
    ``epochs = E ≥ 1``, δ in (0, 1). Returns ``inf`` where the bound is not computed (M above
    1e5, or a grid above its point cap) or ε is not finite.
    """
    if steps > _MAX_M or epochs >= 2**60 or not 1e-3 <= sigma <= 1e6:
        return math.inf
    got = _log_moments(float(sigma), int(steps))
    if got is None:
        return math.inf
    lam, log_m = got
    return _best_epsilon(lam, log_m, epochs, delta)


def _best_epsilon(lam: np.ndarray, log_m: np.ndarray, epochs: int, delta: float) -> float:
    """``min_λ (ln c(λ) + E·ln m(λ) − ln δ)/λ`` with ``c(λ) = λ^λ/(1+λ)^{1+λ}``, rounded up
    (relative and absolute 1e-12); ``inf`` where no order gives a finite value."""
    log_c = lam * np.log(lam) - (1.0 + lam) * np.log1p(lam)
    with np.errstate(over="ignore", invalid="ignore"):
        eps = (log_c + float(epochs) * log_m - math.log(delta)) / lam
    eps = eps[np.isfinite(eps)]
    if eps.size == 0:
        return math.inf
    best = float(eps.min())
    return max(0.0, best * (1.0 + 1e-12) + 1e-12) if math.isfinite(best) else math.inf


_MAX_ORDER = 48  # integer orders n = λ + 1 of the membership moment


@functools.lru_cache(maxsize=32)
def _log_positive_moments(sigma: float, steps: int) -> np.ndarray:
    """Upper bounds on ``ln E_P[A^n]`` for ``n = 0 .. _MAX_ORDER`` (index n).

    ``E[A^n] = n!·M^{−n}·[x^n](1 + g(x))^M`` with ``g(x) = Σ_{c≥1} e^{c(c−1)/(2σ²)} x^c/c!``
    (expand the n-th power of the mean over the counts ``c_i`` of each coordinate;
    ``E[e^{c·w}] = e^{c(c−1)/(2σ²)}``), and ``[x^n](1 + g)^M = Σ_ℓ C(M, ℓ)·[x^n] g^ℓ``: sums
    of positive terms only, in log space.
    """
    n_max = _MAX_ORDER
    c = np.arange(n_max + 1, dtype=np.float64)
    log_g = c * (c - 1.0) / (2.0 * sigma**2) - special.gammaln(c + 1.0)
    log_g[0] = -np.inf
    n_idx, c_idx = np.meshgrid(np.arange(n_max + 1), np.arange(n_max + 1), indexing="ij")
    valid = (c_idx >= 1) & (c_idx < n_idx)  # g^{ℓ+1}[n] = Σ_{1 ≤ c < n} g[c]·g^ℓ[n − c]
    power = log_g.copy()  # log coefficients of g^ℓ, ℓ = 1
    terms = [power]
    for _ in range(2, min(n_max, steps) + 1):
        mat = np.where(valid, log_g[c_idx] + power[np.maximum(n_idx - c_idx, 0)], -np.inf)
        power = special.logsumexp(mat, axis=1)
        terms.append(power)
    ell = np.arange(1, len(terms) + 1, dtype=np.float64)
    # ln C(M, ℓ) − ℓ·ln M = Σ_{i<ℓ} log1p(−i/M) − ln ℓ! (no cancellation at large M); the
    # remaining M^{ℓ−n} is folded in below
    falling = np.concatenate(([0.0], np.cumsum(np.log1p(-np.arange(len(terms)) / steps))))[1:]
    log_binom = falling - special.gammaln(ell + 1.0)
    shifted = np.stack(terms) + log_binom[:, None]
    scale = (ell[:, None] - c[None, :]) * math.log(steps)  # M^{ℓ − n}
    coeff = special.logsumexp(shifted + scale, axis=0)
    out = special.gammaln(c + 1.0) + coeff
    out[0] = 0.0
    return out + 1e-9 * (1.0 + np.abs(out))


def membership_epsilon(sigma: float, steps: int, epochs: int, delta: float) -> float:
    """Smallest ε over integer orders with the Chernoff bound ``δ(ε) ≤ delta`` (adding only).

    ``δ(ε) = E_P[(T − e^ε)_+] ≤ c(λ)·e^{−λε}·E_P[A^{λ+1}]^E`` for every ``λ > 0`` (the
    maximum of ``(x − a)_+/x^{λ+1}`` is ``c(λ)·a^{−λ}``), with ``λ + 1 = 2 .. 48`` and the
    exact moments of :func:`_log_positive_moments`. Arguments as :func:`removal_epsilon`.
    """
    if epochs >= 2**60 or not 1e-2 <= sigma <= 1e6:
        return math.inf
    if steps > 10**15:
        return math.inf
    log_m = _log_positive_moments(float(sigma), int(steps))[2:]
    lam = np.arange(1, log_m.size + 1, dtype=np.float64)
    return _best_epsilon(lam, log_m, epochs, delta)


def by_direction(sigma: float, steps: int, epochs: int, delta: float, *, add: float,
                 remove: float) -> float:
    """``max(ε_add, ε_remove)``: each direction's smallest of the ε given for it and its
    Chernoff ε (the removal quadrature only where it can lower the maximum). Sound for adding
    or removing one record: each direction's δ is non-increasing in ε, so each holds from its
    own ε on. ``steps``, ``epochs``: the reduced one-of-``M`` pair."""
    fwd = min(add, membership_epsilon(sigma, steps, epochs, delta))
    rev = remove if remove <= fwd else min(remove, removal_epsilon(sigma, steps, epochs, delta))
    return max(fwd, rev)
