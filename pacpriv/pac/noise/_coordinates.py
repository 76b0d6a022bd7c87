"""Per-coordinate rescaling of the certificate's shape, fixed from the shape trials only.

The certificate's noise has the shape ``A = D^{1/2} A_y D^{1/2}``: ``D`` a positive diagonal,
``A_y`` the head + isotropic-complement shape of :mod:`pacpriv.pac.noise._shape` fitted on the
rescaled outputs ``y = D^{-1/2} x``. Mutual information is invariant under the public
bijection ``x ↦ D^{-1/2} x``, so certifying ``y`` with noise ``κ A_y`` and releasing
``x + D^{1/2} B_y`` is the same guarantee ([PAC]_ Thm 3 applied to ``y``). When the output
coordinates have very different variances (sums with decaying column scales, weights of
different layers), the complement that ``T`` trials leave unexplored is far from isotropic in
``x``; in ``y`` it is closer to it, and the one complement level wastes less noise.

``D_j = max(s_j², η · mean s²)^α`` with ``s_j²`` the variance of coordinate ``j`` over the
**shape trials** (never the certificate trials: every certificate summand
``||g(f_i) − c_{i−1}||²_{A⁻¹}`` is charged whatever ``D`` is, so a poor ``D`` costs noise,
never validity), ``η`` = :data:`VARIANCE_FLOOR` (a coordinate with no shape-trial variance
gets a floored ``D_j``: too small a ``D_j`` would make any variance it shows in the
certificate trials expensive), and ``α`` among ``0`` and :data:`COORDINATE_EXPONENTS` chosen
with the shape's own cross-validation (inside the shape trials) on the noise power in the outputs'
units. ``α = 0`` (``D = I``, the unscaled certificate, bit for bit) is the only candidate when
the shape trials' coordinate variances are nearly equal (:func:`candidate_exponents`): then no
rescaled copy or extra pass is made.

References
----------
.. [PAC] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["COORDINATE_EXPONENTS", "VARIANCE_FLOOR", "Metric", "candidate_exponents",
           "column_variances", "coordinate_scales", "spread_threshold"]

#: Exponents ``α`` of ``D = (coordinate variance)^α`` tried beside ``α = 0``. One: each costs
#: a cross-validated shape fit (and, when ``d > n_trials``, a Gram pass); ``α = ¼`` and
#: ``α = ¾`` never beat ``½`` on the sums of benchmarks/certificate.py ``--issue32``
#: (d = 200 and 2,000), ``α = 1`` costs 1.6-2x the noise there.
COORDINATE_EXPONENTS = (0.5,)

#: Relative floor ``η`` of a coordinate's variance (of the mean variance) in ``D``.
VARIANCE_FLOOR = 1.0 / 64.0

_BLOCK_BYTES = 16 * 2**20


@dataclass(frozen=True, eq=False)
class Metric:
    """The cost of noise directions of the rescaled space in the outputs' units.

    A unit direction ``v`` of ``y = D^{-1/2} x`` costs ``w = vᵀ D v`` in ``x``. ``diag``: ``D``
    itself (shape (d,); directions given in the ``d`` coordinates), or ``gram``: ``Qᵀ D Q``
    (r, r) when directions are given in coordinates ``Q`` (d, r, orthonormal) of a subspace
    (:mod:`pacpriv.pac.noise._reduced`). ``total = tr(D)``, ``low = min D > 0``.
    """

    total: float
    low: float
    diag: np.ndarray | None = None
    gram: np.ndarray | None = None

    def weights(self, vecs: np.ndarray) -> np.ndarray:
        """``w_j = v_jᵀ D v_j`` for each column of ``vecs`` (width, k), at least ``low``."""
        if self.diag is not None:
            w = (vecs * vecs).T @ self.diag
        else:
            assert self.gram is not None
            w = np.sum(vecs * (self.gram @ vecs), axis=0)
        return np.maximum(w, self.low * np.sum(vecs * vecs, axis=0))


def column_variances(x: np.ndarray, rows: int) -> np.ndarray:
    """Sample variance (ddof 1) of each column over the first ``rows`` rows of ``x`` (n, d):
    shape (d,), float64, read in column blocks (no float64 copy of a float32 or memory-mapped
    ``x``)."""
    d = x.shape[1]
    step = max(1, _BLOCK_BYTES // (8 * max(rows, 1)))
    out = np.empty(d)
    for s in range(0, d, step):
        block = np.asarray(x[:rows, s : s + step], dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):  # non-finite: refused by the caller
            out[s : s + block.shape[1]] = block.var(axis=0, ddof=1) if rows > 1 else 0.0
    return out


def _floored(var: np.ndarray) -> np.ndarray:
    mean = float(np.mean(var))
    return np.maximum(var, VARIANCE_FLOOR * mean)


def spread_threshold(rows: int) -> float:
    """Standard deviation of the log coordinate variances below which they count as nearly
    equal: twice the sampling standard deviation ``sqrt(2/(m_s − 1))`` of one log sample
    variance (Gaussian approximation) over ``m_s = rows`` shape trials."""
    return 2.0 * math.sqrt(2.0 / max(rows - 1, 1))


def candidate_exponents(var: np.ndarray, rows: int) -> tuple[float, ...]:
    """The exponents ``α`` the certificate tries: ``(0,)`` when ``d = 1``, when no coordinate
    varied, or when the log of the (floored) coordinate variances has a standard deviation at
    most :func:`spread_threshold` (nearly equal: rescaling would only fit sampling noise);
    else ``(0,) +`` :data:`COORDINATE_EXPONENTS`."""
    if var.size < 2 or rows < 4 or not float(np.max(var)) > 0.0:
        return (0.0,)
    spread = float(np.std(np.log(_floored(var))))
    if not spread > spread_threshold(rows):
        return (0.0,)
    return (0.0, *COORDINATE_EXPONENTS)


def coordinate_scales(var: np.ndarray, alpha: float) -> np.ndarray:
    """``D^{1/2} = max(var, η · mean var)^{α/2}`` normalised to ``max = 1``: shape (d,), all
    ``> 0`` (``var`` must have a positive entry)."""
    root = _floored(np.asarray(var, dtype=np.float64)) ** (0.5 * alpha)
    return root / float(root.max())
