"""The ``m`` fitted world models and their outputs on a batch of queries, ``(m, n, d)``.

Answering a query needs every world's output (its covariance under the posterior sets the
noise; Zhu, Sridhar & Devadas, Private Prediction via PAC Privacy, arXiv:2601.14033, 2026).
Where the worlds allow it, all of them are evaluated in one batched call per query batch:

* torch modules of one architecture: stacked into a :class:`pacpriv.ensemble.Ensemble`
  (one batched product per linear layer, or a ``vmap`` of ``functional_call``);
* linear scikit-learn models (``LogisticRegression``, ``Ridge``, ...; optionally behind a
  ``StandardScaler``): one stacked coefficient matrix (:mod:`pacpriv.prediction._linear`);
* anything else (trees, naive Bayes, a callable output): one call per world.

The batched forms equal the per-world loop up to floating-point summation order
(:meth:`Worlds.evaluate_each` is the loop).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pacpriv._torch_models import one_torch_thread
from pacpriv.pac.engine._isolation import output_to_stderr
from pacpriv.pac.engine._mechanism import (
    MAX_OUTPUT_MAGNITUDE,
    MIN_OUTPUT_MAGNITUDE,
    InvalidOutput,
    as_float64,
    outside_output_range,
)
from pacpriv.prediction._linear import stack_linear

__all__ = ["EVALUATIONS", "OUTPUTS", "OUTPUT_METHODS", "Worlds", "digest_hex",
           "supported_outputs"]

#: Built-in output transforms.
OUTPUTS = ("proba", "logits", "value", "label")

#: The method of a scikit-learn model that each built-in output calls (``"label"`` also needs
#: the classifier's ``classes_``).
OUTPUT_METHODS = {"proba": "predict_proba", "logits": "decision_function", "value": "predict",
                  "label": "predict"}


def supported_outputs(estimator) -> tuple[str, ...]:
    """The built-in outputs (:data:`OUTPUTS`) that an unfitted scikit-learn estimator gives:
    those whose method (:data:`OUTPUT_METHODS`) it has (``hasattr`` honours scikit-learn's
    ``available_if``, e.g. a ``Pipeline``'s last step), ``"label"`` for classifiers only.

    Examples
    --------
    >>> from sklearn.naive_bayes import GaussianNB
    >>> from sklearn.linear_model import Ridge
    >>> supported_outputs(GaussianNB()), supported_outputs(Ridge())
    (('proba', 'value', 'label'), ('value',))
    """
    from sklearn.base import is_classifier

    return tuple(o for o in OUTPUTS if hasattr(estimator, OUTPUT_METHODS[o])
                 and (o != "label" or is_classifier(estimator)))

#: How the worlds are evaluated (``Worlds.evaluation``).
EVALUATIONS = ("torch ensemble (one batched call)", "stacked linear model (one batched call)",
               "per world (one call per world)")


def digest_hex(row: np.ndarray) -> str:
    """The SHA-256 hex digest a stored world's output row stands for (32 bytes as floats)."""
    return bytes(np.asarray(row, dtype=np.float64).astype(np.uint8).tolist()).hex()


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
    batched : bool, default True
        Evaluate all worlds in one call where the models allow it (see the module docstring);
        False: always one call per world.

    Attributes
    ----------
    evaluation : str
        One of :data:`EVALUATIONS`.
    """

    def __init__(self, models: list, output: str | Callable, *, batched: bool = True) -> None:
        self.models = models
        self.output = output
        self._batched: Callable[[np.ndarray], np.ndarray] | None = None
        self.evaluation = EVALUATIONS[2]
        if batched and models and isinstance(output, str):
            if all(_is_torch_module(m) for m in models):
                self._batched = _torch_ensemble(models, output)
                if self._batched is not None:
                    self.evaluation = EVALUATIONS[0]
            else:
                self._batched = stack_linear(models, output, self._raw_each)
                if self._batched is not None:
                    self.evaluation = EVALUATIONS[1]

    @classmethod
    def load(cls, directory: Path, arrays: dict, output, model_factory=None) -> Worlds:
        """Rebuild from the fitted world arrays (and ``model_factory`` for torch worlds).

        ``arrays["params"]`` (torch): row ``j`` is world ``j``'s parameter vector,
        ``concat(p.reshape(-1) for p in module.parameters())``; else ``arrays["digests"]``
        names the joblib file of each world under ``directory / "models"``.
        """
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
        from pacpriv.prediction._state import StateDir

        folder = StateDir(directory)  # each file checked against the SHA-256 in its name
        models = [folder.load_pickle(f"models/{digest_hex(r)}.joblib")
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
        try:  # pacpriv's cast, not the model: "not castable", never "the model raised"
            arr = as_float64(out)
        except InvalidOutput as err:
            raise InvalidOutput(f"a world model's {err}") from err.__cause__
        return arr.reshape(X.shape[0], -1)

    def dim(self, X: np.ndarray) -> int | None:
        """``d``, the output coordinates of world 0 on the rows ``X`` (nothing is released; no
        range check), or None when that evaluation fails (the query reports it)."""
        try:
            with np.errstate(all="ignore"), output_to_stderr():
                return int(self._one(self.models[0], X).shape[1])
        except Exception:  # user code: its own error comes with the first query
            return None

    def _raw_each(self, X: np.ndarray) -> np.ndarray:
        outs = [self._one(m, X) for m in self.models]
        dims = {o.shape[1] for o in outs}
        if len(dims) != 1:
            raise ValueError(f"world models returned different output dimensions {sorted(dims)}.")
        return np.stack(outs)

    def check_consistent(self) -> None:
        """Classifiers must share ``classes_`` so that output coordinates mean the same thing.

        Raises
        ------
        ValueError
            If two worlds' ``classes_`` differ (a world lacked a class: use more records). The
            message gives the number of classes of each, never the class labels (they are
            values of the data).
        """
        classes = [getattr(m, "classes_", None) for m in self.models]
        if classes[0] is None:
            return
        for j, c in enumerate(classes):
            if c is None or not np.array_equal(c, classes[0]):
                count = "no" if c is None else len(c)
                raise ValueError(
                    f"world {j} was fitted on {count} classes, world 0 on {len(classes[0])} "
                    "(or on other labels): every world must see every class (use a larger pool "
                    "or fewer classes)."
                )

    @property
    def classes(self) -> np.ndarray | None:
        """The shared ``classes_`` of scikit-learn classifier worlds (None for others)."""
        return getattr(self.models[0], "classes_", None) if self.models else None

    @property
    def is_torch(self) -> bool:
        """Whether the worlds are torch modules."""
        return bool(self.models) and _is_torch_module(self.models[0])

    def evaluate(self, X: np.ndarray) -> np.ndarray:
        """Outputs of every world on every query row: shape ``(m, n, d)`` float64.

        All worlds in one batched call where possible (:attr:`evaluation`), else one call per
        world. ``"proba"`` outputs below ``2^-400`` are set to 0 in every world (a fixed
        post-processing); other outputs with a non-zero magnitude outside ``[2^-400, 2^400]``
        are refused (their variance across worlds could underflow to 0: no noise).

        Raises
        ------
        ValueError
            If an output is not finite or out of range, or the worlds disagree on ``d``.
        """
        return self._checked(self._batched or self._raw_each, X)

    def evaluate_each(self, X: np.ndarray) -> np.ndarray:
        """:meth:`evaluate` with one call per world (the reference for the batched forms)."""
        return self._checked(self._raw_each, X)

    def _checked(self, evaluate: Callable[[np.ndarray], np.ndarray], X: np.ndarray
                 ) -> np.ndarray:
        # overflow inside a model is reported below as a non-finite output (a ValueError the
        # app turns into 422), not as a numpy warning; what a model prints goes to stderr
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"), output_to_stderr():
            arr = np.array(evaluate(X), dtype=np.float64)
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


def _transform(out, output: str, torch):
    """The output transform of a torch module's output (last axis = the classes)."""
    if output == "proba":
        return torch.softmax(out, dim=-1)
    if output == "label":
        return torch.nn.functional.one_hot(out.argmax(dim=-1), out.shape[-1])
    return out


def _torch_eval(model, X: np.ndarray, output: str) -> np.ndarray:
    from pacpriv._optional import import_torch

    torch = import_torch("torch world models")
    ref = next(iter(model.parameters()), None)
    dtype = ref.dtype if ref is not None else torch.float32
    with torch.no_grad():
        out = _transform(model(torch.tensor(X, dtype=dtype)), output, torch)
    return out.to(torch.float64).cpu().numpy()


def _torch_ensemble(models: list, output: str) -> Callable[[np.ndarray], np.ndarray] | None:
    """All torch worlds as one :class:`pacpriv.ensemble.Ensemble`, or None where they cannot
    be stacked (different architectures, no or frozen parameters, batch normalisation,
    dropout, a dtype other than float32/float64): those use the per-world loop."""
    from pacpriv.ensemble import Ensemble
    from pacpriv.ensemble._torch import torch

    ref = next(iter(models[0].parameters()), None)
    try:
        ensemble = Ensemble.from_modules(models, dtype=ref.dtype if ref is not None
                                         else torch.float32)
    except (TypeError, ValueError):
        return None
    ensemble.template.eval()  # the worlds answer in evaluation mode, as the loop does

    def evaluate(X: np.ndarray) -> np.ndarray:
        with _few_threads(len(X) * len(models) <= _SMALL):
            # a tensor copy: the rows may be a read-only array (torch warns on those)
            out = ensemble.forward(torch.tensor(X, dtype=ensemble.dtype))
            with torch.inference_mode():
                out = _transform(out, output, torch)
            return out.reshape(out.shape[0], out.shape[1], -1).to(torch.float64).numpy()

    return evaluate


#: Rows × worlds up to which a torch evaluation runs on one intra-op thread.
_SMALL = 16_384
_THREADS = threading.Lock()


@contextlib.contextmanager
def _few_threads(small: bool):
    """One torch intra-op thread for a small evaluation (restored afterwards).

    A one-row query over 128 small worlds is a few microseconds of arithmetic per operator;
    with torch's OpenMP pool each operator also waits for the pool's threads, which on a busy
    machine costs milliseconds (measured: 5.6 ms against 0.9 ms per answered query on 2 loaded
    cores). The switch is process-wide, so it is held under a lock.
    """
    if not small:
        yield
        return
    with _THREADS, one_torch_thread():
        yield
