"""Private helpers for the linear-model mechanisms (logistic regression, linear SVM).

A fixed public class list ``classes`` (K entries) fixes the output shape whatever labels a subset
happens to contain. Labels are mapped to their positions ``0..K-1`` before fitting, so
scikit-learn's ``classes_`` are public positions. The fitted ``coef_`` / ``intercept_`` are then
embedded into a fixed ``(K_out, p)`` / ``(K_out,)`` layout, ``K_out = 1`` for ``K = 2`` and
``K_out = K`` otherwise:

* every public class present: the fitted rows, in public order;
* ``K >= 3`` but exactly two classes ``a < b`` present: scikit-learn fits one binary model
  ``(w, c)`` for ``b`` against ``a``; row ``b`` gets ``+s (w, c)`` and row ``a`` gets
  ``-s (w, c)`` (``s = 1/2`` for softmax models, which keeps the two-class probabilities;
  ``s = 1`` for one-vs-rest models);
* classes absent from the subset, and every row when fewer than two classes are present
  (including ``n = 0``): the public placeholder 0 (coefficients and intercept).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any, ClassVar

import numpy as np

from ._common import canonical_order, class_indices, quiet_convergence, split_supervised

__all__ = [
    "LinearModel",
    "SupervisedConfig",
    "check_classes",
    "check_scaling",
    "check_supervised_config",
    "config_dict",
    "fit_embedded",
    "linear_output_dim",
]


def check_classes(classes: Sequence) -> tuple:
    """Validate a public class list: at least two distinct labels."""
    out = tuple(np.asarray(classes).tolist())
    if len(out) < 2 or len(set(out)) != len(out):
        raise ValueError(f"`classes` must list at least 2 distinct labels; got {out}.")
    return out


def config_dict(mechanism: str, config) -> dict:
    """JSON-serialisable ``{"mechanism": name, field: value, ...}`` of a frozen config dataclass.

    Tuples become lists; fields annotated ``int``/``float`` are cast to the Python type.
    """
    casts = {"int": int, "float": float}
    out: dict = {"mechanism": mechanism}
    for f in fields(config):
        value = getattr(config, f.name)
        if isinstance(value, tuple):
            value = list(value)
        elif f.type in casts:
            value = casts[f.type](value)
        out[f.name] = value
    return out


def check_scaling(center, scale) -> tuple:
    """Validate public standardisation constants (scalar or per feature; ``scale > 0``)."""

    def _tup(v, name):
        if v is None:
            return None
        a = np.atleast_1d(np.asarray(v, dtype=np.float64))
        if a.ndim != 1 or not np.all(np.isfinite(a)):
            raise ValueError(f"`{name}` must be a finite scalar or 1-D sequence.")
        if name == "scale" and np.any(a <= 0):
            raise ValueError(f"`scale` must be > 0 everywhere; got {a.tolist()}.")
        return tuple(a.tolist())

    return _tup(center, "center"), _tup(scale, "scale")


def check_supervised_config(config, *, regularised: bool = True) -> None:
    """Validate and normalise a frozen supervised config in place (its ``__post_init__``).

    ``classes`` (:func:`check_classes`), ``center`` and ``scale`` (:func:`check_scaling`); with
    ``regularised`` also ``C`` (finite, ``> 0``) and ``max_iter`` (``>= 1``).
    """
    object.__setattr__(config, "classes", check_classes(config.classes))
    center, scale = check_scaling(config.center, config.scale)
    object.__setattr__(config, "center", center)
    object.__setattr__(config, "scale", scale)
    if not regularised:
        return
    if not (np.isfinite(config.C) and config.C > 0):
        raise ValueError(f"`C` must be a finite number > 0; got {config.C!r}.")
    if int(config.max_iter) < 1:
        raise ValueError(f"`max_iter` must be >= 1; got {config.max_iter!r}.")


def standardise(X: np.ndarray, center, scale) -> np.ndarray:
    """``(X - center) / scale`` with public constants (identity when both are ``None``)."""
    if center is not None:
        X = X - np.asarray(center)
    if scale is not None:
        X = X / np.asarray(scale)
    return X


def linear_output_dim(n_classes: int, n_features: int) -> int:
    """Output length ``K_out * (p + 1)``."""
    k_out = 1 if n_classes == 2 else n_classes
    return k_out * (n_features + 1)


def fit_embedded(estimator, X, y, classes, *, binary_scale: float) -> np.ndarray:
    """Fit ``estimator`` on ``(X, y)`` and return ``[coef.ravel(), intercept]`` in the fixed layout.

    ``X`` must already be standardised. Rows are put in canonical order first.
    """
    n_classes, p = len(classes), X.shape[1]
    k_out = 1 if n_classes == 2 else n_classes
    coef = np.zeros((k_out, p))
    intercept = np.zeros(k_out)
    idx = class_indices(y, classes) if y.size else np.zeros(0, dtype=np.int64)
    present = np.unique(idx)
    if present.size >= 2:
        Xs, ys = canonical_order(X, idx)
        with quiet_convergence():
            estimator.fit(Xs, ys)
        w = np.asarray(estimator.coef_, dtype=np.float64).reshape(-1, p)
        b = np.broadcast_to(np.asarray(estimator.intercept_, dtype=np.float64), (w.shape[0],))
        if n_classes == 2:
            coef[0], intercept[0] = w[0], b[0]
        elif present.size == 2:
            lo, hi = present
            coef[hi], intercept[hi] = binary_scale * w[0], binary_scale * b[0]
            coef[lo], intercept[lo] = -binary_scale * w[0], -binary_scale * b[0]
        else:
            coef[present], intercept[present] = w, b
    return np.concatenate([coef.ravel(), intercept])


class SupervisedConfig:
    """Behaviour shared by the frozen configs of the supervised mechanisms (a mixin, no fields).

    ``__post_init__`` validates and normalises the config (:func:`check_supervised_config`, with
    ``C`` and ``max_iter`` when ``regularised``); ``to_dict`` is its :func:`config_dict` under
    the registry name ``mechanism``.
    """

    #: Registry name of the mechanism (also named in the errors of :func:`split_supervised`).
    mechanism: ClassVar[str]
    #: Whether the config has the regularisation fields ``C`` and ``max_iter``.
    regularised: ClassVar[bool] = True
    classes: tuple
    center: tuple[float, ...] | None
    scale: tuple[float, ...] | None

    def __post_init__(self) -> None:
        check_supervised_config(self, regularised=self.regularised)

    def to_dict(self) -> dict:
        """JSON-serialisable configuration."""
        return config_dict(self.mechanism, self)


class LinearModel(SupervisedConfig):
    """A linear classifier as a mechanism: fit ``estimator()`` on the standardised subset and
    return its coefficients in the fixed layout of this module (:func:`fit_embedded`)."""

    #: ``s`` of the two-present-classes rule (module docstring): ½ softmax, 1 one-vs-rest.
    binary_scale: ClassVar[float]

    def estimator(self) -> Any:
        """A fresh, unfitted scikit-learn estimator with this config's public settings."""
        raise NotImplementedError

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Coefficients then intercepts, shape ``(K_out * (p + 1),)``; ``rng`` is ignored."""
        X, y = split_supervised(subset, mechanism=self.mechanism)
        Z = standardise(X, self.center, self.scale)
        return fit_embedded(self.estimator(), Z, y, self.classes, binary_scale=self.binary_scale)
