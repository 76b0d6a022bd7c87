"""Coverage experiment: how often does the true MI exceed the budget v? (issue 12, MATH.md §4)

Mechanisms with a **known** output covariance ``Σ``; outputs are simulated directly (Gaussian
draws with covariance ``Σ``, or Bernoulli draws for the rare event), not through the engine:

* ``sum-d``: linear sums ``f(S) = Σ_{i∈S} x_i`` over a Poisson-½ subset of a fixed Gaussian
  pool of 200 records with decaying feature scales (``Σ = ¼ Σ_i x_i x_iᵀ``), d ∈ {5, 20, 50};
* ``scale-sep``: two outputs with ``Σ = diag(1e12, 1e-6)``;
* ``rare-event``: an indicator that is 1 with probability 1/1024 (MI 0.0077 nats unnoised).

For each rule and ``n_trials``, every repetition calibrates a plan from simulated outputs and
computes the **true** bound ``½ ln det(I + Σ_rel Σ_B⁻¹)`` (an upper bound on the true MI for
any output law, by Gaussian maximum entropy), where ``Σ_rel`` is the covariance of what is
released: ``Σ`` for the plug-in rules, the covariance of the *clipped* output for the
certified rules (the known ``Σ`` plus a Monte-Carlo estimate of the clip's correction from
``--mc`` fresh draws, exact for the rare event). For the
rare event the bound is also capped by the output entropy ``h(1/1024)`` (``I <= H(f)``).

Printed per row: the fraction of runs with true MI > v (with its Clopper–Pearson 95% upper
limit for the certified rules, which must be ``>= γ``-consistent: lower limit <= γ) and the
mean noise power ``E||B||²`` relative to the oracle square-root rule on the true ``Σ``.

Usage::

    python benchmarks/coverage.py           # reduced grid: n_trials ∈ {2d, 10d, 100d}, 50 reps
    python benchmarks/coverage.py --full    # n_trials ∈ {2d, 5d, 10d, 20d, 50d, 100d}, 200 reps
    python benchmarks/coverage.py --full --rules certified certified-eb   # certified rules only
    python benchmarks/coverage.py --rules certified --dims 20 200 --trials 64 256
                                            # the high-d split (issue 32; d = 2,000: see
                                            # benchmarks/certificate.py --issue32)
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass

import numpy as np
from scipy import stats

from pacpriv.pac.noise import calibrate_noise, certify_noise
from pacpriv.pac.spectrum import estimate_output_spectrum

RULES = ("certified", "certified-eb", "anisotropic", "isotropic", "variance-only", "exact-mi")
CERTIFIED = ("certified", "certified-eb")
RARE_P = 1.0 / 1024.0


@dataclass(frozen=True)
class Scenario:
    """A mechanism with known output law: ``draw(rng, n) -> (n, d)``, covariance ``cov``."""

    name: str
    cov: np.ndarray
    mi_budget: float
    kind: str  # "gaussian" or "bernoulli"

    @property
    def dim(self) -> int:
        return self.cov.shape[0]

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "bernoulli":
            return (rng.random((n, 1)) < RARE_P).astype(np.float64)
        lam, vec = np.linalg.eigh(self.cov)
        z = rng.standard_normal((n, self.dim)) * np.sqrt(np.clip(lam, 0, None))
        return z @ vec.T


def linear_sum_scenario(d: int, *, n_records: int = 200, mi_budget: float = 0.1,
                        seed: int = 12) -> Scenario:
    """Poisson-½ sums over a Gaussian pool: ``Σ = ¼ Σ_i x_i x_iᵀ`` (scales ``1/sqrt(j)``)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_records, d)) / np.sqrt(np.arange(1, d + 1))
    return Scenario(f"sum-{d}", 0.25 * x.T @ x, mi_budget, "gaussian")


def scenarios(dims=(5, 20, 50)) -> list[Scenario]:
    out = [linear_sum_scenario(d) for d in dims]
    out.append(Scenario("scale-sep", np.diag([1e12, 1e-6]), 0.05, "gaussian"))
    out.append(Scenario("rare-event", np.array([[RARE_P * (1 - RARE_P)]]), 0.001, "bernoulli"))
    return out


def _noise_frame(plan):
    """Orthonormal ``Q`` (d, d) and noise variances along its columns."""
    d = plan.dim
    if plan.basis is None:
        return np.eye(d), np.asarray(plan.noise_variance, dtype=np.float64)
    w = np.asarray(plan.basis, dtype=np.float64)
    var = np.asarray(plan.noise_variance, dtype=np.float64)
    if w.shape[1] < d:
        q, _ = np.linalg.qr(np.hstack([w, np.random.default_rng(0).standard_normal(
            (d, d - w.shape[1]))]))
        comp = q[:, w.shape[1]:]
        comp -= w @ (w.T @ comp)
        comp, _ = np.linalg.qr(comp)
        w = np.hstack([w, comp])
        var = np.concatenate([var, np.full(d - plan.basis.shape[1], plan.residual_variance)])
    return w, var


def true_mi(cov: np.ndarray, plan) -> float:
    """``½ ln det(I + Σ Σ_B⁻¹)``; ``inf`` when a direction with signal gets no noise."""
    q, var = _noise_frame(plan)
    m = q.T @ cov @ q
    zero = var <= 0
    if np.any(zero):
        if float(np.trace(m[np.ix_(zero, zero)])) > 1e-300:
            return math.inf
        keep = ~zero
        m, var = m[np.ix_(keep, keep)], var[keep]
        if var.size == 0:
            return 0.0
    s = 1.0 / np.sqrt(var)
    white = m * s[:, None] * s[None, :]
    ev = np.linalg.eigvalsh((white + white.T) / 2)
    return 0.5 * float(np.sum(np.log1p(np.clip(ev, 0, None))))


def _clip_rows(plan, y: np.ndarray) -> np.ndarray:
    if plan.clip_radius is None:
        return y
    return np.array([plan.clip(row)[0] for row in y]) if y.shape[0] <= 64 else _clip_fast(plan, y)


def _clip_fast(plan, y: np.ndarray) -> np.ndarray:
    c = np.asarray(plan.clip_center)
    if plan.clip_radius == 0.0:
        return np.broadcast_to(c, y.shape).copy()
    q, var = _noise_frame(plan)
    n2 = np.sum(((y - c) @ q) ** 2 / var, axis=1)
    scale = np.minimum(1.0, plan.clip_radius / np.sqrt(np.maximum(n2, 1e-300)))
    return c + (y - c) * scale[:, None]


def released_cov(sc: Scenario, plan, rng, n_mc: int) -> np.ndarray:
    """Covariance of what the plan releases (clipped output), exact or Monte Carlo."""
    if plan.clip_radius is None:
        return sc.cov
    if sc.kind == "bernoulli":
        lo, hi = (_clip_rows(plan, np.array([[0.0], [1.0]]))[:, 0])
        return np.array([[RARE_P * (1 - RARE_P) * (hi - lo) ** 2]])
    # the known Σ plus a Monte-Carlo estimate of the clip's correction (only clipped draws
    # contribute), not the sample covariance of all draws: its ~sqrt(2/n_mc) relative error
    # would flip the MI check of a certificate that is tight to within that error
    f = sc.draw(rng, n_mc)
    h = _clip_fast(plan, f) - f
    h[np.linalg.norm(h, axis=1) <= 1e-12 * (1.0 + np.linalg.norm(f, axis=1))] = 0.0
    mean = np.zeros(sc.dim)  # Gaussian scenarios are centred
    eh = h.mean(axis=0)
    efh = (f - mean).T @ h / n_mc
    return sc.cov + efh + efh.T + h.T @ h / n_mc - np.outer(eh, eh)


def calibrate(rule: str, outputs: np.ndarray, v: float, confidence: float):
    if rule == "certified":
        return certify_noise(outputs, mi_budget=v, confidence=confidence, method="betting")
    if rule == "certified-eb":
        return certify_noise(outputs, mi_budget=v, confidence=confidence,
                             method="empirical-bernstein")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant-output / degenerate warnings are expected
        spec = estimate_output_spectrum(outputs)
    return calibrate_noise(spec, mi_budget=v, rule=rule)


def run_cell(sc: Scenario, n_trials: int, reps: int, *, confidence: float = 0.95,
             n_mc: int = 20000, seed: int = 0, rules=RULES) -> dict:
    """Per rule: fraction of runs with true MI > v and mean noise power / oracle."""
    lam = np.clip(np.linalg.eigvalsh(sc.cov), 0, None)
    oracle = float(np.sum(np.sqrt(lam))) ** 2 / (2 * sc.mi_budget)
    h_rare = float(stats.entropy([RARE_P, 1 - RARE_P]))
    rng = np.random.default_rng([seed, n_trials, sc.dim])
    exceed = {r: 0 for r in rules}
    power = {r: [] for r in rules}
    for _ in range(reps):
        outputs = sc.draw(rng, n_trials)
        for rule in rules:
            plan = calibrate(rule, outputs, sc.mi_budget, confidence)
            mi = true_mi(released_cov(sc, plan, rng, n_mc), plan)
            if sc.kind == "bernoulli":
                mi = min(mi, h_rare)
            exceed[rule] += mi > sc.mi_budget * (1 + 1e-9)
            power[rule].append(plan.expected_noise_power / oracle)
    return {r: {"exceed": exceed[r], "reps": reps, "power": float(np.mean(power[r]))}
            for r in rules}


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="full grid, 200 repetitions")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per cell")
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--mc", type=int, default=20000, help="Monte-Carlo draws for clipped Σ")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rules", nargs="+", choices=RULES, default=list(RULES),
                    help="rules to run (default: all)")
    ap.add_argument("--mults", type=int, nargs="+", default=None,
                    help="n_trials as multiples of max(d, 5) (default: by grid)")
    ap.add_argument("--dims", type=int, nargs="+", default=None,
                    help="dimensions of the sum-d scenarios (default 5 20 50)")
    ap.add_argument("--trials", type=int, nargs="+", default=None,
                    help="n_trials for every scenario (instead of --mults)")
    args = ap.parse_args(argv)
    reps = args.reps or (200 if args.full else 50)
    mults = args.mults or ((2, 5, 10, 20, 50, 100) if args.full else (2, 10, 100))
    gamma = 1 - args.confidence
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        def tqdm(x, **_):
            return x
    cells = []
    for sc in scenarios(tuple(args.dims or (5, 20, 50))):
        d = sc.dim if sc.kind == "gaussian" else 1
        base = max(d, 5)  # 2d trials of a 1- or 2-output mechanism are too few for any rule
        counts = args.trials or [max(6, k * base) for k in mults]
        cells.extend((sc, m) for m in counts)
    print(f"# coverage: confidence {args.confidence}, {reps} repetitions per cell, "
          f"Monte Carlo {args.mc} draws for the clipped covariance\n")
    header = "| scenario | d | n_trials | " + " | ".join(
        f"{r} P(MI>v)" for r in args.rules) + " | " + " | ".join(
        f"{r} power/oracle" for r in args.rules) + " |"
    print(header)
    print("|" + " --- |" * (3 + 2 * len(args.rules)))
    t0 = time.perf_counter()
    bad = []
    for sc, m in tqdm(cells, desc="cells", file=sys.stderr):
        res = run_cell(sc, m, reps, confidence=args.confidence, n_mc=args.mc, seed=args.seed,
                       rules=tuple(args.rules))
        fr = []
        for r in args.rules:
            k = res[r]["exceed"]
            txt = f"{k / reps:.3f}"
            if r in CERTIFIED:
                lo, hi = clopper_pearson(k, reps)
                txt += f" [≤{hi:.3f}]"
                if lo > gamma:
                    bad.append((sc.name, m, r, k))
            fr.append(txt)
        pw = [f"{res[r]['power']:.3g}" for r in args.rules]
        print(f"| {sc.name} | {sc.dim} | {m} | " + " | ".join(fr) + " | " + " | ".join(pw) + " |",
              flush=True)
    print(f"\nelapsed {time.perf_counter() - t0:.0f} s")
    if bad:
        print(f"COVERAGE FAILURE (Clopper–Pearson lower limit > γ = {gamma:g}): {bad}")
        return 1
    print(f"certified rules: every cell consistent with P(MI > v) <= γ = {gamma:g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
