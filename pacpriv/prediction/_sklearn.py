"""The scikit-learn estimator protocol of :class:`~pacpriv.prediction.PrivatePredictor`.

``predict`` (labels of a classifier, values of a regressor), ``predict_proba`` (with
``output="proba"``), ``classes_``, ``score``, ``get_params``/``set_params`` and the estimator
tags, so that the predictor works with ``sklearn.base.clone``, ``cross_val_score`` and the
metrics. Each of them is a function of the noisy answers (post-processing: covered by the
bound) and **every call that answers rows spends budget**, ``per_query_budget`` per row,
including the ``score`` calls that ``cross_val_score`` makes on each test fold.

scikit-learn is imported only inside the methods that need it (``import pacpriv`` does not
import it).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from pacpriv.prediction._settings import Settings

__all__ = ["EstimatorProtocol", "labels_of"]


class _AvailableIf:
    """A method that exists (``hasattr``) only when ``check(instance)`` holds, as
    :func:`sklearn.utils.metaestimators.available_if` (without importing scikit-learn)."""

    def __init__(self, check: Callable[[Any], str | None], fn: Callable) -> None:
        self.check, self.fn = check, fn
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.fn
        why = self.check(obj)
        if why is not None:
            raise AttributeError(why)
        return types.MethodType(self.fn, obj)


def _available_if(check: Callable[[Any], str | None]) -> Callable[[Callable], _AvailableIf]:
    return lambda fn: _AvailableIf(check, fn)


def _needs_proba(pp) -> str | None:
    if pp._settings.output != "proba":
        return (f"predict_proba needs output='proba' (the release is then projected onto the "
                f"probability simplex); this predictor has output={pp._settings.output_name!r}.")
    return None


def _needs_kind(pp) -> str | None:
    if pp._settings.estimator_type is None:
        return "score needs a classifier (proba, logits, label) or regressor (value) output."
    return None


def labels_of(answers: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Predicted labels from released answers: ``classes[argmax]``, or by sign for one score
    column (a binary decision function, as scikit-learn's ``predict``)."""
    if answers.shape[1] == 1:
        index = (answers[:, 0] > 0).astype(np.intp)
    else:
        index = answers.argmax(axis=1)
    return np.asarray(classes)[index]


class EstimatorProtocol:
    """Mixin: the scikit-learn estimator methods of a private predictor (see the module
    docstring)."""

    if TYPE_CHECKING:  # provided by PrivatePredictor
        _params: dict
        _settings: Settings

        @property
        def is_fitted(self) -> bool: ...

        def answer(self, X_queries, *, progress: bool = False) -> np.ndarray: ...

        def _classes(self) -> np.ndarray: ...

    # -- parameters ------------------------------------------------------------------------
    def get_params(self, deep: bool = True) -> dict:
        """The constructor's arguments, as given (``sklearn.base.clone`` rebuilds from them).

        Parameters
        ----------
        deep : bool, default True
            Also list the parameters of a scikit-learn estimator given as ``fit``, as
            ``fit__<name>``.

        Returns
        -------
        dict
        """
        params = dict(self._params)
        fit: Any = params.get("fit")
        if deep and hasattr(fit, "get_params") and not isinstance(fit, type):
            params.update({f"fit__{k}": v for k, v in fit.get_params(deep=True).items()})
        return params

    def set_params(self, **params) -> Any:
        """Change constructor arguments of a predictor that is not fitted yet.

        The predictor is rebuilt through its constructor (every argument is validated again);
        ``fit__<name>`` sets a parameter of the scikit-learn estimator given as ``fit``.

        Parameters
        ----------
        **params
            Constructor arguments by name (``n_worlds=6``, ``fit__C=0.5``, ...).

        Returns
        -------
        self

        Raises
        ------
        RuntimeError
            If the worlds are fitted: the spend so far was accounted under the current
            settings (build a new predictor, e.g. ``sklearn.base.clone(pp).set_params(...)``).
        ValueError
            For a name that is not a constructor argument.
        """
        if not params:
            return self
        if self.is_fitted:
            raise RuntimeError("set_params on a fitted PrivatePredictor would change the "
                               "settings its spent budget was accounted under; build a new "
                               "one (sklearn.base.clone(pp).set_params(...)).")
        direct: dict = {}
        nested: dict[str, dict] = {}
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in self._params:
                raise ValueError(f"invalid parameter {name!r} for PrivatePredictor; valid "
                                 f"parameters: {sorted(self._params)}.")
            if sub:
                nested.setdefault(name, {})[sub] = value
            else:
                direct[name] = value
        merged = {**self._params, **direct}
        for name, sub_params in nested.items():
            merged[name].set_params(**sub_params)
        self.__init__(**merged)  # type: ignore[misc]  # the one construction path
        return self

    def __sklearn_tags__(self):
        """scikit-learn >= 1.6 estimator tags (classifier or regressor by ``output``;
        non-deterministic: the answers are noisy)."""
        from sklearn.utils import ClassifierTags, RegressorTags, Tags, TargetTags

        kind = self._settings.estimator_type
        return Tags(estimator_type=kind, target_tags=TargetTags(required=kind is not None),
                    classifier_tags=ClassifierTags() if kind == "classifier" else None,
                    regressor_tags=RegressorTags() if kind == "regressor" else None,
                    non_deterministic=True)

    @property
    def _estimator_type(self) -> str | None:
        # scikit-learn < 1.6 reads this attribute instead of the tags
        return self._settings.estimator_type

    # -- classes and answers -------------------------------------------------------------
    @property
    def classes_(self) -> np.ndarray:
        """The class labels, in the order of the output coordinates (classifier outputs).

        The worlds' shared ``classes_`` (scikit-learn), else ``0..d−1`` for ``d`` output
        coordinates (torch worlds; ``[0, 1]`` for one score column).

        Raises
        ------
        AttributeError
            Before :meth:`fit`, or for a ``"value"`` or callable output.
        """
        if self._settings.estimator_type != "classifier":
            raise AttributeError("classes_ is defined for classifier outputs (proba, logits, "
                                 f"label); this predictor has output="
                                 f"{self._settings.output_name!r}.")
        if not self.is_fitted:
            raise AttributeError("classes_ is set by fit(): the worlds are not fitted yet.")
        return self._classes()

    @property
    def display_classes(self) -> np.ndarray | None:
        """:attr:`classes_` by their :attr:`label_names` where the state has them (integer
        classes ``0 .. k−1`` naming a pool file's text labels), else :attr:`classes_`; None
        for outputs without classes. What ``predict query`` and ``serve`` show."""
        classes = getattr(self, "classes_", None)
        names = getattr(self, "label_names", None)
        if classes is None or names is None:
            return classes
        c = np.asarray(classes)
        if c.dtype.kind in "iu" and c.size and c.min() >= 0 and c.max() < len(names):
            return np.asarray(names, dtype=object)[c]
        return classes

    def predict(self, X, *, progress: bool = False) -> np.ndarray:
        """Predicted labels (classifier outputs) or values (``"value"``) of the query rows.

        Each row is answered once (:meth:`answer`) and **spends** ``per_query_budget``; the
        label is ``classes_[argmax]`` of the noisy answer (by sign for a single score column),
        a post-processing covered by the same bound. A callable output returns the answers.

        Parameters
        ----------
        X : array_like of shape (n, *feature_shape)
            Query rows (finite).
        progress : bool, default False
            tqdm progress bar over the rows.

        Returns
        -------
        ndarray
            Shape ``(n,)`` of labels (classifiers) or values (one output); ``(n, d)`` for a
            multi-output regressor or a callable output.

        Raises
        ------
        BudgetExceededError
            If the rows would take the spend over ``total_budget``; nothing is spent.
        RuntimeError
            If :meth:`fit` was not called.
        TypeError, ValueError
            For malformed queries (before anything is spent).
        """
        answers = self.answer(X, progress=progress)
        kind = self._settings.estimator_type
        if kind == "classifier":
            return labels_of(answers, self._classes())
        if kind == "regressor" and answers.shape[1] == 1:
            return answers[:, 0]
        return answers

    @_available_if(_needs_proba)
    def predict_proba(self, X, *, progress: bool = False) -> np.ndarray:
        """Class probabilities of the query rows (``output="proba"`` only).

        The noisy answer of each row projected onto the probability simplex: non-negative,
        summing to 1 (:meth:`answer`). Each row **spends** ``per_query_budget``.

        Parameters
        ----------
        X : array_like of shape (n, *feature_shape)
        progress : bool, default False

        Returns
        -------
        ndarray of shape (n, n_classes), float64
            Columns in the order of :attr:`classes_`.

        Raises
        ------
        BudgetExceededError, RuntimeError, TypeError, ValueError
            As :meth:`predict`.
        """
        return self.answer(X, progress=progress)

    @_available_if(_needs_kind)
    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy (classifier outputs) or R² (``"value"``) of :meth:`predict` on ``(X, y)``.

        **Spends** ``per_query_budget`` per row of ``X``, like every answer; inside
        ``cross_val_score`` each fold's clone is a separate predictor, fitted on that fold's
        training part with its own budget and secret world, and its test rows spend it.

        Returns
        -------
        float
        """
        from sklearn.metrics import accuracy_score, r2_score

        metric = accuracy_score if self._settings.estimator_type == "classifier" else r2_score
        return float(metric(y, self.predict(X), sample_weight=sample_weight))
