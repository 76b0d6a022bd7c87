"""The noise shape and the release clip of the certificate, fixed from the shape trials only.

:func:`~pacpriv.pac.noise.certify_noise` splits the trials: the first ``m_s`` fix the noise
shape ``A``, the clip centre ``c`` and the clip radius ``ρ``; the others certify the scale. How
``A``, ``c`` and ``ρ`` are chosen from the shape trials does not affect the certificate's
validity (they are fixed before any certificate trial is used), only how much noise it costs:

* **Shape.** The square-root rule on the shape trials' sample spectrum (``a_j ∝ sqrt(λ̂_j)``,
  the minimiser of ``E||B||²`` under the trace bound, [PAC]_ Thm 3), shrunk towards the
  isotropic shape, ``a ← (1 − α) a + α ā``, with ``α`` chosen by K-fold cross-validation
  *inside the shape trials* on the certificate's own loss ``tr(A⁻¹Σ̂_held-out)·tr(A)`` (the
  noise power the shape needs per unit of budget). Spread in sample eigenvalues makes the raw
  square-root shape cost ``(Σ 1/sqrt(λ̂_j))(Σ sqrt(λ̂_j))/d² > 1`` on a flat spectrum
  (Marchenko–Pastur); shrinkage removes most of it (Ledoit & Wolf 2004 shrink the covariance
  towards the identity for the same reason; here the intensity targets this loss directly).
* **Clip.** Radius ``ρ² = max(max_j r_j², infl · r̄² · F_{k, k(m_s−1)}(1 − π))`` with ``r_j²``
  the whitened radii of the shape trials, ``infl`` the out-of-fold over in-fold mean radius
  (the optimism of a shape fitted on the same trials), ``k`` the Satterthwaite degrees of
  freedom of ``r²`` and ``π`` the target fraction of clipped outputs: under a Gaussian
  approximation a fresh ``r²`` over ``r̄²`` is F-distributed, so the clip shrinks a fraction
  ``≈ π`` of the outputs, the estimation of ``r̄²`` included (it sets how often the release is
  shrunk, never the certificate's validity).
* **Split.** ``m_s ≈ 0.45 · sqrt(d + 1.2) · m^0.7`` (:func:`default_shape_trials`): the shape
  loss falls like ``d/m_s`` and the certificate's width like ``1/sqrt(m − m_s)``; the constants
  were fitted on Gaussian outputs with flat, decaying and one-dominant spectra
  (benchmarks/certificate.py). At most ``m/2`` while ``d <= m/4``; at high ``d`` up to
  ``m − max(32, m/8)`` (:func:`shape_cap`): there the noise is set by how many directions the
  shape trials resolve (docs/guide/sizes.md, the ``T``-trial floor).
* **Complement.** When ``m_s − 1 < d`` the shape trials leave ``d − m_s + 1`` directions
  unexplored. They get one value, the square-root rule on their variance spread evenly
  (``sqrt(τ̂/(d − m_s + 1))``, ``τ̂`` the held-out folds' variance outside each fold's span),
  times a factor chosen by the cross-validation; the explored directions are shrunk towards
  their own mean. The certificate charges the complement through the same trace bound
  (its summands whiten the whole output), so an underestimate of ``τ̂`` costs noise, never
  validity.

References
----------
.. [PAC] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 3.
.. [LW] O. Ledoit, M. Wolf. A well-conditioned estimator for large-dimensional covariance
   matrices. J. Multivariate Analysis 88(2), 2004.
.. [SW] F. E. Satterthwaite. An approximate distribution of estimates of variance components.
   Biometrics Bulletin 2(6), 1946.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from pacpriv.pac.noise._coordinates import Metric

__all__ = ["SHAPE_FLOOR", "Shape", "ShapeFit", "clip_radius2", "default_shape_trials",
           "fit_shape", "fit_shape_scored", "shape_trials_model"]

#: Relative floor ``η`` of the shape's square-root eigenvalues: ``a_j >= η·sqrt(λ_max)``. It
#: raises noise power by at most a fraction ``d·η`` of the square-root rule's.
SHAPE_FLOOR = 1e-6

#: Shrinkage intensities ``α`` tried by the cross-validation.
SHRINKAGE_GRID = np.linspace(0.0, 1.0, 11)

#: Factors of the unexplored directions' estimated square-root value that the
#: cross-validation tries (powers of sqrt(2) from 1/4 to 4; 1 first, so that ties keep it).
COMPLEMENT_GRID = 2.0 ** np.array([0.0, -0.5, 0.5, -1.0, 1.0, -1.5, 1.5, -2.0, 2.0])

#: Folds of the shape trials for the cross-validation (fewer when there are few trials).
CV_FOLDS = 8

#: Bounds on the out-of-fold inflation of the clip radius.
_INFLATION_RANGE = (1.0, 4.0)


@dataclass(frozen=True, eq=False)
class Shape:
    """``A = V diag(a) Vᵀ + a_c (I − V Vᵀ)``, positive definite, normalised to ``max a = 1``.

    Attributes
    ----------
    vecs : ndarray of shape (d, k)
        Orthonormal directions (right singular vectors of the centred shape trials).
    a : ndarray of shape (k,)
        Shape along ``vecs`` (all ``> 0``).
    a_c : float or None
        Shape in the ``d − k`` directions orthogonal to ``vecs`` (None when ``k = d``).
    full_dim : int or None
        ``d`` when ``vecs`` are coordinates in an ``r``-dimensional subspace that holds every
        row the shape is applied to (:mod:`pacpriv.pac.noise._reduced`, ``r < d``); None:
        ``vecs`` live in the full space.
    weights : ndarray of shape (k,) or None
        ``w_j = v_jᵀ D v_j`` when the shape lives in rescaled coordinates ``y = D^{-1/2} x``
        (:mod:`pacpriv.pac.noise._coordinates`): the noise in the outputs' units is
        ``D^{1/2} A D^{1/2}``, of trace :attr:`trace`; None: ``D = I``.
    weight_total : float or None
        ``tr(D)`` (with ``weights``).
    """

    vecs: np.ndarray
    a: np.ndarray
    a_c: float | None
    full_dim: int | None = None
    weights: np.ndarray | None = None
    weight_total: float | None = None

    @property
    def dim(self) -> int:
        return int(self.vecs.shape[0]) if self.full_dim is None else self.full_dim

    @property
    def size(self) -> float:
        """``tr(D)``: the dimension, or the total weight of rescaled coordinates."""
        return float(self.dim) if self.weight_total is None else self.weight_total

    @property
    def trace(self) -> float:
        """``tr(D^{1/2} A D^{1/2})`` (``tr(A)`` when ``D = I``): the noise power per unit
        scale, in the outputs' units."""
        if self.weights is None:
            return float(np.sum(self.a)) + (0.0 if self.a_c is None else
                                            (self.dim - self.a.size) * self.a_c)
        head = float(np.sum(self.weights))
        return float(np.sum(self.a * self.weights)) + (
            0.0 if self.a_c is None else max(self.size - head, 0.0) * self.a_c)

    def _with(self, a: np.ndarray, a_c: float | None) -> Shape:
        return Shape(self.vecs, a, a_c, self.full_dim, self.weights, self.weight_total)

    @property
    def a_min(self) -> float:
        """Smallest eigenvalue of ``A``."""
        return min(float(self.a.min()), math.inf if self.a_c is None else self.a_c)

    def whiten2(self, y: np.ndarray) -> np.ndarray:
        """``yᵀ A⁻¹ y`` for each row of ``y`` (n, d) → (n,)."""
        coef = y @ self.vecs
        out = np.sum(coef**2 / self.a, axis=1)
        if self.a_c is not None:
            resid = np.sum(y**2, axis=1) - np.sum(coef**2, axis=1)
            out = out + np.maximum(resid, 0.0) / self.a_c
        return out

    def shrunk(self, alpha: float) -> Shape:
        """``(1 − α) A + α (tr A/d) I``, renormalised to ``max a = 1``."""
        if alpha == 0.0:
            return self
        mean = self.trace / self.size
        a = (1.0 - alpha) * self.a + alpha * mean
        a_c = None if self.a_c is None else (1.0 - alpha) * self.a_c + alpha * mean
        top = max(float(a.max()), 0.0 if a_c is None else a_c)
        return self._with(a / top, None if a_c is None else a_c / top)

    def split_shrunk(self, explored: int, alpha: float, complement: float | None) -> Shape:
        """The first ``explored`` values that sit above the floor (twice :data:`SHAPE_FLOOR`)
        shrunk towards their mean by ``α``; the unexplored ones (``a[explored:]`` and
        ``a_c``) set to ``complement > 0`` (in this shape's units; None: kept, as are floored
        values); renormalised to ``max a = 1``. With no unexplored direction: :meth:`shrunk`."""
        if self.a_c is None and explored >= self.a.size:
            return self.shrunk(alpha)
        a = self.a.copy()
        head = np.flatnonzero(a[:explored] > 2.0 * SHAPE_FLOOR)
        if head.size and alpha:
            a[head] = (1.0 - alpha) * a[head] + alpha * float(a[head].mean())
        a_c = self.a_c
        if complement is not None:
            a[explored:] = complement
            a_c = None if a_c is None else complement
        top = max(float(a.max()), 0.0 if a_c is None else a_c)
        return self._with(a / top, None if a_c is None else a_c / top)


def sqrt_shape(outputs: np.ndarray, dim: int | None = None,
               metric: Metric | None = None) -> tuple[Shape, np.ndarray]:
    """Square-root-rule shape of the rows of ``outputs`` (n, d), and their spectrum ``λ̂``.

    Explored directions get ``max(sqrt(λ̂_j/w_j), η · max_i sqrt(λ̂_i/w_i))`` (``w_j = 1``
    without ``metric``; with it, ``w_j = v_jᵀ D v_j``, the cost of direction ``j`` in the
    outputs' units: the square-root rule for the cost ``tr(D^{1/2} A D^{1/2})``); unexplored
    ones (beyond the ``n − 1`` that ``n`` centred trials span, and the complement of
    ``span(V)``) the smallest explored value: their variance is unknown and the certificate
    covers whatever they carry. ``dim``: the full dimension ``d`` when the rows are coordinates
    in a subspace holding them all (``outputs.shape[1] < d``); None: ``outputs.shape[1]``.
    """
    n, width = outputs.shape
    d = width if dim is None else dim
    full = None if dim is None else dim
    centred = outputs - outputs.mean(axis=0)
    _, sing, vt = np.linalg.svd(centred, full_matrices=False)
    lam = sing**2 / max(n - 1, 1)
    vecs = vt.T
    k = vecs.shape[1]
    w = None if metric is None else metric.weights(vecs)
    total = None if metric is None else metric.total
    root = np.sqrt(lam) if w is None else np.sqrt(lam / w)
    top = float(root.max()) if root.size else 0.0
    if top == 0.0 or not math.isfinite(top):
        return Shape(vecs, np.ones(k), 1.0 if k < d else None, full, w, total), lam
    a = np.maximum(root, SHAPE_FLOOR * top) / top
    explored = min(n - 1, d)
    unexplored = float(a[:explored].min())
    if width < explored:  # coordinates narrower than the trials' span: the rest has variance 0
        unexplored = min(unexplored, SHAPE_FLOOR)
    a[explored:] = unexplored
    return Shape(vecs, a, unexplored if k < d else None, full, w, total), lam


def _folds(n: int) -> list[np.ndarray]:
    k = min(CV_FOLDS, n // 2)
    return [] if k < 2 else np.array_split(np.arange(n), k)


@dataclass(frozen=True)
class _Unexplored:
    """The directions a shape fit leaves unexplored: ``count`` explored, ``n_rest`` not, and
    ``scale`` their square-root value per unit of complement factor (None: kept as fitted)."""

    count: int
    n_rest: int
    scale: float | None


def _unexplored(n: int, width: int, dim: int | None, lam: np.ndarray,
                resid: float | None, metric: Metric | None = None,
                weights: np.ndarray | None = None) -> _Unexplored | None:
    """:class:`_Unexplored` of a :func:`sqrt_shape` fit on ``n`` rows with sample spectrum
    ``lam``, given ``resid``, an estimate of the variance outside the explored directions
    (None: not known). None when every direction is explored. The unexplored value is the
    square-root rule on that variance spread evenly, ``sqrt(resid / n_rest)`` in the fit's
    units (``max sqrt(λ̂) = 1``); with a ``metric`` (``weights`` the fit's ``w_j``),
    ``sqrt(resid / tr(D P_rest))``, ``tr(D P_rest) = tr(D) − Σ_explored w_j`` the cost of the
    unexplored directions. ``scale`` is None (the unexplored values kept as fitted)
    when the shape trials are rank-deficient (an explored direction at :data:`SHAPE_FLOOR`,
    or coordinates narrower than their span: the unexplored ones are at the floor already)."""
    d = width if dim is None else dim
    explored = min(n - 1, d)
    if explored >= d:
        return None
    w = np.ones(lam.size) if weights is None else weights
    root = np.sqrt(np.maximum(lam, 0.0) / w)
    top = float(root.max()) if root.size else 0.0
    if (width < explored or resid is None or not top > 0.0
            or float(root[explored - 1]) <= SHAPE_FLOOR * top):
        # rank-deficient shape trials: an explored direction sits at the floor already
        return _Unexplored(explored, d - explored, None)
    cost = float(d - explored)
    if metric is not None:
        cost = max(metric.total - float(np.sum(w[:explored])), metric.low * (d - explored))
    return _Unexplored(explored, d - explored, math.sqrt(resid / cost) / top)


def _variant(shape: Shape, pair: np.ndarray, rest: _Unexplored | None) -> Shape:
    """``shape`` with shrinkage ``α = pair[0]`` and its unexplored directions (if any) at
    ``pair[1]`` times their estimated square-root value (:meth:`Shape.split_shrunk`)."""
    if rest is None:
        return shape.shrunk(float(pair[0]))
    value = None if rest.scale is None else max(float(pair[1]) * rest.scale, SHAPE_FLOOR)
    return shape.split_shrunk(rest.count, float(pair[0]), value)


def _outside(shape: Shape, held: np.ndarray) -> tuple[np.ndarray, float]:
    """Held-out variance along ``shape.vecs`` (k,) and outside them (the complement's trace)."""
    z = held - held.mean(axis=0)
    coef = z @ shape.vecs
    along = np.sum(coef**2, axis=0) / (z.shape[0] - 1)
    return along, max(float(np.sum(z**2) / (z.shape[0] - 1) - np.sum(along)), 0.0)


def _variant_table(shape: Shape, grid: np.ndarray,
                   rest: _Unexplored | None) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """``(a, a_c, trace)`` of every variant :func:`_variant` makes of ``shape`` for the rows
    of ``grid``, at once: ``a`` (V, k), ``a_c`` (V,) or None, ``trace`` (V,) their
    :attr:`Shape.trace`. The same float operations in the same order as one :func:`_variant`
    per row (elementwise, and each row's sum over its own ``k`` values), so bit for bit its
    values: the cross-validation scores every variant, and only the one it picks is built."""
    alpha, factor = grid[:, 0], grid[:, 1]
    base = shape.a
    if rest is None or (shape.a_c is None and rest.count >= base.size):
        # Shape.shrunk: towards the mean noise power per unit of size
        mean = shape.trace / shape.size
        a = (1.0 - alpha)[:, None] * base + (alpha * mean)[:, None]
        a_c = None if shape.a_c is None else (1.0 - alpha) * shape.a_c + alpha * mean
        a[alpha == 0.0] = base  # α = 0 is the shape itself (already at max a = 1)
        if a_c is not None:
            a_c[alpha == 0.0] = shape.a_c
        return _normalised(shape, a, a_c, keep=alpha == 0.0)
    # Shape.split_shrunk: the explored head shrunk towards its own mean, the rest set
    a = np.repeat(base[None, :], grid.shape[0], axis=0)
    head = np.flatnonzero(base[:rest.count] > 2.0 * SHAPE_FLOOR)
    moved = alpha != 0.0
    if head.size and np.any(moved):
        mean = float(base[head].mean())
        am = alpha[moved][:, None]
        a[np.ix_(moved, head)] = (1.0 - am) * base[head] + am * mean
    a_c = None if shape.a_c is None else np.full(grid.shape[0], shape.a_c)
    if rest.scale is not None:
        value = np.maximum(factor * rest.scale, SHAPE_FLOOR)
        a[:, rest.count:] = value[:, None]
        if a_c is not None:
            a_c = value
    return _normalised(shape, a, a_c, keep=np.zeros(grid.shape[0], dtype=bool))


def _normalised(shape: Shape, a: np.ndarray, a_c: np.ndarray | None,
                keep: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Rows of ``a`` (and ``a_c``) divided by their largest value (rows ``keep`` as they are),
    with their :attr:`Shape.trace`."""
    top = a.max(axis=1)
    if a_c is not None:
        top = np.maximum(top, a_c)
    top[keep] = 1.0  # x / 1.0 == x: the rows kept are not moved
    a = a / top[:, None]
    if a_c is not None:
        a_c = a_c / top
    if shape.weights is None:
        trace = np.sum(a, axis=1)
        if a_c is not None:
            trace = trace + (shape.dim - a.shape[1]) * a_c
    else:
        head = float(np.sum(shape.weights))
        trace = np.sum(a * shape.weights, axis=1)
        if a_c is not None:
            trace = trace + max(shape.size - head, 0.0) * a_c
    return a, a_c, trace


def _held_out_traces(along: np.ndarray, resid: float,
                     table: tuple[np.ndarray, np.ndarray | None, np.ndarray]) -> np.ndarray:
    """``tr(A⁻¹ S)·tr(A)`` for each variant ``A`` of one fold's shape (``table`` from
    :func:`_variant_table`); ``S`` the held-out covariance (``along`` its variances along the
    shape's ``vecs``, ``resid`` the rest)."""
    a, a_c, trace = table
    tr = np.sum(along / a, axis=1)
    if a_c is not None:
        tr = tr + resid / a_c
    return tr * trace


def _whitened_mean(shape: Shape, y: np.ndarray, variant: Shape) -> float:
    """``mean_i y_iᵀ A⁻¹ y_i`` for the variant ``A`` of ``shape`` (:func:`_variant`)."""
    coef2 = (y @ shape.vecs) ** 2
    r2 = np.sum(coef2 / variant.a, axis=1)
    if shape.a_c is not None and variant.a_c is not None:
        resid = np.maximum(np.sum(y**2, axis=1) - np.sum(coef2, axis=1), 0.0)
        r2 = r2 + resid / variant.a_c
    return float(np.mean(r2))


def _grid(shrinkage: str | float) -> np.ndarray:
    """``(α, complement factor)`` pairs the cross-validation tries (only factor 1 when ``α``
    is given)."""
    if shrinkage != "cv":
        return np.array([[float(shrinkage), 1.0]])
    return np.array([[a, c] for a in SHRINKAGE_GRID for c in COMPLEMENT_GRID])


def fit_shape(shape_x: np.ndarray, *, shrinkage: str | float = "cv",
              dim: int | None = None) -> tuple[Shape, float, float]:
    """The noise shape from the shape trials: ``(shape, α, inflation)``.

    When the shape trials span fewer directions than ``d`` (``m_s − 1 < d``), the explored
    directions are shrunk towards their own mean, and the unexplored ones (the complement)
    get the square-root rule on the complement's variance spread evenly: its trace estimated
    by the held-out folds' variance outside each fold's fit (an over-estimate for the full
    shape trials, which explore more), times a factor of :data:`COMPLEMENT_GRID` chosen by the
    same cross-validation. This is the structure of the ``T``-trial floor
    (docs/guide/noise_high_d.md): a head along the estimated directions, isotropic noise sized
    by the trace in the rest.

    Parameters
    ----------
    shape_x : ndarray of shape (m_s, d)
        The shape trials.
    shrinkage : "cv" or float in [0, 1]
        ``α`` (and the complement factor) chosen by cross-validation on the shape trials, or
        ``α`` given (factor 1).
    dim : int, optional
        The full dimension ``d`` when ``shape_x`` holds coordinates in a subspace of it
        (:func:`sqrt_shape`).

    Returns
    -------
    (Shape, float, float)
        The (shrunk) shape, ``α``, and the out-of-fold over in-fold mean whitened radius of the
        shrunk shapes fitted without each fold, in ``[1, 4]`` (1 when there are fewer than 4
        shape trials), for :func:`clip_radius2`. Each fold's shape is used and dropped: at most
        one is alive at a time.
    """
    fit = fit_shape_scored(shape_x, shrinkage=shrinkage, dim=dim)
    return fit.shape, fit.shrinkage, fit.inflation


@dataclass(frozen=True, eq=False)
class ShapeFit:
    """:func:`fit_shape_scored`'s result: the shape, its shrinkage ``α``, the clip's
    out-of-fold inflation, and ``loss``, the cross-validated noise power per unit of budget
    ``mean_folds tr(A⁻¹ S_held-out) · tr(D^{1/2} A D^{1/2})`` of the chosen variant (in the
    outputs' squared units, so fits in different rescaled coordinates compare; ``inf`` when
    there are no folds)."""

    shape: Shape
    shrinkage: float
    inflation: float
    loss: float


def fit_shape_scored(shape_x: np.ndarray, *, shrinkage: str | float = "cv",
                     dim: int | None = None, metric: Metric | None = None) -> ShapeFit:
    """:func:`fit_shape` with its cross-validated loss, in coordinates rescaled by ``D``.

    ``metric`` (:class:`~pacpriv.pac.noise._coordinates.Metric`): the rows of ``shape_x`` are
    outputs divided by ``D^{1/2}`` (or coordinates of those in a subspace); the square-root
    rule and the loss then weigh each direction by its cost in the outputs' units
    (:func:`sqrt_shape`). None: ``D = I``, the fit of :func:`fit_shape`.
    """
    base, lam = sqrt_shape(shape_x, dim, metric)
    n, width = shape_x.shape
    folds = _folds(n)
    cv = shrinkage == "cv"
    grid = _grid(shrinkage)
    loss = np.zeros(len(grid))
    outside = []
    fitted = []  # each fold's shape and unexplored directions, for the pick's clip inflation
    for f in folds:
        keep = np.ones(n, dtype=bool)
        keep[f] = False
        s, lam_f = sqrt_shape(shape_x[keep], dim, metric)
        along, resid = _outside(s, shape_x[f])
        n_fit = int(np.sum(keep))
        # the held-out variance outside the explored directions (``vecs`` may hold one more,
        # of singular value 0, whose direction is arbitrary)
        rest_var = resid + float(np.sum(along[min(n_fit - 1, base.dim):]))
        outside.append(rest_var)
        rest = _unexplored(n_fit, width, dim, lam_f, rest_var, metric, s.weights)
        loss += _held_out_traces(along, resid, _variant_table(s, grid, rest))
        fitted.append((keep, s, rest))
    pick = int(np.argmin(loss)) if cv and base.dim > 1 and folds else 0
    alpha = float(grid[pick, 0])
    infl = 1.0
    if folds:  # out-of-fold over in-fold mean whitened radius of the picked variant
        num = den = 0.0
        for f, (keep, s, rest_f) in zip(folds, fitted, strict=True):
            variant = _variant(s, grid[pick], rest_f)
            c = shape_x[keep].mean(axis=0)
            den += _whitened_mean(s, shape_x[keep] - c, variant)
            num += _whitened_mean(s, shape_x[f] - c, variant)
        if den > 0:
            infl = min(max(num / den, _INFLATION_RANGE[0]), _INFLATION_RANGE[1])
    rest = _unexplored(n, width, dim, lam, float(np.mean(outside)) if outside else None,
                       metric, base.weights)
    score = float(loss[pick]) / len(folds) if folds else math.inf
    return ShapeFit(_variant(base, grid[pick], rest), alpha, infl, score)


def clip_radius2(shape_x: np.ndarray, centre: np.ndarray, shape: Shape, infl: float,
                 *, clip_probability: float) -> float:
    """Squared clip radius ``ρ²`` (whitened units of ``shape``) from the shape trials.

    ``max(max_j r_j², infl · mean(r²) · F_{k, k(m_s−1)}(1 − π))``: ``r_j²`` the shape trials'
    whitened radii, ``infl`` the out-of-fold inflation of the mean radius (in ``[1, 4]``, from
    :func:`fit_shape`), ``k`` the Satterthwaite degrees of freedom ``(Σ w)²/Σ w²`` of
    ``r² = Σ_j w_j χ²₁`` with ``w_j = λ̂_j/a_j`` [SW]_, ``π = clip_probability``. 0 when the
    shape trials never varied.
    """
    r2 = shape.whiten2(shape_x - centre)
    top = float(r2.max())
    if top == 0.0:
        return 0.0
    coef = (shape_x - centre) @ shape.vecs
    w = np.mean(coef**2, axis=0) / shape.a
    if shape.a_c is not None:
        resid = max(float(np.mean(r2) - np.sum(w)), 0.0)
        w = np.append(w, resid)  # the complement as one more term (fewer dof: conservative)
    k = float(np.sum(w) ** 2 / max(float(np.sum(w * w)), 1e-300))
    k = min(max(k, 1.0), float(shape.dim))
    # a fresh r² over the shape trials' mean r² is F(k, k(m_s − 1))-distributed (Gaussian
    # approximation): its (1 − π) quantile clips a fraction π on average, estimation included
    dof = k * max(shape_x.shape[0] - 1, 1)
    q = infl * float(np.mean(r2)) * float(stats.f.ppf(1.0 - clip_probability, k, dof))
    return max(top, q)


#: Fewest certificate trials the high-dimensional split leaves (see :func:`shape_cap`).
HIGH_D_CERTIFICATE_TRIALS = 32


def shape_cap(n_trials: float, dim: int) -> float:
    """Most shape trials of the split: ``m/2`` while ``d <= m/4``; when ``d >= 3m/4``,
    ``max(m/2, m − max(32, m/8))`` (the shape trials must see the directions the complement
    would otherwise be charged for, and at high ``d`` the whitened summands concentrate, so
    ``max(32, m/8)`` certificate trials suffice); linear in ``d/m`` in between.

    A function of ``(m, d)`` only, so the split never looks at the outputs. Measured on
    Poisson sums with decaying scales (benchmarks/certificate.py, issue 32).
    """
    half = 0.5 * n_trials
    high = max(half, n_trials - max(HIGH_D_CERTIFICATE_TRIALS, n_trials / 8.0))
    weight = min(max((dim / n_trials - 0.25) / 0.5, 0.0), 1.0)
    return half + weight * (high - half)


def shape_trials_model(n_trials: float, dim: int) -> float:
    """The split rule before rounding: ``min(cap, 0.45 · sqrt(d + 1.2) · m^0.7)`` with ``cap``
    from :func:`shape_cap` (``m/2`` while ``d <= m/4``)."""
    return min(shape_cap(n_trials, dim), 0.45 * math.sqrt(dim + 1.2) * n_trials**0.7)


def default_shape_trials(n_trials: int, dim: int) -> int:
    """Shape trials ``m_s`` of the default split: :func:`shape_trials_model` rounded, at
    least 2.

    E.g. 20 of 128 trials at ``d = 1``, 33 at ``d = 5``, 62 at ``d = 20``; 86 of 1024 at
    ``d = 1``, 265 at ``d = 20``.
    """
    return int(max(2, round(shape_trials_model(n_trials, dim))))
