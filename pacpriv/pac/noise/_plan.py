"""The :class:`NoisePlan` result of :mod:`pacpriv.pac.noise._calibration` (private module).

Defined here to keep :mod:`.calibration` to the rules; import it from ``pacpriv.pac`` or
``pacpriv.pac.noise._calibration``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacpriv._display import Displayable, Summary
from pacpriv._numbers import format_bound
from pacpriv._random import as_generator

__all__ = ["NoisePlan", "per_record_noise_excess"]


def _block_rows(k: int) -> int:
    return max(1, 2**21 // max(k, 1))  # ~16 MiB of float64 per block


def _matvec(basis: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``basis @ x`` in float64 without upcasting a float32 basis as a whole.

    A lazy basis (:class:`~pacpriv.pac.spectrum._eigenbasis.LazyEigenbasis`) applies itself.
    """
    if hasattr(basis, "matvec"):
        return basis.matvec(x)
    out = np.empty(basis.shape[0])
    step = _block_rows(basis.shape[1])
    for s in range(0, basis.shape[0], step):
        out[s : s + step] = np.asarray(basis[s : s + step], dtype=np.float64) @ x
    return out


def _rmatvec(basis: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``basis.T @ z`` in float64, by row blocks (a lazy basis applies itself)."""
    if hasattr(basis, "rmatvec"):
        return basis.rmatvec(z)
    out = np.zeros(basis.shape[1])
    step = _block_rows(basis.shape[1])
    for s in range(0, basis.shape[0], step):
        out += np.asarray(basis[s : s + step], dtype=np.float64).T @ z[s : s + step]
    return out


@dataclass(frozen=True, eq=False)
class NoisePlan(Displayable):
    """Gaussian noise ``B ~ N(0, Σ_B)`` calibrated to a mutual-information budget.

    ``Σ_B = W diag(noise_std²) W^T + residual_std² (I − W W^T)`` for ``W = basis``, or
    ``Σ_B = diag(noise_std²)`` on the coordinate axes when ``basis`` is None (variance-only and
    isotropic rules); with a ``coordinate_scale`` ``s``, ``Σ_B = S Σ_y S`` (``S = diag(s)``,
    ``Σ_y`` the form above): the noise ``B = s ⊙ B_y`` of a plan made for the outputs divided
    by ``s`` coordinate-wise.

    Attributes
    ----------
    rule : str
        One of :data:`RULES`.
    mi_budget : float
        Budget ``v`` in nats.
    mi_bound : float
        Certified ``½ ln det(I + Σ Σ_B⁻¹)`` (nats) on the *estimated* ``Σ``; ``<= mi_budget``.
        (:func:`calibrate_variance_only`, which sees no eigenvectors, reports the trace bound,
        an upper bound of it.)
    linearised_mi_bound : float
        ``½ tr(Σ_B⁻¹ Σ)`` (nats), ``>= mi_bound``; the square-root and variance-only rules make
        it equal to ``mi_budget``.
    mi_claim : float
        The MI bound the plan claims for the *true* ``Σ``: ``mi_budget`` for the plug-in rules
        (exact for the estimated ``Σ`` only), ``mi_budget + beta`` for Algorithm 1.
    confidence : float or None
        Algorithm 1 only: probability ``>=`` which ``mi_claim`` holds according to the
        conservative matrix-Bernstein count of :mod:`.noise._confidence` (1 for a known Σ).
    dim : int
        Output dimension ``d``.
    basis : ndarray or LazyEigenbasis of shape (d, k), or None
        Orthonormal noise directions (the spectrum's eigenvectors, not copied; a lazy basis is
        applied by one pass over the trial outputs per product), or None.
    noise_std : ndarray of shape (k,) or (d,)
        Noise **standard deviation** along each basis column (or each coordinate axis).
    residual_std : float
        Noise standard deviation in every direction orthogonal to ``basis`` (0 if none).
    details : dict
        Rule-specific diagnostics (JSON-serialisable), e.g. Algorithm 1's branch and ``j0``.
    clip_center : ndarray of shape (d,) or None
        Centre ``c`` of the release clip (``"certified"`` rule); None: no clip.
    clip_radius : float or None
        The release is clipped to ``{y : ||Σ_B^{-1/2}(y − c)|| <= clip_radius}`` by a radial
        shrink towards ``c`` (radius 0: the release is ``c``). Post-processing of ``f``: the
        plan's guarantee is for the clipped mechanism.
    certificate : pacpriv.pac.noise.Certificate or None
        How a ``"certified"``/``"asymptotic-t"`` plan was certified.
    rule_spec : NoiseRule or None
        The rule object that made the plan (:mod:`pacpriv.pac.noise`); it decides
        :attr:`certified` and :attr:`label`.
    coordinate_scale : ndarray of shape (d,) or None
        Positive per-coordinate factors ``s`` of the noise (``Σ_B = S Σ_y S``); None: 1.
        The certified rule sets it when it rescales the shape's coordinates
        (``Certificate.coordinate_exponent > 0``); ``basis``, ``noise_std`` and
        ``residual_std`` then describe ``Σ_y``, in the units of the outputs divided by ``s``
        (:attr:`noise_std_per_coordinate` and :attr:`expected_noise_power` are in the outputs'
        units).
    """

    rule: str
    mi_budget: float
    mi_bound: float
    linearised_mi_bound: float
    mi_claim: float
    confidence: float | None
    dim: int
    basis: np.ndarray | None = field(repr=False)
    noise_std: np.ndarray = field(repr=False)
    residual_std: float
    details: dict = field(default_factory=dict)
    clip_center: np.ndarray | None = field(default=None, repr=False)
    clip_radius: float | None = None
    certificate: Any = field(default=None, repr=False)
    rule_spec: Any = field(default=None, repr=False)
    coordinate_scale: np.ndarray | None = field(default=None, repr=False)

    @property
    def certified(self) -> bool:
        """Whether ``mi_claim`` holds for the true covariance with probability ``confidence``."""
        if self.rule_spec is not None:
            return bool(self.rule_spec.is_certified(self))
        return bool(getattr(self.certificate, "certified", False))

    @property
    def label(self) -> str:
        """Headline wording: ``"certified (1−γ = 0.95)"`` or ``"estimated (plug-in)"``."""
        if self.rule_spec is not None:
            return str(self.rule_spec.label(self))
        cert = self.certificate  # a plan built outside a rule object (e.g. certify_noise)
        if getattr(cert, "certified", False):
            return f"certified (1−γ = {format_bound(self.confidence, side='down')})"
        if cert is not None:
            return f"estimated (asymptotic, 1−γ ≈ {self.confidence:g}, not certified)"
        return "estimated (plug-in)"

    @property
    def isotropic(self) -> bool:
        """Whether ``Σ_B`` is a multiple of the identity (one noise std, coordinate axes)."""
        std = np.asarray(self.noise_std)
        return self.basis is None and bool(std.size == 0 or np.all(std == std.flat[0]))

    def clip(self, value: np.ndarray) -> tuple[np.ndarray, bool]:
        """Apply the plan's release clip to one output ``(d,)``; returns ``(value, clipped)``."""
        if self.clip_center is None or self.clip_radius is None:
            return value, False
        y = value - self.clip_center
        if self.clip_radius == 0.0:
            return (np.array(self.clip_center, dtype=np.float64), bool(np.any(y != 0)))
        norm = math.sqrt(self._whitened_norm2(y))
        if norm <= self.clip_radius:
            return value, False
        return self.clip_center + y * (self.clip_radius / norm), True

    def _whitened_norm2(self, y: np.ndarray) -> float:
        """``yᵀ Σ_B⁻¹ y`` (all noise variances are positive when a clip radius is set)."""
        if self.coordinate_scale is not None:
            y = y / self.coordinate_scale
        if self.basis is None:
            return float(np.sum((y / self.noise_std) ** 2))
        coef = _rmatvec(self.basis, y)
        out = float(np.sum((coef / self.noise_std) ** 2))
        if self.n_complement > 0:
            resid = y - _matvec(self.basis, coef)
            out += float(np.sum(resid**2)) / self.residual_variance
        return out

    @functools.cached_property
    def noise_std_per_coordinate(self) -> np.ndarray:
        """The release's error bar: the noise standard deviation of each output coordinate,
        ``sqrt(diag(Σ_B))``, shape ``(d,)``, float64, in the output's units.

        Coordinate ``i`` of the release ``f(X) + B`` is off from ``f(X)`` by ``B_i ~ N(0,
        σ_i²)`` with ``σ_i²`` the ``i``-th diagonal entry of ``Σ_B``: on the coordinate axes
        ``noise_std[i]²``; in the eigenbasis ``Σ_j W_ij² noise_std_j² + residual_std²
        (1 − Σ_j W_ij²)``, computed from the rows of ``W`` (read in blocks; a lazy basis forms
        them block by block). Before any clip of the release (certified rule), which only
        moves it toward the clip centre.

        ``Σ_B`` is calibrated from the spread of ``f`` over random subsets of the pool: it is a
        statistic of the pool, not of the secret subset, so under the PAC threat model (the
        adversary knows the pool; Xiao & Devadas, CRYPTO 2023, Def. 1, Thm 3) it reveals
        nothing about membership. If the pool itself is confidential it does reveal the pool's
        spread (for a mean, the scale of an outlier's value).
        """
        d = self.dim
        std = np.asarray(self.noise_std, dtype=np.float64)
        if self.basis is None:
            out = np.broadcast_to(std, (d,)).astype(np.float64, copy=True)
        else:
            var = std**2
            r2 = float(self.residual_std) ** 2
            out = np.empty(d)
            step = _block_rows(self.basis.shape[1])
            for s in range(0, d, step):
                rows = np.asarray(self.basis[s : s + step], dtype=np.float64)
                w2 = rows**2
                diag = w2 @ var
                if r2 > 0:
                    diag += r2 * np.clip(1.0 - w2.sum(axis=1), 0.0, 1.0)
                out[s : s + rows.shape[0]] = np.sqrt(np.maximum(diag, 0.0))
        if self.coordinate_scale is not None:
            out = out * self.coordinate_scale
        out.setflags(write=False)
        return out

    @property
    def noise_variance(self) -> np.ndarray:
        """Noise **variances** ``noise_std²`` (shape of ``noise_std``)."""
        return self.noise_std**2

    @property
    def residual_variance(self) -> float:
        """``residual_std²``."""
        return self.residual_std**2

    @property
    def n_complement(self) -> int:
        """Number of directions orthogonal to ``basis`` (``d − k``; 0 when ``basis`` is None)."""
        return 0 if self.basis is None else self.dim - self.basis.shape[1]

    @property
    def expected_noise_power(self) -> float:
        """``E||B||² = trace(Σ_B)``."""
        if self.coordinate_scale is not None:
            return float(np.sum(self.noise_std_per_coordinate**2))
        return float(np.sum(self.noise_variance)) + self.n_complement * self.residual_variance

    def sample(self, rng=None) -> np.ndarray:
        """Draw one noise vector ``B`` of shape ``(d,)`` (float64).

        Parameters
        ----------
        rng : None, int, SeedSequence or Generator
            ``None`` draws fresh OS entropy (SPEC 7).
        """
        gen = as_generator(rng)
        out = self._sample_unscaled(gen)
        return out if self.coordinate_scale is None else out * self.coordinate_scale

    def _sample_unscaled(self, gen: np.random.Generator) -> np.ndarray:
        """``B_y ~ N(0, Σ_y)`` (``Σ_B`` before the coordinate scale)."""
        if self.basis is None:
            return self.noise_std * gen.standard_normal(self.dim)
        coef = self.noise_std * gen.standard_normal(self.basis.shape[1])
        if not (self.residual_std > 0 and self.n_complement > 0):
            return _matvec(self.basis, coef)
        # W c + r (I − W Wᵀ) z = W (c − r Wᵀz) + r z: two products with W, not three
        z = gen.standard_normal(self.dim)
        coef -= self.residual_std * _rmatvec(self.basis, z)
        return _matvec(self.basis, coef) + self.residual_std * z

    def summary(self) -> Summary:
        """Rows shown by ``str(plan)`` and in Jupyter (MI bound and required noise rounded up:
        the ``"risk"`` rounding)."""
        return Summary(f"NoisePlan ({self.rule}; {self.label})", [
            ("MI budget v (nats)", self.mi_budget, "risk"),
            ("MI bound (nats)", self.mi_bound, "risk"),
            ("output dimension d", self.dim, "plain"),
            ("E||B||^2", self.expected_noise_power, "risk"),
            ("largest noise std", float(np.max(self.noise_std)) if self.noise_std.size else None,
             "risk"),
            ("smallest noise std", float(np.min(self.noise_std)) if self.noise_std.size else None,
             "risk"),
            ("release clipped to an ellipsoid", self.clip_radius is not None, "plain"),
        ])

    def to_dict(self) -> dict:
        """JSON-serialisable summary (no length-``d`` arrays)."""
        std = self.noise_std
        return {
            "rule": self.rule,
            "mi_budget": self.mi_budget,
            "mi_bound": self.mi_bound,
            "linearised_mi_bound": self.linearised_mi_bound,
            "mi_claim": self.mi_claim,
            "confidence": self.confidence,
            "dim": self.dim,
            "basis": "coordinate" if self.basis is None else (
                "eigenvectors" if self.coordinate_scale is None
                else "eigenvectors of the rescaled outputs"),
            "n_directions": int(std.shape[0]),
            "noise_std_max": float(np.max(std)) if std.size else 0.0,
            "noise_std_min": float(np.min(std)) if std.size else 0.0,
            "residual_std": self.residual_std,
            "expected_noise_power": self.expected_noise_power,
            "details": dict(self.details),
            "certified": self.certified,
            "label": self.label,
            "clipped_release": self.clip_radius is not None,
        }


def per_record_noise_excess(per_record: NoisePlan, whole_subset: NoisePlan, *,
                            ratios: bool = True) -> str | None:
    """Warning text when a per-record plan adds more noise than the whole-subset plan.

    With independent memberships the whole-subset MI bounds every record's MI (chain rule:
    ``Σ_i I(x_i; Y) <= I(X; Y)``), so the whole-subset plan at the same accuracy target already
    gives the per-record guarantee; a per-record plan that needs *more* noise (an outlier can
    make one record's certified exposure dominate) should not be chosen over it. Compared: the
    noise power ``E||B||² = tr Σ_B`` and every coordinate's noise std (the error bars).

    Parameters
    ----------
    per_record, whole_subset : NoisePlan
        The per-record plan (:func:`pacpriv.pac.calibrate_per_record`) and the whole-subset
        plan (:func:`pacpriv.pac.run_pac`) for the same mechanism, pool and accuracy target.
    ratios : bool, default True
        Include the noise-power ratio and the count of coordinates (functions of the pool's
        spread). ``False`` for a pool whose statistics are not shown: the sentence says only
        which plan needs more noise.

    Returns
    -------
    str or None
        None when the per-record plan adds no more noise (in power and in every coordinate);
        else one sentence with the ratios only (never an absolute noise scale, a pool
        statistic), for a warning.

    Raises
    ------
    ValueError
        If the plans have different output dimensions.
    """
    if per_record.dim != whole_subset.dim:
        raise ValueError(f"the plans have different output dimensions: {per_record.dim} "
                         f"(per-record) and {whole_subset.dim} (whole subset).")
    power_pr, power_ws = per_record.expected_noise_power, whole_subset.expected_noise_power
    bar_pr = per_record.noise_std_per_coordinate
    bar_ws = whole_subset.noise_std_per_coordinate
    more = int(np.count_nonzero(bar_pr > bar_ws * (1 + 1e-12)))
    if not (power_pr > power_ws * (1 + 1e-12) or more):
        return None
    ratio = power_pr / power_ws if power_ws > 0 else math.inf
    if ratios:
        coords = (f"a larger noise std in {more} of {per_record.dim} coordinates"
                  if more else "no coordinate with a larger noise std")
        more_power = f": {format_bound(ratio, 3, side='down')}x its noise power E||B||^2, and "
        less_power = f" ({format_bound(ratio, 3, side='up')}x its E||B||^2) but "
    else:  # the pool's statistics are not shown: no ratio, no count
        coords = ("a larger noise std in some coordinates" if more
                  else "no coordinate with a larger noise std")
        more_power, less_power = " (more noise power E||B||^2), and ", " but "
    if power_pr > power_ws * (1 + 1e-12):
        return (f"the per-record plan needs more noise than the whole-subset plan for the same "
                f"target{more_power}{coords} (an outlier's exposure dominates). With "
                "independent memberships the whole-subset plan already bounds every record "
                "(MI chain rule): release with it (pacpriv pac run) instead.")
    return (f"the per-record plan has less noise power than the whole-subset plan for the same "
            f"target{less_power}{coords} (an "
            "outlier's exposure dominates there); compare their "
            "utility on the coordinates you need before releasing with either.")
