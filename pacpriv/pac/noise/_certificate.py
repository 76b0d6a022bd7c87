"""A (1−γ) certificate for PAC noise from finitely many trials.

The plug-in rules of :mod:`pacpriv.pac.noise._calibration` meet the budget for the *estimated*
covariance only. :func:`certify_noise` meets it for the true covariance of the released
(clipped) mechanism with probability ``>= 1 − γ`` over the simulation
(docs/guide/certification.md has the derivation):

1. **Shape and clip** (:mod:`pacpriv.pac.noise._shape`). The first ``m_s`` trials fix the
   noise shape ``A`` (square-root rule on their spectrum, shrunk towards isotropic by
   cross-validation inside them; positive definite), the clip centre ``c₀`` (their mean) and
   the clip radius ``ρ``. Every output, simulated or released, is clipped to the ellipsoid
   ``E = {c₀ + A^{1/2}u : ||u|| <= ρ}`` (a radial shrink towards ``c₀``): post-processing of
   ``f``, so the certificate is for the clipped mechanism ``g∘f``, which
   :func:`pacpriv.pac.release.privatize` releases.
2. **Summands.** Every other trial ``i > m_s`` gives ``Y_i = ||g(f_i) − c_{i−1}||²_{A⁻¹}``
   around the running mean ``c_{i−1}`` of all earlier clipped trials. Given the earlier trials,
   ``g(f_i)`` is a fresh draw, so ``E[Y_i | past] = T + ||μ_g − c_{i−1}||²_{A⁻¹} >= T`` with
   ``T = tr(A⁻¹Σ_g)``, and ``0 <= Y_i <= b_i = (ρ + ||c_{i−1} − c₀||_{A⁻¹})²`` (both in ``E``).
   All certificate trials serve as summands (no pairing), the bias ``≈ T/(i−1)`` is
   conservative, and ``T <= ρ²``.
3. **Bound.** A capital process with predictable bets (Waudby-Smith & Ramdas 2024;
   :func:`predictable_betting_upper`) gives ``U`` with ``P(T > U) <= γ``.
4. **Scale.** ``Σ_B = κA``. ``MI <= ½ ln det(I + Σ_gΣ_B⁻¹) <= (d/2) ln(1 + T/(dκ))`` ([PAC]_
   Thm 3, then concavity of ``ln`` over the ``d`` eigenvalues, whose sum is ``T/κ``), so
   ``κ = max(U, T̂)/(d(e^{2v/d} − 1))`` (``scaling="log-det"``) or ``max(U, T̂)/(2v)``
   (``"trace"``, the linearised bound) gives ``MI <= v`` with probability ``>= 1 − γ``;
   ``T̂ = tr(A⁻¹Σ̂)`` on all clipped trials (never less noise than the plug-in, same shape).

Without any bound on the outputs, ``method="student-t"`` replaces steps 2–3 by a one-sided
Student-t bound on fixed-centre summands (no clipping): an asymptotic approximation, never
labelled certified.

References
----------
.. [PAC] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 3.
.. [WSR] I. Waudby-Smith, A. Ramdas. Estimating means of bounded random variables by betting.
   J. R. Stat. Soc. B 86(1), 2024.
.. [MP] A. Maurer, M. Pontil. Empirical Bernstein bounds and sample variance penalization.
   COLT 2009, Thm 4.
.. [RM] A. Ramdas, T. Manole. Randomized and exchangeable improvements of Markov's,
   Chebyshev's and Chernoff's inequalities. arXiv:2304.02611, 2023.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from pacpriv._random import as_generator
from pacpriv._validation import check_real
from pacpriv.exceptions import CalibrationError
from pacpriv.pac.noise._concentration import (
    _check_confidence,
    empirical_bernstein_upper,
    predictable_betting_upper,
    student_t_upper,
)
from pacpriv.pac.noise._coordinates import (
    Metric,
    candidate_exponents,
    column_variances,
    coordinate_scales,
)
from pacpriv.pac.noise._plan import NoisePlan
from pacpriv.pac.noise._reduced import Reduced, head_mean, realign, reduce_rows, rows_equal
from pacpriv.pac.noise._shape import (
    SHAPE_FLOOR,
    Shape,
    ShapeFit,
    clip_radius2,
    default_shape_trials,
    fit_shape_scored,
)
from pacpriv.pac.spectrum._gram import CentredGram
from pacpriv.pac.spectrum._spectral import one_blas_thread

__all__ = ["DEFAULT_CLIP_PROBABILITY", "METHODS", "SCALINGS", "SHAPE_FLOOR", "Certificate",
           "RelativeOutputs", "certify_noise", "split_source"]

#: Upper-bound methods: rigorous for clipped outputs, and the labelled asymptotic fallback.
METHODS = ("betting", "empirical-bernstein", "student-t")

#: How the certified trace bound sets the scale: the log-det bound at ``d`` equal eigenvalues
#: (never more noise) or the linearised trace bound.
SCALINGS = ("log-det", "trace")

#: Target fraction of outputs the release clip shrinks (a Gaussian approximation).
DEFAULT_CLIP_PROBABILITY = 0.02

#: Fewest trials: 2 for the shape and 4 summands.
_MIN_TRIALS = 6
_MIN_CERT = 4

@dataclass(frozen=True, eq=False)
class RelativeOutputs:
    """Outputs stored relative to a reference (float32 storage of the engine): trial ``i``'s
    output is ``outputs[i] + reference`` (None: the outputs themselves), with the centred Gram
    matrix of ``outputs`` when the pipeline has already made it (``gram``, shared with the
    spectrum: :func:`pacpriv.pac.spectrum._gram.centred_gram`).

    The certificate is translation invariant except for the clip centre and the public
    ``output_bound``'s radius, which take ``reference`` back; no absolute copy is made.
    """

    outputs: np.ndarray
    reference: np.ndarray | None
    gram: CentredGram | None = None


def split_source(source) -> tuple[np.ndarray, np.ndarray | None]:
    """``(outputs, reference or None)`` of a rule's source (an array or
    :class:`RelativeOutputs`)."""
    if isinstance(source, RelativeOutputs):
        ref = source.reference
        return source.outputs, None if ref is None else np.asarray(ref, dtype=np.float64)
    return source, None


@dataclass(frozen=True)
class Certificate:
    """How a certified noise plan was obtained (public facts only).

    Attributes
    ----------
    method : {"betting", "empirical-bernstein", "student-t"}
        Upper-bound method; ``"student-t"`` is not certified.
    certified : bool
        Whether ``MI <= v`` holds with probability ``>= confidence`` rigorously.
    confidence : float
        ``1 − γ``.
    n_shape : int
        Trials that fixed the noise shape and the clip (the first ``n_shape``).
    n_certificate : int
        Trials after them, each one summand of the upper bound.
    clip_radius : float or None
        ``ρ`` in the whitened space of the shape (None: no clipping).
    summand_bound : float or None
        ``max_i b_i``, the largest range of a summand (None for Student-t).
    mean_summand, upper_bound : float
        ``Ȳ`` and ``U`` (estimates of ``tr(A⁻¹Σ)``; ``A`` normalised to ``max a_j = 1``).
    plugin_trace : float
        ``T̂ = tr(A⁻¹Σ̂)`` on all (clipped) trials.
    kappa, kappa_plugin : float
        Noise scale ``Σ_B = κA`` of the plan and of the plug-in with the same shape and scaling.
    inflation : float
        ``κ/κ_plugin``: the noise power the certificate cost relative to the plug-in with the
        same shape (``>= 1``).
    n_clipped : int
        Simulated outputs (of all ``m``) that the clip changed.
    constant : bool
        All simulated outputs were identical.
    output_bound : float or None
        The user's public bound ``r >= ||f(X)||₂``, if given.
    n_trials : int
        Independent trials the certificate used (``n_shape + n_certificate``).
    shrinkage : float
        Intensity ``α`` of the shape's shrinkage towards isotropic (cross-validated on the
        shape trials).
    scaling : {"log-det", "trace"}
        How the certified trace bound set ``κ``.
    summands : {"running-mean", "shape-mean"}
        Centre of each summand: the running mean of the earlier trials (betting) or the shape
        trials' mean (empirical Bernstein, Student-t: i.i.d. summands).
    clip_probability : float
        Target fraction of clipped outputs that set ``ρ``.
    randomized : bool
        Whether the betting threshold was the randomized ``W/γ`` (Ramdas & Manole 2023).
    roundoff : float
        ``ε >= 0``: the relative round-off bound of the lift from the Gram matrix (``d >
        n_trials``; :mod:`pacpriv.pac.noise._gram_lift`), charged on the safe side (every
        summand, range and trace multiplied by ``1 + ε``, so the noise grows by up to that
        factor); 0 where the lift read the outputs.
    coordinate_exponent : float
        ``α`` of the per-coordinate rescaling ``D = (shape-trial variance)^α`` of the shape
        (:mod:`pacpriv.pac.noise._coordinates`; 0: none), chosen inside the shape trials.
    """

    method: str
    certified: bool
    confidence: float
    n_shape: int
    n_certificate: int
    clip_radius: float | None
    summand_bound: float | None
    mean_summand: float
    upper_bound: float
    plugin_trace: float
    kappa: float
    kappa_plugin: float
    inflation: float
    n_clipped: int
    constant: bool
    output_bound: float | None
    n_trials: int = 0
    shrinkage: float = 0.0
    scaling: str = "log-det"
    summands: str = "running-mean"
    clip_probability: float = DEFAULT_CLIP_PROBABILITY
    randomized: bool = False
    roundoff: float = 0.0
    coordinate_exponent: float = 0.0

    def to_dict(self) -> dict:
        """JSON-serialisable copy."""
        return asdict(self)


def _use_reduced(m: int, d: int) -> bool:
    """Whether the certificate runs on coordinates of the rows' span (``d > m``: the span has
    fewer dimensions than the outputs) rather than on the outputs themselves."""
    return d > m


def _clip(x: np.ndarray, centre: np.ndarray, norm2: np.ndarray, radius: float):
    """Radial shrink of rows with whitened norm ``> radius``; returns ``(clipped, mask)``."""
    outside = norm2 > radius * radius
    if not np.any(outside):
        return x, outside
    scale = np.ones_like(norm2)
    if radius == 0.0:
        scale[outside] = 0.0
    else:
        scale[outside] = radius / np.sqrt(norm2[outside])
    return centre + (x - centre) * scale[:, None], outside


def _kappa_bounds(top: float, kappa: float, d: int, scaling: str) -> tuple[float, float]:
    """(the plan's bound, the trace bound) of noise ``kappa·A`` for the certified ``top``."""
    trace_bound = 0.0 if kappa == 0 else top / (2.0 * kappa)
    bound = trace_bound if scaling == "trace" or kappa == 0 else (
        0.5 * d * math.log1p(top / (d * kappa)))
    return min(bound, trace_bound), trace_bound


def _round_up_kappa(top: float, kappa: float, v: float, d: int, scaling: str) -> float:
    """``kappa`` raised by a few ulps until the plan's bound is ``<= v`` exactly (rounding of
    ``top / den`` can leave it an ulp above; more noise is the safe side)."""
    step = 4.0 * float(np.finfo(np.float64).eps)
    for _ in range(64):
        if kappa == 0 or _kappa_bounds(top, kappa, d, scaling)[0] <= v:
            return kappa
        kappa *= 1.0 + step
        step *= 2.0
    raise CalibrationError(f"the certified noise could not be rounded up to meet the budget "
                           f"{v!r}; this is a bug, please report it.")


def _plan_radius(radius: float | None, kappa: float) -> float | None:
    """The clip radius in the plan's ``Σ_B``-whitened units (``Σ_B = κA``): ``ρ/sqrt(κ)``."""
    if radius is None:
        return None
    return 0.0 if radius == 0.0 or kappa == 0.0 else radius / math.sqrt(kappa)


def _scale_denominator(scaling: str, v: float, d: int) -> float:
    """``κ = trace/den``: ``2v`` (trace) or ``d(e^{2v/d} − 1) >= 2v`` (log-det)."""
    return 2.0 * v if scaling == "trace" else d * math.expm1(2.0 * v / d)


def _running_summands(x: np.ndarray, n_shape: int, centre: np.ndarray, shape: Shape,
                      radius: float):
    """``Y_i = ||x_i − c_{i−1}||²_{A⁻¹}`` and ranges ``(ρ + ||c_{i−1} − c₀||)²`` for
    ``i >= n_shape`` (``c_{i−1}`` the mean of rows ``< i``, all clipped)."""
    m = x.shape[0]
    running = np.cumsum(x, axis=0)[n_shape - 1 : m - 1] / np.arange(n_shape, m)[:, None]
    y = shape.whiten2(x[n_shape:] - running)
    ranges = (radius + np.sqrt(shape.whiten2(running - centre))) ** 2
    return np.minimum(y, ranges), ranges  # round-off only: the triangle inequality


def certify_noise(
    outputs,
    *,
    mi_budget: float,
    confidence: float = 0.95,
    shape_fraction: float | None = None,
    output_bound: float | None = None,
    clip_margin: float = 1.0,
    method: str = "betting",
    clip_probability: float = DEFAULT_CLIP_PROBABILITY,
    shrinkage: str | float = "cv",
    scaling: str = "log-det",
    randomize=None,
    offset=None,
) -> NoisePlan:
    """Gaussian noise with ``MI <= mi_budget`` certified with probability ``>= confidence``.

    Parameters
    ----------
    outputs : array_like of shape (n_trials, d), or RelativeOutputs
        Mechanism outputs on **independent** random subsets, each drawn like the secret
        (real, finite), in trial order; ``n_trials >= 6``. Of complementary pairs pass one
        member each (``run_pac`` does). Any real dtype, a memory map included: it is read,
        never copied whole. When ``d > n_trials`` the certificate works on the
        ``n_trials × n_trials`` Gram matrix (float64 sums) and thin factors: memory the outputs
        plus ``n_trials × n_trials`` matrices and 16 MiB blocks, no ``d × d`` matrix; the plan's
        basis is then ``(X − x̄)ᵀB``, applied from the outputs (a reference to them), with the
        round-off of that route charged in ``Certificate.roundoff``; where its bound does not
        close, a formed ``d × k`` basis (``k <= n_shape``).
    mi_budget : float
        Budget ``v > 0`` in nats.
    confidence : float, default 0.95
        ``1 − γ`` in ``(0, 1)``.
    shape_fraction : float, optional
        Fraction of the trials that fix the shape and the clip, in ``(0, 1)``. Default: the
        split of :func:`~pacpriv.pac.noise._shape.default_shape_trials`
        (``≈ 0.45 sqrt(d) m^0.7`` trials, at most half while ``d <= m/4``, up to
        ``m − max(32, m/8)`` at high ``d``).
    output_bound : float, optional
        Public bound ``r >= ||f(X)||₂`` (an assumption; :func:`~pacpriv.pac.job.run_pac`
        refuses one that a simulated output breaks). Gives the clip radius
        ``(r + ||c₀||)/sqrt(min a)`` when it is smaller than the empirical one, and a certified
        minimum noise when the outputs never varied.
    clip_margin : float, default 1
        Multiplier ``>= 1`` of the clip radius set from the shape trials.
    method : {"betting", "empirical-bernstein", "student-t"}, default "betting"
        Upper bound on the trace: :func:`predictable_betting_upper` on running-mean summands,
        or :func:`empirical_bernstein_upper` on shape-mean summands (both certified);
        ``"student-t"``: no clipping, asymptotic bound, labelled *not certified*.
    clip_probability : float, default 0.02
        Target fraction ``π`` in ``(0, 1/2)`` of outputs the clip shrinks (sets ``ρ`` under a
        Gaussian approximation; the certificate holds whatever the outputs' law).
    shrinkage : "cv" or float, default "cv"
        Shrinkage ``α`` in ``[0, 1]`` of the square-root shape towards isotropic, or chosen by
        cross-validation inside the shape trials.
    scaling : {"log-det", "trace"}, default "log-det"
        Set ``κ`` from the log-det bound at ``d`` equal eigenvalues, ``(d/2) ln(1 + U/(dκ)) =
        v`` (less noise, the same guarantee), or from the trace bound ``U/(2κ) = v``.
    randomize : None, int, SeedSequence or Generator, optional
        ``method="betting"`` only: draw ``W ~ U(0, 1)`` from this source and use the
        randomized threshold ``W/γ`` (Ramdas & Manole 2023): the same ``1 − γ``, on average less
        noise, but the plan then depends on ``W``. None (default): Markov's ``1/γ``.

    offset : array_like of shape (d,), optional
        The rows of ``outputs`` are ``f_i − offset`` (e.g. float32 storage relative to trial
        0): the clip centre and ``output_bound``'s radius add it back; nothing else depends on
        a translation. A :class:`RelativeOutputs` ``outputs`` brings its own ``reference`` as
        the offset (then ``offset`` must be None) and, in ``gram``, the centred Gram matrix of
        its rows already made and shared with the spectrum
        (:func:`pacpriv.pac.spectrum._gram.centred_gram`): used when ``d > n_trials`` instead of
        a new pass over the outputs (that pass also checked them finite).
        :func:`pacpriv.pac._pipeline.measure` passes one.

    Returns
    -------
    NoisePlan
        ``rule="certified"`` (or ``"asymptotic-t"``), ``confidence = 1 − γ``, ``mi_bound`` the
        certified bound (``<= v``), ``linearised_mi_bound`` its trace form;
        ``clip_center``/``clip_radius`` set the clip that
        :func:`~pacpriv.pac.release.privatize` applies; ``certificate`` holds the
        :class:`Certificate`.

    Raises
    ------
    TypeError, ValueError
        Bad ``outputs`` (not 2-D, not finite, fewer than 6 rows) or out-of-range arguments.

    Notes
    -----
    Validity needs only that the trials are independent draws of the output under the sampler
    and that the shape, clip and split are fixed by the shape trials alone; it does not
    assume Gaussian outputs. Outputs that never varied (and no ``output_bound``): the clip
    radius is 0, the release is the seen value (constant, MI = 0 for the released map) and the
    report states :func:`constant_output_bound`.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 3.
    .. [2] Waudby-Smith & Ramdas, JRSS-B 86(1), 2024.
    .. [3] Maurer & Pontil, COLT 2009, Thm 4.
    .. [4] Ramdas & Manole, arXiv:2304.02611, 2023.
    """
    gram = None
    if isinstance(outputs, RelativeOutputs):
        if offset is not None and outputs.reference is not None:
            raise ValueError("`offset` must be None when `outputs` is a RelativeOutputs with a "
                             "reference (it is the offset).")
        if outputs.reference is not None:
            offset = outputs.reference
        outputs, gram = outputs.outputs, outputs.gram
    x = outputs if isinstance(outputs, np.ndarray) else np.asarray(outputs)
    if x.dtype == bool or not (np.issubdtype(x.dtype, np.floating)
                               or np.issubdtype(x.dtype, np.integer)):
        raise TypeError(f"`outputs` must hold real numbers; got dtype {x.dtype}.")
    if x.ndim != 2 or x.shape[1] < 1:
        raise ValueError(f"`outputs` must be 2-D (n_trials, d) with d >= 1; got shape {x.shape}.")
    if gram is not None:
        _check_gram(gram, x)
    elif not np.all(np.isfinite(x)):
        raise ValueError("`outputs` must be finite; found NaN or inf.")
    v = check_real(mi_budget, "mi_budget", low=0.0, low_inclusive=False, high=100.0)
    conf = _check_confidence(confidence)
    frac = None if shape_fraction is None else check_real(
        shape_fraction, "shape_fraction", low=0.0, high=1.0, low_inclusive=False,
        high_inclusive=False)
    margin = check_real(clip_margin, "clip_margin", low=1.0)
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}; got {method!r}.")
    if scaling not in SCALINGS:
        raise ValueError(f"`scaling` must be one of {SCALINGS}; got {scaling!r}.")
    pi = check_real(clip_probability, "clip_probability", low=0.0, high=0.5,
                    low_inclusive=False, high_inclusive=False)
    if shrinkage != "cv":
        shrinkage = check_real(shrinkage, "shrinkage", low=0.0, high=1.0)
    if randomize is not None and method != "betting":
        raise ValueError(f"`randomize` applies to method='betting' only; got method={method!r}.")
    r = None if output_bound is None else check_real(output_bound, "output_bound", low=0.0,
                                                     low_inclusive=False)
    m, d = x.shape
    if m < _MIN_TRIALS:
        raise ValueError(f"`outputs` needs at least {_MIN_TRIALS} trials (rows) for a "
                         f"certificate; got n_trials = {m}.")
    wanted = default_shape_trials(m, d) if frac is None else math.ceil(frac * m)
    n_shape = min(max(2, wanted), m - _MIN_CERT)
    theta = 1.0 if randomize is None else float(as_generator(randomize).random()) or 1.0
    if offset is not None:
        offset = np.asarray(offset, dtype=np.float64)
        if offset.shape != (d,) or not np.all(np.isfinite(offset)):
            raise ValueError(f"`offset` must be a finite vector of shape ({d},); got shape "
                             f"{offset.shape}.")
    with one_blas_thread(m, d):
        return _certify(x, n_shape=n_shape, v=v, conf=conf, margin=margin, method=method,
                        pi=pi, shrinkage=shrinkage, scaling=scaling, r=r, theta=theta,
                        randomized=randomize is not None, offset=offset, gram=gram)


def _check_gram(gram, x: np.ndarray) -> None:
    """Refuse a precomputed Gram that is not that of ``x``."""
    if not isinstance(gram, CentredGram):
        raise TypeError(f"`gram` must be a CentredGram or None; got {type(gram).__name__}.")
    if gram.outputs is not x:
        raise ValueError("`gram` must be the centred Gram of `outputs` itself (made by "
                         "centred_gram(outputs) or its restrict()).")


@dataclass(frozen=True, eq=False)
class _Rescaled:
    """One candidate rescaling: the rows certified (``x``, checked; with ``d <= m`` a rescaled
    float64 copy when ``scale`` is set; with ``d > m`` the outputs themselves, which ``red``
    reads divided by ``scale`` block by block), their reduced form, the shape fit and
    ``D^{1/2}`` (None: ``I``)."""

    x: np.ndarray
    rows: np.ndarray
    red: Reduced | None
    constant: bool
    fit: ShapeFit
    scale: np.ndarray | None
    exponent: float


def _in_memory_float64(x: np.ndarray) -> bool:
    return type(x) is np.ndarray and x.dtype == np.float64


def _fit_rescaled(x: np.ndarray, *, n_shape: int, shrinkage,
                  gram: CentredGram | None) -> _Rescaled:
    """The shape fit of least cross-validated noise power over the rescalings ``D^{1/2}`` of
    :func:`~pacpriv.pac.noise._coordinates.candidate_exponents`, all fixed by the shape trials
    (``α = 0``, the outputs themselves, first: it wins ties). With ``d > m`` each rescaling
    makes its own Gram pass (the rows in coordinates of their span; never ``d × d``) over the
    outputs, each column block divided by ``D^{1/2}`` as it is read (no rescaled copy: the
    same Gram, bit for bit, as on ``np.divide(x, D^{1/2}, dtype=np.float64)``); it is tried
    for in-memory float64 outputs only (float32 or memory-mapped ones get ``α = 0``, as
    before, so that their plans do not change)."""
    m, d = x.shape
    reduced = _use_reduced(m, d)
    var = column_variances(x, n_shape) if d > 1 else np.zeros(1)
    candidates = candidate_exponents(var, n_shape)
    if reduced and not _in_memory_float64(x):
        candidates = (0.0,)  # float32 or on disk: no float64 copy of the outputs (bounded memory)
    best: _Rescaled | None = None
    base_gram = None
    for alpha in candidates:
        scale = metric = None
        src = x
        if alpha != 0.0:
            scale = coordinate_scales(var, alpha)
            if not reduced:  # d <= m: a small copy
                src = np.divide(x, scale, dtype=np.float64)
        # d > m: the rows in coordinates of their span (never d x d), the rescaled ones read
        # from x itself (each column block divided by the scale as it is read)
        red = (reduce_rows(x, gram=gram if scale is None else None, scale=scale,
                           head=0 if scale is None else n_shape) if reduced else None)
        if red is not None and scale is None:
            base_gram = red.gram
        if scale is not None:
            d2 = scale * scale
            if red is None:
                metric = Metric(float(np.sum(d2)), float(d2.min()), diag=d2)
            else:  # Qᵀ D Q = liftᵀ Z_y D Z_yᵀ lift = liftᵀ K_x lift (Z_y D^{1/2} = Z_x)
                if base_gram is None:
                    base_gram = gram.gram if gram is not None else reduce_rows(x).gram
                metric = Metric(float(np.sum(d2)), float(d2.min()),
                                gram=red.lift.T @ base_gram @ red.lift)
        src, rows, constant = _rows_of(src, red)
        fit = fit_shape_scored(rows[:n_shape], shrinkage=shrinkage,
                               dim=None if red is None else d, metric=metric)
        if best is None or fit.loss < best.fit.loss:
            best = _Rescaled(src, rows, red, constant, fit, scale, alpha)
    assert best is not None
    return best


def _rows_of(x: np.ndarray, red: Reduced | None) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(x, rows, constant)``: ``x`` as checked float64, or its reduced ``red.coords`` rows."""
    if red is None:
        x = np.array(x, dtype=np.float64)
        if not np.all(np.isfinite(x)):
            raise ValueError("`outputs` must be finite; found NaN or inf.")
        constant = bool(np.all(x == x[0]))
        rows = x
    else:
        constant = rows_equal(x, red.scale)
        rows = red.coords
    return x, rows, constant


def _summands_upper(x: np.ndarray, shape_x: np.ndarray, n_shape: int, centre: np.ndarray,
                    shape: Shape, radius: float | None, *, method: str, conf: float,
                    theta: float, slack: float = 1.0) -> tuple[np.ndarray, str, float | None,
                                                               float]:
    """``(z, summands, b, upper)``: the certificate's summands, their bound and upper mean.

    ``slack`` (``1 + ε >= 1``): the computed whitened norms may understate the exact ones by
    this factor (round-off of the Gram route, :mod:`pacpriv.pac.noise._gram_lift`); every
    summand, range and radius² is multiplied by it, so the summands dominate the exact ones.
    """
    if method == "betting" and radius:
        z, ranges = _running_summands(x, n_shape, centre, shape, radius)
        ranges = ranges * slack
        summands = "running-mean"
    else:
        z = shape.whiten2(x[n_shape:] - centre)
        summands = "shape-mean"
    z = z * slack
    if radius == 0.0:  # certified, and the clipped release is the constant c: MI = 0
        b, upper = 0.0, 0.0
    elif radius is not None:  # certified (a clip radius exactly when certified)
        rho2 = radius * radius * slack
        if method == "betting":
            prior = shape.whiten2(shape_x - centre) * slack
            b = float(ranges.max())
            upper = predictable_betting_upper(
                z, ranges, confidence=conf, prior_mean=float(prior.mean()),
                prior_variance=float(prior.var(ddof=1)), mean_limit=rho2, threshold=theta)
        else:
            b = rho2
            upper = min(rho2, empirical_bernstein_upper(np.minimum(z, rho2), bound=rho2,
                                                        confidence=conf))
    else:
        b = None
        upper = student_t_upper(z, confidence=conf)
    return z, summands, b, upper


def _certify(x, *, n_shape: int, v: float, conf: float, margin: float, method: str, pi: float,
             shrinkage, scaling: str, r: float | None, theta: float,
             randomized: bool, offset: np.ndarray | None,
             gram: CentredGram | None = None) -> NoisePlan:
    """The body of :func:`certify_noise` on validated arguments."""
    m, d = x.shape
    chosen = _fit_rescaled(x, n_shape=n_shape, shrinkage=shrinkage, gram=gram)
    x, rows, red, constant, scale = chosen.x, chosen.rows, chosen.red, chosen.constant, chosen.scale
    shape, alpha, infl = chosen.fit.shape, chosen.fit.shrinkage, chosen.fit.inflation
    shape_x = rows[:n_shape]
    centre = shape_x.mean(axis=0)
    # the clip centre in the (rescaled) outputs' own coordinates (float64 sums)
    centre_out = centre if red is None else (
        red.head_mean if red.head_mean is not None else head_mean(x, n_shape, red.scale, red.step))
    if offset is not None:
        centre_out = centre_out + (offset if scale is None else offset / scale)

    certified = method != "student-t"
    radius: float | None = None
    if certified:
        emp = math.sqrt(clip_radius2(shape_x, centre, shape, infl, clip_probability=pi))
        radius = margin * emp
        if r is not None:  # ||y|| <= r / min(D^{1/2}) for the rescaled outputs
            r_y = r if scale is None else r / float(scale.min())
            from_bound = (r_y + float(np.linalg.norm(centre_out))) / math.sqrt(shape.a_min)
            radius = from_bound if emp == 0.0 else min(radius, from_bound)
    basis = shape.vecs
    slack = 1.0
    if red is not None:
        # the summands, the clip and the trace along the released basis (from the Gram matrix
        # with a round-off factor 1 + ε charged below, or from the data)
        basis, rows, shape, eps = realign(red, shape)
        slack = 1.0 + eps
        del red
        shape_x = rows[:n_shape]
        centre = shape_x.mean(axis=0)
    x = rows
    n_clipped = 0
    if radius is not None:
        x, clipped = _clip(x, centre, shape.whiten2(x - centre), radius)
        n_clipped = int(np.sum(clipped))
    z, summands, b, upper = _summands_upper(x, shape_x, n_shape, centre, shape, radius,
                                            method=method, conf=conf, theta=theta, slack=slack)
    centred_all = x - x.mean(axis=0)
    plugin_trace = slack * float(np.sum(shape.whiten2(centred_all))) / (m - 1)
    den = _scale_denominator(scaling, v, d)
    kappa_plugin = plugin_trace / den
    top = max(upper, plugin_trace)
    kappa = _round_up_kappa(top, top / den, v, d, scaling)
    cert = Certificate(
        method=method, certified=certified, confidence=conf, n_shape=n_shape,
        n_certificate=m - n_shape, clip_radius=radius, summand_bound=b,
        mean_summand=float(np.mean(z)), upper_bound=upper, plugin_trace=plugin_trace,
        kappa=kappa, kappa_plugin=kappa_plugin,
        inflation=(kappa / kappa_plugin) if kappa_plugin > 0 else math.inf if kappa > 0 else 1.0,
        n_clipped=n_clipped, constant=constant, output_bound=r, n_trials=m, shrinkage=alpha,
        scaling=scaling, summands=summands, clip_probability=pi,
        randomized=randomized, roundoff=slack - 1.0, coordinate_exponent=chosen.exponent,
    )
    noise_std = np.sqrt(kappa * shape.a)
    noise_std.setflags(write=False)
    vecs = basis
    if isinstance(vecs, np.ndarray):  # a lazy basis (the Gram route) is read-only already
        vecs.setflags(write=False)
    if scale is not None:  # back to the outputs' units: x = D^{1/2} y
        centre_out = centre_out * scale
        scale.setflags(write=False)
    centre_out.setflags(write=False)
    bound, trace_bound = _kappa_bounds(top, kappa, d, scaling)
    return NoisePlan(
        rule="certified" if certified else "asymptotic-t", mi_budget=v,
        mi_bound=bound, linearised_mi_bound=trace_bound, mi_claim=v,
        confidence=conf, dim=d, basis=vecs, noise_std=noise_std,
        residual_std=float(math.sqrt(kappa * shape.a_c)) if shape.a_c is not None else 0.0,
        details={"certificate": cert.to_dict()},
        clip_center=None if radius is None else centre_out,
        clip_radius=_plan_radius(radius, kappa), certificate=cert, coordinate_scale=scale,
    )
