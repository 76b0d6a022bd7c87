"""Fit one model per world: with the PAC engine, or all at once with the torch ensemble.

The worlds ``S_1..S_m`` are the engine's trial subsets (:func:`pacpriv.pac.simulate` with
``n_trials = m``), so fitting is parallel (joblib), checkpointed and reproducible per world
index. The engine's mechanism returns a vector, so a world model is stored by content:

* a generic fit function or a scikit-learn estimator: the mechanism fits the model, writes
  ``joblib.dump(model)`` atomically to ``models/<sha256>.joblib`` and returns the 32 digest bytes
  as its output vector; world ``j``'s model is the file named by row ``j`` of the outputs;
* torch worlds: the output is the trained parameter vector itself; a world's module is
  ``model_factory()`` loaded with it. A free-form training function
  (:class:`pacpriv.pac.engine.TorchMechanism`) runs one world per engine task; a declarative
  :class:`~pacpriv.prediction.TorchFit` trains all worlds in one vectorised program
  (:func:`pacpriv.ensemble.train_ensemble`) unless ``ExecutionOptions(ensemble=False)`` asks
  for the per-world engine path, with the same masks and seeds
  (:mod:`pacpriv.prediction._torch_worlds`).

The world set (masks, digests or parameters) is public in the threat model of Zhu, Sridhar &
Devadas (Private Prediction via PAC Privacy, arXiv:2601.14033, 2026): only the index ``J`` of the
world that answers is secret.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pacpriv._files import atomic_write, private_dir
from pacpriv.exceptions import MechanismError, NotReproducibleWarning
from pacpriv.pac.engine._adapters import EstimatorMechanism, TorchMechanism
from pacpriv.pac.engine._mechanism import accepts_rng
from pacpriv.pac.engine._options import ExecutionOptions
from pacpriv.pac.samplers import callable_fingerprint, display_name
from pacpriv.prediction._torch_worlds import TorchFit, fit_torch_ensemble

__all__ = [
    "SklearnFit",
    "WorldFitter",
    "as_world_fitter",
    "check_fitter_output",
    "check_world_classes",
    "fit_fingerprint",
    "fit_worlds",
    "model_factory_of",
    "trains_classifier",
]

#: What fits the worlds, once normalised by :func:`as_world_fitter`.
WorldFitter = Callable | TorchMechanism | TorchFit


@dataclass(frozen=True)
class SklearnFit:
    """Fit a fresh ``sklearn.base.clone`` of ``estimator`` on a subset and return the model.

    Seeding follows :class:`pacpriv.pac.engine.EstimatorMechanism`: a ``random_state`` left at
    ``None`` is set from the world's generator; an integer one is kept.

    Parameters
    ----------
    estimator : sklearn estimator
        Template (never fitted itself).
    supervised : bool, default True
        Subset is ``(X, y)`` and ``fit(X, y)`` is called; else ``fit(X)``.
    """

    estimator: Any
    supervised: bool = True

    def __call__(self, subset, *, rng=None):
        """The fitted clone."""
        from sklearn.base import clone

        model = clone(self.estimator)
        params = model.get_params(deep=False)
        if rng is not None and "random_state" in params and params["random_state"] is None:
            model.set_params(random_state=int(np.random.default_rng(rng).integers(0, 2**31 - 1)))
        if self.supervised:
            if not (isinstance(subset, tuple) and len(subset) == 2):
                raise ValueError(
                    "supervised estimator: the pool must be a tuple (X, y); got "
                    f"{type(subset).__name__}."
                )
            return model.fit(np.asarray(subset[0]), np.asarray(subset[1]))
        X = subset[0] if isinstance(subset, tuple) else subset
        return model.fit(np.asarray(X))


def as_world_fitter(fit: Any) -> WorldFitter:
    """Normalise ``fit``: a callable ``fit(subset[, rng]) -> model``, an sklearn estimator, an
    :class:`~pacpriv.pac.engine.EstimatorMechanism`, a
    :class:`~pacpriv.pac.engine.TorchMechanism` or a :class:`~pacpriv.prediction.TorchFit`.

    Raises
    ------
    TypeError
        If ``fit`` is none of these.
    """
    if isinstance(fit, (TorchMechanism, TorchFit)):
        return fit
    if isinstance(fit, EstimatorMechanism):
        return SklearnFit(fit.estimator, supervised=fit.supervised)
    if hasattr(fit, "fit") and hasattr(fit, "get_params"):
        return SklearnFit(fit)
    if callable(fit):
        return fit
    raise TypeError(
        "`fit` must be a callable fit(subset) -> model, a scikit-learn estimator, an "
        f"EstimatorMechanism, a TorchMechanism or a TorchFit; got {type(fit).__name__}."
    )


def check_fitter_output(fitter: Any, output: Any) -> None:
    """Refuse, before any work, a built-in ``output`` that a scikit-learn ``fitter``'s models
    cannot give (e.g. ``"logits"`` of ``GaussianNB``: no ``decision_function``). Callable
    fitters, torch worlds and callable outputs are not checked here.

    Raises
    ------
    ValueError
        Naming ``output``, the estimator, the missing method and the supported outputs.
    """
    if not (isinstance(fitter, SklearnFit) and isinstance(output, str)):
        return
    from pacpriv.prediction._evaluate import OUTPUT_METHODS, supported_outputs

    supported = supported_outputs(fitter.estimator)
    if output in supported:
        return
    name = type(fitter.estimator).__name__
    method = OUTPUT_METHODS.get(output)
    why = (f"it has no {method}()" if method and not hasattr(fitter.estimator, method)
           else "it is not a classifier")
    raise ValueError(f"`output`={output!r} is not available for {name} ({why}); it supports "
                     f"{', '.join(supported) or 'none of the built-in outputs'} (or pass a "
                     "callable output(model, X) -> (n, d)).")


#: The last class check's key and finding (see :func:`check_world_classes`).
_CHECKED: dict[tuple, tuple[int, int, int] | None] = {}


def check_world_classes(fitter: Any, output: Any, pool: Any, *, n_worlds: int, sampler: Any,
                        world_seed: np.random.SeedSequence, name: str = "`n_worlds`",
                        first: int | None = None) -> None:
    """Refuse, before any world is fitted, worlds a scikit-learn estimator cannot be fitted
    on: a world (the engine's public mask ``sampler.trial_mask(n, root=world_seed, index=j)``)
    that holds no record, or, for a classifier, lacks a class of the pool's labels (it fails
    to fit, or learns other ``classes_``).

    ``first``: check only the first ``first`` worlds (a quick look before a timed probe; the
    message still names ``n_worlds``). A check that runs longer than a few seconds says how
    far it got (a :class:`~pacpriv.exceptions.StallWarning`); the last full check's finding
    is kept, so the same worlds are not drawn twice in one process.

    Raises
    ------
    ValueError
        Naming ``name``, the first such world, the class counts (never a label) and the
        largest count of worlds that works with this seed.
    """
    from pacpriv._validation import first_subset_missing_a_class, missing_class_message

    if not isinstance(fitter, SklearnFit):
        return  # a fit function or torch worlds: their needs are not known here
    count = int(n_worlds) if first is None else min(int(first), int(n_worlds))
    features = pool[0] if isinstance(pool, tuple) else pool
    n = int(np.shape(features)[0])
    classifier = (fitter.supervised and isinstance(pool, tuple) and len(pool) == 2
                  and trains_classifier(fitter, output))
    y = np.asarray(pool[1]) if classifier else np.zeros(n)
    described = sampler.to_dict() if hasattr(sampler, "to_dict") else type(sampler).__name__
    key = (repr(described), repr(world_seed.entropy), repr(world_seed.spawn_key), n, count,
           hashlib.sha256(np.unique(y, return_inverse=True)[1].tobytes()).hexdigest())
    if key not in _CHECKED:  # the CLI's check, then the predictor's: the masks are drawn once
        from pacpriv.pac.engine._stall import CountNotice

        with CountNotice(count, "checking that every world's public mask holds every "
                         "class, before any world is fitted") as note:
            def mask(j: int) -> np.ndarray:
                note.done = j
                return sampler.trial_mask(n, root=world_seed, index=j)
            found = first_subset_missing_a_class(
                y, mask, count,
                inclusion=sampler.prior if sampler.independent_records else None)
        _CHECKED.clear()  # one entry: bounded memory
        _CHECKED[key] = found
    found = _CHECKED[key]
    if found is not None:
        raise ValueError(missing_class_message(name, n_worlds, found, n, unit="world",
                                               step=sampler.trials_per_draw,
                                               classifier=classifier))


def trains_classifier(fitter: Any, output: Any) -> bool:
    """Whether the worlds are classifiers: a scikit-learn classifier, or a class output
    (``"proba"``, ``"logits"``, ``"label"``) of any fitter. Their labels must be class labels
    (:func:`pacpriv._validation.check_class_labels`)."""
    if isinstance(output, str) and output in ("proba", "logits", "label"):
        return True
    if isinstance(fitter, SklearnFit):
        from sklearn.base import is_classifier

        return bool(is_classifier(fitter.estimator))
    return False


def _estimator_name(estimator: Any) -> str:
    """The estimator's class, a pipeline's with its steps' (``Pipeline(StandardScaler,
    MLPClassifier)``): what a refused resume names."""
    name = type(estimator).__qualname__
    steps = getattr(estimator, "steps", None)
    if isinstance(steps, list) and all(isinstance(s, tuple) and len(s) == 2 for s in steps):
        return f"{name}({', '.join(type(step).__qualname__ for _, step in steps)})"
    return name


def fit_fingerprint(fitter: Any) -> dict:
    """JSON description of the fitting procedure (for refusing a resume with another one)."""
    if isinstance(fitter, SklearnFit):
        params = fitter.estimator.get_params(deep=True)
        return {"kind": "sklearn", "estimator": _estimator_name(fitter.estimator),
                "params": repr(sorted((k, repr(v)) for k, v in params.items())),
                "supervised": fitter.supervised}
    if isinstance(fitter, TorchMechanism):
        return {"kind": "torch", "model_factory": callable_fingerprint(fitter.model_factory),
                "train_fn": callable_fingerprint(fitter.train_fn)}
    if isinstance(fitter, TorchFit):
        return {"kind": "torch-spec", **fitter.to_dict()}
    return {"kind": "callable", "fit": callable_fingerprint(fitter)}


def model_factory_of(fitter: Any) -> Callable | None:
    """What rebuilds a torch world's module from its parameters (None for other worlds)."""
    if isinstance(fitter, TorchFit):
        return fitter.template
    return getattr(fitter, "model_factory", None)


@dataclass(frozen=True)
class _FitAndStore:
    """Engine mechanism: fit a world model, store it by SHA-256, output the 32 digest bytes."""

    fit: Callable
    models_dir: str

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        import joblib

        model = self.fit(subset, rng=rng) if accepts_rng(self.fit) else self.fit(subset)
        buf = io.BytesIO()
        try:
            joblib.dump(model, buf)
            data = buf.getvalue()
        except (pickle.PicklingError, AttributeError):
            # a class from a user file (``file.py:Model``) lives in a module that cannot be
            # imported by name: pickle it by value (joblib.load reads the plain pickle)
            import cloudpickle

            data = cloudpickle.dumps(model)
        digest = hashlib.sha256(data).digest()
        path = Path(self.models_dir) / f"{digest.hex()}.joblib"
        if not path.exists():
            atomic_write(path, data)  # 0600: an un-noised model of a subset
        return np.frombuffer(digest, dtype=np.uint8).astype(np.float64)


def _name_the_fit(err: MechanismError) -> None:
    """Say "Estimator X ... fitting world j" where the engine says "Mechanism X ... in trial
    j": a world's model is fitted by the user's estimator or fit function."""
    if err.args and isinstance(err.args[0], str) and err.args[0].startswith("Mechanism "):
        text = "Estimator " + err.args[0][len("Mechanism "):]
        err.args = (text.replace(" in trial ", " fitting world ", 1), *err.args[1:])


def fit_worlds(fitter, pool, *, n_worlds: int, sampler, world_seed: np.random.SeedSequence,
               directory: Path, execution: ExecutionOptions) -> dict:
    """Fit the ``m`` world models; return the world arrays.

    A :class:`~pacpriv.prediction.TorchFit` with ``execution.ensemble`` (the default) trains
    all worlds at once on ``execution.device``; everything else runs
    :func:`pacpriv.pac.simulate`, one world per trial (``n_jobs``, backend, checkpoint).

    Returns ``{"masks": (m, n) bool, "digests": (m, 32) float or None, "params": (m, P) or
    None}``; models of a generic/sklearn fit are written under ``directory / "models"``.
    """
    from pacpriv.pac.engine._simulate import simulate

    if isinstance(fitter, TorchFit) and execution.ensemble:
        return fit_torch_ensemble(fitter, pool, n_worlds=n_worlds, sampler=sampler,
                                  world_seed=world_seed, device=execution.device,
                                  progress=execution.progress)
    torch_worlds = isinstance(fitter, (TorchMechanism, TorchFit))
    models_dir = directory / "models"
    if not torch_worlds:
        private_dir(models_dir)
    mechanism = fitter if torch_worlds else _FitAndStore(fitter, str(models_dir))
    with warnings.catch_warnings():
        # The fitted worlds are stored and answer from storage, so whether a refit from the
        # seed is bit-identical does not matter here; and the digest of a pickled model differs
        # whenever BLAS threading differs between a worker and this process.
        warnings.simplefilter("ignore", NotReproducibleWarning)
        try:
            res = simulate(mechanism, pool, n_trials=n_worlds, sampler=sampler,
                           rng=world_seed, execution=execution,
                           mechanism_name=None if torch_worlds else display_name(
                               type(fitter.estimator) if isinstance(fitter, SklearnFit)
                               else fitter))
        except MechanismError as err:  # the engine's words for a trial: here a world's fit
            _name_the_fit(err)
            raise
    out = np.asarray(res.outputs, dtype=np.float64)
    masks = np.asarray(res.masks, dtype=bool)
    if torch_worlds:
        return {"masks": masks, "digests": None, "params": out}
    return {"masks": masks, "digests": out, "params": None}
