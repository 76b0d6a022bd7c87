"""A (1−γ) certificate for PAC noise from finitely many trials.

Sources: Xiao & Devadas 2023 (Thm 3, the trace bound); Maurer & Pontil 2009 (Thm 4).

The plug-in rules of :mod:`pacpriv.pac.noise._calibration` meet the budget for the *estimated*
covariance only.
:func:`certify_noise` meets it for the true covariance of the released (clipped) mechanism with
probability ``>= 1 − γ`` over the simulation:

1. **Shape.** The first ``⌈shape_fraction · m⌉`` trials fix the noise shape ``A`` by the
   square-root rule on their sample spectrum, ``A = V diag(a) Vᵀ + a_c (I − V Vᵀ)`` with
   ``a_j = max(sqrt(λ̂_j), η·sqrt(λ̂_max))`` (``η = SHAPE_FLOOR``), so ``A`` is positive definite:
   no direction ever gets zero noise. They also fix the clip centre ``c`` (their mean).
2. **Clip.** Every output is clipped to the ellipsoid ``{c + A^{1/2} u : ||u|| <= ρ}`` (a radial
   shrink of ``f − c``). Clipping is post-processing of ``f``: the certificate is for the
   clipped mechanism, and :func:`pacpriv.pac.release.privatize` applies the same map.
3. **Certificate.** The other trials form disjoint pairs ``(f₁, f₂)``;
   ``Z = ½ (f₁ − f₂)ᵀ A⁻¹ (f₁ − f₂)`` has ``E[Z] = tr(A⁻¹ Σ)`` (no mean estimate needed) and
   ``0 <= Z <= 2ρ²``. The empirical-Bernstein bound of Maurer & Pontil (2009, Thm 4) gives
   ``U >= E[Z]`` with probability ``>= 1 − γ``.
4. **Scale.** ``Σ_B = κ A`` with ``κ = max(U, T̂)/(2v)`` (``T̂`` the plug-in ``tr(A⁻¹Σ̂)`` on all
   trials, so the certificate never uses less noise than the plug-in); then
   ``MI <= ½ ln det(I + ΣΣ_B⁻¹) <= ½ tr(Σ_B⁻¹Σ) = E[Z]/(2κ) <= v`` with probability ``>= 1 − γ``.

Without any bound on the outputs, ``method="student-t"`` replaces step 3 by a one-sided
Student-t bound (no clipping): an asymptotic approximation, never labelled certified.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 3.
.. [2] A. Maurer, M. Pontil. Empirical Bernstein bounds and sample variance penalization.
   COLT 2009, Thm 4.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from pacpriv._validation import check_real
from pacpriv.pac.noise._concentration import (
    _bet_from_shape,
    _check_confidence,
    betting_upper,
    empirical_bernstein_upper,
    student_t_upper,
)
from pacpriv.pac.noise._plan import NoisePlan

__all__ = ["METHODS", "SHAPE_FLOOR", "Certificate", "certify_noise"]

#: Upper-bound methods: rigorous for clipped outputs, and the labelled asymptotic fallback.
METHODS = ("betting", "empirical-bernstein", "student-t")

#: Relative floor ``η`` of the shape's square-root eigenvalues: ``a_j >= η·sqrt(λ_max)``. It
#: raises noise power by at most a fraction ``d·η`` of the square-root rule's.
SHAPE_FLOOR = 1e-6

_MIN_PAIRS = 2


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
        Trials that fixed the noise shape and the clip centre.
    n_pairs : int
        Disjoint pairs of the other trials used by the upper bound.
    clip_radius : float or None
        ``ρ`` in the whitened space of the shape (None: no clipping).
    summand_bound : float or None
        ``b = 2ρ²``, the range of the summands (None for Student-t).
    mean_summand, upper_bound : float
        ``Z̄`` and ``U`` (estimates of ``tr(A⁻¹Σ)``; ``A`` normalised to ``max a_j = 1``).
    plugin_trace : float
        ``T̂ = tr(A⁻¹Σ̂)`` on all (clipped) trials.
    kappa, kappa_plugin : float
        Noise scale ``Σ_B = κA`` of the plan and of the plug-in (``T̂/(2v)``).
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
        Independent trials the certificate used (shape, pairs and an unpaired last one).
    """

    method: str
    certified: bool
    confidence: float
    n_shape: int
    n_pairs: int
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

    def to_dict(self) -> dict:
        """JSON-serialisable copy."""
        return asdict(self)


def _shape(outputs: np.ndarray):
    """Square-root-rule shape from the shape trials: ``(V, a, a_c, λ̂)``, normalised ``max a = 1``.

    ``V`` (d, k) holds the right singular vectors of the centred outputs (all ``d`` when
    ``k = d``); ``a_c`` is the shape in the complement of ``span(V)`` (None when ``k = d``).
    Explored directions get ``max(sqrt(λ̂_j), η sqrt(λ̂_max))``; unexplored ones (beyond the
    ``n − 1`` that ``n`` trials span) the smallest explored value.
    """
    n, d = outputs.shape
    centred = outputs - outputs.mean(axis=0)
    _, sing, vt = np.linalg.svd(centred, full_matrices=False)
    lam = sing**2 / max(n - 1, 1)
    vecs = vt.T
    k = vecs.shape[1]
    root = np.sqrt(lam)
    top = float(root.max()) if root.size else 0.0
    if top == 0.0 or not math.isfinite(top):
        a = np.ones(k)
        a_c = 1.0 if k < d else None
        return vecs, a, a_c, lam
    floor = SHAPE_FLOOR * top
    a = np.maximum(root, floor) / top
    # n centred trials span at most n − 1 directions: the others (SVD directions past that rank
    # and the complement of span(V)) were not explored, so their variance is unknown and they
    # get the smallest explored shape (the certificate then covers whatever they carry)
    explored = min(n - 1, d)
    unexplored = float(a[:explored].min())
    a[explored:] = unexplored
    a_c = unexplored if k < d else None
    return vecs, a, a_c, lam


def _whiten(x: np.ndarray, centre: np.ndarray, vecs, a, a_c) -> np.ndarray:
    """``A^{-1/2}(x − c)`` norms²: rows of ``x`` (n, d) → (n,)."""
    y = x - centre
    coef = y @ vecs
    out = np.sum(coef**2 / a, axis=1)
    if a_c is not None:
        resid = y - coef @ vecs.T
        out = out + np.sum(resid**2, axis=1) / a_c
    return out


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


def _plan_radius(radius: float | None, kappa: float) -> float | None:
    """The clip radius in the plan's ``Σ_B``-whitened units (``Σ_B = κA``): ``ρ/sqrt(κ)``."""
    if radius is None:
        return None
    return 0.0 if radius == 0.0 or kappa == 0.0 else radius / math.sqrt(kappa)


def certify_noise(
    outputs,
    *,
    mi_budget: float,
    confidence: float = 0.95,
    shape_fraction: float = 0.5,
    output_bound: float | None = None,
    clip_margin: float = 1.25,
    method: str = "betting",
) -> NoisePlan:
    """Gaussian noise with ``MI <= mi_budget`` certified with probability ``>= confidence``.

    Parameters
    ----------
    outputs : array_like of shape (n_trials, d)
        Mechanism outputs on **independent** random subsets, each drawn like the secret
        (real, finite), in trial order; ``n_trials >= 6`` (two shape trials and two pairs at
        least). Of complementary pairs pass one member each (``run_pac`` does). The array is
        held in float64 memory (``n_trials · d · 8`` bytes).
    mi_budget : float
        Budget ``v > 0`` in nats.
    confidence : float, default 0.95
        ``1 − γ`` in ``(0, 1)``.
    shape_fraction : float, default 0.5
        Fraction of the trials that fix the shape and the clip centre, in ``(0, 1)``.
    output_bound : float, optional
        Public bound ``r >= ||f(X)||₂`` (an assumption; :func:`~pacpriv.pac.job.run_pac`
        refuses one that a simulated output breaks). Gives the clip radius
        ``(r + ||c||)/sqrt(min a)`` when it is smaller than the empirical one, and a certified
        minimum noise when the outputs never varied.
    clip_margin : float, default 1.25
        Clip radius ``ρ = clip_margin · max`` whitened radius of the shape trials (``>= 1``).
    method : {"betting", "empirical-bernstein", "student-t"}, default "betting"
        Upper bound on ``E[Z]``: :func:`betting_upper` (bet chosen from the shape trials) or
        :func:`empirical_bernstein_upper` (both certified); ``"student-t"``: no clipping,
        asymptotic bound, labelled *not certified*.

    Returns
    -------
    NoisePlan
        ``rule="certified"`` (or ``"asymptotic-t"``), ``confidence = 1 − γ``, ``mi_bound`` the
        certified trace bound ``U/(2κ) <= v``; ``clip_center``/``clip_radius`` set the clip that
        :func:`~pacpriv.pac.release.privatize` applies; ``certificate`` holds the
        :class:`Certificate`.

    Raises
    ------
    TypeError, ValueError
        Bad ``outputs`` (not 2-D, not finite, fewer than 6 rows) or out-of-range arguments.

    Notes
    -----
    Validity needs only that the trials are independent draws of the (clipped) output under
    the sampler and that the shape and clip are fixed before the certificate trials are used;
    it does not assume Gaussian outputs. The certificate bounds the *trace* bound, which the
    square-root rule meets with equality, so it loses nothing against that rule's target.
    Outputs that never varied (and no ``output_bound``): the clip radius is 0, the release is
    the seen value (constant, MI = 0 for the released map) and the report states
    :func:`constant_output_bound`.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 3.
    .. [2] Maurer & Pontil, COLT 2009, Thm 4.
    """
    x = np.asarray(outputs)
    if x.dtype == bool or not (np.issubdtype(x.dtype, np.floating)
                               or np.issubdtype(x.dtype, np.integer)):
        raise TypeError(f"`outputs` must hold real numbers; got dtype {x.dtype}.")
    x = x.astype(np.float64)
    if x.ndim != 2 or x.shape[1] < 1:
        raise ValueError(f"`outputs` must be 2-D (n_trials, d) with d >= 1; got shape {x.shape}.")
    if not np.all(np.isfinite(x)):
        raise ValueError("`outputs` must be finite; found NaN or inf.")
    v = check_real(mi_budget, "mi_budget", low=0.0, low_inclusive=False)
    conf = _check_confidence(confidence)
    frac = check_real(shape_fraction, "shape_fraction", low=0.0, high=1.0, low_inclusive=False,
                      high_inclusive=False)
    margin = check_real(clip_margin, "clip_margin", low=1.0)
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}; got {method!r}.")
    r = None if output_bound is None else check_real(output_bound, "output_bound", low=0.0,
                                                     low_inclusive=False)
    m, d = x.shape
    n_shape = min(max(2, math.ceil(frac * m)), m - 2 * _MIN_PAIRS)
    if n_shape < 2:
        raise ValueError(f"`outputs` needs at least {2 + 2 * _MIN_PAIRS} trials (rows) for a "
                         f"certificate; got n_trials = {m}.")
    shape_x, cert_x = x[:n_shape], x[n_shape:]
    n_pairs = cert_x.shape[0] // 2
    vecs, a, a_c, _ = _shape(shape_x)
    centre = shape_x.mean(axis=0)
    constant = bool(np.all(x == x[0]))

    certified = method != "student-t"
    radius: float | None = None
    if certified:
        emp = float(np.sqrt(np.max(_whiten(shape_x, centre, vecs, a, a_c))))
        radius = margin * emp
        if r is not None:
            a_min = min(float(a.min()), a_c if a_c is not None else math.inf)
            from_bound = (r + float(np.linalg.norm(centre))) / math.sqrt(a_min)
            radius = from_bound if emp == 0.0 else min(radius, from_bound)
    n2_all = _whiten(x, centre, vecs, a, a_c)
    if radius is not None:
        x, clipped = _clip(x, centre, n2_all, radius)
        n_clipped = int(np.sum(clipped))
        cert_x = x[n_shape:]
    else:
        n_clipped = 0
    u = cert_x[: 2 * n_pairs]
    diff = u[0::2] - u[1::2]
    z = 0.5 * _whiten(diff, np.zeros(d), vecs, a, a_c)
    centred_all = x - x.mean(axis=0)
    plugin_trace = float(np.sum(_whiten(centred_all, np.zeros(d), vecs, a, a_c))) / (m - 1)
    if radius == 0.0:  # certified, and the clipped release is the constant c: MI = 0
        b, upper = 0.0, 0.0
    elif radius is not None:  # certified (a clip radius exactly when certified)
        b = 2.0 * radius * radius
        z = np.minimum(z, b)  # round-off only: |u1 − u2| <= 2ρ exactly
        if method == "betting":
            k = n_shape // 2
            sd = x[:2 * k]
            z_shape = np.minimum(0.5 * _whiten(sd[0::2] - sd[1::2], np.zeros(d), vecs, a, a_c), b)
            bet = _bet_from_shape(z_shape, n_pairs, b, 1.0 - conf)
            upper = betting_upper(z, bound=b, confidence=conf, bet=bet)
        else:
            upper = empirical_bernstein_upper(z, bound=b, confidence=conf)
    else:
        b = None
        upper = student_t_upper(z, confidence=conf)
    kappa_plugin = plugin_trace / (2.0 * v)
    kappa = max(upper, plugin_trace) / (2.0 * v)
    cert = Certificate(
        method=method, certified=certified, confidence=conf, n_shape=n_shape, n_pairs=n_pairs,
        clip_radius=radius, summand_bound=b, mean_summand=float(np.mean(z)), upper_bound=upper,
        plugin_trace=plugin_trace, kappa=kappa, kappa_plugin=kappa_plugin,
        inflation=(kappa / kappa_plugin) if kappa_plugin > 0 else math.inf if kappa > 0 else 1.0,
        n_clipped=n_clipped, constant=constant, output_bound=r, n_trials=m,
    )
    noise_std = np.sqrt(kappa * a)
    noise_std.setflags(write=False)
    vecs.setflags(write=False)
    centre.setflags(write=False)
    bound = 0.0 if kappa == 0 else max(upper, plugin_trace) / (2.0 * kappa)
    return NoisePlan(
        rule="certified" if certified else "asymptotic-t", mi_budget=v,
        mi_bound=bound, linearised_mi_bound=bound, mi_claim=v, confidence=conf, dim=d,
        basis=vecs, noise_std=noise_std,
        residual_std=float(math.sqrt(kappa * a_c)) if a_c is not None else 0.0,
        details={"certificate": cert.to_dict()},
        clip_center=None if radius is None else centre,
        clip_radius=_plan_radius(radius, kappa), certificate=cert,
    )
