"""Adapters that turn scikit-learn estimators and torch modules into mechanisms.

A mechanism is ``f(subset, *, rng=None) -> ndarray of shape (d,)``. The adapters here are small
picklable objects (they travel to joblib/loky workers): every call fits a *fresh* model on the
subset and returns the named fitted parameters, flattened. torch is imported only inside
:class:`TorchMechanism` calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pacpriv._optional import import_torch
from pacpriv.pac.engine._mechanism import MechanismExit, accepts_rng

__all__ = ["EstimatorMechanism", "TorchMechanism", "fitted_value", "sort_rows"]

_PART = re.compile(r"^(\w*)((?:\[-?\d+\])*)$")


def _is_step(obj: Any) -> bool:
    return isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], str)


def fitted_value(model: Any, path: str | Callable[[Any], Any]) -> np.ndarray:
    """A fitted value of ``model`` named by ``path``.

    Parameters
    ----------
    model : fitted estimator
    path : str or callable
        An attribute (``"coef_"``), an attribute path with indexing (``"steps[-1].coef_"``,
        ``"[-1].coef_"``, ``"named_steps.clf.coef_"``; a ``(name, estimator)`` pipeline step
        stands for its estimator), or a callable ``path(model) -> array``. A plain attribute
        that a scikit-learn ``Pipeline`` lacks is read from its last step.

    Returns
    -------
    ndarray

    Raises
    ------
    AttributeError
        If the path does not exist on the fitted model (the message names the path).
    ValueError
        If ``path`` is malformed.
    """
    if callable(path):
        return np.asarray(path(model))
    if "." not in path and "[" not in path and not hasattr(model, path) \
            and hasattr(model, "steps"):
        return fitted_value(model, f"[-1].{path}")  # Pipeline: the final estimator
    obj = model
    for part in path.split("."):
        m = _PART.match(part)
        if m is None or not (m.group(1) or m.group(2)):
            raise ValueError(f"attribute path {path!r}: cannot read {part!r} (use names, "
                             "dots and [index], e.g. 'steps[-1].coef_').")
        name, indexes = m.group(1), m.group(2)
        if name:
            if not hasattr(obj, name):
                raise AttributeError(f"fitted {type(obj).__name__} has no attribute {name!r} "
                                     f"(from attribute path {path!r}).")
            obj = getattr(obj, name)
        for index in re.findall(r"-?\d+", indexes):
            try:
                obj = obj[int(index)]
            except (IndexError, KeyError, TypeError) as err:
                raise AttributeError(f"attribute path {path!r}: cannot index "
                                     f"{type(obj).__name__} with [{index}] ({err}).") from None
            if _is_step(obj):
                obj = obj[1]
    return np.asarray(obj)


def sort_rows(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Canonicalisation hook: sort the rows of each 2-D array lexicographically.

    Removes label permutation from e.g. k-means ``cluster_centers_`` (which centre is called
    "0" is arbitrary and would otherwise cost noise: Xiao & Devadas, CRYPTO 2023, §4). 1-D
    arrays are returned as is.
    """
    out = []
    for a in arrays:
        a = np.asarray(a)
        if a.ndim == 2 and a.shape[1] > 0:
            a = a[np.lexsort(a.T[::-1])]
        out.append(a)
    return out


def _flatten(arrays: Sequence[Any]) -> np.ndarray:
    parts = [np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays]
    return np.concatenate(parts) if parts else np.zeros(0)


@dataclass(frozen=True)
class EstimatorMechanism:
    """Fit a clone of a scikit-learn estimator on the subset; output its fitted attributes.

    Parameters
    ----------
    estimator : sklearn estimator
        Template, never fitted itself: each call uses ``sklearn.base.clone(estimator)``.
    attributes : tuple of str or callable
        Fitted values to output (e.g. ``("coef_", "intercept_")``, ``("cluster_centers_",)``),
        flattened in C order and concatenated. Each is an attribute, an attribute path into a
        scikit-learn ``Pipeline`` (``"steps[-1].coef_"``, ``"named_steps.clf.coef_"``; a plain
        name missing on a pipeline is read from its last step), or a callable
        ``extract(fitted_model) -> array`` (:func:`fitted_value`).
    supervised : bool
        ``True``: the subset is ``(X, y)`` and ``fit(X, y)`` is called; ``False``: ``fit(X)``
        with ``X = subset`` (or ``subset[0]`` for a tuple).
    canonicalize : callable or None
        ``canonicalize(list_of_attribute_arrays) -> sequence of arrays``, applied before
        flattening to remove superficial randomness (e.g. :func:`sort_rows`).

    Notes
    -----
    If the estimator has a ``random_state`` parameter left at ``None`` and the caller passes
    ``rng``, a seed drawn from ``rng`` is set on the clone (no global state is used); an integer
    ``random_state`` is kept as a public fixed seed. Seeding from the trial makes the estimator a
    randomized mechanism whose seed the plain engine treats as part of the secret; see
    :func:`pacpriv.pac.noise.coupling_noise` for the alternative. The estimator must handle
    every subset the sampler can draw (e.g. a classifier needs two classes); otherwise the
    engine reports a ``MechanismError`` naming the trial.
    """

    estimator: Any
    attributes: tuple[str | Callable[[Any], Any], ...] = ("coef_", "intercept_")
    supervised: bool = True
    canonicalize: Callable[[list[np.ndarray]], Sequence[Any]] | None = None

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Fitted attributes of a fresh clone fitted on ``subset``, shape ``(d,)`` float64."""
        from sklearn.base import clone

        model = clone(self.estimator)
        if rng is not None and "random_state" in model.get_params(deep=False):
            if model.get_params(deep=False)["random_state"] is None:
                seed = int(np.random.default_rng(rng).integers(0, 2**31 - 1))
                model.set_params(random_state=seed)
        if self.supervised:
            if not (isinstance(subset, tuple) and len(subset) == 2):
                raise AdapterError(_unlabelled(subset))
            model.fit(np.asarray(subset[0]), np.asarray(subset[1]))
        else:
            X = subset[0] if isinstance(subset, tuple) else subset
            model.fit(np.asarray(X))
        values = [_read(model, name) for name in self.attributes]
        if self.canonicalize is not None:
            values = list(self.canonicalize(values))
        return _flatten(values)


    def check_pool(self, pool: Any) -> None:
        """Before any trial: a supervised estimator needs a labelled pool ``(X, y)``.

        Raises
        ------
        ValueError
            The pool is not a pair ``(X, y)`` while ``supervised`` is True.
        """
        if self.supervised and not (isinstance(pool, tuple) and len(pool) == 2):
            raise ValueError(f"from_estimator({type(self.estimator).__name__}(...)) "
                             + _unlabelled(pool).rstrip(",") + ".")


def _unlabelled(data: Any) -> str:
    """pacpriv's words (no data) for a supervised estimator given unlabelled data."""
    kind = type(data).__name__ if not isinstance(data, tuple) else f"tuple of {len(data)}"
    return ("is a supervised estimator (supervised=True: it fits (X, y)) but got a "
            f"{kind}, not a pair (X, y): pass supervised=False for fit(X) (e.g. KMeans, PCA), "
            "or a labelled pool (X, y),")


class AdapterError(MechanismExit, ValueError):
    """An adapter's own words about how it was configured or called (never the data's values),
    which the engine prints instead of withholding them as a user function's message (ninth
    new-user pass, #528)."""


class AttributesError(MechanismExit, AttributeError):
    """A named fitted attribute is missing or not numeric: an ``AttributeError`` whose message
    holds only the caller's configuration (the name, a dtype), so the engine prints it (a
    :class:`~pacpriv.pac.engine._mechanism.MechanismExit`: its words are pacpriv's)."""


def _read(model: Any, name: str | Callable[[Any], Any]) -> np.ndarray:
    """:func:`fitted_value`; a named attribute that the fitted model lacks is said in public
    words (the name is the caller's configuration, never data), not withheld like a failure
    of the estimator itself (seventh new-user pass, #154/#159/#163)."""
    if callable(name):
        return fitted_value(model, name)
    try:
        value = fitted_value(model, name)
    except (AttributeError, ValueError) as err:
        raise AttributesError(f"could not read its `attributes` entry {name!r}: "
                            f"{str(err).rstrip('.')} (name fitted attributes of the estimator, "
                            "e.g. 'coef_', or 'steps[-1].coef_' in a Pipeline),") from err
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):  # e.g. classes_ with string labels: its dtype, no value
        raise AttributesError(
            f"could not read its `attributes` entry {name!r}: an array of dtype "
            f"{value.dtype.name}, not numbers (release numeric fitted attributes only),"
        ) from None


@dataclass(frozen=True)
class TorchMechanism:
    """Build a torch module, train it on the subset, output its flattened parameters.

    Parameters
    ----------
    model_factory : callable
        ``model_factory() -> torch.nn.Module``; called under ``torch.random.fork_rng`` with a
        seed drawn from ``rng``, so the initialisation is reproducible and the global torch
        state is restored afterwards.
    train_fn : callable
        ``train_fn(model, subset)`` or ``train_fn(model, subset, rng=generator)`` (a numpy
        ``Generator`` is passed when the signature has ``rng``); trains in place and may return
        the trained module (used instead of ``model`` if it returns one).

    Notes
    -----
    The output is ``concat(p.detach().reshape(-1) for p in model.parameters())`` as float64,
    shape ``(n_parameters,)``. Requires ``pip install pacpriv[torch]``.
    """

    model_factory: Callable[[], Any]
    train_fn: Callable[..., Any]

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """Flattened parameters after training on ``subset``, shape ``(n_parameters,)``."""

        torch = import_torch("the torch adapter (from_torch)")
        gen = np.random.default_rng(rng)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(gen.integers(0, 2**63 - 1)))
            model = self.model_factory()
            if not isinstance(model, torch.nn.Module):
                raise AdapterError(f"returned no torch.nn.Module from its `model_factory` (got "
                                   f"{type(model).__name__}),")
            kwargs = {"rng": gen} if accepts_rng(self.train_fn) else {}
            trained = self.train_fn(model, subset, **kwargs)
        if isinstance(trained, torch.nn.Module):
            model = trained
        with torch.no_grad():
            flat = [p.detach().reshape(-1).to(torch.float64).cpu() for p in model.parameters()]
        return torch.cat(flat).numpy() if flat else np.zeros(0)
