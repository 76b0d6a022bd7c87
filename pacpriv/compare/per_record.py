"""The "PAC, per record (informed adversary)" row of :func:`compare_pac_dpsgd` (imports torch
only through the mechanism it is given).

The same noise-free training as the whole-subset PAC row is run as a black box; for every
record of the pool (by default; or a public random sample, labelled as such) the per-record
differences ``Δᵢ = f(S ∪ {i}) − f(S ∖ {i})`` are simulated
(:func:`pacpriv.pac.per_record.simulate_differences`). The first part of the trials
calibrates isotropic noise so that every audited record's informed-adversary accuracy is
certified ``<= a`` (:func:`pacpriv.pac.per_record.calibrate_from_differences`); the
held-out rest runs the informed likelihood-ratio attack
(:func:`pacpriv.pac.per_record.informed_attack`). The noise is added once to the final
parameters, like the whole-subset row (PAC Privacy, Xiao & Devadas 2023, §2).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from pacpriv._random import trial_seed
from pacpriv.pac.per_record._attack import informed_attack
from pacpriv.pac.per_record._calibration import calibrate_from_differences
from pacpriv.pac.per_record._exposure import simulate_differences
from pacpriv.pac.release import privatize
from pacpriv.pac.samplers import PoissonSampler

__all__ = ["PER_RECORD_LABEL", "SAMPLE_LABEL", "audited_sample", "coverage_text",
           "per_record_row", "split_differences"]

PER_RECORD_LABEL = "PAC, per record (informed adversary)"
#: Label of the row when only a sample of the records is audited (``{k}`` of ``{n}``).
SAMPLE_LABEL = "PAC, per record, SAMPLE of {k} of {n} records (informed adversary)"
#: Public seed of the audited-record sample.
AUDIT_SEED = 0


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


def split_differences(diffs, n_first: int):
    """Two :class:`RecordDifferences` of trials ``[0, n_first)`` and ``[n_first, n)``."""
    first = replace(diffs, differences=diffs.differences[:n_first],
                    outputs=diffs.outputs[:n_first])
    rest = replace(diffs, differences=diffs.differences[n_first:],
                   outputs=diffs.outputs[n_first:])
    return first, rest


def per_record_row(row_cls, mech, data, *, target_accuracy, n_trials, n_records_audited,
                   holdout, n_repeats, confidence, root, attack_rng, execution,
                   evaluate):
    """Simulate, calibrate, attack and evaluate; returns ``(row, plan, attack, differences)``."""
    tic = time.perf_counter()
    X, y, members = data
    records = audited_sample(X.shape[0], n_records_audited)
    n_attack = max(2, round(n_trials * holdout))
    diffs = simulate_differences(mech, (X, y), n_trials=n_trials, records=records,
                                 sampler=PoissonSampler(0.5), rng=trial_seed(root, 0),
                                 execution=execution)
    cal, held = split_differences(diffs, n_trials - n_attack)
    plan = calibrate_from_differences(cal, target_accuracy=target_accuracy,
                                      confidence=confidence)
    informed = informed_attack(held, plan, confidence=confidence, rng=trial_seed(root, 1))
    clean = mech((X[members], y[members]))
    draws = (privatize(clean, plan, rng=trial_seed(root, 2 + r)) for r in range(n_repeats))
    mean, std, attack = evaluate(mech, draws, data, confidence=confidence, attack_rng=attack_rng)
    power = plan.expected_noise_power
    n = X.shape[0]
    label = PER_RECORD_LABEL if records.size >= n else SAMPLE_LABEL.format(k=records.size, n=n)
    scope = (", every record" if records.size >= n
             else f", SAMPLE of {records.size} of {n} records only")
    row = row_cls(
        method=label, family="pac", noise=math.sqrt(power / mech.dim),
        noise_units="RMS noise std per parameter sqrt(E||B||²/d)", noise_multiplier=None,
        gradient_noise_std=None, parameter_noise_rms=math.sqrt(power / mech.dim),
        expected_noise_power=power, mi_budget=None, test_accuracy=mean, test_accuracy_std=std,
        accuracy_bound=plan.max_accuracy_upper,
        bound_source=(f"certified (1−γ = {confidence:g}{scope}): per-record "
                      f"informed-adversary accuracy for "
                      f"{coverage_text(records.size, n)}; empirical Bernstein + union bound"),
        attack=attack, n_repeats=n_repeats, wall_time_s=time.perf_counter() - tic,
        informed_attack=informed.to_dict(),
    )
    return row, plan, informed, diffs
