"""Informed likelihood-ratio membership attack: an empirical check of the per-record bound.

For held-out trials (differences simulated with a seed independent of the calibration), each
audited record ``i`` of trial ``t`` plays the membership game of the informed adversary of
:mod:`pacpriv.pac.per_record._exposure`: a secret bit ``b ~ Bernoulli(q)`` is drawn, the release is
``Y = f(S_t ∖ {i} ∪ b·{i}) + B`` with ``B ~ N(0, Σ_B)``, and the adversary, who knows
``μ₀ = f(S_t ∖ {i})``, ``μ₁ = f(S_t ∪ {i})`` (``S₋ᵢ`` and ``θ``) and ``Σ_B``, guesses ``b`` by the
likelihood-ratio test ``log N(Y; μ₁, Σ_B) − log N(Y; μ₀, Σ_B) + ln(q/(1−q)) > 0`` (the densities
come from :mod:`scipy.stats`, independently of the closed form). Without noise it guesses the
nearer of ``μ₀``, ``μ₁`` (ties: the likelier prior). Its accuracy is at most the per-record bound
``max_i Aᵢ`` (Neyman–Pearson; [1]_ §2), so a confidence interval above the certified bound would
reveal a bug.

Intervals: trials are i.i.d.; the pooled accuracy is the mean of the per-trial fractions of
correct guesses (Student-t interval). Per record, the count of correct guesses over trials is
binomial (exact Clopper–Pearson, Bonferroni over the audited records).

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, §2.
.. [2] C. J. Clopper, E. S. Pearson. Biometrika 26(4), 1934.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from pacpriv._display import Displayable, Summary, shown_estimate
from pacpriv._random import RNGLike, as_generator
from pacpriv._validation import check_real
from pacpriv.pac.per_record._exposure import RecordDifferences
from pacpriv.pac.per_record._math import NoiseGeometry

__all__ = ["InformedAttackResult", "informed_attack"]


@dataclass(frozen=True)
class InformedAttackResult(Displayable):
    """Accuracy of the informed likelihood-ratio attack (:func:`informed_attack`).

    Attributes
    ----------
    accuracy : float
        Pooled accuracy over audited records and trials (an **estimate**).
    ci_low, ci_high : float
        Two-sided ``confidence`` Student-t interval of ``accuracy`` (trials i.i.d.).
    max_record_accuracy : float
        Highest per-record accuracy (optimistically selected).
    max_record_ci_high : float
        Largest per-record Clopper–Pearson upper limit (Bonferroni over records).
    confidence : float
    baseline : float
        Blind-guess accuracy ``max(q, 1 − q)``.
    noise_applied : bool
    n_trials, n_audited : int
    record_accuracy : ndarray of shape (n_audited,)
    """

    accuracy: float
    ci_low: float
    ci_high: float
    max_record_accuracy: float
    max_record_ci_high: float
    confidence: float
    baseline: float
    noise_applied: bool
    n_trials: int
    n_audited: int
    record_accuracy: np.ndarray = field(repr=False)

    def summary(self) -> Summary:
        """Rows shown by ``str(result)`` and in Jupyter (measurements; no per-record values)."""
        return Summary("Informed likelihood-ratio attack (knows S without i, θ and the noise)", [
            ("pooled accuracy (Student-t)",
             shown_estimate(self.accuracy, self.ci_low, self.ci_high, self.confidence), "plain"),
            ("best record's accuracy (estimated)", self.max_record_accuracy, "plain"),
            (f"its upper {100 * self.confidence:g}% limit (Clopper–Pearson, Bonferroni)",
             self.max_record_ci_high, "risk"),
            ("blind-guess baseline", self.baseline, "plain"),
            ("noise applied", self.noise_applied, "plain"),
            ("trials / audited records", f"{self.n_trials} / {self.n_audited}", "plain"),
        ])

    def to_dict(self) -> dict:
        """JSON summary (no per-record values)."""
        return {
            "attack": "informed likelihood-ratio (knows S without i, theta and the noise)",
            "accuracy": self.accuracy, "ci_low": self.ci_low, "ci_high": self.ci_high,
            "accuracy_kind": "measured",
            "max_record_accuracy": self.max_record_accuracy,
            "max_record_ci_high": self.max_record_ci_high, "confidence": self.confidence,
            "baseline": self.baseline, "noise_applied": self.noise_applied,
            "n_trials": self.n_trials, "n_audited": self.n_audited,
        }


def _noise_root(geom: NoiseGeometry) -> np.ndarray:
    vals, vecs = np.linalg.eigh(geom.covariance())
    return vecs * np.sqrt(np.clip(vals, 0.0, None))


def informed_attack(
    differences: RecordDifferences,
    noise_cov=None,
    *,
    confidence: float = 0.95,
    rng: RNGLike = None,
) -> InformedAttackResult:
    """Run the informed likelihood-ratio attack on held-out differences.

    Parameters
    ----------
    differences : RecordDifferences
        From :func:`~pacpriv.pac.per_record.simulate_differences` with a seed **independent**
        of the one used to calibrate the noise (held-out trials).
    noise_cov : float, array_like of shape (d,) or (d, d), NoisePlan or None
        ``Σ_B``; None attacks the noiseless outputs.
    confidence : float, default 0.95
        Level of the intervals, in ``(0, 1)``.
    rng : None, int, SeedSequence or Generator
        Source of the secret bits and the noise.

    Returns
    -------
    InformedAttackResult

    Raises
    ------
    TypeError, ValueError
        For invalid arguments.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, §2; Clopper & Pearson 1934.
    """
    if not isinstance(differences, RecordDifferences):
        raise TypeError(
            f"`differences` must be a RecordDifferences; got {type(differences).__name__}."
        )
    conf = check_real(confidence, "confidence", low=0.0, high=1.0, low_inclusive=False,
                      high_inclusive=False)
    gen = as_generator(rng)
    q = differences.sampling_rate
    n, k, d = differences.differences.shape
    delta = np.asarray(differences.differences, dtype=np.float64)
    # frame with μ₀ = 0: the test is translation invariant, so Y − μ₀ = b Δ + B
    bits = gen.random((n, k)) < q
    release = np.where(bits[..., None], delta, 0.0)
    if noise_cov is None:
        noise_applied = False
        d1 = np.sum((release - delta) ** 2, axis=-1)
        d0 = np.sum(release**2, axis=-1)
        guess = np.where(d1 == d0, q > 0.5, d1 < d0)
    else:
        noise_applied = True
        geom = NoiseGeometry.from_spec(noise_cov, d)
        release = release + gen.standard_normal((n, k, d)) @ _noise_root(geom).T
        dist = stats.multivariate_normal(mean=np.zeros(d), cov=geom.covariance(),
                                         allow_singular=True)
        flat = release.reshape(-1, d)
        llr = (np.asarray(dist.logpdf(flat - delta.reshape(-1, d))).reshape(n, k)
               - np.asarray(dist.logpdf(flat)).reshape(n, k))
        guess = llr + math.log(q / (1.0 - q)) > 0
    correct = guess == bits
    per_trial = correct.mean(axis=1)
    acc = float(per_trial.mean())
    half = float(stats.t.ppf(0.5 + conf / 2.0, n - 1) * per_trial.std(ddof=1) / math.sqrt(n))
    per_record = correct.mean(axis=0)
    level = 1.0 - (1.0 - conf) / k
    hits = correct.sum(axis=0)
    best = int(hits.max())
    ci = stats.binomtest(best, n).proportion_ci(confidence_level=level, method="exact")
    return InformedAttackResult(
        accuracy=acc, ci_low=max(acc - half, 0.0), ci_high=min(acc + half, 1.0),
        max_record_accuracy=float(per_record.max()), max_record_ci_high=float(ci.high),
        confidence=conf, baseline=max(q, 1.0 - q), noise_applied=noise_applied,
        n_trials=n, n_audited=k, record_accuracy=per_record,
    )
