"""Empirical membership-inference attack on simulated (noisy) releases.

The engine's ``(masks, outputs)`` pairs are exactly the PAC membership game: trial ``i``'s
secret is ``masks[i]`` and the release is ``outputs[i] + B_i``. For each target record ``j`` an
attacker fits a Gaussian likelihood-ratio test (linear discriminant with a shared, shrunk
covariance: in/out Gaussians) predicting ``masks[:, j]`` from the noisy output on training
trials, and is scored on held-out trials. Any attack's success rate is at most the certified
posterior bound ``p*(v)`` of [1]_ Thm 1, so the held-out accuracy is a sanity check of the
calibration from below (it measures one attack, it does not certify anything).

Confidence intervals
--------------------
Given the fitted attacks, held-out trials are i.i.d., so for one target the number of correct
guesses is binomial (exact Clopper–Pearson [2]_). The mean accuracy over targets is the mean of
the i.i.d. per-trial fractions of correct guesses (Student-t interval, CLT). For the most
vulnerable record every per-target interval is taken at level ``1 − (1 − confidence)/k``
(Bonferroni over ``k`` targets), so with probability ``>= confidence`` all hold at once:
``max_ci_high`` bounds the best target's accuracy and ``max_ci_low > baseline`` shows that some
record leaks.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 1.
.. [2] C. J. Clopper, E. S. Pearson. Biometrika 1934 (exact binomial interval).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from pacpriv._display import Displayable, Summary, shown_estimate
from pacpriv._json import field_values
from pacpriv._random import RNGLike, as_generator
from pacpriv._stats import clopper_pearson
from pacpriv._validation import check_real
from pacpriv.pac.bounds._posterior import posterior_success_rate
from pacpriv.pac.engine._simulate import SimulationResult
from pacpriv.pac.noise._calibration import NoisePlan

__all__ = ["EmpiricalAttackResult", "empirical_membership_attack"]


@dataclass(frozen=True)
class EmpiricalAttackResult(Displayable):
    """Held-out success of a per-record Gaussian likelihood-ratio membership attack.

    Attributes
    ----------
    accuracy : float
        Mean over targets of the held-out success rate (fraction of trials whose membership
        bit of the target is guessed right).
    ci_low, ci_high : float
        Two-sided ``confidence`` interval of ``accuracy`` (``ci_method``).
    confidence : float
        Level of the intervals.
    ci_method : str
        ``"clopper-pearson"`` (one target) or ``"student-t"`` (mean of per-trial fractions).
    baseline : float
        Blind-guess success rate ``max(q, 1 − q)``, ``q`` the targets' membership frequency.
    posterior_success_bound : float or None
        ``posterior_success_rate(plan.mi_claim, prior=baseline)`` when a plan was given:
        an *estimate* at the measured blind-guess prior ``baseline`` of these trials, so it can
        differ slightly from the run's certified bound, which uses the sampler's declared
        prior (see ``posterior_success_bound_label``).
    noise_applied : bool
        Whether fresh plan noise was added to the outputs before the attack.
    n_trials_used, n_train, n_holdout, n_targets : int
        Trials used, of which training / held out; number of target records.
    max_target : int
        Record index with the highest held-out accuracy.
    max_accuracy : float
        Its held-out accuracy (optimistically selected; use the Bonferroni limits).
    max_ci_low, max_ci_high : float
        Largest Bonferroni Clopper–Pearson lower / upper limit over targets.
    per_target : dict
        Summary of per-target accuracies: ``min``, ``median``, ``max``, ``mean_auc``.
    targets : ndarray of int, shape (n_targets,)
    target_accuracies : ndarray of float, shape (n_targets,)
    posterior_success_bound_label : str
        How ``posterior_success_bound`` was obtained (always "estimated ...").
    """

    accuracy: float
    ci_low: float
    ci_high: float
    confidence: float
    ci_method: str
    baseline: float
    posterior_success_bound: float | None
    noise_applied: bool
    n_trials_used: int
    n_train: int
    n_holdout: int
    n_targets: int
    max_target: int
    max_accuracy: float
    max_ci_low: float
    max_ci_high: float
    per_target: dict
    targets: np.ndarray = field(repr=False)
    target_accuracies: np.ndarray = field(repr=False)
    posterior_success_bound_label: str = (
        "estimated (at the measured blind-guess prior of these trials; the run's certified "
        "bound uses the sampler's declared prior)")

    def summary(self) -> Summary:
        """Rows shown by ``str(result)`` and in Jupyter: measured accuracies (estimates with
        their intervals; no record index) beside the posterior bound they stay under."""
        return Summary("Membership attack on simulated releases (Gaussian likelihood ratio)", [
            (f"mean accuracy over {self.n_targets} targets ({self.ci_method})",
             shown_estimate(self.accuracy, self.ci_low, self.ci_high, self.confidence), "plain"),
            ("best target's accuracy (Bonferroni Clopper–Pearson)",
             shown_estimate(self.max_accuracy, self.max_ci_low, self.max_ci_high,
                            self.confidence), "plain"),
            ("blind-guess baseline (estimated)", self.baseline, "plain"),
            ("posterior success bound at the measured prior (estimated)",
             self.posterior_success_bound, "risk"),
            ("noise applied", self.noise_applied, "plain"),
            ("trials: training / held out", f"{self.n_train} / {self.n_holdout}", "plain"),
        ])

    def to_dict(self) -> dict:
        """JSON-serialisable summary (per-target arrays omitted)."""
        return {
            **field_values(self, exclude=("targets", "target_accuracies")),
            "per_target": dict(self.per_target),
            "attack": "gaussian-lda (Ledoit-Wolf shrinkage)",
        }


def _inputs(simulation) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(simulation, SimulationResult):
        masks, outputs = simulation.masks, simulation.outputs
    elif isinstance(simulation, tuple) and len(simulation) == 2:
        masks, outputs = simulation
    else:
        raise TypeError(
            "`simulation` must be a SimulationResult or a tuple (masks, outputs); got "
            f"{type(simulation).__name__}."
        )
    masks = np.asarray(masks)
    outputs = np.asarray(outputs, dtype=np.float64)
    if outputs.ndim == 1:
        outputs = outputs[:, None]
    if masks.dtype != bool or masks.ndim != 2:
        raise ValueError(f"`masks` must be a 2-D bool array; got {masks.dtype}, {masks.shape}.")
    if outputs.ndim != 2 or outputs.shape[0] != masks.shape[0]:
        raise ValueError(
            f"`outputs` must have shape (n_trials, d) with n_trials = {masks.shape[0]}; "
            f"got {outputs.shape}."
        )
    if not np.all(np.isfinite(outputs)):
        raise ValueError("`outputs` must be finite; found NaN or inf.")
    return masks, outputs


def _targets(targets, n_records: int, gen: np.random.Generator) -> np.ndarray:
    if targets is None:
        return np.arange(n_records)
    if isinstance(targets, (int, np.integer)) and not isinstance(targets, bool):
        if not 1 <= targets <= n_records:
            raise ValueError(f"`targets` as a count must be in [1, {n_records}]; got {targets}.")
        return np.sort(gen.choice(n_records, size=int(targets), replace=False))
    idx = np.asarray(targets)
    if idx.ndim != 1 or idx.size == 0 or idx.dtype.kind not in "iu":
        raise ValueError("`targets` must be None, a count, or a non-empty 1-D array of indices.")
    if idx.min() < 0 or idx.max() >= n_records:
        raise ValueError(f"`targets` indices must be in [0, {n_records - 1}]; got {idx.tolist()}.")
    return idx


def _add_noise(outputs: np.ndarray, plan: NoisePlan, gen: np.random.Generator) -> np.ndarray:
    if plan.dim != outputs.shape[1]:
        raise ValueError(f"`plan` has dim {plan.dim}; the outputs have d = {outputs.shape[1]}.")
    if plan.basis is None:
        return outputs + plan.noise_std * gen.standard_normal(outputs.shape)
    return outputs + np.stack([plan.sample(gen) for _ in range(outputs.shape[0])])


def _attack(z_train, y_train, z_test, y_test) -> tuple[np.ndarray, float]:
    """Correct-guess indicators on the test trials, and the test AUC (nan if one class)."""
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.metrics import roc_auc_score

    if y_train.all() or not y_train.any():
        guess = np.full(y_test.shape, bool(y_train[0]))
        return guess == y_test, float("nan")
    mu, sd = z_train.mean(axis=0), z_train.std(axis=0)
    sd[sd == 0] = 1.0
    lda = LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # collinear/constant-feature notices
        lda.fit((z_train - mu) / sd, y_train)
    zt = (z_test - mu) / sd
    correct = lda.predict(zt).astype(bool) == y_test
    auc = float("nan")
    if y_test.any() and not y_test.all():
        auc = float(roc_auc_score(y_test, lda.decision_function(zt)))
    return correct, auc


def empirical_membership_attack(
    simulation: SimulationResult | tuple[Any, Any],
    plan: NoisePlan | None = None,
    *,
    targets: Any = None,
    holdout: float = 0.5,
    confidence: float = 0.95,
    rng: RNGLike = None,
) -> EmpiricalAttackResult:
    """Per-record membership attack on the engine's (noisy) outputs, with held-out accuracy.

    Parameters
    ----------
    simulation : SimulationResult or tuple (masks, outputs)
        ``masks`` bool of shape ``(n_trials, n_records)``, ``outputs`` of shape
        ``(n_trials, d)`` (as :func:`pacpriv.pac.engine.simulate` returns them).
    plan : NoisePlan or None
        Noise to add (one fresh draw per trial, as a real release would); ``None`` attacks the
        raw outputs.
    targets : None, int or array of int
        Records attacked: all (None), a random sample of that many (int), or these indices.
    holdout : float, default 0.5
        Fraction of trials held out for evaluation, in (0, 1).
    confidence : float, default 0.95
        Level of the two-sided intervals, in (0, 1).
    rng : None, int, SeedSequence or Generator
        Randomness of the noise, the split and the target sample (None: OS entropy).

    Returns
    -------
    EmpiricalAttackResult

    Raises
    ------
    TypeError, ValueError
        Invalid inputs (messages name the argument), or fewer than 2 trials on either side.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 1 (the bound it is compared with).
    """
    masks, outputs = _inputs(simulation)
    if plan is not None and not isinstance(plan, NoisePlan):
        raise TypeError(f"`plan` must be a NoisePlan or None; got {type(plan).__name__}.")
    holdout = check_real(holdout, "holdout", low=0.0, high=1.0, low_inclusive=False,
                         high_inclusive=False)
    confidence = check_real(confidence, "confidence", low=0.0, high=1.0, low_inclusive=False,
                            high_inclusive=False)
    gen = as_generator(rng)
    n = masks.shape[0]
    n_hold = round(holdout * n)
    if n_hold < 2 or n - n_hold < 2:
        raise ValueError(
            f"need at least 2 training and 2 held-out trials; got n_trials={n}, holdout={holdout}."
        )
    idx = _targets(targets, masks.shape[1], gen)
    z = outputs if plan is None else _add_noise(outputs, plan, gen)
    perm = gen.permutation(n)
    train, test = perm[n_hold:], perm[:n_hold]
    correct = np.empty((n_hold, idx.size), dtype=bool)
    aucs = np.full(idx.size, np.nan)
    for col, j in enumerate(idx):
        y = masks[:, j]
        correct[:, col], aucs[col] = _attack(z[train], y[train], z[test], y[test])
    acc_t = correct.mean(axis=0)
    if idx.size == 1:
        ci_low, ci_high = clopper_pearson(int(correct.sum()), n_hold, confidence)
        method = "clopper-pearson"
    else:
        frac = correct.mean(axis=1)
        half = stats.t.ppf(0.5 + confidence / 2, n_hold - 1) * frac.std(ddof=1) / np.sqrt(n_hold)
        ci_low, ci_high = max(float(frac.mean() - half), 0.0), min(float(frac.mean() + half), 1.0)
        method = "student-t"
    level = 1.0 - (1.0 - confidence) / idx.size
    limits = np.array([clopper_pearson(int(c), n_hold, level) for c in correct.sum(axis=0)])
    best = int(np.argmax(acc_t))
    q = float(masks[:, idx].mean())
    baseline = max(q, 1.0 - q)
    bound = None
    if plan is not None and 0.0 < baseline < 1.0:
        bound = float(posterior_success_rate(plan.mi_claim, prior=baseline))
    finite = aucs[np.isfinite(aucs)]
    return EmpiricalAttackResult(
        accuracy=float(acc_t.mean()), ci_low=ci_low, ci_high=ci_high, confidence=confidence,
        ci_method=method, baseline=baseline, posterior_success_bound=bound,
        noise_applied=plan is not None, n_trials_used=n, n_train=n - n_hold, n_holdout=n_hold,
        n_targets=int(idx.size), max_target=int(idx[best]), max_accuracy=float(acc_t[best]),
        max_ci_low=float(limits[:, 0].max()), max_ci_high=float(limits[:, 1].max()),
        per_target={
            "min": float(acc_t.min()), "median": float(np.median(acc_t)),
            "max": float(acc_t.max()),
            "mean_auc": float(finite.mean()) if finite.size else None,
        },
        targets=idx, target_accuracies=acc_t,
    )
