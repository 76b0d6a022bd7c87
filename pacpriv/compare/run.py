"""PAC Privacy vs DP-SGD at the same membership-inference accuracy bound.

:func:`compare_pac_dpsgd` trains one model (logistic regression, :mod:`pacpriv.compare.models`)
on the same data with the same epochs and steps in three ways, each certified to the same
membership-inference accuracy bound ``a``:

* **DP-SGD, closed form**: σ from the chi-square closed form [2]_;
* **DP-SGD, exact**: σ calibrated to the exact accuracy ½ + ½·TV [2]_ (needs
  :mod:`pacpriv.dpsgd.calibration`; the row is left out with a note when it is missing);
* **PAC, whole subset**: a black box (:mod:`pacpriv.compare.blackbox`; by default the
  stabilised logistic regression) run on Poisson-½ subsets by the engine; Gaussian noise for
  the budget ``v = ln 2 − H(a)`` nats [1]_ (Thm 1, Thm 3) is added once to the final
  parameters;
* **PAC, per record (informed adversary)**: noise certified so that **every record of the
  pool** has informed-adversary accuracy ``<= a`` [1]_ §2 (betting certificate,
  :mod:`pacpriv.pac.per_record._calibration`), with the informed likelihood-ratio attack
  measured on simulated trials;
* references: non-private (DP-SGD's model, and the PAC black box), the majority class, and
  DP-SGD (exact σ) on the PAC black box's features.

:func:`compare_table` runs several datasets and bounds (one simulation per dataset, shared by
its bounds) and returns a :class:`~pacpriv.compare.results.ComparisonTable`.

Each row gives the noise, the test accuracy and a loss-threshold attack's accuracy with a
confidence interval, under its own threat model (:data:`THREAT_MODELS`). torch is imported
lazily (``pip install pacpriv[torch]``).

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 1 and Thm 3.
.. [2] Membership-inference accuracy bound for DP-SGD with random allocation (RA-MIA,
   CWI / VU Amsterdam): closed form from the chi-square divergence and exact TV.
.. [3] S. Yeom et al. Privacy Risk in Machine Learning. CSF 2018 (loss-threshold attack).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacpriv._random import RNGLike, seed_to_dict
from pacpriv._validation import (
    check_class_labels,
    check_int,
    check_real,
    class_labels_message,
    keyword_fields,
)
from pacpriv.compare._phases import checkpoint_root
from pacpriv.compare.blackbox import StableBlackBox, as_black_box
from pacpriv.compare.results import ComparisonResult, ComparisonRow, ComparisonTable
from pacpriv.datasets import Dataset, load_dataset
from pacpriv.pac.engine._options import (
    ExecutionOptions,
    execution_hints,
    refuses_removed,
    resolve_execution,
)
from pacpriv.pac.engine._simulate import _check_memory
from pacpriv.pac.noise._registry import DEFAULT_RULE, SHORTHANDS, as_rule
from pacpriv.pac.noise._rule import NoiseRule
from pacpriv.pac.per_record._certificate import check_betting_feasible
from pacpriv.threat_models import THREAT_MODELS

__all__ = [
    "COMPARISON_RULES",
    "THREAT_MODELS",
    "ComparisonResult",
    "ComparisonRow",
    "ComparisonSettings",
    "ComparisonTable",
    "check_comparison",
    "compare_pac_dpsgd",
    "compare_table",
]

#: Rule names the comparison takes as shorthands (any rule object is accepted too).
COMPARISON_RULES = SHORTHANDS

#: Most training steps per model (epochs, steps per epoch and their product): past it one
#: model alone trains for hours, and the DP-SGD accountants' step arrays grow past memory.
MAX_STEPS = 10**7
#: Most models per row: the test accuracy is an average; more repeats only cost time.
MAX_REPEATS = 1000
#: Most PAC simulations (and per-record trials): each trains a model, so 10**6 is days.
MAX_TRIALS = 10**6


def _compare_iv(dataset, target_accuracy, epochs, steps_per_epoch, max_grad_norm,
                learning_rate, n_trials, n_repeats, rule, confidence, public_seed):
    a = check_real(target_accuracy, "target_accuracy", low=0.5, high=1.0,
                   low_inclusive=False, high_inclusive=False)
    values = dict(
        target_accuracy=a,
        epochs=check_int(epochs, "epochs", low=1, high=MAX_STEPS),
        steps_per_epoch=check_int(steps_per_epoch, "steps_per_epoch", low=1, high=MAX_STEPS),
        max_grad_norm=check_real(max_grad_norm, "max_grad_norm", low=0.0, low_inclusive=False),
        learning_rate=check_real(learning_rate, "learning_rate", low=0.0, low_inclusive=False),
        n_trials=check_int(n_trials, "n_trials", low=2, high=MAX_TRIALS),
        n_repeats=check_int(n_repeats, "n_repeats", low=1, high=MAX_REPEATS),
        confidence=check_real(confidence, "confidence", low=0.0, high=1.0,
                              low_inclusive=False, high_inclusive=False),
        public_seed=check_int(public_seed, "public_seed", low=0),
    )
    steps = values["epochs"] * values["steps_per_epoch"]
    if steps > MAX_STEPS:
        raise ValueError(
            f"`steps_per_epoch` x `epochs` must be at most {MAX_STEPS} training steps per "
            f"model; got {values['steps_per_epoch']} x {values['epochs']} = {steps}."
        )
    allowed = None if isinstance(rule, NoiseRule) else COMPARISON_RULES
    values["rule"] = as_rule(rule, allowed=allowed)
    if not isinstance(dataset, Dataset):
        if not isinstance(dataset, (str, os.PathLike)):
            raise TypeError(f"`dataset` must be a name, a path or a Dataset; "
                            f"got {type(dataset).__name__}.")
        dataset = load_dataset(dataset)
    if dataset.y is not None:  # continuous or about one record per class: the one message
        where = f"the label column of `dataset` {dataset.name!r}"
        if dataset.classes is None:  # a regression target
            raise ValueError(class_labels_message(where, "compare_pac_dpsgd", None,
                                                  dataset.n_records))
        check_class_labels(dataset.y, where, "compare_pac_dpsgd")
    if dataset.y is None:  # "has classes None" said nothing (eighth new-user pass)
        raise ValueError(f"`dataset` {dataset.name!r} has no labels: compare trains a "
                         "classifier; load a labelled pool (load_dataset(path, "
                         "label_column=...)).")
    if dataset.classes is None or len(dataset.classes) < 2 or dataset.n_records < 8:
        raise ValueError(
            f"`dataset` must be a classification pool with >= 2 classes and >= 8 records; "
            f"{dataset.name!r} has classes {dataset.classes} and {dataset.n_records} records."
        )
    features = np.asarray(dataset.X, dtype=np.float64)
    if features.size and not np.any(features != features[:1]):  # no direction to learn: the
        raise ValueError(  # black box's whitening divided by 0 and its Newton fit never converged
            f"`dataset` {dataset.name!r}: every feature column is constant over its "
            f"{dataset.n_records} records, so there is nothing to learn and compare's models "
            "cannot be fitted: give a pool with a varying feature.")
    _check_memory(values["n_trials"], dataset.n_records, None)  # the engine's, before any trial
    return dataset, values


_SHAPE_FRACTION = 0.25  # per-record shape trials / all (pacpriv.compare.per_record)


def _execution(execution: ExecutionOptions | None) -> ExecutionOptions:
    """The comparison's execution options (a ``checkpoint`` is the folder of all its
    simulations: :func:`checkpoint_root`; no ``output_path``: it runs several simulations)."""
    execution = resolve_execution(execution)
    if execution.output_path is not None:
        raise ValueError(
            f"`options.output_path` must be None for compare_pac_dpsgd (the output_path of "
            f"`execution`: it runs several simulations); got {execution.output_path!r}."
        )
    return execution


def _per_record_iv(n_trials, n_records, values, pool_size, black_box) -> dict:
    """Validate the per-record row's settings and its feasibility, before any training."""
    trials = check_int(n_trials, "per_record_trials", low=0, high=MAX_TRIALS)
    k = pool_size if n_records is None else check_int(n_records, "per_record_records", low=1,
                                                       high=pool_size)
    if trials:
        if trials < 10:
            raise ValueError(f"`per_record_trials` must be 0 or >= 10; got {trials}.")
        n_cert = trials - max(2, round(trials * _SHAPE_FRACTION))
        for a in values["targets"]:  # a declared range lowers the floor: its data-free
            try:  # part here, the rest after the shape trials (check_scale_feasible)
                check_betting_feasible(a, n_cert, k, 0.5, values["confidence"],
                                       declared_range=isinstance(black_box, StableBlackBox))
            except ValueError as err:
                raise ValueError(f"`per_record_trials`: {err}") from None
    return {"per_record_trials": trials,
            "per_record_records": None if n_records is None else k}


@dataclass(frozen=True)
class ComparisonSettings:
    """Everything a comparison runs with, except the data, the bounds and the seed.

    The fields are the keyword arguments of :func:`compare_pac_dpsgd` of the same names
    (validated there); :func:`compare_table` takes one such object for all its comparisons.
    """

    epochs: int = field(default=10, metadata={"flag": "--epochs",
                                              "help": "epochs E, in [1, 1e7] (default 10)"})
    steps_per_epoch: int = field(default=5, metadata={"flag": "--steps-per-epoch",
                                                      "help": "steps per epoch M, in [1, 1e7] "
                                                              "(default 5)"})
    max_grad_norm: float = field(default=1.0, metadata={
        "flag": "--max-grad-norm", "help": "DP-SGD clipping norm C > 0 (default 1)"})
    learning_rate: float = field(default=0.5, metadata={
        "flag": "--learning-rate", "help": "SGD step size > 0 (default 0.5)"})
    n_trials: int = field(default=500, metadata={
        "flag": "--trials", "metavar": "TRIALS", "help": "PAC simulations (>= 2, default 500)"})
    n_repeats: int = field(default=5, metadata={
        "flag": "--repeats", "metavar": "REPEATS",
        "help": "models averaged per row in the test accuracy, in [1, 1000] (default 5)"})
    rule: Any = field(default=DEFAULT_RULE, metadata={
        "flag": "--rule", "choices": COMPARISON_RULES,
        "help": f"PAC noise rule (default {DEFAULT_RULE}; plug-in rules are estimates)"})
    exact: bool = field(default=True, metadata={
        "flag": "--no-exact", "negate": True, "help": "skip the exact DP-SGD calibration"})
    confidence: float = 0.95
    public_seed: int = field(default=0, metadata={
        "flag": "--public-seed", "help": "public seed (an integer >= 0) of the initialisation "
                                         "and the PAC batch "
        "order (default 0)"})
    per_record_trials: int = field(default=400, metadata={
        "flag": "--per-record-trials", "help": "trials of the per-record PAC row, in [0, 1e6] "
                                               "(informed "
        "adversary, every record by default); each costs 1 + (audited records) trainings; 0 "
        "leaves the row out (default 400)"})
    per_record_records: int | None = field(default=None, metadata={
        "flag": "--per-record-records", "help": "audit only a public random sample of K >= 1 "
        "records (the row is then labelled as a sample: the other records are not bounded). "
        "Default: every record of the pool"})
    black_box: Any = None


#: The blind-guess rate of the comparison's secret subset (Poisson sampling at rate 1/2).
COMPARISON_PRIOR = 0.5


def check_derived(targets, *, steps_per_epoch: int, epochs: int,
                  what: str = "`target_accuracy`") -> None:
    """Check, before any work, what the comparison derives from each bound in ``targets``.

    The PAC side's MI budget ``mi_budget_for_accuracy(a, prior=1/2)`` (the comparison's
    Poisson 1/2 secret subset) must lie in the range the PAC rules accept, and the DP-SGD
    side's closed-form noise multiplier must be finite and positive; a bound a rounding step
    above 1/2 (``0.5000000000000001``) derives a budget of 0. ``what`` names the argument (the
    CLI passes ``--target-accuracy``).

    Raises
    ------
    ValueError
        Naming ``what``, the bound, the derived value and the valid range.
    """
    from pacpriv.dpsgd.bounds import closed_form_noise_multiplier
    from pacpriv.pac.bounds._posterior import mi_budget_for_accuracy
    from pacpriv.pac.noise._calibration import MAX_MI_BUDGET, MIN_MI_BUDGET

    for a in targets:
        v = float(mi_budget_for_accuracy(a, prior=COMPARISON_PRIOR))
        if not MIN_MI_BUDGET <= v <= MAX_MI_BUDGET:
            raise ValueError(
                f"{what} {a!r} is too close to the blind-guess rate {COMPARISON_PRIOR:g}: its "
                f"MI budget {v:g} nats is outside [{MIN_MI_BUDGET:g}, {MAX_MI_BUDGET:g}] (no "
                "noise scale can meet it); give a larger target")
        sigma = float(closed_form_noise_multiplier(a, steps_per_epoch=steps_per_epoch,
                                                   epochs=epochs))
        if not (math.isfinite(sigma) and sigma > 0):
            raise ValueError(
                f"{what} {a!r}: the DP-SGD noise multiplier for it at {steps_per_epoch} steps "
                f"per epoch x {epochs} epochs is {sigma:g}, not a finite positive number; give "
                "a target further from 0.5 and 1")


def _validated(settings: ComparisonSettings, targets, dataset,
               what: str = "`target_accuracy`") -> tuple[Any, ComparisonSettings]:
    """The dataset and a validated copy of ``settings`` (black box resolved)."""
    if not isinstance(settings, ComparisonSettings):
        raise TypeError(f"`settings` must be a ComparisonSettings; got "
                        f"{type(settings).__name__}.")
    st = settings
    ds, values = _compare_iv(dataset, targets[0], st.epochs, st.steps_per_epoch,
                             st.max_grad_norm, st.learning_rate, st.n_trials, st.n_repeats,
                             st.rule, st.confidence, st.public_seed)
    check_derived(targets, steps_per_epoch=values["steps_per_epoch"], epochs=values["epochs"],
                  what=what)
    values["targets"] = targets
    if not isinstance(st.exact, bool):
        raise TypeError("`exact` must be a bool (include the exact-σ row).")
    box = as_black_box(st.black_box)
    per_record = _per_record_iv(st.per_record_trials, st.per_record_records, values,
                                ds.n_records, box)
    values["rule"].validate(n_trials=values["n_trials"])  # the whole-subset row's, up front
    return ds, ComparisonSettings(
        epochs=values["epochs"], steps_per_epoch=values["steps_per_epoch"],
        max_grad_norm=values["max_grad_norm"], learning_rate=values["learning_rate"],
        n_trials=values["n_trials"], n_repeats=values["n_repeats"], rule=values["rule"],
        exact=st.exact, confidence=values["confidence"], public_seed=values["public_seed"],
        black_box=box, **per_record)


def check_comparison(settings: ComparisonSettings, target_accuracies, datasets,
                     what: str = "`target_accuracies`") -> None:
    """Validate ``settings`` for every dataset and bound, as :func:`compare_table` does before
    any training (a caller, e.g. the CLI, checks everything before it takes an output folder).

    ``what`` names the bounds in a message about what they derive (:func:`check_derived`).

    Raises
    ------
    TypeError, ValueError
        As :func:`compare_table`.
    """
    targets = _targets(target_accuracies)
    for dataset in datasets:
        _validated(settings, targets, dataset, what)


def _targets(target_accuracies) -> tuple[float, ...]:
    vals = [target_accuracies] if isinstance(target_accuracies, (int, float)) else list(
        target_accuracies)
    if not vals:
        raise ValueError("`target_accuracies` must hold at least one bound in (0.5, 1).")
    out = tuple(sorted({check_real(a, "target_accuracies", low=0.5, high=1.0,
                                   low_inclusive=False, high_inclusive=False) for a in vals}))
    return out


def _warmed() -> float:
    """Import the comparison's modules (torch: ``pacpriv[torch]``) and return the start of
    the run's ``time_limit`` clock (``time.monotonic()``): imports aside, every stage after
    it counts (twelfth new-user pass, R8, R9)."""
    from pacpriv.compare.experiment import warm_imports

    warm_imports()
    return time.monotonic()


def _results(ds, root, targets, st, execution, tic, *,
             started: float | None = None) -> list[ComparisonResult]:
    from pacpriv.compare.experiment import run_comparison  # imports torch (pacpriv[torch])
    from pacpriv.pac.engine._limit import whole_run_words

    with whole_run_words(execution.time_limit):  # one limit for all the simulations
        parts = run_comparison(ds, root=root, targets=targets, settings=st,
                               execution=execution, started=started)
    elapsed = time.perf_counter() - tic
    return [ComparisonResult(seed=seed_to_dict(root), elapsed_s=elapsed,
                             threat_models=dict(THREAT_MODELS), **p) for p in parts]


def _settings(settings: ComparisonSettings | None, fields: dict) -> ComparisonSettings:
    """``settings``, or a :class:`ComparisonSettings` of the keyword ``fields`` (not both)."""
    names = tuple(f.name for f in dataclasses.fields(ComparisonSettings))
    given = keyword_fields(fields, names, where="compare_pac_dpsgd", owner="ComparisonSettings")
    if settings is None:
        return ComparisonSettings(**given)
    if not isinstance(settings, ComparisonSettings):
        raise TypeError("`settings` must be a ComparisonSettings or None; got "
                        f"{type(settings).__name__}.")
    if given:
        raise TypeError(f"pass {', '.join(sorted(given))} either in `settings` or as keywords, "
                        "not both.")
    return settings


@refuses_removed(execution_hints())
def compare_pac_dpsgd(
    dataset: Any = "breast_cancer",
    *,
    target_accuracy: float = 0.6,
    settings: ComparisonSettings | None = None,
    rng: RNGLike = None,
    execution: ExecutionOptions | None = None,
    **fields: Any,
) -> ComparisonResult:
    """Compare PAC noise and DP-SGD at the same membership-inference accuracy bound.

    Parameters
    ----------
    dataset : str, path or Dataset, default "breast_cancer"
        A classification pool (:func:`pacpriv.datasets.load_dataset`). Features are scaled
        to [-1, 1] with its feature ranges (``bounds_source``: published, declared, or the
        pool's own min/max, which one outlier can dominate: a note then says when the
        non-private model is at chance); a Poisson-½ subset of the records is the
        training set (members), the rest is the test set and the attack's non-members.
    target_accuracy : float, default 0.6
        Bound ``a`` in (½, 1) for every method.
    settings : ComparisonSettings, optional
        Every setting below but ``rng`` and ``execution`` in one object; or give them as
        keywords (``fields``), not both. The settings are:
    epochs, steps_per_epoch : int, default 10, 5
        E >= 1 and M >= 1, the same for every method.
    max_grad_norm : float, default 1.0
        DP-SGD clipping norm C > 0 (the PAC training does not clip).
    learning_rate : float, default 0.5
        SGD step size η > 0 (no momentum).
    n_trials : int, default 500
        PAC simulations (>= 2); more give a better covariance estimate (d = K·(p + 1)).
    n_repeats : int, default 5
        Models per row averaged in the test accuracy (>= 1).
    rule : NoiseRule or str, default "certified"
        PAC noise rule: a rule object of :mod:`pacpriv.pac.noise`, or a name of
        :data:`COMPARISON_RULES` for its defaults; ``"certified"`` holds with confidence 0.95
        over the simulation, the plug-in rules are estimates (the row says which).
    exact : bool, default True
        Include the DP-SGD row calibrated with the exact method.
    confidence : float, default 0.95
        Level of the attack-accuracy intervals, in (0, 1).
    public_seed : int, default 0
        Public seed of the model initialisation and of the PAC training's batch order.
    rng : None, int, SeedSequence or Generator
        Root seed of the whole evaluation (membership split, simulation, PAC noise draws,
        DP-SGD allocations and noise, attack splits); None = fresh OS entropy. Either way it
        is recorded in ``seed`` and the reports, so the comparison is reproducible by anyone
        holding them: its models are evaluation artefacts, never private releases (the
        reports publish no model or release vector and say so).
    per_record_trials : int, default 400
        Trials of the per-record row (0 leaves the row out): a quarter are shape trials (also
        used by the informed attack), the rest certify. Each costs ``1 + (audited records)``
        evaluations, or one call of a black box with a fast per-record path.
    per_record_records : int or None, default None
        Audited records of the per-record row. None (default): **every record of the pool**,
        so the row's bound holds for all of them at once. An int ``k < n`` audits a public
        random sample (seed 0) only; the row is then labelled as a sample and its bound says
        nothing about the other ``n − k`` records.
    execution : ExecutionOptions, optional
        How the PAC and per-record simulations run (:class:`~pacpriv.pac.engine.ExecutionOptions`:
        ``n_jobs``, ``backend``, ``progress``, ``retries``, ``timeout``, ``batch_size``);
        ``checkpoint`` and ``output_path`` must be None (the comparison runs several
        simulations). Never changes the result. A ``time_limit`` covers the whole comparison
        from after its imports: each simulation is refused on its probe's estimate of what is
        left or stopped at the limit, and every other stage (building the models, training the
        references and the DP-SGD rows, evaluating the rows) is interrupted at it with a
        :class:`~pacpriv.exceptions.TimeLimitError` (nothing released). The 0.2 keywords
        ``n_jobs=``, ``progress=`` and ``options=`` were removed in 0.4 (a ``TypeError``
        naming the replacement).
    black_box : StableBlackBox, SgdBlackBox, "stable", "sgd" or None (stable)
        What the PAC rows simulate (:mod:`pacpriv.compare.blackbox`): the stabilised logistic
        regression (default), or the DP-SGD rows' training without noise (``"sgd"``).

    Returns
    -------
    ComparisonResult

    Raises
    ------
    TypeError, ValueError
        Invalid arguments (the message names the argument and its range), a dataset
        without class labels, or ``execution`` with a ``checkpoint`` or ``output_path``.
    ImportError
        If torch is missing (``pip install pacpriv[torch]``).

    Notes
    -----
    Runs with the same seed are reproducible bit for bit, for any ``n_jobs``. This is an
    evaluation: the models are measured with known members (test accuracy, attacks), and
    what a row certifies is the bound and its noise calibration, i.e. the noise a private
    release would need. ``pac_result`` carries no release (its ``evaluation`` text says
    why); a private release draws its subset and noise from unrecorded OS entropy
    (:func:`pacpriv.pac.run_pac`).

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 1, Thm 3; [2] RA-MIA (module refs).

    Examples
    --------
    A full comparison trains several torch models (about a minute on 2 cores), so this example
    is shown, not run as a doctest (``examples/compare_pac_vs_dpsgd.py`` runs it in the tests)::

        res = compare_pac_dpsgd("breast_cancer", n_trials=200, rng=0)
        print(res.to_markdown())
    """
    settings = _settings(settings, fields)
    a = check_real(target_accuracy, "target_accuracy", low=0.5, high=1.0,
                   low_inclusive=False, high_inclusive=False)
    ds, st = _validated(settings, (a,), dataset)
    execution = _execution(execution)
    started = _warmed()
    tic = time.perf_counter()
    return _results(ds, checkpoint_root(rng, execution), (a,), st, execution, tic,
                    started=started)[0]


def compare_table(
    datasets: Sequence[Any] | str = ("breast_cancer", "digits", "wine"),
    *,
    target_accuracies: Sequence[float] | float = (0.55, 0.6),
    settings: ComparisonSettings | None = None,
    rng: RNGLike = None,
    execution: ExecutionOptions | None = None,
) -> ComparisonTable:
    """One matched-bound table over several datasets and bounds.

    Parameters
    ----------
    datasets : sequence of (str, path or Dataset), or one
        Classification pools (as ``dataset`` of :func:`compare_pac_dpsgd`).
    target_accuracies : sequence of float, or one float
        Bounds ``a`` in (½, 1); duplicates are dropped, the rest sorted.
    settings : ComparisonSettings, optional
        Training, simulation and black-box settings (default: ``ComparisonSettings()``).
    rng : None, int, SeedSequence or Generator
        Root seed, the same for every dataset: the comparison of a dataset at a bound equals
        ``compare_pac_dpsgd(dataset, target_accuracy=a, rng=rng, ...)`` row for row.
    execution : ExecutionOptions, optional
        As in :func:`compare_pac_dpsgd`.

    Returns
    -------
    ComparisonTable

    Raises
    ------
    TypeError, ValueError
        Invalid arguments (before any training).
    """
    names = [datasets] if isinstance(datasets, (str, os.PathLike, Dataset)) else list(datasets)
    if not names:
        raise ValueError("`datasets` must name at least one dataset.")
    targets = _targets(target_accuracies)
    checked = [_validated(settings or ComparisonSettings(), targets, d,
                          "`target_accuracies`") for d in names]
    execution = _execution(execution)
    root = checkpoint_root(rng, execution)
    started = _warmed()
    tic = time.perf_counter()
    results: list[ComparisonResult] = []
    for ds, st in checked:
        results += _results(ds, root, targets, st, execution, time.perf_counter(),
                            started=started)  # one time_limit for every dataset
    return ComparisonTable(results=tuple(results), elapsed_s=time.perf_counter() - tic)
