"""Certified noise power against the oracle, and coverage, on mechanisms with a known Σ (issue 26).

Mechanisms (outputs simulated directly, not through the engine):

* ``gauss-<spectrum>``: Gaussian outputs with covariance ``Q diag(λ) Qᵀ`` (``Q`` a random
  rotation), spectra ``flat`` (``λ_j = 1``), ``decay`` (``λ_j = 1/j²``) and ``dominant``
  (``λ_1 = 1``, the others ``0.01``);
* ``psum``: linear sums ``f(S) = Σ_{i∈S} x_i`` over a Poisson-½ subset of a fixed pool of 200
  records with feature scales ``1/sqrt(j)``: ``Σ = q(1 − q) Σ_i x_i x_iᵀ`` exactly (the outputs
  are sums of Bernoulli-weighted records, not Gaussian);
* ``psum-heavy``: the same with 4 records 8x larger (skewed, heavier-tailed sums).

For each cell (mechanism, d ∈ {1, 2, 5, 10, 20}, n_trials ∈ {64, 128, 256, 1024}) every
repetition certifies a plan (``certify_noise`` with its defaults) from fresh outputs and
computes

* ``ratio``: ``E||B||²`` over the oracle ``(Σ_j sqrt(λ_j))²/(2v)``, the square-root rule with
  the trace bound on the true Σ (the issue's definition);
* ``same-rule``: the ratio against the same rule on the true Σ (square-root shape, log-det
  scaling ``κ = tr(√Σ)/(d(e^{2v/d} − 1))``): what estimation from finitely many trials costs;
* ``P(MI>v)``: the fraction of runs whose true ``½ ln det(I + Σ_rel Σ_B⁻¹)`` exceeds ``v``,
  with ``Σ_rel`` the covariance of the released (clipped) output: the known Σ plus a Monte
  Carlo estimate of the clip's correction (only clipped draws contribute; exact for d = 1
  Gaussian), with the Clopper–Pearson 95% interval. It must be consistent with ``<= γ``:
  a cell fails when its one-sided Clopper–Pearson lower limit at ``1 − 0.05/(number of
  cells)`` (Bonferroni) exceeds ``γ``. Ville's inequality is nearly tight for the many small
  steps of a long capital process, so rates approach ``γ`` as ``n_trials`` grows;
* ``clipped``: the fraction of fresh outputs the clip changes, and ``distortion``:
  ``E||g(f) − f||²`` (what the clip moves the release) over the oracle noise power.

Usage::

    python benchmarks/certificate.py                 # 200 repetitions per cell
    python benchmarks/certificate.py --reps 500      # the published coverage table
    python benchmarks/certificate.py --quick         # n_trials = 128 only, 60 repetitions
    python benchmarks/certificate.py --issue32       # certified/oracle and /floor vs d
                                                     # (d = 20, 200, 2,000; 256 trials; sums
                                                     # over 600 records; 100 seeds; coverage)
    python benchmarks/certificate.py --issue32 --baseline   # and the unscaled shape (α = 0)
                                                     # in the same run (before/after)
    python benchmarks/certificate.py --issue32 --structures # reference noise of candidate
                                                     # structures (true Σ, no certificate)

``--issue32`` prints, per ``d``, the median over seeds of the certified noise power over the
oracle ``(Σ sqrt λ)²/(2v)`` and over the ``T``-trial floor
``(Σ_{j<T} sqrt λ_j + sqrt((d − T + 1) Σ_{j>=T} λ_j))²/(2v)`` (docs/guide/sizes.md: what no
``T``-trial certificate beats when ``T`` is below the rank), the coverage ``P(MI > v)`` with
its Clopper–Pearson interval, the clipped fraction, and the load average. ``PCA-head/oracle``
is a reference, not a bound: the head along the sample principal directions of all ``T``
trials with their *true* variances (what estimating the head from ``T`` trials allows at
best, with no split and no confidence bound); ``exact charge/floor`` is the certified shape's
noise scaled to its exact trace charge ``½ tr(Σ_B⁻¹Σ) = v`` (the shape without its confidence
bound; the median over seeds). ``--structures`` prints such references for
the candidate structures of :data:`STRUCTURES` (a residual-variance ``D``, the true
eigenvectors as head, the shape split), the measurements behind the choice of structure.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from pacpriv._stats import clopper_pearson
from pacpriv.pac.noise import certify_noise

DIMS = (1, 2, 5, 10, 20)
TRIALS = (64, 128, 256, 1024)
SPECTRA = ("flat", "decay", "dominant")


@dataclass
class Mechanism:
    """A mechanism with known output law: ``draw(rng, n) -> (n, d)``, mean and covariance."""

    name: str
    cov: np.ndarray
    mean: np.ndarray
    pool: np.ndarray | None = None
    q: float = 0.5
    _root: np.ndarray | None = field(default=None, repr=False)

    @property
    def dim(self) -> int:
        return int(self.cov.shape[0])

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.pool is not None:
            return (rng.random((n, self.pool.shape[0])) < self.q).astype(np.float64) @ self.pool
        if self._root is None:
            lam, vec = np.linalg.eigh(self.cov)
            self._root = vec * np.sqrt(np.clip(lam, 0, None))
        return self.mean + rng.standard_normal((n, self.dim)) @ self._root.T

    def eigenvalues(self) -> np.ndarray:
        """The true output covariance's eigenvalues, largest first (negative round-off 0)."""
        return np.clip(np.linalg.eigvalsh(self.cov), 0, None)[::-1]

    def oracle(self, v: float) -> tuple[float, float]:
        """Oracle noise power: trace rule, and the same rule (log-det scaling)."""
        root = float(np.sum(np.sqrt(self.eigenvalues())))
        d = self.dim
        return root**2 / (2 * v), root**2 / (d * math.expm1(2 * v / d))

    def factor(self) -> np.ndarray | None:
        """``L`` with ``Σ = LᵀL`` (``q(1 − q)``-scaled pool) for a Poisson sum, else None."""
        return None if self.pool is None else math.sqrt(self.q * (1 - self.q)) * self.pool


def trial_floor(eigenvalues: np.ndarray, n_trials: int, v: float) -> float:
    """The ``T``-trial floor of the noise power (docs/guide/sizes.md): the top ``k = T − 1``
    directions known exactly, the rest one isotropic level sized by its trace (trace rule)."""
    lam = np.sort(np.clip(np.asarray(eigenvalues, dtype=np.float64), 0, None))[::-1]
    k = min(n_trials - 1, lam.size)
    head = float(np.sum(np.sqrt(lam[:k])))
    rest = math.sqrt((lam.size - k) * float(np.sum(lam[k:])))
    return (head + rest) ** 2 / (2 * v)


def spectrum(name: str, d: int) -> np.ndarray:
    j = np.arange(1, d + 1, dtype=np.float64)
    if name == "flat":
        return np.ones(d)
    if name == "decay":
        return 1.0 / j**2
    lam = np.full(d, 0.01)
    lam[0] = 1.0
    return lam


def gaussian(name: str, d: int, seed: int = 0) -> Mechanism:
    rng = np.random.default_rng([seed, d])
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    cov = (q * spectrum(name, d)) @ q.T
    return Mechanism(f"gauss-{name}", (cov + cov.T) / 2, 3.0 * rng.standard_normal(d))


def poisson_sum(d: int, *, heavy: bool = False, n_records: int = 200, q: float = 0.5,
                seed: int = 12) -> Mechanism:
    rng = np.random.default_rng([seed, d])
    x = rng.standard_normal((n_records, d)) / np.sqrt(np.arange(1, d + 1))
    if heavy:
        x[:4] *= 8.0
    cov = q * (1 - q) * x.T @ x
    return Mechanism("psum-heavy" if heavy else "psum", cov, q * x.sum(axis=0), pool=x, q=q)


def mechanisms(dims=DIMS) -> list[Mechanism]:
    out = []
    for d in dims:
        for s in SPECTRA if d > 1 else ("flat",):
            out.append(gaussian(s, d))
        out.append(poisson_sum(d))
        if d in (1, 5):
            out.append(poisson_sum(d, heavy=True))
    return out


def _frame(plan):
    """Orthonormal ``Q`` (d, d) and the noise variances along its columns."""
    w = np.asarray(plan.basis, dtype=np.float64)
    var = np.asarray(plan.noise_variance, dtype=np.float64)
    d = plan.dim
    if w.shape[1] < d:
        u, _, _ = np.linalg.svd(np.eye(d) - w @ w.T)
        w = np.hstack([w, u[:, : d - w.shape[1]]])
        var = np.concatenate([var, np.full(d - plan.basis.shape[1], plan.residual_variance)])
    return w, var


def in_rescaled(mech: Mechanism, plan, sample: np.ndarray):
    """``(mech, plan, sample)`` in the plan's rescaled coordinates ``y = f / s`` when it has a
    ``coordinate_scale`` ``s`` (``Σ_B = S Σ_y S``): the law of ``y``, the plan for ``y`` (no
    scale, clip centre ``c / s``) and the sample divided by ``s``. MI is invariant under this
    public bijection, so the true MI is computed there. Unchanged when ``s`` is None."""
    s = plan.coordinate_scale
    if s is None:
        return mech, plan, sample
    law = Mechanism(mech.name, mech.cov / np.outer(s, s), mech.mean / s,
                    None if mech.pool is None else mech.pool / s, mech.q)
    centre = None if plan.clip_center is None else plan.clip_center / s
    inner = dataclasses.replace(plan, coordinate_scale=None, clip_center=centre)
    return law, inner, sample / s


def released(mech: Mechanism, plan, sample: np.ndarray,
             scale: np.ndarray | None = None) -> tuple[np.ndarray, float, float]:
    """Covariance of the clipped output, the clipped fraction and ``E||g(f) − f||²``.

    ``sample``: fresh draws of ``f`` (one Monte-Carlo sample per cell, shared by its plans);
    only the clip's correction to the known Σ is estimated from it. ``scale``: the
    coordinates are ``f / scale`` (:func:`in_rescaled`); the distortion is in ``f``'s units.
    """
    c = np.asarray(plan.clip_center)
    rho = float(plan.clip_radius)
    if mech.dim == 1 and mech.pool is None:
        _, var = _frame(plan)  # exact: a normal clipped to [c − h, c + h]
        s = math.sqrt(float(mech.cov[0, 0]))
        h = rho * math.sqrt(float(var[0]))
        lo, hi = (c[0] - h - mech.mean[0]) / s, (c[0] + h - mech.mean[0]) / s
        p_lo, p_hi = stats.norm.cdf(lo), stats.norm.sf(hi)
        pdf_lo, pdf_hi = stats.norm.pdf(lo), stats.norm.pdf(hi)
        mid = stats.norm.cdf(hi) - stats.norm.cdf(lo)
        e1 = (pdf_lo - pdf_hi) + lo * p_lo + hi * p_hi
        e2 = (mid - hi * pdf_hi + lo * pdf_lo) + lo * lo * p_lo + hi * hi * p_hi
        tail = (_tail2(hi) + _tail2(-lo)) * s * s
        return np.array([[s * s * (e2 - e1 * e1)]]), float(p_lo + p_hi), float(tail)
    f = sample
    n_mc = f.shape[0]
    n2 = _whitened2(f - c, plan)
    out = n2 > rho * rho
    if not np.any(out):
        return mech.cov, 0.0, 0.0
    fo = f[out]
    h = (fo - c) * (rho / np.sqrt(n2[out]) - 1.0)[:, None]
    eh = h.sum(axis=0) / n_mc
    efh = (fo - mech.mean).T @ h / n_mc
    cov = mech.cov + efh + efh.T + h.T @ h / n_mc - np.outer(eh, eh)
    moved = h if scale is None else h * scale
    return cov, float(out.mean()), float(np.sum(moved * moved) / n_mc)


def _whitened2(y: np.ndarray, plan) -> np.ndarray:
    """``yᵀ Σ_B⁻¹ y`` per row, from the plan's thin basis (no ``d × d`` matrix)."""
    w = np.asarray(plan.basis, dtype=np.float64)
    coef = y @ w
    out = np.sum(coef**2 / np.asarray(plan.noise_variance, dtype=np.float64), axis=1)
    if w.shape[1] < plan.dim:
        rest = np.maximum(np.sum(y * y, axis=1) - np.sum(coef**2, axis=1), 0.0)
        out = out + rest / float(plan.residual_variance)
    return out


def _trace_charge(cov: np.ndarray, low: np.ndarray | None, plan) -> float:
    """``tr(Σ_B⁻¹ Σ)`` of the plan's noise: from ``Σ = lowᵀ low`` when given, else from the
    dense ``cov`` (thin basis ``V``, ``Σ_B⁻¹ = V diag(1/s) Vᵀ + (I − VVᵀ)/s_c``)."""
    if low is not None:
        return float(np.sum(_whitened2(low, plan)))
    w = np.asarray(plan.basis, dtype=np.float64)
    var = np.asarray(plan.noise_variance, dtype=np.float64)
    along = np.einsum("ij,ik,kj->j", w, cov, w)
    out = float(np.sum(along / var))
    if w.shape[1] < plan.dim:
        out += max(float(np.trace(cov)) - float(np.sum(along)), 0.0) / float(
            plan.residual_variance)
    return out


def _tail2(a: float) -> float:
    """``E[(Z − a)₊²]`` for a standard normal ``Z``."""
    return float((1 + a * a) * stats.norm.sf(a) - a * stats.norm.pdf(a))


def structure_power(low: np.ndarray, w: np.ndarray, dd: np.ndarray, v: float) -> float:
    """Noise power (trace rule, no split, no bound) of the certificate's structure with the
    **true** covariance ``Σ = lowᵀ low``: in ``y = D^{-1/2} x`` (``dd = diag(D)``, shape (d,)),
    a head along the orthonormal columns of ``w`` (d, k), each with its true variance
    ``λ'_j = w_jᵀΣ_y w_j`` and cost ``w_jᵀ D w_j``, and the rest one isotropic level sized by
    the true rescaled trace ``τ'`` outside the head:
    ``(Σ_j sqrt(λ'_j w_jᵀDw_j) + sqrt(τ' tr(D P_c)))² / (2v)`` (docs/guide/noise_high_d.md)."""
    low_y = low / np.sqrt(dd)
    total = float(np.sum(low_y * low_y))
    head = np.sum((low_y @ w) ** 2, axis=0)
    cost = (w * w).T @ dd
    rest = max(total - float(np.sum(head)), 0.0) * max(float(dd.sum() - cost.sum()), 0.0)
    return (float(np.sum(np.sqrt(head * cost))) + math.sqrt(rest)) ** 2 / (2 * v)


def sample_head(x: np.ndarray, dd: np.ndarray, k: int) -> np.ndarray:
    """The top ``k`` sample principal directions of the trials ``x`` (n, d) in ``y =
    D^{-1/2} x``: orthonormal columns, shape (d, k)."""
    y = x / np.sqrt(dd)
    _, _, vt = np.linalg.svd(y - y.mean(axis=0), full_matrices=False)
    return vt[:k].T


def residual_variances(low: np.ndarray, w: np.ndarray, dd: np.ndarray) -> np.ndarray:
    """True per-coordinate variances (in ``x``'s units, shape (d,)) of the outputs with the
    head ``w`` of ``y = D^{-1/2} x`` removed: ``r_j = D_j (Σ_y − P_h Σ_y P_h)_jj``, i.e. the
    diagonal of ``D^{1/2} P_c Σ_y P_c D^{1/2}``."""
    low_y = low / np.sqrt(dd)
    res = low_y - (low_y @ w) @ w.T
    return np.sum(res * res, axis=0) * dd


def pca_head_reference(mech: Mechanism, n_trials: int, v: float, seeds: int = 5,
                       seed: int = 0, alpha: float = 0.0) -> float:
    """Median over ``seeds`` draws of the noise power with the head along the sample principal
    directions of ``n_trials`` trials, each with its **true** variance, and the rest one
    isotropic level sized by its true trace: what a certificate whose head is estimated from
    all ``n_trials`` trials could reach at best (no split, no bound). Poisson sums only.

    ``alpha > 0``: the same in coordinates rescaled by ``D^{-1/2}``, ``D = diag(Σ)^α`` (true
    variances), noise ``D^{1/2} A_y D^{1/2}`` (:func:`structure_power`; the lead's measurement
    for issue 32, deliverable 4)."""
    low = mech.factor()
    if low is None:
        return math.nan
    dd = np.clip(np.sum(low * low, axis=0), 1e-300, None) ** alpha  # D (true variances)
    out = []
    for s in range(seeds):
        x = mech.draw(np.random.default_rng([seed, 3, s, mech.dim]), n_trials)
        w = sample_head(x, dd, min(n_trials - 1, mech.dim))
        out.append(structure_power(low, w, dd, v))
    return float(np.median(out))


#: Candidate structures of issue 32 deliverable 4 (``--structures``): the head's trials and
#: how ``D`` is set, ``D = diag(Σ)^a · r^b`` with ``r`` the residual variances
#: (:func:`residual_variances`, floored at 1/64 of their mean) outside the ``α = ½`` head.
STRUCTURES = {
    "PCA α=½": ("all", 0.5, 0.0),
    "PCA α=½, shape split": ("shape", 0.5, 0.0),
    "PCA D=r^½ (residual)": ("all", 0.0, 0.5),
    "PCA D=diag^¼ r^¼": ("all", 0.25, 0.25),
    "true eigvecs α=0": ("eig", 0.0, 0.0),
    "true eigvecs α=¼": ("eig", 0.25, 0.0),
}


def structure_references(mech: Mechanism, n_trials: int, v: float, seeds: int = 3,
                         seed: int = 0, shape_trials: int | None = None) -> dict[str, float]:
    """Median noise power over ``seeds`` draws of each of :data:`STRUCTURES` with the true
    covariance (no split unless named, no bound): the references behind the choice of
    structure. ``"eig"`` heads are the true top ``n_trials − 1`` eigenvectors of ``Σ_y`` (the
    floor's grant; with ``α = 0`` this is :func:`trial_floor`)."""
    low = mech.factor()
    assert low is not None, "Poisson sums only"
    var = np.clip(np.sum(low * low, axis=0), 1e-300, None)
    k = min(n_trials - 1, mech.dim)
    m_s = shape_trials or n_trials
    out: dict[str, list[float]] = {name: [] for name in STRUCTURES}
    for s in range(seeds):
        x = mech.draw(np.random.default_rng([seed, 3, s, mech.dim]), n_trials)
        half = np.sqrt(var)
        r = residual_variances(low, sample_head(x, half, k), half)
        r = np.maximum(r, float(np.mean(r)) / 64)
        for name, (head, a, b) in STRUCTURES.items():
            dd = var**a * r**b
            if head == "eig":
                low_y = low / np.sqrt(dd)
                _, vec = np.linalg.eigh(low_y.T @ low_y)
                w = vec[:, ::-1][:, :k]
            elif head == "shape":
                w = sample_head(x[:m_s], dd, min(m_s - 1, mech.dim))
            else:
                w = sample_head(x, dd, k)
            out[name].append(structure_power(low, w, dd, v))
    return {name: float(np.median(p)) for name, p in out.items()}


def true_mi_low_rank(factor: np.ndarray, plan) -> float:
    """``½ ln det(I + Σ Σ_B⁻¹)`` for ``Σ = LᵀL`` (``L`` n × d) without a ``d × d`` matrix:
    ``det(I_d + Σ Σ_B⁻¹) = det(I_n + L Σ_B⁻¹ Lᵀ)`` (Sylvester), ``Σ_B⁻¹ = V diag(1/s − 1/s_c)
    Vᵀ + I/s_c``."""
    w = np.asarray(plan.basis, dtype=np.float64)
    var = np.asarray(plan.noise_variance, dtype=np.float64)
    resid = float(plan.residual_variance) if w.shape[1] < plan.dim else math.inf
    lw = factor @ w
    inner = (factor @ factor.T) / resid + (lw * (1.0 / var - 1.0 / resid)) @ lw.T
    ev = np.linalg.eigvalsh((inner + inner.T) / 2)
    return 0.5 * float(np.sum(np.log1p(np.clip(ev, 0, None))))


def true_mi(cov: np.ndarray, plan) -> float:
    q, var = _frame(plan)
    s = 1.0 / np.sqrt(var)
    white = (q.T @ cov @ q) * s[:, None] * s[None, :]
    ev = np.linalg.eigvalsh((white + white.T) / 2)
    return 0.5 * float(np.sum(np.log1p(np.clip(ev, 0, None))))


def run_cell(mech: Mechanism, n_trials: int, reps: int, *, v: float = 0.1,
             confidence: float = 0.95, n_mc: int = 100000, seed: int = 0, **options) -> dict:
    """Mean ratios, exceedances of ``v`` and clip statistics over ``reps`` certified plans."""
    rng = np.random.default_rng([seed, n_trials, mech.dim, len(mech.name)])
    sample = mech.draw(np.random.default_rng([seed, 1, mech.dim, len(mech.name)]), n_mc)
    trace_oracle, same_oracle = mech.oracle(v)
    ratio, exceed, clipped, distortion, exponent, exact = [], 0, [], [], [], []
    for _ in range(reps):
        plan = certify_noise(mech.draw(rng, n_trials), mi_budget=v, confidence=confidence,
                             **options)
        law, inner, fresh = in_rescaled(mech, plan, sample)
        cov, frac, dist = released(law, inner, fresh, plan.coordinate_scale)
        low = law.factor() if cov is law.cov else None  # unclipped: Σ = LᵀL exactly
        mi = true_mi(cov, inner) if low is None else true_mi_low_rank(low, inner)
        # the shape's power scaled to its exact trace charge (no bound)
        exact.append(plan.expected_noise_power * _trace_charge(cov, low, inner) / (2 * v))
        exceed += mi > v * (1 + 1e-9)
        ratio.append(plan.expected_noise_power)
        clipped.append(frac)
        distortion.append(dist / trace_oracle)
        exponent.append(float(getattr(plan.certificate, "coordinate_exponent", 0.0)))
    power = np.asarray(ratio)
    return {"ratio": float(np.mean(power)) / trace_oracle,
            "median": float(np.median(power)) / trace_oracle,
            "ratio_sd": float(np.std(power)) / trace_oracle,
            "same_rule": float(np.mean(power)) / same_oracle,
            "exceed": int(exceed), "reps": reps, "clipped": float(np.mean(clipped)),
            "distortion": float(np.mean(distortion)), "exponent": float(np.mean(exponent)),
            "exact": float(np.median(exact)) / trace_oracle}


@contextlib.contextmanager
def unscaled_shape():
    """The certificate without its per-coordinate rescaling (``α = 0`` only: the shape of
    0.4, bit for bit), as the baseline of ``--issue32 --baseline``."""
    from pacpriv.pac.noise import _certificate

    saved = _certificate.candidate_exponents
    _certificate.candidate_exponents = lambda var, rows: (0.0,)
    try:
        yield
    finally:
        _certificate.candidate_exponents = saved


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover
        return "n/a"


def issue32_structures(args) -> int:
    """``--issue32 --structures``: the reference noise power of each of :data:`STRUCTURES`
    over the floor and the oracle (true covariance, no bound), per ``d``; no certificate."""
    from pacpriv.pac.noise._shape import default_shape_trials

    v = args.mi_budget
    seeds = args.reps if args.reps != 200 else 3
    print(f"# reference structures (issue 32, deliverable 4): psum over {args.records} records, "
          f"scales 1/sqrt(j), v = {v}, median of {seeds} draws, load {_load()}\n")
    print("| d | n_trials | structure | reference/oracle | reference/floor |")
    print("| --- | --- | --- | --- | --- |")
    for d in args.dims or (20, 200, 2000):
        mech = poisson_sum(d, n_records=args.records)
        oracle = mech.oracle(v)[0]
        for m in args.trials or (256,):
            floor = trial_floor(mech.eigenvalues(), m, v)
            refs = structure_references(mech, m, v, seeds=seeds, seed=args.seed,
                                        shape_trials=default_shape_trials(m, d))
            for name, power in refs.items():
                print(f"| {d} | {m} | {name} | {power / oracle:.3f} | {power / floor:.3f} |",
                      flush=True)
    return 0


def issue32(args) -> int:
    """Certified/oracle and certified/floor at d = 20, 200, 2,000 (256 trials, Poisson-½ sums
    over ``--records`` records with decaying column scales), with coverage."""
    reps = args.reps if args.reps != 200 else 100
    dims = args.dims or (20, 200, 2000)
    trials = args.trials or (256,)
    gamma = 1 - args.confidence
    v = args.mi_budget
    print(f"# certified noise vs oracle and the T-trial floor (issue 32): psum over "
          f"{args.records} records, scales 1/sqrt(j), v = {v}, 1−γ = {args.confidence}, "
          f"{reps} seeds per cell, load {_load()}\n")
    print("| d | n_trials | shape | certified/oracle (median) | floor/oracle | "
          "certified/floor | exact charge/floor | PCA-head/oracle (α = 0; ½) | P(MI>v) [95% CP] | clipped | α (mean) | "
          "s/seed | load |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    bad = []
    variants = (("rescaled", False), ("unscaled", True)) if args.baseline else (
        ("rescaled", False),)
    family = 1.0 - 0.05 / (len(dims) * len(trials) * len(variants))
    for d in dims:
        mech = poisson_sum(d, n_records=args.records)
        oracle = mech.oracle(v)[0]
        lam = mech.eigenvalues()
        for m in trials:
            floor = trial_floor(lam, m, v)
            pca = pca_head_reference(mech, m, v, seed=args.seed)
            pca_half = pca_head_reference(mech, m, v, seed=args.seed, alpha=0.5)
            for name, unscaled in variants:
                t0 = time.perf_counter()
                with unscaled_shape() if unscaled else contextlib.nullcontext():
                    res = run_cell(mech, m, reps, v=v, confidence=args.confidence,
                                   n_mc=max(1000, min(args.mc, 5_000_000 // d)),
                                   seed=args.seed, scaling=args.scaling)
                per = (time.perf_counter() - t0) / reps
                k = res["exceed"]
                lo, hi = clopper_pearson(k, reps, 0.95)
                if k > 0 and float(stats.beta.ppf(1.0 - family, k, reps - k + 1)) > gamma:
                    bad.append((d, m, name, k))
                med = res["median"]
                print(f"| {d} | {m} | {name} | {med:.3f} | {floor / oracle:.3f} | "
                      f"{med * oracle / floor:.3f} | {res['exact'] * oracle / floor:.3f} | "
                      f"{pca / oracle:.3f}; {pca_half / oracle:.3f} | "
                      f"{k / reps:.3f} [{lo:.3f}, {hi:.3f}] | "
                      f"{100 * res['clipped']:.2f}% | {res['exponent']:.3f} | {per:.2f} | "
                      f"{_load()} |", flush=True)
    if bad:
        print(f"COVERAGE FAILURE (Bonferroni Clopper–Pearson lower limit > γ = {gamma:g}): "
              f"{bad}")
        return 1
    print(f"every cell consistent with P(MI > v) <= γ = {gamma:g}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--issue32", action="store_true",
                    help="certified/oracle and certified/floor at d = 20, 200, 2000 (256 "
                         "trials, median of seeds), with coverage")
    ap.add_argument("--baseline", action="store_true",
                    help="--issue32: also run the unscaled shape (α = 0) in the same run")
    ap.add_argument("--structures", action="store_true",
                    help="--issue32: only the reference noise of candidate structures (true "
                         "covariance, no certificate; --reps draws, default 3)")
    ap.add_argument("--records", type=int, default=600,
                    help="records of the Poisson sum in --issue32 (default 600)")
    ap.add_argument("--reps", type=int, default=200, help="repetitions per cell")
    ap.add_argument("--quick", action="store_true", help="n_trials = 128 only, 60 repetitions")
    ap.add_argument("--trials", type=int, nargs="+", default=None)
    ap.add_argument("--dims", type=int, nargs="+", default=None)
    ap.add_argument("--mi-budget", type=float, default=0.1)
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--mc", type=int, default=100000,
                    help="Monte-Carlo draws of f for the clip's correction (one sample per cell)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scaling", choices=("log-det", "trace"), default="log-det")
    ap.add_argument("--only", nargs="+", default=None, metavar="NAME",
                    help="only these mechanisms (e.g. psum gauss-decay)")
    ap.add_argument("--randomize", action="store_true",
                    help="randomized Markov threshold (seeded per repetition)")
    args = ap.parse_args(argv)
    if args.issue32:
        return issue32_structures(args) if args.structures else issue32(args)
    reps = 60 if args.quick and args.reps == 200 else args.reps
    trials = args.trials or ((128,) if args.quick else TRIALS)
    gamma = 1 - args.confidence
    options = {"scaling": args.scaling}
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        def tqdm(x, **_):
            return x
    cells = [(mech, m) for mech in mechanisms(args.dims or DIMS) for m in trials
             if args.only is None or mech.name in args.only]
    print(f"# certified noise vs oracle: v = {args.mi_budget}, 1−γ = {args.confidence}, "
          f"{reps} repetitions per cell, scaling {args.scaling}"
          + (", randomized threshold" if args.randomize else "") + "\n")
    print("| mechanism | d | n_trials | ratio (mean ± sd) | same-rule ratio | P(MI>v) "
          "[95% CP] | clipped | distortion |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    t0 = time.perf_counter()
    bad = []
    family = 1.0 - 0.05 / len(cells)  # Bonferroni over the cells
    for mech, m in tqdm(cells, desc="cells", file=sys.stderr):
        opts = dict(options)
        if args.randomize:
            opts["randomize"] = np.random.default_rng([args.seed, m, mech.dim, 7])
        res = run_cell(mech, m, reps, v=args.mi_budget, confidence=args.confidence,
                       n_mc=args.mc, seed=args.seed, **opts)
        lo, hi = clopper_pearson(res["exceed"], reps, 0.95)
        k = res["exceed"]
        if k > 0 and float(stats.beta.ppf(1.0 - family, k, reps - k + 1)) > gamma:
            bad.append((mech.name, mech.dim, m, k))
        print(f"| {mech.name} | {mech.dim} | {m} | {res['ratio']:.3f} ± {res['ratio_sd']:.3f} | "
              f"{res['same_rule']:.3f} | {res['exceed'] / reps:.3f} [{lo:.3f}, {hi:.3f}] | "
              f"{100 * res['clipped']:.2f}% | {res['distortion']:.1e} |", flush=True)
    print(f"\nelapsed {time.perf_counter() - t0:.0f} s")
    if bad:
        print(f"COVERAGE FAILURE (Bonferroni Clopper–Pearson lower limit > γ = {gamma:g}): "
              f"{bad}")
        return 1
    print(f"every cell consistent with P(MI > v) <= γ = {gamma:g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
