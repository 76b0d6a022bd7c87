"""All worlds of a linear scikit-learn model as one stacked matrix, evaluated in one product.

When every world is the same linear estimator (optionally after ``StandardScaler`` steps of a
``Pipeline``), the ``m`` coefficient matrices are stacked into ``W`` of shape ``(m, k, p)`` and
the intercepts into ``c`` of shape ``(m, k)``; a batch of ``n`` query rows gives every world's
scores ``Z = X Wᵀ + c`` of shape ``(m, n, k)`` in one batched product instead of ``m``
``decision_function`` calls. The outputs follow scikit-learn's own formulas:

* ``"logits"``: ``decision_function`` (a binary classifier's single column);
* ``"value"``: a regressor's ``predict``;
* ``"label"``: one-hot of ``predict`` (``Z > 0`` for binary, ``argmax`` otherwise);
* ``"proba"`` (``LogisticRegression``): ``expit`` of the binary score (``[1 − s, s]``), the
  softmax of the multinomial scores.

A ``StandardScaler`` is folded into the matrix (``W / σ``, ``c − (W / σ) μ``), so one
``(n, p) × (p, m·k)`` product gives every world's scores.

:func:`stack_linear` checks the stacked form against the per-world loop on probe rows before it
is used (a scikit-learn release that changed a formula falls back to the loop).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["StackedLinear", "stack_linear"]

#: Linear classifiers (scores ``X Wᵀ + c``; ``predict`` by sign or argmax).
_CLASSIFIERS = ("LogisticRegression", "RidgeClassifier", "LinearSVC", "SGDClassifier",
                "Perceptron", "PassiveAggressiveClassifier")
#: Linear regressors (``predict = X Wᵀ + c``).
_REGRESSORS = ("Ridge", "LinearRegression", "Lasso", "ElasticNet", "LinearSVR", "SGDRegressor",
               "HuberRegressor", "BayesianRidge", "ARDRegression", "Lars", "LassoLars")
#: Outputs each kind supports in stacked form (others use the per-world loop).
_OUTPUTS = {"classifier": ("logits", "label"), "regressor": ("value",)}
#: Probe tolerance: the stacked scores differ from scikit-learn's by summation order only.
_RTOL, _ATOL = 1e-7, 1e-9


def _kind(model) -> str | None:
    module = type(model).__module__
    if not module.startswith("sklearn.linear_model") and not module.startswith("sklearn.svm"):
        return None
    name = type(model).__name__
    if name in _CLASSIFIERS:
        return "classifier"
    return "regressor" if name in _REGRESSORS else None


def _parts(model) -> tuple[list, Any]:
    """``(scalers, final estimator)`` of a model or of a Pipeline of scalers and a model."""
    steps = getattr(model, "steps", None)
    if steps is None:
        return [], model
    scalers = [s for _, s in steps[:-1] if s != "passthrough" and s is not None]
    return scalers, steps[-1][1]


def _is_scaler(step) -> bool:
    return type(step).__name__ == "StandardScaler" and \
        type(step).__module__.startswith("sklearn.preprocessing")


@dataclass(frozen=True, eq=False)
class StackedLinear:
    """The stacked worlds of one linear model (see the module docstring).

    Attributes
    ----------
    weights : ndarray of shape (m, k, p)
    intercepts : ndarray of shape (m, k)
    means, scales : ndarray of shape (m, p) or None
        The worlds' ``StandardScaler`` statistics (None: no centring or scaling).
    output : str
    classes : ndarray or None
        The shared ``classes_`` of classifier worlds.
    """

    weights: np.ndarray
    intercepts: np.ndarray
    means: np.ndarray | None
    scales: np.ndarray | None
    output: str
    classes: np.ndarray | None

    def scores(self, X: np.ndarray) -> np.ndarray:
        """``Z = X' Wᵀ + c`` of shape ``(m, n, k)``, ``X'`` the scaled rows of each world.

        The scaler is folded into the stacked matrix (``W / σ`` and ``c − (W / σ) μ``), so the
        product is one ``(n, p) × (p, m·k)`` matrix product for all worlds.
        """
        m, k, _ = self.weights.shape
        z = np.asarray(X, dtype=np.float64) @ self._folded[0]
        return z.reshape(-1, m, k).transpose(1, 0, 2) + self._folded[1][:, None, :]

    @functools.cached_property
    def _folded(self) -> tuple[np.ndarray, np.ndarray]:
        w, c = self.weights, self.intercepts
        if self.scales is not None:
            w = w / self.scales[:, None, :]
        if self.means is not None:
            c = c - np.einsum("mkp,mp->mk", w, self.means)
        m, k, p = w.shape
        return np.ascontiguousarray(w.reshape(m * k, p).T), c

    def __call__(self, X: np.ndarray) -> np.ndarray:
        """Every world's output on every row: shape ``(m, n, d)`` float64."""
        z = self.scores(X)
        if self.output in ("logits", "value"):
            return z
        if self.output == "label":
            assert self.classes is not None
            index = (z[..., 0] > 0).astype(np.intp) if z.shape[2] == 1 else z.argmax(axis=2)
            return np.eye(len(self.classes))[index]
        if z.shape[2] == 1:  # binary logistic regression: expit, then [1 − s, s]
            from scipy.special import expit

            s = expit(z[..., 0])
            return np.stack([1.0 - s, s], axis=2)
        z = z - z.max(axis=2, keepdims=True)
        np.exp(z, out=z)
        return z / z.sum(axis=2, keepdims=True)


def _stack(models: list, output: str) -> StackedLinear | None:
    first_scalers, first = _parts(models[0])
    kind = _kind(first)
    proba = output == "proba" and type(first).__name__ == "LogisticRegression"
    if kind is None or not (proba or output in _OUTPUTS[kind]):
        return None
    if not all(_is_scaler(s) for s in first_scalers):
        return None
    weights: list[np.ndarray] = []
    intercepts: list[np.ndarray] = []
    means: list[Any] = []
    scales: list[Any] = []
    for model in models:
        scalers, est = _parts(model)
        if type(est) is not type(first) or len(scalers) != len(first_scalers) or \
                not all(_is_scaler(s) for s in scalers) or len(scalers) > 1:
            return None
        coef = np.asarray(est.coef_, dtype=np.float64)
        weights.append(coef.reshape(1, -1) if coef.ndim == 1 else coef)
        intercepts.append(np.broadcast_to(np.asarray(est.intercept_, dtype=np.float64),
                                          (weights[-1].shape[0],)))
        if scalers:
            s = scalers[0]
            means.append(s.mean_ if s.with_mean else None)
            scales.append(s.scale_ if s.with_std else None)
    if len({w.shape for w in weights}) != 1:
        return None
    classes = getattr(first, "classes_", None)
    if output == "proba" and (classes is None or weights[0].shape[0] not in (1, len(classes))):
        return None
    return StackedLinear(
        weights=np.stack(weights), intercepts=np.stack(intercepts),
        means=None if not means or means[0] is None else np.stack(means).astype(np.float64),
        scales=None if not scales or scales[0] is None else np.stack(scales).astype(np.float64),
        output=output, classes=None if classes is None else np.asarray(classes))


def stack_linear(models: list, output: str, loop) -> StackedLinear | None:
    """The stacked form of ``models``, or None where it does not apply or disagrees.

    Parameters
    ----------
    models : list
        The fitted worlds.
    output : str
        The output kind (a callable output is never stacked).
    loop : callable
        ``loop(X) -> (m, n, d)``, the per-world evaluation the stacked form must reproduce.

    Returns
    -------
    StackedLinear or None
        None unless every world is the same supported linear estimator (optionally behind one
        ``StandardScaler``) and the stacked outputs equal the loop's on 8 probe rows (relative
        ``1e-7``; labels exactly).
    """
    if not isinstance(output, str) or not models:
        return None
    try:
        stacked = _stack(models, output)
    except (AttributeError, TypeError, ValueError):
        return None
    if stacked is None:
        return None
    p = stacked.weights.shape[2]
    probe = np.random.default_rng(0).standard_normal((8, p))  # public probe rows
    if stacked.scales is not None:
        probe = probe * stacked.scales[0]
    if stacked.means is not None:
        probe = probe + stacked.means[0]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        want, got = loop(probe), stacked(probe)
    if want.shape != got.shape:
        return None
    same = np.array_equal(want, got) if output == "label" else \
        np.allclose(got, want, rtol=_RTOL, atol=_ATOL)
    return stacked if same else None
