"""PAC Privacy vs DP-SGD at the same membership-inference accuracy bound.

:func:`compare_pac_dpsgd` trains one model (logistic regression, :mod:`pacpriv._compare_models`)
on the same data with the same epochs and steps in three ways, each certified to the same
membership-inference accuracy bound ``a``:

* **DP-SGD, closed form**: σ from the chi-square closed form [2]_ (MATH.md §3);
* **DP-SGD, exact**: σ calibrated to the exact accuracy ½ + ½·TV [2]_ (needs
  :mod:`pacpriv.dpsgd.calibration`; the row is left out with a note when it is missing);
* **PAC**: the same training without noise, run as a black box on Poisson-½ subsets by the
  engine; Gaussian noise for the budget ``v = ln 2 − H(a)`` nats [1]_ (Thm 1, Thm 3) is
  added once to the final parameters.

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

import os
import time
from dataclasses import dataclass, field
from typing import Any

from pacpriv._compare_render import THREAT_MODELS
from pacpriv._random import RNGLike, as_seed_sequence, seed_to_dict
from pacpriv._validation import check_int, check_real
from pacpriv.attacks import AttackResult

__all__ = ["THREAT_MODELS", "ComparisonResult", "ComparisonRow", "compare_pac_dpsgd"]

_RULES = ("anisotropic", "isotropic", "variance-only", "exact-mi")


@dataclass(frozen=True)
class ComparisonRow:
    """One method of the comparison.

    Attributes
    ----------
    method : str
        Label, e.g. ``"DP-SGD (chi-square closed form)"``.
    family : {"dpsgd", "pac", "none"}
        Which half of pacpriv certifies it (``"none"``: the non-private baseline).
    noise : float
        The method's own noise knob: the noise multiplier σ (dimensionless, noise std / C)
        for DP-SGD, the RMS noise std per parameter ``sqrt(E||B||²/d)`` for PAC, 0 for the
        baseline. Not the same quantity across families.
    noise_units : str
        What ``noise`` measures.
    noise_multiplier : float or None
        σ (DP-SGD only).
    gradient_noise_std : float or None
        DP-SGD per-step noise std on the *averaged* gradient, σ·C/(n/M) per coordinate.
    parameter_noise_rms : float or None
        Noise std per parameter of the final model: PAC ``sqrt(E||B||²/d)`` (exact);
        DP-SGD ``η·σ·C·sqrt(M·E)/(n/M)``, the injected noise summed over the M·E steps
        without the contraction by the loss curvature (an estimate; in the linearised
        dynamics of a convex loss with ηH <= 2 it overstates what is left).
    expected_noise_power : float or None
        PAC ``E||B||² = trace(Σ_B)`` on the parameters.
    mi_budget : float or None
        PAC budget ``v`` in nats.
    test_accuracy, test_accuracy_std : float
        Mean and sd of the accuracy on the non-members over ``n_repeats`` models (DP-SGD:
        independent trainings; PAC: independent noise draws).
    accuracy_bound : float
        Membership-inference accuracy bound the method is certified to (1 for the baseline).
    bound_source : str
        Where the bound comes from.
    attack : AttackResult
        Loss-threshold attack [3]_ on the first repeat's model: members vs non-members.
    n_repeats : int
        Models averaged in ``test_accuracy``.
    wall_time_s : float
        Seconds spent on this row (PAC: including the simulation).
    """

    method: str
    family: str
    noise: float
    noise_units: str
    noise_multiplier: float | None
    gradient_noise_std: float | None
    parameter_noise_rms: float | None
    expected_noise_power: float | None
    mi_budget: float | None
    test_accuracy: float
    test_accuracy_std: float
    accuracy_bound: float
    bound_source: str
    attack: AttackResult
    n_repeats: int
    wall_time_s: float

    @property
    def attack_accuracy(self) -> float:
        """Measured attack accuracy (balanced, on the evaluation half)."""
        return self.attack.accuracy

    def to_dict(self) -> dict:
        """JSON-serialisable dict; the attack is flattened to ``attack_*`` keys."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "attack"}
        a = self.attack
        out.update(attack_accuracy=a.accuracy, attack_ci_low=a.ci_low, attack_ci_high=a.ci_high,
                   attack_auc=a.auc, attack_confidence=a.confidence, attack=a.to_dict())
        return out

    def plot_row(self) -> dict:
        """Row of :func:`pacpriv.plotting.plot_pac_vs_dpsgd`; one noise axis for all bars, so
        ``noise`` is ``parameter_noise_rms`` there (DP-SGD: the estimate), not the native knob."""
        return {"method": self.method, "noise": self.parameter_noise_rms,
                "test_accuracy": self.test_accuracy,
                "accuracy_bound": self.accuracy_bound, "attack_accuracy": self.attack_accuracy}


@dataclass(frozen=True)
class ComparisonResult:
    """Outcome of :func:`compare_pac_dpsgd`.

    Attributes
    ----------
    target_accuracy : float
        Membership-inference accuracy bound ``a`` every row is certified to.
    mi_budget : float
        PAC budget ``v = ln 2 − H(a)`` in nats.
    rows : tuple of ComparisonRow
        DP-SGD closed form, DP-SGD exact (if available), PAC.
    baseline : ComparisonRow
        The same training without noise or clipping (no guarantee; bound 1).
    threat_models : dict
        ``{"pac": str, "dpsgd": str}`` (:data:`THREAT_MODELS`).
    settings : dict
        Dataset, model, training and simulation settings (JSON-serialisable).
    notes : tuple of str
        How to read the table (units, estimates, skipped rows).
    seed : dict
        ``seed_to_dict`` of the root seed (children: 0 membership, 1 simulation, 2 PAC
        noise, 3/4 DP-SGD closed form/exact, 5 attack splits).
    elapsed_s : float
        Wall-clock seconds of the whole comparison.
    pac_result : PacResult
        The PAC job (simulation, spectrum, noise plan, first release); not in ``to_dict``.
        ``write_report(result.pac_result.with_sections(result.report_section()), out)``
        writes the PAC report with this comparison as an extra section.
    """

    target_accuracy: float
    mi_budget: float
    rows: tuple[ComparisonRow, ...]
    baseline: ComparisonRow
    threat_models: dict
    settings: dict
    notes: tuple[str, ...]
    seed: dict
    elapsed_s: float
    pac_result: Any = field(repr=False, compare=False, default=None)

    def row(self, family: str, *, exact: bool | None = None) -> ComparisonRow:
        """The first row of ``family`` ("dpsgd" or "pac"); for DP-SGD pick ``exact``."""
        for r in self.rows:
            if r.family == family and (exact is None or ("exact" in r.method) == exact):
                return r
        raise KeyError(f"no {family!r} row (exact={exact}) in this comparison")

    def to_dict(self) -> dict:
        """JSON-serialisable dict (no arrays, no records)."""
        return {
            "target_accuracy": self.target_accuracy,
            "mi_budget_nats": self.mi_budget,
            "rows": [r.to_dict() for r in self.rows],
            "baseline": self.baseline.to_dict(),
            "threat_models": dict(self.threat_models),
            "settings": dict(self.settings),
            "notes": list(self.notes),
            "seed": self.seed,
            "elapsed_s": self.elapsed_s,
        }

    def to_markdown(self) -> str:
        """The table, the notes and the two threat models side by side (Markdown)."""
        from pacpriv._compare_render import comparison_markdown

        return comparison_markdown(self)

    def report_section(self) -> dict:
        """A report section (``title``, ``markdown``, ``table``, ``plot``, ``comparison``).

        Pass it to :meth:`pacpriv.pac.job.PacResult.with_sections`, or give this result to
        :func:`pacpriv.report.write_report` directly (an analytic report).
        """
        cols = ["method", "noise", "noise_units", "parameter_noise_rms", "test_accuracy",
                "accuracy_bound", "attack_accuracy", "attack_ci_low", "attack_ci_high"]
        dicts = [r.to_dict() for r in (*self.rows, self.baseline)]
        return {
            "title": f"PAC Privacy vs DP-SGD at membership-inference accuracy "
                     f"{100 * self.target_accuracy:.1f}%",
            "markdown": self.to_markdown(),
            "threat_model": "\n\n".join(self.threat_models.values()),
            "table": {"columns": cols, "rows": [[d[c] for c in cols] for d in dicts]},
            "plot": {"kind": "pac_vs_dpsgd", "rows": self.plot_rows()},
            "comparison": self.to_dict(),
        }

    def plot_rows(self) -> list[dict]:
        """Rows for :func:`pacpriv.plotting.plot_pac_vs_dpsgd` (baseline last)."""
        return [r.plot_row() for r in (*self.rows, self.baseline)]

    def figure(self):
        """The side-by-side figure (matplotlib; ``pip install pacpriv[plot]``)."""
        from pacpriv.plotting import plot_pac_vs_dpsgd

        return plot_pac_vs_dpsgd(self.plot_rows())


def _compare_iv(dataset, target_accuracy, epochs, steps_per_epoch, max_grad_norm,
                learning_rate, n_trials, n_repeats, rule, confidence, public_seed):
    from pacpriv.datasets import Dataset, load_dataset

    a = check_real(target_accuracy, "target_accuracy", low=0.5, high=1.0,
                   low_inclusive=False, high_inclusive=False)
    values = dict(
        target_accuracy=a,
        epochs=check_int(epochs, "epochs", low=1),
        steps_per_epoch=check_int(steps_per_epoch, "steps_per_epoch", low=1),
        max_grad_norm=check_real(max_grad_norm, "max_grad_norm", low=0.0, low_inclusive=False),
        learning_rate=check_real(learning_rate, "learning_rate", low=0.0, low_inclusive=False),
        n_trials=check_int(n_trials, "n_trials", low=2),
        n_repeats=check_int(n_repeats, "n_repeats", low=1),
        confidence=check_real(confidence, "confidence", low=0.0, high=1.0,
                              low_inclusive=False, high_inclusive=False),
        public_seed=check_int(public_seed, "public_seed", low=0),
    )
    if rule not in _RULES:
        raise ValueError(f"`rule` must be one of {', '.join(_RULES)}; got {rule!r}.")
    if not isinstance(dataset, Dataset):
        if not isinstance(dataset, (str, os.PathLike)):
            raise TypeError(f"`dataset` must be a name, a path or a Dataset; "
                            f"got {type(dataset).__name__}.")
        dataset = load_dataset(dataset)
    if dataset.classes is None or len(dataset.classes) < 2 or dataset.n_records < 8:
        raise ValueError(
            f"`dataset` must be a classification pool with >= 2 classes and >= 8 records; "
            f"{dataset.name!r} has classes {dataset.classes} and {dataset.n_records} records."
        )
    return dataset, values


def compare_pac_dpsgd(
    dataset: Any = "breast_cancer",
    *,
    target_accuracy: float = 0.6,
    epochs: int = 10,
    steps_per_epoch: int = 5,
    max_grad_norm: float = 1.0,
    learning_rate: float = 0.5,
    n_trials: int = 500,
    n_repeats: int = 5,
    rule: str = "anisotropic",
    exact: bool = True,
    confidence: float = 0.95,
    public_seed: int = 0,
    n_jobs: int | None = None,
    rng: RNGLike = None,
    progress: bool = True,
) -> ComparisonResult:
    """Compare PAC noise and DP-SGD at the same membership-inference accuracy bound.

    Parameters
    ----------
    dataset : str, path or Dataset, default "breast_cancer"
        A classification pool (:func:`pacpriv.datasets.load_dataset`). Features are scaled
        to [-1, 1] with its published ranges; a Poisson-½ subset of the records is the
        training set (members), the rest is the test set and the attack's non-members.
    target_accuracy : float, default 0.6
        Bound ``a`` in (½, 1) for every method.
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
    rule : {"anisotropic", "isotropic", "variance-only", "exact-mi"}
        PAC noise rule (:func:`pacpriv.pac.calibration.calibrate_noise`).
    exact : bool, default True
        Include the DP-SGD row calibrated with the exact method.
    confidence : float, default 0.95
        Level of the attack-accuracy intervals, in (0, 1).
    public_seed : int, default 0
        Public seed of the model initialisation and of the PAC training's batch order.
    n_jobs : int or None
        joblib workers of the PAC simulation (-1: all cores).
    rng : None, int, SeedSequence or Generator
        Root seed of everything secret (membership, simulation, noise, attack splits);
        None = fresh OS entropy (recorded in ``seed``), as a real release must use.
    progress : bool, default True
        Progress bar of the PAC simulation.

    Returns
    -------
    ComparisonResult

    Raises
    ------
    TypeError, ValueError
        Invalid arguments (the message names the argument and its range), or a dataset
        without class labels.
    ImportError
        If torch is missing (``pip install pacpriv[torch]``).

    Notes
    -----
    Seeded runs are reproducible bit for bit, for any ``n_jobs``.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 1, Thm 3; [2] RA-MIA (module refs).

    Examples
    --------
    >>> res = compare_pac_dpsgd("breast_cancer", n_trials=200, rng=0)  # doctest: +SKIP
    >>> print(res.to_markdown())  # doctest: +SKIP
    """
    ds, values = _compare_iv(dataset, target_accuracy, epochs, steps_per_epoch, max_grad_norm,
                             learning_rate, n_trials, n_repeats, rule, confidence, public_seed)
    if not isinstance(exact, bool) or not isinstance(progress, bool):
        raise TypeError("`exact` and `progress` must be bools.")
    from pacpriv._compare_models import run_comparison  # torch: after validating the input

    tic = time.perf_counter()
    root = as_seed_sequence(rng)
    parts = run_comparison(ds, root=root, rule=rule, exact=exact, n_jobs=n_jobs,
                           progress=progress, **values)
    return ComparisonResult(
        target_accuracy=values["target_accuracy"],
        seed=seed_to_dict(root),
        elapsed_s=time.perf_counter() - tic,
        threat_models=dict(THREAT_MODELS),
        **parts,
    )


