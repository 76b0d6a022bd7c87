"""Fit one model per world with the PAC engine, store the models, evaluate them in batches.

The worlds ``S_1..S_m`` are the engine's trial subsets (:func:`pacpriv.pac.simulate` with
``n_trials = m``), so fitting is parallel (joblib), checkpointed and reproducible per world
index. The engine's mechanism returns a vector, so a world model is stored by content:

* a generic fit function or a scikit-learn estimator: the mechanism fits the model, writes
  ``joblib.dump(model)`` atomically to ``models/<sha256>.joblib`` and returns the 32 digest bytes
  as its output vector; world ``j``'s model is the file named by row ``j`` of the outputs;
* a torch training function (:class:`pacpriv.pac.engine.TorchMechanism`): the engine's output is
  the trained parameter vector itself; a world's module is ``model_factory()`` loaded with it.

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
from pacpriv.exceptions import NotReproducibleWarning
from pacpriv.pac.engine._adapters import EstimatorMechanism, TorchMechanism
from pacpriv.pac.engine._mechanism import (
    MAX_OUTPUT_MAGNITUDE,
    MIN_OUTPUT_MAGNITUDE,
    accepts_rng,
    outside_output_range,
)
from pacpriv.pac.engine._options import ExecutionOptions
from pacpriv.pac.samplers import callable_fingerprint

__all__ = [
    "OUTPUTS",
    "SklearnFit",
    "Worlds",
    "as_world_fitter",
    "fit_fingerprint",
    "fit_worlds",
]

#: Built-in output transforms.
OUTPUTS = ("proba", "logits", "value", "label")


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


def as_world_fitter(fit: Any) -> Callable | TorchMechanism:
    """Normalise ``fit``: a callable ``fit(subset[, rng]) -> model``, an sklearn estimator, an
    :class:`~pacpriv.pac.engine.EstimatorMechanism` or a
    :class:`~pacpriv.pac.engine.TorchMechanism`.

    Raises
    ------
    TypeError
        If ``fit`` is none of these.
    """
    if isinstance(fit, TorchMechanism):
        return fit
    if isinstance(fit, EstimatorMechanism):
        return SklearnFit(fit.estimator, supervised=fit.supervised)
    if hasattr(fit, "fit") and hasattr(fit, "get_params"):
        return SklearnFit(fit)
    if callable(fit):
        return fit
    raise TypeError(
        "`fit` must be a callable fit(subset) -> model, a scikit-learn estimator, an "
        f"EstimatorMechanism or a TorchMechanism; got {type(fit).__name__}."
    )


def fit_fingerprint(fitter: Any) -> dict:
    """JSON description of the fitting procedure (for refusing a resume with another one)."""
    if isinstance(fitter, SklearnFit):
        params = fitter.estimator.get_params(deep=True)
        return {"kind": "sklearn", "estimator": type(fitter.estimator).__qualname__,
                "params": repr(sorted((k, repr(v)) for k, v in params.items())),
                "supervised": fitter.supervised}
    if isinstance(fitter, TorchMechanism):
        return {"kind": "torch", "model_factory": callable_fingerprint(fitter.model_factory),
                "train_fn": callable_fingerprint(fitter.train_fn)}
    return {"kind": "callable", "fit": callable_fingerprint(fitter)}


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


def _digest_hex(row: np.ndarray) -> str:
    return bytes(np.asarray(row, dtype=np.float64).astype(np.uint8).tolist()).hex()


def fit_worlds(fitter, pool, *, n_worlds: int, sampler, world_seed: np.random.SeedSequence,
               directory: Path, execution: ExecutionOptions) -> dict:
    """Fit the ``m`` world models with :func:`pacpriv.pac.simulate`; return the world arrays.

    Returns ``{"masks": (m, n) bool, "digests": (m, 32) float or None, "params": (m, P) or
    None}``; models of a generic/sklearn fit are written under ``directory / "models"``.
    """
    from pacpriv.pac.engine._simulate import simulate

    models_dir = directory / "models"
    private_dir(models_dir)
    mechanism = fitter if isinstance(fitter, TorchMechanism) else _FitAndStore(
        fitter, str(models_dir))
    with warnings.catch_warnings():
        # The fitted worlds are stored and answer from storage, so whether a refit from the
        # seed is bit-identical does not matter here; and the digest of a pickled model differs
        # whenever BLAS threading differs between a worker and this process.
        warnings.simplefilter("ignore", NotReproducibleWarning)
        res = simulate(mechanism, pool, n_trials=n_worlds, sampler=sampler, rng=world_seed,
                       execution=execution, mechanism_name=None if isinstance(
                           fitter, TorchMechanism) else callable_fingerprint(fitter)["name"])
    out = np.asarray(res.outputs, dtype=np.float64)
    masks = np.asarray(res.masks, dtype=bool)
    if isinstance(fitter, TorchMechanism):
        return {"masks": masks, "digests": None, "params": out}
    return {"masks": masks, "digests": out, "params": None}


class Worlds:
    """The ``m`` fitted world models and a batched evaluation ``(m, n_queries, d)``.

    Parameters
    ----------
    models : list
        Fitted models (sklearn estimators, any object the ``output`` transform accepts, or torch
        modules).
    output : {"proba", "logits", "value", "label"} or callable
        ``"proba"``: ``predict_proba`` (torch: softmax of the module's output); ``"logits"``:
        ``decision_function`` (torch: the module's output); ``"value"``: ``predict`` (torch: the
        module's output); ``"label"``: one-hot of the predicted class over ``classes_`` (torch:
        of the argmax), so that a query on which every world predicts the same class has
        ``C = 0`` and is answered exactly, without noise; a callable
        ``output(model, X) -> (n, d)``.
    """

    def __init__(self, models: list, output: str | Callable) -> None:
        self.models = models
        self.output = output

    @classmethod
    def load(cls, directory: Path, arrays: dict, output, model_factory=None) -> Worlds:
        """Rebuild from :func:`fit_worlds`'s arrays (and ``model_factory`` for torch)."""
        if arrays.get("params") is not None:
            from pacpriv._optional import import_torch

            torch = import_torch("torch world models")
            models = []
            for row in arrays["params"]:
                module = model_factory()
                ref = next(iter(module.parameters()), None)
                dtype = ref.dtype if ref is not None else torch.float32
                torch.nn.utils.vector_to_parameters(
                    torch.as_tensor(row, dtype=dtype), module.parameters())
                module.eval()
                models.append(module)
            return cls(models, output)
        import joblib

        models = [joblib.load(directory / "models" / f"{_digest_hex(r)}.joblib")
                  for r in arrays["digests"]]
        return cls(models, output)

    def _one(self, model, X: np.ndarray) -> np.ndarray:
        if callable(self.output):
            out = self.output(model, X)
        elif _is_torch_module(model):
            out = _torch_eval(model, X, self.output)
        elif self.output == "proba":
            out = model.predict_proba(X)
        elif self.output == "logits":
            out = model.decision_function(X)
        elif self.output == "label":
            classes = np.asarray(model.classes_)
            out = (np.asarray(model.predict(X))[:, None] == classes[None, :]).astype(np.float64)
        else:
            out = model.predict(X)
        out = np.asarray(out, dtype=np.float64)
        return out.reshape(X.shape[0], -1)

    def check_consistent(self) -> None:
        """Classifiers must share ``classes_`` so that output coordinates mean the same thing.

        Raises
        ------
        ValueError
            If two worlds' ``classes_`` differ (a world lacked a class: use more records).
        """
        classes = [getattr(m, "classes_", None) for m in self.models]
        if classes[0] is None:
            return
        for j, c in enumerate(classes):
            if c is None or not np.array_equal(c, classes[0]):
                raise ValueError(
                    f"world {j} was fitted on classes {c!r}, world 0 on {classes[0]!r}: every "
                    "world must see every class (use a larger pool or fewer classes)."
                )

    def evaluate(self, X: np.ndarray) -> np.ndarray:
        """Outputs of every world on every query row: shape ``(m, n, d)`` float64.

        ``"proba"`` outputs below ``2^-400`` are set to 0 in every world (a fixed
        post-processing); other outputs with a non-zero magnitude outside ``[2^-400, 2^400]``
        are refused (their variance across worlds could underflow to 0: no noise).

        Raises
        ------
        ValueError
            If an output is not finite or out of range, or the worlds disagree on ``d``.
        """
        # overflow inside a model is reported below as a non-finite output (a ValueError the
        # app turns into 422), not as a numpy warning
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            outs = [self._one(m, X) for m in self.models]
        dims = {o.shape[1] for o in outs}
        if len(dims) != 1:
            raise ValueError(f"world models returned different output dimensions {sorted(dims)}.")
        arr = np.stack(outs)
        if not np.all(np.isfinite(arr)):
            raise ValueError("a world model returned a non-finite output (NaN or inf).")
        if self.output == "proba":
            # probabilities below 2^-400 (GaussianNB gives 1e-200 routinely) are 0 for every
            # purpose: set to 0 in every world alike (a fixed post-processing of each world's
            # output), so that no variance underflows
            arr[np.abs(arr) < MIN_OUTPUT_MAGNITUDE] = 0.0
        if np.any(outside_output_range(arr)):
            # a tiny output has variance exactly 0 across worlds: no noise, an exact answer
            raise ValueError(
                f"a world model returned an output of magnitude outside "
                f"[{MIN_OUTPUT_MAGNITUDE:.3g}, {MAX_OUTPUT_MAGNITUDE:.3g}] (non-zero): its "
                f"variance across worlds would under- or overflow float64 and the noise could "
                f"be computed as 0. Rescale the model's output.")
        return arr


def _is_torch_module(model) -> bool:
    mod = type(model).__module__
    return mod.startswith("torch") or any(
        c.__module__.startswith("torch.nn") for c in type(model).__mro__)


def _torch_eval(model, X: np.ndarray, output: str) -> np.ndarray:
    from pacpriv._optional import import_torch

    torch = import_torch("torch world models")
    ref = next(iter(model.parameters()), None)
    dtype = ref.dtype if ref is not None else torch.float32
    with torch.no_grad():
        out = model(torch.as_tensor(X, dtype=dtype))
        if output == "proba":
            out = torch.softmax(out, dim=-1)
        elif output == "label":
            out = torch.nn.functional.one_hot(out.argmax(dim=-1), out.shape[-1])
    return out.to(torch.float64).cpu().numpy()
