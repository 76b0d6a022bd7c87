"""What a PAC-private estimator releases, and how its predictions use the noisy release.

Two releases (:class:`~pacpriv.estimators.PACPrivateClassifier`'s ``release=``):

* ``"parameters"``: the fitted attributes (``coef_``, ``intercept_``, ...) flattened. The noisy
  vector is written into a *carrier*: a clone of the estimator fit on a few public synthetic
  rows (a fixed seed, no record), so that its ``predict`` runs with the noisy parameters and
  every attribute that is not released comes from public rows, not from the records.
* ``"decision_function"``: the estimator's scores (``predict_proba`` if it has one, else
  ``decision_function``; ``predict`` for a regressor) on a public set the user declares. New
  rows are answered by the nearest public row's noisy scores (a 1-nearest-neighbour lookup,
  post-processing of the release, which costs no privacy).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Scores smaller than this in magnitude are released as 0 (see :class:`FitMechanism`).
TINY = 1e-100

__all__ = ["FitMechanism", "public_carrier", "score_method", "write_parameters"]


def score_method(estimator: Any, classifier: bool) -> str:
    """The method whose values a ``"decision_function"`` release holds."""
    if not classifier:
        return "predict"
    for name in ("predict_proba", "decision_function"):
        if hasattr(estimator, name):
            return name
    raise ValueError(f"release='decision_function' needs an estimator with predict_proba or "
                     f"decision_function; {type(estimator).__name__} has neither.")


@dataclass(frozen=True)
class FitMechanism:
    """Fit a clone on the subset ``(X, y)``; output its released values, flattened.

    Parameters
    ----------
    estimator : sklearn estimator
        Template (cloned for every call; a ``random_state`` left at ``None`` is seeded from
        the trial's ``rng``).
    attributes : tuple of str
        Fitted attributes released (``method=None``).
    public_X : ndarray of shape (n_public, p) or None
        The declared public rows (``method`` set).
    method : {"predict_proba", "decision_function", "predict"} or None
        What to evaluate on ``public_X``; ``None`` releases ``attributes``. Scores below
        :data:`TINY` in magnitude are released as 0.
    anchors : ndarray of shape (n_classes,) or None
        For a classifier: every fit also sees one public row per class, at the origin of the
        feature space (a public constant, the same for every subset), so every class is
        present in every subset and the release has one shape.
    """

    estimator: Any
    attributes: tuple[str, ...] = ()
    public_X: np.ndarray | None = None
    method: str | None = None
    anchors: np.ndarray | None = None

    def __call__(self, subset, *, rng=None) -> np.ndarray:
        """The released values of a fresh fit on ``subset``, shape ``(d,)`` float64."""
        from sklearn.base import clone

        from pacpriv.pac.engine._adapters import fitted_value

        model = clone(self.estimator)
        params = model.get_params(deep=False)
        if rng is not None and "random_state" in params and params["random_state"] is None:
            model.set_params(random_state=int(np.random.default_rng(rng).integers(2**31 - 1)))
        X, y = (np.asarray(a) for a in subset)
        if self.anchors is not None:
            X = np.vstack([X, np.zeros((len(self.anchors), X.shape[1]), dtype=X.dtype)])
            y = np.concatenate([y, self.anchors.astype(y.dtype)])
        model.fit(X, y)
        if self.method is None:
            parts = [np.asarray(fitted_value(model, a), dtype=np.float64).ravel()
                     for a in self.attributes]
            return np.concatenate(parts)
        values = np.asarray(getattr(model, self.method)(self.public_X), dtype=np.float64)
        # a probability of 1e-200 is 0 for every use, and the engine refuses magnitudes that
        # float64 variances cannot hold: such values are released as 0 (part of f, public)
        return np.where(np.abs(values) < TINY, 0.0, values).ravel()


def _public_rows(n_features: int, classes: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """A few synthetic rows from a fixed public seed, with every class (or a Gaussian target)."""
    gen = np.random.default_rng(20231203)  # public constant: the rows hold no record
    k = 1 if classes is None else len(classes)
    n = max(8 * k, 16)
    X = gen.standard_normal((n, n_features))
    y = gen.standard_normal(n) if classes is None else np.resize(classes, n)
    return X, y


def public_carrier(estimator: Any, n_features: int, classes: np.ndarray | None):
    """A clone of ``estimator`` fit on public synthetic rows: the carrier of noisy parameters."""
    from sklearn.base import clone

    model = clone(estimator)
    X, y = _public_rows(n_features, classes)
    with warnings.catch_warnings():  # a convergence warning on synthetic rows says nothing
        warnings.simplefilter("ignore")
        model.fit(X, y)
    return model


def write_parameters(carrier: Any, attributes: tuple[str, ...], flat: np.ndarray) -> None:
    """Write the released vector ``flat`` into the carrier's ``attributes``, in order.

    Raises
    ------
    ValueError
        If the lengths disagree (the carrier's attributes have other shapes than the fits on
        the data, e.g. a class missing from the data).
    """
    flat = np.asarray(flat, dtype=np.float64)
    start = 0
    for name in attributes:
        template = np.asarray(getattr(carrier, name))
        size = template.size
        if start + size > flat.size:
            break
        value = flat[start:start + size].reshape(template.shape)
        setattr(carrier, name, value if template.ndim else float(value))
        start += size
    if start != flat.size:
        raise ValueError(f"the released parameters ({flat.size} values) do not match the "
                         f"attributes {list(attributes)} of the estimator ({start} values).")
