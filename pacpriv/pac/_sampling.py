"""Hardened release noise: an exact discrete Gaussian on a declared grid, from a CSPRNG.

Why. A Gaussian drawn in floating point and added to a float leaves gaps in its support that
depend on the secret value (Mironov, CCS 2012; Jin et al., S&P 2022: membership attacks through
the low bits). Here nothing secret ever meets floating-point noise:

1. The plan's noise directions ``W`` (the coordinate axes when it has no basis) and standard
   deviations ``σ_i`` are public. Each coordinate gets the **declared grid** ``h_i = σ_i / s``
   with ``s = 2^40`` grid steps per standard deviation.
2. The secret output's coordinates ``c = Wᵀ f(X)`` are rounded to the grid, ``K = round(c/h)``
   (a deterministic function of ``f(X)``), and the noise ``Z_i`` is an exact **discrete
   Gaussian** ``N_Z(0, s²)`` on the integers, drawn with integer arithmetic only
   (Canonne, Kamath & Steinke, *The Discrete Gaussian for Differential Privacy*, NeurIPS 2020,
   Algorithms 1–3). The release is ``h·(K + Z)``: on the grid, mapped back by ``W`` (post-
   processing of the integers ``K + Z``).
3. Randomness: the operating system's CSPRNG (``os.urandom`` bytes, rejection-sampled into
   uniform integers; not numpy's PCG64, whose state its outputs reveal). A caller's seed is
   for experiments: :func:`pacpriv.pac.privatize` and the predictor then draw numpy's
   reproducible floating-point Gaussian and label the release ``"seeded, not for release"``;
   ``NoiseSource(seed)`` (a :class:`random.Random`, not cryptographic) seeds this sampler in
   tests.

Accounting (what is actually released, rounding included). Let ``R = Σ_B^{-1/2} C Σ_B^{-1/2}``
be the whitened covariance of ``f(X)`` in the noise basis, so the plan certifies
``½ ln det(I + R) <= v``. With ``U`` uniform on ``[−½, ½]^k`` independent,
``H(K + Z) = h(K + Z + U) <= ½ ln det(2πe (Cov K + s² I + I/12))`` (maximum entropy) and
``H(Z) >= ½ ln(2πe s²) − 10⁻¹⁰⁰`` per coordinate (Poisson summation: for ``s = 2^40`` the
normaliser exceeds ``s√(2π)`` and the variance is ``s²`` up to ``e^{−2π² s²}``). With
``K = c/h + e``, ``|e_i| <= 1`` (rounding, float division included) and
``Cov K ⪯ (1 + t) s² R + (1 + 1/t) k I`` for ``t = √k / s``:
``I(X; release) <= ½ ln det(I + R) + (k/2)(t + ((1 + 1/t) k + 1/12) / s²)``,
i.e. the plan's bound plus :func:`grid_overhead` ``(k)`` nats (about ``k^{3/2} / 2^40``:
``9.1e-7`` nats for ``k = 10⁴`` coordinates, ``2.9e-11`` for ``k = 10``). The released float
is ``h·n`` rounded to float64 (``h`` carries σ's full mantissa, so the product is not exact in
general; ``rint(value / h)`` recovers ``n`` for ``|n| < 2^50``). It is a fixed function of the
integers either way, so the accounting holds (post-processing). For ``k > 1`` the grid lives in
the noise basis: the release ``W·(h·n)`` is on a lattice in those coordinates, not in the
output's own coordinates.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable

import numpy as np

__all__ = ["GRID_STEPS", "NoiseSource", "discrete_gaussian", "grid_overhead", "grid_release"]

#: ``s``: grid steps per noise standard deviation (``h_i = σ_i / s``).
GRID_STEPS = 2**40
_S2 = GRID_STEPS * GRID_STEPS  # σ² of the integer discrete Gaussian (exact)

#: What a release says about its noise.
FROM_OS = "OS CSPRNG (os.urandom), exact discrete Gaussian on a declared grid"
SEEDED = "seeded, not for release"


def grid_overhead(k: int) -> float:
    """Nats a grid release may add to the plan's MI bound over ``k`` noisy coordinates
    (module docstring), rounded up."""
    if k <= 0:
        return 0.0
    s = float(GRID_STEPS)
    t = math.sqrt(k) / s
    return math.nextafter((k / 2) * (t + ((1 + 1 / t) * k + 1 / 12) / (s * s)) + 1e-100 * k,
                          math.inf)


class _Urandom:
    """Uniform integers from ``os.urandom`` bytes, read 4 KiB at a time (rejection sampling:
    exactly uniform); the bytes are the OS CSPRNG's, used once each."""

    def __init__(self) -> None:
        self._buf, self._pos = b"", 0

    def _bytes(self, n: int) -> bytes:
        if self._pos + n > len(self._buf):
            self._buf, self._pos = os.urandom(max(4096, n)), 0
        out = self._buf[self._pos:self._pos + n]
        self._pos += n
        return out

    def below(self, n: int) -> int:
        bits = (n - 1).bit_length()
        if bits == 0:
            return 0
        nbytes = (bits + 7) // 8
        while True:
            r = int.from_bytes(self._bytes(nbytes), "little") >> (8 * nbytes - bits)
            if r < n:
                return r


class NoiseSource:
    """Uniform integers for the samplers: the OS CSPRNG, or a seeded ``random.Random``.

    Parameters
    ----------
    seed : None, int, SeedSequence or Generator
        None: :func:`secrets.randbelow` (cryptographically secure); otherwise a reproducible,
        non-cryptographic stream (label :data:`SEEDED`).
    """

    def __init__(self, seed=None) -> None:
        self._below: Callable[[int], int]
        if seed is None:
            self._below = _Urandom().below
            self.label = FROM_OS
            return
        if isinstance(seed, np.random.Generator):
            value = int(seed.integers(0, 2**63))
        elif isinstance(seed, np.random.SeedSequence):
            value = int.from_bytes(seed.generate_state(4, np.uint32).tobytes(), "little")
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
            value = int(seed)
        else:
            raise TypeError("`rng` must be None, an int >= 0, a SeedSequence or a Generator; "
                            f"got {type(seed).__name__}.")
        stream = random.Random(value)
        self._below = lambda n: stream.randrange(n)
        self.label = SEEDED

    @property
    def seeded(self) -> bool:
        """Whether the stream is reproducible (not for release)."""
        return self.label == SEEDED

    def below(self, n: int) -> int:
        """Uniform integer in ``[0, n)``."""
        return self._below(n)


def _bernoulli_exp(num: int, den: int, src: NoiseSource) -> bool:
    """``Bernoulli(exp(−num/den))`` for integers ``num >= 0, den > 0`` (CKS 2020,
    Algorithm 1)."""
    while num > den:
        if not _bernoulli_exp(1, 1, src):
            return False
        num -= den
    k = 1
    while src.below(den * k) < num:  # Bernoulli(γ / k)
        k += 1
    return k % 2 == 1


def _discrete_laplace(t: int, src: NoiseSource) -> int:
    """``P(Y = y) ∝ exp(−|y|/t)`` on the integers (CKS 2020, Algorithm 2, ``s = 1``)."""
    while True:
        u = src.below(t)
        if not _bernoulli_exp(u, t, src):
            continue
        v = 0
        while _bernoulli_exp(1, 1, src):
            v += 1
        x = u + t * v
        negative = src.below(2) == 1
        if negative and x == 0:
            continue
        return -x if negative else x


def discrete_gaussian(sigma2: int, src: NoiseSource) -> int:
    """One exact draw of ``N_Z(0, σ²)``: ``P(Z = z) ∝ exp(−z²/(2σ²))`` on the integers
    (CKS 2020, Algorithm 3; integer ``σ² >= 1``, integer arithmetic only)."""
    sigma2 = int(sigma2)
    t = math.isqrt(sigma2) + 1
    while True:
        y = _discrete_laplace(t, src)
        # γ = (|y| − σ²/t)² / (2σ²) = (|y|·t − σ²)² / (2σ² t²)
        if _bernoulli_exp((abs(y) * t - sigma2) ** 2, 2 * sigma2 * t * t, src):
            return y


def grid_release(coords: np.ndarray, noise_std: np.ndarray, src: NoiseSource
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coordinates released on the grid: ``(h·(K + Z) (k,), grid steps h (k,), K + Z)``.

    Parameters
    ----------
    coords : ndarray of shape (k,)
        The secret output's coordinates in the noise basis (``Wᵀ f(X)``, or ``f(X)``).
    noise_std : ndarray of shape (k,)
        The plan's standard deviation per direction (``>= 0``; a zero entry gets no noise and
        is released as it is: every world agrees there).
    src : NoiseSource

    Returns
    -------
    released : ndarray of shape (k,), float64
        ``h_i (K_i + Z_i)`` (``coords_i`` where ``σ_i = 0``).
    h : ndarray of shape (k,)
        The declared grid steps ``σ_i / 2^40`` (0 where ``σ_i = 0``).
    integers : ndarray of shape (k,), object (Python ints)
        ``K + Z`` (0 where ``σ_i = 0``).

    Raises
    ------
    ValueError
        If a coordinate is not finite on the grid (over ``~10^292`` standard deviations).
    """
    coords = np.asarray(coords, dtype=np.float64)
    std = np.asarray(noise_std, dtype=np.float64)
    noisy = std > 0
    h = np.where(noisy, std / GRID_STEPS, 0.0)
    scaled = coords[noisy] / h[noisy]
    if not np.all(np.isfinite(scaled)):
        raise ValueError("the release does not fit the grid (a coordinate too far from 0 in "
                         "noise standard deviations, or a non-finite value).")
    ints = np.zeros(std.size, dtype=object)
    released = coords.copy()
    for i, k in zip(np.flatnonzero(noisy), np.rint(scaled), strict=True):
        ints[i] = int(k) + discrete_gaussian(_S2, src)
        released[i] = h[i] * float(ints[i])
    return released, h, ints
