"""The "PAC, per record (informed adversary)" row of :func:`compare_pac_dpsgd`.

The black box is simulated once per dataset (:func:`simulate_record_trials`: shape trials,
then certification trials that keep only the distances), and every bound of the table reuses
those trials (:func:`per_record_row`): the betting certificate
(:mod:`pacpriv.pac.per_record._calibration`) picks the noise so that **every record of the
pool** (by default; or a public random sample, labelled as such) has informed-adversary
accuracy ``<= a``, with confidence ``1 − γ``. The informed likelihood-ratio attack runs on the
shape trials (independent of the certification trials). The noise is added once to the
final parameters (PAC Privacy, Xiao & Devadas 2023, §2).
"""

from __future__ import annotations

import math
import time

import numpy as np

from pacpriv._random import trial_seed
from pacpriv.pac.per_record._attack import informed_attack
from pacpriv.pac.per_record._calibration import (
    CalibrationTrials,
    plan_from_trials,
    simulate_calibration_trials,
)
from pacpriv.pac.per_record._certificate import UncertifiableTarget
from pacpriv.pac.release import privatize
from pacpriv.pac.samplers import PoissonSampler

__all__ = ["AUDIT_SEED", "PER_RECORD_LABEL", "SAMPLE_LABEL", "audited_sample", "coverage_text",
           "per_record_row", "simulate_record_trials"]

PER_RECORD_LABEL = "PAC, per record (informed adversary)"
#: Label of the row when only a sample of the records is audited (``{k}`` of ``{n}``).
SAMPLE_LABEL = "PAC, per record, SAMPLE of {k} of {n} records (informed adversary)"
#: Public seed of the audited-record sample.
AUDIT_SEED = 0
#: Shape trials / all trials.
SHAPE_FRACTION = 0.25


def audited_sample(n_records: int, k: int) -> np.ndarray:
    """Every record when ``k >= n_records``; else ``k`` distinct indices drawn with the public
    seed :data:`AUDIT_SEED` (sorted)."""
    if int(k) >= n_records:
        return np.arange(n_records, dtype=np.int64)
    return np.sort(np.random.default_rng(AUDIT_SEED).choice(n_records, size=int(k),
                                                            replace=False))


def coverage_text(k: int, n: int) -> str:
    """Which records a per-record bound covers: every record, or a named sample."""
    if k >= n:
        return f"every record of the pool (all {n})"
    return (f"a public random SAMPLE of {k} of the {n} records only (seed {AUDIT_SEED}); the "
            f"other {n - k} records are NOT bounded")


def simulate_record_trials(mech, pool, *, n_trials: int, n_records_audited: int, root,
                           execution, targets: tuple = (), confidence: float = 0.95
                           ) -> CalibrationTrials:
    """The per-record trials of one dataset (seed ``root``), reused for every bound; each of
    ``targets`` is refused after the shape trials when no certification could meet it."""
    n = pool[0].shape[0]
    try:
        return simulate_calibration_trials(
            mech, pool, n_trials=n_trials, sampler=PoissonSampler(0.5),
            records=audited_sample(n, n_records_audited), shape="isotropic",
            shape_fraction=SHAPE_FRACTION, rng=trial_seed(root, 0), execution=execution,
            targets=tuple(targets), confidence=confidence)
    except UncertifiableTarget as err:  # the flag to change, as the up-front check says
        raise ValueError(f"`per_record_trials`: {err}") from None


def per_record_row(row_cls, mech, data, trials: CalibrationTrials, *, target_accuracy,
                   n_repeats, confidence, root, attack_rng, evaluate, dataset, secrets):
    """Certify, attack and evaluate one bound; returns ``(row, plan, attack)``."""
    tic = time.perf_counter()
    X, y, members = data
    n = X.shape[0]
    plan = plan_from_trials(trials, target_accuracy=target_accuracy, confidence=confidence)
    informed = informed_attack(trials.shape_trials, plan, confidence=confidence,
                               rng=trial_seed(root, 1))
    clean = mech((X[members], y[members]))
    draws = (privatize(clean, plan, rng=trial_seed(root, 2 + r)) for r in range(n_repeats))
    mean, std, attack = evaluate(mech, draws, data, confidence=confidence, attack_rng=attack_rng)
    power = plan.expected_noise_power
    k = plan.records.size
    label = PER_RECORD_LABEL if k >= n else SAMPLE_LABEL.format(k=k, n=n)
    scope = ", every record" if k >= n else f", SAMPLE of {k} of {n} records only"
    row = row_cls(
        method=label, family="pac", noise=math.sqrt(power / mech.dim),
        noise_units="RMS noise std per parameter sqrt(E||B||²/d)", noise_multiplier=None,
        gradient_noise_std=None, parameter_noise_rms=math.sqrt(power / mech.dim),
        expected_noise_power=power, mi_budget=None, test_accuracy=mean, test_accuracy_std=std,
        accuracy_bound=plan.max_accuracy_upper,
        bound_source=(f"certified (1−γ = {confidence:g}{scope}): per-record informed-adversary "
                      f"accuracy for {coverage_text(k, n)}; {plan.method}"),
        # the per-record trials are simulated once per dataset; their time counts in each row
        attack=attack, n_repeats=n_repeats,
        wall_time_s=time.perf_counter() - tic + trials.elapsed_s,
        informed_attack=informed.to_dict(), dataset=dataset, target_accuracy=target_accuracy,
        secret=secrets["pac_record" if k >= n else "pac_record_sample"],
        bound_label=plan.bound_label, mechanism=mech, noise_plan=plan,
    )
    return row, plan, informed
