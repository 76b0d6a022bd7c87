"""What each stabiliser buys: per-record noise and test accuracy of black-box variants.

:func:`stabiliser_effects` simulates the per-record differences of several black boxes on the
same pool (the same trials and the same public sample of records for all of them) and, for
each, sets isotropic noise so that the sampled records' **plug-in** informed-adversary
accuracy is at most the target, then measures the test accuracy of the noisy model. These are
*estimates* for comparing the black boxes (few trials, a sample of records, no confidence
margin), never certificates: the certified every-record rows are in the comparison table.

Variants (the stabilisers of :mod:`pacpriv.compare.blackbox` and
:mod:`pacpriv.mechanisms.stabilise`, added one at a time where it makes sense):

1. the DP-SGD rows' model trained without noise (no stabiliser);
2. clipped, noise-free full-batch gradient descent (C = 1, 100 steps, L2 0.02);
3. the exact clipped, L2-regularised minimiser on all features (whitened);
4. the same without clipping (c = 10⁶);
5. the same on the pool's principal directions (Kaiser): the default stabilised black box;
6. 5 with λ chosen inside by 3-fold cross-validation;
7. 5 averaged over 4 record-hashed shards (subsample-and-aggregate).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pacpriv._display import Displayable, Summary
from pacpriv._numbers import format_bound
from pacpriv._random import RNGLike, as_seed_sequence, seed_to_dict, trial_seed
from pacpriv._validation import check_int, check_real
from pacpriv.pac.engine._options import ExecutionOptions, resolve_execution
from pacpriv.pac.noise._plan import NoisePlan
from pacpriv.pac.per_record._math import bayes_accuracy

__all__ = ["EffectRow", "StabiliserEffects", "stabiliser_effects"]

ESTIMATE_LABEL = "estimated (plug-in, {t} trials, SAMPLE of {k} records; not certified)"


@dataclass(frozen=True)
class EffectRow:
    """One black box: its per-record noise (estimated) and the test accuracy under it."""

    variant: str
    description: str
    dim: int
    clean_test_accuracy: float
    expected_noise_power: float
    test_accuracy: float
    test_accuracy_std: float
    max_plug_in_accuracy: float
    wall_time_s: float

    def to_dict(self) -> dict:
        """JSON."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class StabiliserEffects(Displayable):
    """The effects table (:func:`stabiliser_effects`)."""

    dataset: str
    target_accuracy: float
    label: str
    rows: tuple[EffectRow, ...]
    seed: dict
    pool: Any = field(repr=False, compare=False, default=None)

    def summary(self) -> Summary:
        """One line per variant."""
        return Summary(f"Stabiliser effects on {self.dataset} (per-record noise {self.label})",
                       [(r.variant, f"E‖B‖² {r.expected_noise_power:.3g}; test accuracy "
                         f"{r.test_accuracy:.3f} ± {r.test_accuracy_std:.3f}", "plain")
                        for r in self.rows])

    def to_dict(self) -> dict:
        """JSON (no records)."""
        return {"dataset": self.dataset, "target_accuracy": self.target_accuracy,
                "label": self.label, "rows": [r.to_dict() for r in self.rows],
                "seed": self.seed}

    def to_markdown(self) -> str:
        """The table."""
        out = [f"Stabilisers on {self.dataset}: isotropic noise so that the sampled records' "
               f"informed-adversary accuracy is <= {self.target_accuracy:g}, "
               f"**{self.label}**.", "",
               "| black box | parameters | clean test accuracy | noise E‖B‖² | test accuracy |",
               "| --- | --- | --- | --- | --- |"]
        for r in self.rows:
            out.append(f"| {r.variant} | {r.dim} | {r.clean_test_accuracy:.3f} | "
                       f"{format_bound(r.expected_noise_power, 3, side='up')} | "
                       f"{r.test_accuracy:.3f} ± {r.test_accuracy_std:.3f} |")
        return "\n".join(out)

    def report_section(self) -> dict:
        """A report section."""
        return {"title": f"Stabiliser effects ({self.dataset})",
                "markdown": self.to_markdown(), "effects": self.to_dict()}


def _variants(X, classes, sampling_rate, sgd) -> list[tuple[str, Any]]:
    from pacpriv.mechanisms.stabilise import (
        ClippedGradientDescent,
        SubsampleAggregate,
        TunedStableLogistic,
    )
    from pacpriv.mechanisms.stable_logistic import StableLogistic

    kw = dict(classes=tuple(range(classes)), sampling_rate=sampling_rate)
    whole = StableLogistic.for_pool(X, components=None, **kw)
    kaiser = StableLogistic.for_pool(X, **kw)
    n_pub = sampling_rate * X.shape[0]
    return [
        ("DP-SGD's model, no noise (no stabiliser)", sgd),
        ("clipped noise-free GD (C = 1, 100 steps, L2 0.02)",
         ClippedGradientDescent(n_features=X.shape[1], n_classes=classes, normalizer=n_pub)),
        ("exact clipped L2 minimiser, all features whitened", whole),
        ("the same without clipping (c = 1e6)", replace(whole, clip=1e6)),
        ("exact clipped L2 minimiser on the pool's principal directions (default)", kaiser),
        ("default, λ chosen inside (3-fold CV)", TunedStableLogistic(kaiser)),
        ("default, averaged over 4 shards (subsample-and-aggregate)",
         SubsampleAggregate(replace(kaiser, normalizer=kaiser.normalizer / 4), 4)),
    ]


def stabiliser_effects(dataset: Any = "breast_cancer", *, target_accuracy: float = 0.6,
                       n_trials: int = 16, n_records: int = 20, n_repeats: int = 5,
                       rng: RNGLike = None,
                       execution: ExecutionOptions | None = None) -> StabiliserEffects:
    """Per-record noise (estimated) and test accuracy of each stabilised black box.

    Parameters
    ----------
    dataset : str, path or Dataset, default "breast_cancer"
        A classification pool (as in :func:`~pacpriv.compare.compare_pac_dpsgd`).
    target_accuracy : float, default 0.6
        In (½, 1).
    n_trials : int, default 16
        Trials (>= 2), the same for every variant.
    n_records : int, default 20
        Size of the public random sample of records (seed 0) whose differences are simulated.
    n_repeats : int, default 5
        Noise draws per variant in the test accuracy.
    rng, execution
        Root seed (split: child 0, as in the comparison; trials: child 8) and execution
        options.

    Returns
    -------
    StabiliserEffects

    Raises
    ------
    TypeError, ValueError
        Invalid arguments, before any training.
    """
    from pacpriv.compare.models import (  # torch (pacpriv[torch])
        LogisticRegressionMechanism,
        evaluate_draws,
        scale_features,
    )
    from pacpriv.compare.per_record import audited_sample
    from pacpriv.compare.run import _compare_iv
    from pacpriv.pac.per_record._certificate import plug_in_scale
    from pacpriv.pac.per_record._exposure import simulate_differences
    from pacpriv.pac.release import privatize
    from pacpriv.pac.samplers import PoissonSampler

    a = check_real(target_accuracy, "target_accuracy", low=0.5, high=1.0,
                   low_inclusive=False, high_inclusive=False)
    ds, _ = _compare_iv(dataset, a, 10, 5, 1.0, 0.5, 2, 1, "certified", 0.95, 0)
    n_trials = check_int(n_trials, "n_trials", low=2)
    k = check_int(n_records, "n_records", low=1, high=ds.n_records)
    n_repeats = check_int(n_repeats, "n_repeats", low=1)
    run = resolve_execution(execution)
    root = as_seed_sequence(rng)
    X = scale_features(ds.X, ds.feature_low, ds.feature_high)
    classes = np.asarray(ds.classes)
    y = np.searchsorted(classes, np.asarray(ds.y)).astype(np.int64)
    sampler = PoissonSampler(0.5)
    members = sampler.draw(X.shape[0], np.random.default_rng(trial_seed(root, 0)))
    sgd = LogisticRegressionMechanism(n_features=X.shape[1], n_classes=classes.size,
                                      steps_per_epoch=5, epochs=10, learning_rate=0.5,
                                      public_seed=0)
    records = audited_sample(X.shape[0], k)
    data = (X, y, members)
    rows = []
    for j, (name, mech) in enumerate(_variants(X, classes.size, 0.5, sgd)):
        tic = time.perf_counter()
        diffs = simulate_differences(mech, (X, y), n_trials=n_trials, sampler=sampler,
                                     records=records, rng=trial_seed(root, 8), execution=run)
        s = plug_in_scale(np.linalg.norm(diffs.differences, axis=-1), a, 0.5)
        dim = int(diffs.dim)
        plan = NoisePlan(rule="isotropic (effects estimate)", mi_budget=math.nan,
                         mi_bound=math.nan, linearised_mi_bound=math.nan, mi_claim=math.nan,
                         confidence=None, dim=dim, basis=None, noise_std=np.full(dim, s),
                         residual_std=0.0)
        clean = mech((X[members], y[members]))
        clean_acc, _, _ = evaluate_draws(mech, [clean], data, confidence=0.95,
                                         attack_rng=trial_seed(root, 9))
        draws = (privatize(clean, plan, rng=trial_seed(trial_seed(root, 10 + j), r))
                 for r in range(n_repeats))
        mean, sd, _ = evaluate_draws(mech, draws, data, confidence=0.95,
                                     attack_rng=trial_seed(root, 9))
        worst = float(np.max(bayes_accuracy(
            np.linalg.norm(diffs.differences, axis=-1) / s, 0.5).mean(axis=0))) if s else 0.5
        rows.append(EffectRow(variant=name, description=mech.describe(), dim=dim,
                              clean_test_accuracy=clean_acc, expected_noise_power=dim * s**2,
                              test_accuracy=mean, test_accuracy_std=sd,
                              max_plug_in_accuracy=worst,
                              wall_time_s=time.perf_counter() - tic))
    return StabiliserEffects(dataset=ds.name, target_accuracy=a,
                             label=ESTIMATE_LABEL.format(t=n_trials, k=k), rows=tuple(rows),
                             seed=seed_to_dict(root), pool=(X, y))
