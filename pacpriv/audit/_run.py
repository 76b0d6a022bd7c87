"""One membership-inference audit: attacks on a batch of models beside the certified curves.

:func:`run_audit` splits the data into candidate records (the pool) and population samples
(never trained on), trains ``K`` reference models on complementary halves of the pool through
the engine (:mod:`pacpriv.audit._reference`), plays the leave-one-pair-out game with every
attack (:mod:`pacpriv.audit._suite`), measures TPR at low FPR with exact intervals
(:mod:`pacpriv.audit._metrics`), draws the family's certified trade-off curves
(:mod:`pacpriv.audit._curves`) and, optionally, runs the one-run ε audit
(:mod:`pacpriv.audit._onerun`). The result is an :class:`AuditReport`, written as JSON,
Markdown and HTML by :mod:`pacpriv.report.audit`.

Every model of the audit derives from the recorded root seed: the models are evaluation
artefacts, never releases.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pacpriv._random import (
    AUDIT_ATTACK_STREAM,
    AUDIT_MODELS_STREAM,
    AUDIT_ONE_RUN_STREAM,
    AUDIT_SPLIT_STREAM,
    RNGLike,
    as_seed_sequence,
    seed_to_dict,
    trial_seed,
)
from pacpriv._validation import check_class_labels, check_int, check_real
from pacpriv.audit._curves import TradeoffCurve, curve_grid, curve_value
from pacpriv.audit._metrics import DEFAULT_FPRS, RocMetrics
from pacpriv.audit._onerun import OneRunResult, OneRunSpec, one_run_audit
from pacpriv.audit._reference import train_reference_models
from pacpriv.audit._suite import DEFAULT_ATTACKS, evaluate_attacks
from pacpriv.pac.engine._options import ExecutionOptions

__all__ = ["AUDIT_THREAT_MODEL", "AuditSettings", "AuditReport", "run_audit"]

#: The game every audit plays (shown in its report).
AUDIT_THREAT_MODEL = (
    "Membership game on a batch of K models: each model is trained with the audited algorithm "
    "on a random half of the candidate pool (models 2k and 2k+1 on complementary halves), so "
    "every record is a member of exactly half of them. Each model is the target in turn; the "
    "attacker knows the pool, the training algorithm and its parameters, the population "
    "samples (records no model was trained on), and the training sets of the other models "
    "except the target's pair partner (its K − 2 reference models); it sees the target's class "
    "scores on each record (black box) and guesses membership. TPRs and FPRs pool the K games. "
    "Attacks give lower bounds on leakage: a small attack TPR never certifies privacy."
)


@dataclass(frozen=True)
class AuditSettings:
    """How an audit attacks and measures (the model family and the batch size are separate).

    Parameters
    ----------
    attacks : tuple of attack objects, default :data:`pacpriv.audit.DEFAULT_ATTACKS`
        Online and offline LiRA, online and offline RMIA (a = 0.3), LOSS.
    fprs : tuple of float, default (1e-4, 1e-3, 1e-2, 1e-1)
        False-positive rates of the TPR table, each in (0, 1).
    confidence : float, default 0.95
        Level of the Clopper–Pearson intervals.
    population : float or tuple (X_z, y_z), default 0.2
        Population samples (RMIA's ``z``; never trained on): a fraction in (0, 1) of the
        records held out, or separate records (then every given record is a candidate: use
        this when the audited algorithm was calibrated on exactly that pool, e.g. a PAC plan).
    augmentations : tuple of callables, default ()
        Extra queries ``X -> X'`` of each record for LiRA and RMIA (e.g.
        :func:`pacpriv.audit.image_shifts`); none for tabular data.
    """

    attacks: tuple = DEFAULT_ATTACKS
    fprs: tuple[float, ...] = DEFAULT_FPRS
    confidence: float = 0.95
    population: float | tuple = 0.2
    augmentations: tuple[Callable[[np.ndarray], np.ndarray], ...] = ()

    def __post_init__(self) -> None:
        if not self.attacks:
            raise ValueError("`attacks` must hold at least one attack.")
        names = [getattr(a, "name", None) for a in self.attacks]
        if None in names or len(set(names)) != len(names):
            raise ValueError(f"`attacks` must be attack objects with distinct names; got "
                             f"{len(names)} attack(s), {len(set(names) - {None})} distinct.")
        if not self.fprs:
            raise ValueError("`fprs` must hold at least one false-positive rate.")
        for i, a in enumerate(self.fprs):
            check_real(a, f"fprs[{i}]", low=0.0, high=1.0, low_inclusive=False,
                       high_inclusive=False)
        check_real(self.confidence, "confidence", low=0.0, high=1.0, low_inclusive=False,
                   high_inclusive=False)
        if isinstance(self.population, tuple):
            if len(self.population) != 2 or np.shape(self.population[0])[:1] != \
                    np.shape(self.population[1]) or not np.shape(self.population[1])[0]:
                raise ValueError("`population` as samples must be a tuple (X_z, y_z) of at "
                                 "least 1 record with matching lengths; got shapes "
                                 f"{[np.shape(a) for a in self.population]}.")
        else:
            check_real(self.population, "population", low=0.0, high=1.0, low_inclusive=False,
                       high_inclusive=False)
        for i, aug in enumerate(self.augmentations):
            if not callable(aug):
                raise TypeError(f"`augmentations[{i}]` must be callable; got "
                                f"{type(aug).__name__}.")


@dataclass(frozen=True)
class AuditReport:
    """Outcome of :func:`run_audit`: public aggregates only (no record, no per-record score).

    Attributes
    ----------
    attacks : tuple of RocMetrics
        One per attack, in the settings' order.
    curves : tuple of TradeoffCurve
        The family's certified curves; ``curves[0]`` is "the" certified curve.
    one_run : OneRunResult or None
    model : dict
        The family's public description.
    dataset : dict
        Public facts of the data (name, sizes).
    setup : dict
        Sizes of the game: candidate records, population samples, reference models, queries,
        confidence; and the utility of the models: the fraction of member and of non-member
        (record, model) pairs with ``p(y | x) > ½`` (each such pair is classified right, so
        the non-member fraction is a lower bound on the held-out accuracy).
    simulation : dict
        The engine's summary of the reference run (seed, workers, time, reproducibility).
    seed : dict
        Root seed of the audit (split, models, one-run).
    timings : dict
        Wall-clock seconds of the phases.
    notes : tuple of str
        Caveats shown with the report.
    """

    attacks: tuple[RocMetrics, ...]
    curves: tuple[TradeoffCurve, ...]
    one_run: OneRunResult | None
    model: dict
    dataset: dict
    setup: dict
    simulation: dict
    seed: dict
    timings: dict
    notes: tuple[str, ...] = field(default=())

    def gaps(self) -> list[dict]:
        """At each FPR: the best resolved attack, the certified TPR there and the gap, and
        whether every attack's interval stays under every certified curve that holds for
        every record."""
        out = []
        for j, alpha in enumerate(self.setup["fprs"]):
            entries = [(a.name, a.tpr_at_fpr[j]) for a in self.attacks]
            resolved = [(n, t) for n, t in entries if t.resolved]
            primary = curve_value(self.curves[0], alpha)
            row: dict[str, Any] = {"fpr": alpha, "certified_tpr": primary}
            if not resolved:
                row.update(best_attack=None, tpr=None, ci=None, gap=None,
                           resolved=False, reason=entries[0][1].reason)
            else:
                name, best = max(resolved, key=lambda e: e[1].tpr or 0.0)
                row.update(best_attack=name, tpr=best.tpr, ci=list(best.ci or ()),
                           gap=primary - float(best.tpr or 0.0), resolved=True)
            # only curves that hold for every record bound the pooled rates of all records
            row["violations"] = [
                {"attack": n, "curve": c.label} for n, t in resolved for c in self.curves
                if c.scope == "every record" and t.ci is not None
                and t.ci[0] > curve_value(c, float(t.fpr_upper or 1.0))
            ]
            out.append(row)
        return out

    def compact_dict(self) -> dict:
        """Exactly the layout ``pacpriv audit --json`` prints: ``attacks`` (name, auc,
        balanced_accuracy, tpr_at_fpr with tpr / ci / resolved, and the reason of an
        unresolved FPR), ``certified_curve`` (label, fpr, tpr) and ``one_run`` (epsilon_lower,
        epsilon_accountant, delta, confidence, canaries; None without a one-run audit)."""
        def entry(t) -> dict:
            out = {"tpr": t.tpr, "ci": None if t.ci is None else list(t.ci),
                   "resolved": t.resolved}
            return out if t.resolved else {**out, "reason": t.reason}

        o = self.one_run
        return {
            "attacks": [{"name": a.name, "auc": a.auc, "balanced_accuracy": a.balanced_accuracy,
                         "tpr_at_fpr": {repr(float(t.fpr)): entry(t) for t in a.tpr_at_fpr}}
                        for a in self.attacks],
            "certified_curve": {k: v for k, v in self.curves[0].to_dict().items()
                                if k in ("label", "fpr", "tpr")},
            "one_run": None if o is None else {
                "epsilon_lower": o.epsilon_lower, "epsilon_accountant": o.epsilon_accountant,
                "delta": o.delta, "confidence": o.confidence, "canaries": o.canaries},
        }

    def to_dict(self) -> dict:
        """The issue's layout first -- ``attacks``, ``certified_curve``, ``one_run`` -- then
        every certified curve, the gaps, the setup and the reproducibility facts."""
        return {
            "attacks": [a.to_dict() for a in self.attacks],
            "certified_curve": self.curves[0].to_dict(),
            "one_run": None if self.one_run is None else self.one_run.to_dict(),
            "kind": "audit",
            "title": f"Membership-inference audit: {self.model.get('training', 'model')}",
            "threat_model": AUDIT_THREAT_MODEL,
            "certified_curves": [c.to_dict() for c in self.curves],
            "gaps": self.gaps(),
            "model": dict(self.model),
            "dataset": dict(self.dataset),
            "setup": dict(self.setup),
            "simulation": dict(self.simulation),
            "seed": dict(self.seed),
            "timings": dict(self.timings),
            "notes": list(self.notes),
        }

    def write(self, out_dir: str | os.PathLike, *,
              formats: Sequence[str] = ("json", "md", "html"), overwrite: bool = False) -> dict:
        """Write ``report.json``, ``report.md``, ``report.html`` and ``roc.png`` into ``out_dir``
        (:func:`pacpriv.report.audit.write_audit_report`); returns format -> path. An earlier
        report there is replaced only with ``overwrite=True`` (else ``FileExistsError``)."""
        from pacpriv.report.audit import write_audit_report

        return write_audit_report(self.to_dict(), out_dir, formats=formats, overwrite=overwrite)


def _check_out(out, overwrite) -> None:
    """``out`` is a folder (or new) without an earlier report unless ``overwrite``."""
    if isinstance(out, (str, os.PathLike)):
        from pacpriv._files import refuse_link_loop
        refuse_link_loop(Path(out), "`out`")  # not "an existing file" or a missing link
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        raise ValueError("`out` is an existing file; give a directory path.")
    if out is not None and overwrite is not True:
        from pacpriv.report.builder import REPORT_FILES

        earlier = [f for f in REPORT_FILES if (Path(out) / f).exists()]
        if earlier:
            raise FileExistsError(
                f"`out` {str(out)!r} already holds a report ({', '.join(earlier)}): pass "
                "overwrite=True to replace it, or give another folder.")


def _audit_root(rng: RNGLike, execution: ExecutionOptions | None) -> np.random.SeedSequence:
    """The audit's root seed: ``rng``'s; with ``rng=None`` and an existing checkpoint, the
    root whose reference-model stream (:data:`AUDIT_MODELS_STREAM`) the checkpoint recorded,
    so that the identical call resumes (as ``run_pac`` reuses a checkpoint's seed). A fresh
    root would draw another split and pool, and pass the checkpoint a seed the user never
    gave. An unreadable or foreign manifest is left to the engine's checkpoint to refuse."""
    import json

    folder = None if execution is None else execution.checkpoint
    if rng is not None or folder is None:
        return as_seed_sequence(rng)
    try:
        seed = json.loads((Path(folder) / "manifest.json").read_text()).get("root_seed")
        key = [int(k) for k in seed["spawn_key"]]
        if key[-1:] == [AUDIT_MODELS_STREAM]:
            return np.random.SeedSequence(seed["entropy"], spawn_key=tuple(key[:-1]))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass
    return as_seed_sequence(None)


def _split(n: int, population: float, gen: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    n_z = round(population * n)
    if n_z < 1 or n - n_z < 8:
        raise ValueError(
            f"the data must leave at least 1 population sample and 8 candidate records; got "
            f"{n} records with population fraction {population!r} ({n_z} population samples)."
        )
    perm = gen.permutation(n)
    return np.sort(perm[n_z:]), np.sort(perm[:n_z])


def _notes(model: dict, one_run: OneRunResult | None, batch) -> tuple[str, ...]:
    notes = [
        "Intervals are Clopper–Pearson intervals over (record, target model) pairs; the pairs "
        "of the K games are not independent (the same records, overlapping training sets), "
        "so the intervals are nominal.",
        "Each TPR is that of the most permissive threshold whose empirical FPR is at most the "
        "target (no interpolation); an FPR needing more non-member scores than the game has is "
        "reported as unresolved, not as 0.",
    ]
    if model.get("noise_multiplier"):
        notes.append("The DP-SGD trainer divides each noisy sum by n/M, with n the size of the "
                     "model's training set; the certified curves treat n as public (as opacus "
                     "does).")
    if one_run is not None and one_run.consistent is False:
        notes.append("The one-run ε lower bound exceeds the accountant's ε: the training does "
                     "not meet its claimed guarantee (or the confidence level failed).")
    if batch.simulation.get("reproducible") is False:
        notes.append("Re-running one reference model from its seed gave a different result: "
                     "the audit is not reproducible from its seed.")
    return tuple(notes)


def _check_model(model: Any) -> None:
    """A model family (``fit``, ``statistics``, ...); a plain scikit-learn estimator (the
    CLI's --model takes one) is told its wrapper, ``EstimatorModel`` (ninth new-user pass)."""
    for method in ("fit", "statistics", "describe", "certified_curves", "accountant_epsilon"):
        if not callable(getattr(model, method, None)):
            wrap = (f" (a scikit-learn estimator: wrap it, model=EstimatorModel("
                    f"{type(model).__name__}(...)), from pacpriv.audit)"
                    if callable(getattr(model, "fit", None))
                    and callable(getattr(model, "get_params", None)) else "")
            raise TypeError(f"`model` must be a model family with a `{method}` method; got "
                            f"{type(model).__name__}{wrap}.")
    from pacpriv.audit._families import EstimatorModel
    from pacpriv.audit._user_model import check_classifier

    if isinstance(model, EstimatorModel):  # a regressor would fail in trial 0
        inner = model.estimator
        if isinstance(inner, type):
            raise TypeError(f"`model`: EstimatorModel wraps a scikit-learn classifier instance; "
                            f"got the class {inner.__name__}: pass {inner.__name__}(...).")
        if callable(inner) and not callable(getattr(inner, "get_params", None)):
            raise TypeError(
                "`model`: EstimatorModel wraps a scikit-learn classifier instance, e.g. "
                "EstimatorModel(LogisticRegression()); got a "
                f"{type(inner).__name__} (a factory: call it, or give a torch module factory "
                "as `model` through pacpriv.audit.user_model_family).")
        check_classifier(inner)


def run_audit(
    X,
    y,
    *,
    model: Any,
    reference_models: int = 16,
    settings: AuditSettings | None = None,
    one_run: OneRunSpec | None = None,
    dataset: dict | None = None,
    rng: RNGLike = None,
    execution: ExecutionOptions | None = None,
    out: str | os.PathLike | None = None,
    overwrite: bool = False,
) -> AuditReport:
    """Audit a training algorithm: attacks at low FPR against its certified trade-off curves.

    Parameters
    ----------
    X : array-like of shape (n, ...)
        Features of all records (already scaled by a public rule).
    y : array-like of shape (n,)
        Class labels.
    model : model family
        :class:`pacpriv.audit.DPSGDModel` (torch, DP-SGD or its non-private twin),
        :class:`pacpriv.audit.EstimatorModel` (scikit-learn) or
        :class:`pacpriv.audit.PacReleaseModel` (a PAC release), or any object with their
        methods.
    reference_models : int, default 16
        ``K``, an even number >= 4 of models, each trained on a random half of the pool; every
        one is the target once. The game has about ``K·n_pool/2`` non-member scores.
    settings : AuditSettings, optional
        Attacks, FPRs, confidence, population samples, augmentations.
    one_run : OneRunSpec, optional
        Also run the one-run ε audit (one extra training with canaries from the pool).
    dataset : dict, optional
        Public description of the data for the report (e.g. ``Dataset.to_dict()``).
    rng : None, int, SeedSequence or Generator
        Root seed (None: fresh OS entropy, or with a checkpoint in ``execution`` the seed it
        recorded, so the identical call resumes; recorded in the report either way).
    execution : ExecutionOptions, optional
        Workers, progress bar, checkpoint of the reference run (never the results).
    out : path, optional
        Write ``report.json``, ``report.md``, ``report.html`` and ``roc.png`` there.
    overwrite : bool, default False
        Replace an earlier report in ``out``; without it such a folder is refused before any
        model is trained (``FileExistsError``; the CLI's ``--force``).

    Returns
    -------
    AuditReport

    Raises
    ------
    TypeError, ValueError
        On invalid arguments, before any model is trained (messages give counts and
        positions, never values).
    MechanismError
        If a reference model fails to train.
    """
    tic = time.perf_counter()
    opts = settings if settings is not None else AuditSettings()
    if not isinstance(opts, AuditSettings):
        raise TypeError(f"`settings` must be an AuditSettings; got {type(opts).__name__}.")
    if one_run is not None and not isinstance(one_run, OneRunSpec):
        raise TypeError(f"`one_run` must be a OneRunSpec or None; got {type(one_run).__name__}.")
    if execution is not None and not isinstance(execution, ExecutionOptions):
        raise TypeError("`execution` must be an ExecutionOptions or None; got "
                        f"{type(execution).__name__}.")
    _check_model(model)
    K = check_int(reference_models, "reference_models", low=4)
    if K % 2:
        raise ValueError(f"`reference_models` must be even (complementary pairs); got {K}.")
    X_arr, y_arr = np.asarray(X), np.asarray(y)
    if X_arr.ndim < 1 or y_arr.shape != X_arr.shape[:1]:
        raise ValueError(f"`X` and `y` must hold the same number of records; got shapes "
                         f"{X_arr.shape} and {y_arr.shape}.")
    check_class_labels(y_arr, "`y`", "run_audit")  # before any model is trained
    _check_out(out, overwrite)
    root = _audit_root(rng, execution)
    if isinstance(opts.population, tuple):
        pool = (X_arr, y_arr)
        population = (np.asarray(opts.population[0]), np.asarray(opts.population[1]))
        if population[0].shape[1:] != X_arr.shape[1:]:
            raise ValueError(f"population samples of shape {population[0].shape} do not match "
                             f"the records' shape {X_arr.shape}.")
    else:
        pool_idx, pop_idx = _split(X_arr.shape[0], opts.population,
                                   np.random.default_rng(trial_seed(root, AUDIT_SPLIT_STREAM)))
        pool = (X_arr[pool_idx], y_arr[pool_idx])
        population = (X_arr[pop_idx], y_arr[pop_idx])
    if one_run is not None and pool[0].shape[0] < one_run.canaries + 1:
        raise ValueError(f"the one-run audit needs more candidate records than canaries: "
                         f"{one_run.canaries} canaries, {pool[0].shape[0]} candidate records.")
    _check_model_classes(model, pool[1], K, trial_seed(root, AUDIT_MODELS_STREAM))
    t0 = time.perf_counter()
    curves = tuple(model.certified_curves(curve_grid(opts.fprs)))  # cheap: fails early
    t1 = time.perf_counter()
    batch = train_reference_models(model, pool, population=population, n_models=K,
                                   augmentations=opts.augmentations,
                                   rng=trial_seed(root, AUDIT_MODELS_STREAM),
                                   execution=execution)
    t2 = time.perf_counter()
    attacks = evaluate_attacks(batch.statistics, batch.population, batch.masks,
                               attacks=opts.attacks, fprs=opts.fprs,
                               confidence=opts.confidence,
                               rng=trial_seed(root, AUDIT_ATTACK_STREAM))
    t3 = time.perf_counter()
    onerun = None
    if one_run is not None:
        onerun = one_run_audit(model, *pool, spec=one_run,
                               rng=trial_seed(root, AUDIT_ONE_RUN_STREAM))
    described = dict(model.describe())
    first = batch.statistics[:, :, 0]
    confident = {  # φ > 0 ⇔ p(y|x) > ½, which implies the right class: a lower bound
        "member_pairs_classified_with_p_above_half": float(np.mean(first[batch.masks] > 0)),
        "nonmember_pairs_classified_with_p_above_half": float(np.mean(first[~batch.masks] > 0)),
    }
    report = AuditReport(
        attacks=tuple(attacks), curves=curves, one_run=onerun, model=described,
        dataset=dict(dataset or {}),
        setup={"candidate_records": int(pool[0].shape[0]),
               "population_samples": int(population[0].shape[0]),
               "reference_models": K, "queries": 1 + len(opts.augmentations),
               "fprs": [float(a) for a in opts.fprs], "confidence": opts.confidence,
               "attacks": [a.name for a in opts.attacks], **confident},
        simulation=batch.simulation, seed=seed_to_dict(root),
        timings={"certified_curves_s": t1 - t0, "reference_models_s": t2 - t1,
                 "attacks_s": t3 - t2,
                 "one_run_s": None if onerun is None else onerun.elapsed_s,
                 "total_s": time.perf_counter() - tic},
        notes=_notes(described, onerun, batch),
    )
    if out is not None:
        report.write(out, overwrite=bool(overwrite))
    return report


def _check_model_classes(model, y, n_models: int, models_root) -> None:
    """A scikit-learn reference model must see every class: refuse, before any model is
    trained, a batch whose public masks (complementary pairs from ``models_root``) leave a
    class out of some model's half."""
    from pacpriv._validation import first_subset_missing_a_class, missing_class_message
    from pacpriv.audit._families import EstimatorModel
    from pacpriv.pac.samplers import ComplementaryPairsSampler

    if not isinstance(model, EstimatorModel):
        return  # torch families train on fixed class counts
    from pacpriv.pac.engine._stall import CountNotice

    sampler, root = ComplementaryPairsSampler(), as_seed_sequence(models_root)
    with CountNotice(n_models, "checking that every reference model's public mask holds "
                     "every class, before any model is trained") as note:
        def mask(j: int):
            note.done = j
            return sampler.trial_mask(len(y), root=root, index=j)
        found = first_subset_missing_a_class(y, mask, n_models, inclusion=0.5)
    if found is not None:
        raise ValueError(missing_class_message("`reference_models`", n_models, found, len(y),
                                               unit="reference model", low=4))
