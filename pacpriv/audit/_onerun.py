"""Privacy auditing with one training run (Steinke, Nasr & Jagielski, NeurIPS 2023).

``m`` canaries are each included in the training set independently with probability ½
(``S_i = ±1``), the model is trained **once**, the canaries are scored, and the auditor guesses
"in" for the ``k`` highest scores, "out" for the ``k`` lowest and abstains on the middle. If the
training algorithm is (ε, δ)-DP, the number ``W`` of correct guesses among ``r = 2k`` satisfies
([1]_, main theorem of Sec. 3 for δ = 0 and its (ε, δ) form)

    P[W >= v] <= P[Binom(r, q) >= v] + 2mδ · max_{1<=i<=v} (P[Binom(r, q) >= v − i]
                                                           − P[Binom(r, q) >= v]) / i,
    q = e^ε / (1 + e^ε),

so the right side, evaluated at the observed ``v``, is a p-value for "(ε, δ)-DP". The ε lower
bound at confidence ``1 − β`` is the largest ε whose p-value is at most β. Because an
(ε, δ)-DP algorithm is (ε', δ)-DP for every ε' >= ε, the smallest p-value over ε' >= ε is still
valid; that monotone envelope is what is inverted here (on a grid of step 0.01 in ε, rounded
down), so the bound is valid whether or not the p-value is monotone in ε.

The number of guesses ``k`` is not tuned on the outcome: a fixed set of guess fractions is
tried, each at level β / (number of fractions) (Bonferroni), and the largest resulting bound is
reported -- valid at ``1 − β`` jointly.

Canaries are records of the pool; with ``mislabel=True`` each gets a label drawn uniformly
from the other classes (a public, random transformation), which makes inclusion far easier to
detect than for a typical record (the auditor's choice of canaries is free: the DP guarantee
covers every record).

References
----------
.. [1] T. Steinke, M. Nasr, M. Jagielski. Privacy Auditing with One (1) Training Run.
   NeurIPS 2023, arXiv:2305.08846, Sec. 3 (main theorem) and its (ε, δ) extension.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from pacpriv._random import (
    AUDIT_MODELS_STREAM,
    AUDIT_SPLIT_STREAM,
    RNGLike,
    as_seed_sequence,
    trial_seed,
)
from pacpriv._validation import check_int, check_real

__all__ = ["OneRunResult", "OneRunSpec", "one_run_audit", "one_run_epsilon", "one_run_p_value"]

#: ε grid of the inversion: 0 .. 40 in steps of 0.01.
_EPS_STEP = 0.01
_EPS_MAX = 40.0


def _counts_iv(m, r, v) -> tuple[int, int, int]:
    m = check_int(m, "m", low=1)
    r = check_int(r, "r", low=0, high=m)
    v = check_int(v, "v", low=0, high=r)
    return m, r, v


def _p_values(m: int, r: int, v: int, eps: np.ndarray, delta: float) -> np.ndarray:
    """The p-value of [1]_ at each ε (vectorised over ``eps``), capped at 1."""
    q = special.expit(np.asarray(eps, dtype=float))[:, None]  # (G, 1)
    tail = stats.binom.sf(v - 1, r, q)[:, 0]  # P[Binom >= v]
    if delta == 0 or v == 0:
        return np.minimum(tail, 1.0)
    i = np.arange(1, v + 1)
    window = stats.binom.sf(v - i - 1, r, q) - tail[:, None]  # P[v − i <= Binom < v]
    alpha = np.max(np.maximum(window, 0.0) / i, axis=1)
    return np.minimum(tail + 2.0 * m * delta * alpha, 1.0)


def one_run_p_value(m: int, r: int, v: int, *, epsilon: float, delta: float) -> float:
    """P-value of "(ε, δ)-DP" after ``v`` correct guesses out of ``r`` on ``m`` canaries [1]_.

    Parameters
    ----------
    m : int
        Canaries (each included with probability ½), ``>= 1``.
    r : int
        Guesses made (abstentions excluded), ``0 <= r <= m``.
    v : int
        Correct guesses, ``0 <= v <= r``.
    epsilon : float
        ε >= 0 of the null hypothesis.
    delta : float
        δ in [0, 1].

    Returns
    -------
    float
        In [0, 1].
    """
    m, r, v = _counts_iv(m, r, v)
    eps = check_real(epsilon, "epsilon", low=0.0)
    delta = check_real(delta, "delta", low=0.0, high=1.0)
    return float(_p_values(m, r, v, np.array([eps]), delta)[0])


def one_run_epsilon(m: int, r: int, v: int, *, delta: float, confidence: float) -> float:
    """ε lower bound at ``confidence`` from ``v`` correct guesses out of ``r`` [1]_.

    The largest grid ε (step 0.01, up to 40) whose p-value envelope ``min_{ε' >= ε} p(ε')`` is at
    most ``1 − confidence``; 0 when even ε = 0 is not rejected.
    """
    m, r, v = _counts_iv(m, r, v)
    delta = check_real(delta, "delta", low=0.0, high=1.0)
    beta = 1.0 - check_real(confidence, "confidence", low=0.0, high=1.0, low_inclusive=False,
                            high_inclusive=False)
    grid = np.arange(0.0, _EPS_MAX + _EPS_STEP / 2, _EPS_STEP)
    # p(ε) >= P[Binom(r, q) >= v], which increases with ε: only ε up to the last grid point
    # where that tail is <= β can have p <= β, so the δ term is evaluated there only
    tail = stats.binom.sf(v - 1, r, special.expit(grid))
    below = np.flatnonzero(tail <= beta)
    if below.size == 0:
        return 0.0
    grid = grid[: below[-1] + 1]
    envelope = np.minimum.accumulate(_p_values(m, r, v, grid, delta)[::-1])[::-1]
    ok = np.flatnonzero(envelope <= beta)
    return float(grid[ok[-1]]) if ok.size else 0.0


@dataclass(frozen=True)
class OneRunSpec:
    """Settings of a one-run audit.

    Parameters
    ----------
    canaries : int, default 500
        ``m``, canaries drawn from the pool (each included with probability ½).
    delta : float, default 1e-5
        δ of the tested (ε, δ) claims, in (0, 1).
    confidence : float, default 0.95
        ``1 − β`` of the lower bound.
    mislabel : bool, default True
        Give each canary a random wrong label (classification pools only).
    guess_fractions : tuple of float, default (0.02, 0.05, 0.1, 0.2, 0.5)
        Fractions of ``m`` guessed (half "in" at the top, half "out" at the bottom); one test
        per fraction, Bonferroni-corrected.
    """

    canaries: int = 500
    delta: float = 1e-5
    confidence: float = 0.95
    mislabel: bool = True
    guess_fractions: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2, 0.5)

    def __post_init__(self) -> None:
        check_int(self.canaries, "canaries", low=2)
        check_real(self.delta, "delta", low=0.0, high=1.0, low_inclusive=False,
                   high_inclusive=False)
        check_real(self.confidence, "confidence", low=0.0, high=1.0, low_inclusive=False,
                   high_inclusive=False)
        if not self.guess_fractions:
            raise ValueError("`guess_fractions` must hold at least one fraction.")
        for i, f in enumerate(self.guess_fractions):
            check_real(f, f"guess_fractions[{i}]", low=0.0, high=1.0, low_inclusive=False)


@dataclass(frozen=True)
class OneRunResult:
    """Outcome of :func:`one_run_audit` (aggregate counts only: no canary and no score).

    Attributes
    ----------
    epsilon_lower : float
        ε lower bound at ``confidence`` (rounded down to 0.01).
    epsilon_accountant : float or None
        The accountant's certified ε(δ) for the same run (inf: not private; None: no ε).
    accountant : str
        Which accountant.
    delta, confidence : float
    canaries : int
        ``m``.
    guesses, correct : int
        ``r`` and ``v`` of the reported (best) guess fraction.
    guess_fraction : float
    tests : int
        Number of guess fractions tried (the Bonferroni factor).
    mislabeled : bool
    elapsed_s : float
    """

    epsilon_lower: float
    epsilon_accountant: float | None
    accountant: str
    delta: float
    confidence: float
    canaries: int
    guesses: int
    correct: int
    guess_fraction: float
    tests: int
    mislabeled: bool
    elapsed_s: float

    @property
    def consistent(self) -> bool | None:
        """Whether ``epsilon_lower <= epsilon_accountant`` (None without an accountant)."""
        if self.epsilon_accountant is None:
            return None
        return self.epsilon_lower <= self.epsilon_accountant

    def to_dict(self) -> dict:
        """The issue's layout first (epsilon_lower, epsilon_accountant, delta, confidence,
        canaries), then the counts behind the bound."""
        return {
            "epsilon_lower": self.epsilon_lower, "epsilon_accountant": self.epsilon_accountant,
            "delta": self.delta, "confidence": self.confidence, "canaries": self.canaries,
            "accountant": self.accountant, "consistent": self.consistent,
            "guesses": self.guesses, "correct": self.correct,
            "guess_fraction": self.guess_fraction, "tests": self.tests,
            "mislabeled": self.mislabeled, "elapsed_s": self.elapsed_s,
        }


def _canary_labels(y: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """Each label replaced by one drawn uniformly from the other classes of ``y``'s classes."""
    classes, index = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise ValueError("`mislabel` needs at least 2 classes; the pool has 1.")
    shift = gen.integers(1, classes.size, size=index.size)
    return classes[(index + shift) % classes.size]


def best_guess(scores: np.ndarray, included: np.ndarray, spec: OneRunSpec) -> tuple:
    """``(ε lower bound, r, v, fraction)`` maximised over the spec's fractions (Bonferroni)."""
    m = scores.size
    order = np.argsort(-scores, kind="stable")
    level = 1.0 - (1.0 - spec.confidence) / len(spec.guess_fractions)
    best = (0.0, 0, 0, float(spec.guess_fractions[0]))
    for f in spec.guess_fractions:
        k = max(1, min(m // 2, round(f * m / 2)))
        v = int(included[order[:k]].sum() + (~included[order[m - k:]]).sum())
        eps = one_run_epsilon(m, 2 * k, v, delta=spec.delta, confidence=level)
        if eps > best[0] or best[1] == 0:
            best = (eps, 2 * k, v, float(f))
    return best


def one_run_audit(family, X, y, *, spec: OneRunSpec, rng: RNGLike = None) -> OneRunResult:
    """Train ``family`` once with ``spec.canaries`` canaries and bound ε from below [1]_.

    Parameters
    ----------
    family : model family
        ``fit``, ``statistics`` and ``accountant_epsilon`` (:mod:`pacpriv.audit._families`).
    X, y : arrays of shape (n, ...), (n,)
        The pool; the canaries are ``m`` of its records, the other ``n − m`` always train.
    spec : OneRunSpec
    rng : None, int, SeedSequence or Generator
        Canary choice, labels, inclusion and the training randomness.

    Returns
    -------
    OneRunResult

    Raises
    ------
    ValueError
        If the pool has fewer than ``canaries + 1`` records.
    """
    tic = time.perf_counter()
    X, y = np.asarray(X), np.asarray(y)
    n = X.shape[0]
    m = spec.canaries
    if n < m + 1:
        raise ValueError(f"the one-run audit needs more records than canaries: {m} canaries, "
                         f"{n} records in the pool.")
    root = as_seed_sequence(rng)
    gen = np.random.default_rng(trial_seed(root, AUDIT_SPLIT_STREAM))
    canaries = gen.choice(n, size=m, replace=False)
    labels = y.copy()
    if spec.mislabel:
        labels[canaries] = _canary_labels(y, gen)[canaries]
    included = gen.random(m) < 0.5
    train = np.ones(n, dtype=bool)
    train[canaries[~included]] = False
    model = family.fit(X[train], labels[train], rng=np.random.default_rng(
        trial_seed(root, AUDIT_MODELS_STREAM)))
    scores = np.asarray(family.statistics(model, X[canaries], labels[canaries]), dtype=float)
    eps, r, v, frac = best_guess(scores, included, spec)
    acc, label = family.accountant_epsilon(spec.delta)
    return OneRunResult(
        epsilon_lower=eps,
        epsilon_accountant=None if acc is None else float(acc),
        accountant=label, delta=spec.delta, confidence=spec.confidence, canaries=m,
        guesses=r, correct=v, guess_fraction=frac, tests=len(spec.guess_fractions),
        mislabeled=spec.mislabel, elapsed_s=time.perf_counter() - tic,
    )
