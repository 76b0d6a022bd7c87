"""scikit-learn meta-estimators whose fitted model is a PAC-private release.

``fit`` measures the wrapped estimator on random subsets of the training data with the PAC
engine (:func:`pacpriv.run_pac`), calibrates Gaussian noise for the membership budget, fits
the estimator once on a secret random subset and releases its parameters (or its scores on a
declared public set) plus the noise; ``predict``, ``predict_proba``, ``decision_function`` and
``score`` use only the noisy release.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted

from pacpriv._validation import check_class_labels, check_int, check_real
from pacpriv.estimators._release import (
    FitMechanism,
    public_carrier,
    score_method,
    write_parameters,
)
from pacpriv.exceptions import WITHHELD_NOTE, MechanismError, UserCodeError

__all__ = ["PACPrivateClassifier", "PACPrivateRegressor"]

#: Used when neither ``mi_budget`` nor ``target_accuracy`` is given.
DEFAULT_TARGET_ACCURACY = 0.6

RELEASES = ("parameters", "decision_function")

#: Largest chance a regressor's fits may have that one of them gets an empty random half.
_EMPTY_HALF_RISK = 0.05


def _validate_data(est, X, y=None, *, reset: bool):
    try:
        from sklearn.utils.validation import validate_data
    except ImportError:  # scikit-learn < 1.6
        validate_data = type(est)._validate_data  # type: ignore[attr-defined]
    if y is None:
        return validate_data(est, X, reset=reset)
    return validate_data(est, X, y, reset=reset, ensure_min_samples=2, y_numeric=False)


class _PACPrivate(BaseEstimator):
    """Shared fit of the classifier and the regressor (see :class:`PACPrivateClassifier`)."""

    _classifier = False

    def __init__(self, estimator=None, *, mi_budget=None, target_accuracy=None, n_trials=100,
                 release="parameters", attributes=("coef_", "intercept_"), public_X=None,
                 rule="certified", execution=None, random_state=None):
        self.estimator = estimator
        self.mi_budget = mi_budget
        self.target_accuracy = target_accuracy
        self.n_trials = n_trials
        self.release = release
        self.attributes = attributes
        self.public_X = public_X
        self.rule = rule
        self.execution = execution
        self.random_state = random_state

    def _default_estimator(self):
        raise NotImplementedError

    def _budget(self) -> float:
        from pacpriv.pac import mi_budget_for_accuracy

        if self.mi_budget is not None and self.target_accuracy is not None:
            raise ValueError("give at most one of `mi_budget` (nats) and `target_accuracy`; "
                             f"got {self.mi_budget!r} and {self.target_accuracy!r}.")
        if self.mi_budget is not None:  # a number (named); run_pac checks the range
            return check_real(self.mi_budget, "mi_budget", low=0.0, low_inclusive=False)
        target = (DEFAULT_TARGET_ACCURACY if self.target_accuracy is None
                  else self.target_accuracy)
        target = check_real(target, "target_accuracy", low=0.5, high=1.0, low_inclusive=False,
                            high_inclusive=False)
        return float(mi_budget_for_accuracy(target, prior=0.5))

    def _check_estimator(self, estimator, *, n_rows: int) -> None:
        """The wrapped estimator is of this meta-estimator's kind (a regressor in a classifier
        released its continuous predictions as labels: seventh new-user pass, #203), and a
        regressor's random halves are non-empty with high probability (it has no anchor rows)."""
        want = "classifier" if self._classifier else "regressor"
        if not callable(getattr(estimator, "fit", None)):
            raise TypeError(f"`estimator` must be a scikit-learn {want} (with fit); got "
                            f"{type(estimator).__name__}.")
        if self.release == "parameters" and hasattr(estimator, "steps"):  # a Pipeline
            raise ValueError(
                f"release='parameters' releases named attributes of one estimator, and a "
                f"{type(estimator).__name__}'s other steps are fitted on the data too: wrap "
                "the final estimator instead, e.g. make_pipeline(StandardScaler(), "
                f"{type(self).__name__}(LogisticRegression(), ...)) (the other steps' "
                "statistics are then outside the bound), or use "
                "release='decision_function' with public_X.")
        kind = _estimator_type(estimator)
        if kind is not None and kind != want:
            other = {"classifier": "PACPrivateClassifier",
                     "regressor": "PACPrivateRegressor"}.get(kind)
            raise ValueError(f"{type(self).__name__} wraps a {want}; `estimator` "
                             f"{type(estimator).__name__} is a {kind} (its scikit-learn "
                             "estimator type)" + (f": use {other}" if other else "") + ".")
        if self._classifier or not isinstance(self.n_trials, (int, np.integer)):
            return
        fits = max(int(self.n_trials), 1) + 1
        if fits * 0.5**n_rows > _EMPTY_HALF_RISK:
            need = math.ceil(math.log2(fits / _EMPTY_HALF_RISK))
            raise ValueError(
                f"{type(self).__name__} needs at least {need} training rows for n_trials="
                f"{int(self.n_trials)}; got {n_rows}: each of the n_trials + 1 fits is on a "
                f"random half of the rows, which is empty with probability 2^-{n_rows} (give "
                "more rows or fewer `n_trials`).")

    def _mechanism(self, estimator, n_features: int, classes) -> FitMechanism:
        if self.release not in RELEASES:
            raise ValueError(f"`release` must be one of {', '.join(RELEASES)}; got "
                             f"{self.release!r}.")
        if self.release == "parameters":
            attrs = tuple(self.attributes)
            if not attrs or not all(isinstance(a, str) and a.isidentifier() for a in attrs):
                raise ValueError("`attributes` must be a non-empty tuple of attribute names "
                                 f"(release='parameters' writes them back); got {attrs!r}.")
            return FitMechanism(estimator, attributes=attrs, anchors=classes)
        if self.public_X is None:
            raise ValueError("release='decision_function' needs `public_X`: rows you declare "
                             "public (never records of the training data).")
        public = np.asarray(self.public_X, dtype=np.float64)
        if public.ndim != 2 or public.shape[1] != n_features or not np.isfinite(public).all():
            found = ("" if public.ndim != 2 or public.shape[1] != n_features
                     else f" ({int(np.count_nonzero(~np.isfinite(public)))} NaN or infinite "
                     "entries)")  # public rows: a count is not a private fact
            raise ValueError(f"`public_X` must be a finite 2-D array with {n_features} "
                             f"columns; got shape {public.shape}{found}.")
        return FitMechanism(estimator, public_X=public, anchors=classes,
                            method=score_method(estimator, self._classifier))

    def _fit(self, X, y):
        from pacpriv.pac import run_pac
        from pacpriv.pac.engine import ExecutionOptions
        from pacpriv.pac.engine._limit import carry_over

        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y "
                             "is None.")
        X, y = _validate_data(self, X, y, reset=True)
        classes = None
        if self._classifier:
            try:  # the one label refusal of pacpriv, before scikit-learn's own checks
                check_class_labels(y, "`y`", type(self).__name__)
            except ValueError as err:  # keep scikit-learn's words too (its estimator checks)
                kind = type_of_target(y)
                sk = f" (scikit-learn: Unknown label type: {kind})" if "continuous" in kind else ""
                raise ValueError(f"{err}{sk}") from None
            check_classification_targets(y)
            classes = np.unique(y)
            if len(classes) < 2:
                raise ValueError(f"{type(self).__name__} needs at least 2 classes in y; got "
                                 "1 class.")
            self.classes_ = classes
        else:
            y = np.asarray(y, dtype=np.float64)
        if isinstance(self.n_trials, bool) or not isinstance(self.n_trials, (int, np.integer)):
            raise TypeError(f"`n_trials` must be an int; got {type(self.n_trials).__name__}.")
        check_int(self.n_trials, "n_trials", low=2, high=2**63 - 1)  # as run_pac (int64 index)
        budget = self._budget()  # every hyperparameter checked before the estimator's checks
        estimator = self._default_estimator() if self.estimator is None else self.estimator
        self._check_estimator(estimator, n_rows=X.shape[0])
        mechanism = self._mechanism(estimator, X.shape[1], classes)
        sim_seed, release_seed = (None, None) if self.random_state is None else \
            np.random.SeedSequence(int(self.random_state)).spawn(2)
        execution = self.execution or ExecutionOptions(n_jobs=1, progress=False)
        started = time.monotonic()  # `time_limit`: the carrier's fit counts too
        carrier = None
        if self.release == "parameters":  # the carrier first: a missing attribute fails now
            carrier = _carrier_within(estimator, X.shape[1], classes, execution, started)
            missing = [a for a in self.attributes if not hasattr(carrier, a)]
            if missing:
                raise ValueError(f"the fitted {type(estimator).__name__} has no attribute "
                                 f"{missing[0]!r} to release (`attributes`); name its fitted "
                                 "parameters, or use release='decision_function' with "
                                 "public_X.")
        execution = carry_over(execution, started, execution.time_limit, before="the trials")
        try:
            result = run_pac(mechanism, (X, y), mi_budget=budget, n_trials=int(self.n_trials),
                             rule=self.rule, rng=sim_seed, release_rng=release_seed,
                             execution=execution, mechanism_name=type(estimator).__name__,
                             dataset={"name": "training data", "n_records": int(X.shape[0])})
        except MechanismError as err:  # say what a trial is here: a fit on a random half
            raise MechanismError(
                f"{err} Each trial (and the release) fits a clone of the estimator on a random "
                f"half of the {X.shape[0]} training rows (Poisson, inclusion probability 1/2: "
                "it can be small or, for a regressor, empty): give more rows, or an estimator "
                "that fits any such subset.", trial_index=err.trial_index, seed=err.seed
            ) from err.__cause__
        released = np.asarray(result.release, dtype=np.float64)
        if self.release == "parameters":
            write_parameters(carrier, tuple(self.attributes), released)
            self.estimator_ = carrier
        else:
            from sklearn.neighbors import KNeighborsRegressor

            public = mechanism.public_X
            self.score_method_ = mechanism.method
            self.estimator_ = KNeighborsRegressor(n_neighbors=1).fit(
                public, released.reshape(public.shape[0], -1))
        name = mechanism_label(estimator)
        self.release_ = (f"parameters: {', '.join(self.attributes)} of the fitted {name}"
                         if self.release == "parameters" else
                         f"decision_function: {mechanism.method} of the fitted {name} on "
                         f"{mechanism.public_X.shape[0]} declared public rows")
        self.mi_budget_ = budget
        self.noise_std_ = np.asarray(result.noise_std_per_coordinate, dtype=np.float64)
        self.posterior_success_bound_ = float(result.posterior_success_bound)
        self.bound_label_ = str(result.posterior_label)
        # not kept: result.simulation holds every trial's un-noised output (as private as the
        # data), and a fitted estimator is pickled and shipped
        return self

    def _scores(self, X) -> np.ndarray:
        return np.asarray(self._carrier("predict", X), dtype=np.float64)

    def _carrier(self, method: str, X):
        """The fitted carrier's ``method`` on the validated ``X`` (with ``release="parameters"``
        the released model itself; otherwise its scores, noised by :meth:`_fit`)."""
        check_is_fitted(self)
        X = _validate_data(self, X, reset=False)
        return getattr(self.estimator_, method)(X)

    def _lookup(self, X) -> np.ndarray:
        scores = self._scores(X)
        return scores[:, 0] if scores.ndim == 2 and scores.shape[1] == 1 else scores

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags


def _carrier_within(estimator: Any, n_features: int, classes, execution, started: float):
    """:func:`_carrier_fit` bounded by the run's ``time_limit`` and the per-trial ``timeout``
    (fifteenth new-user pass: an estimator whose fit hung there hung ``fit`` without a word)."""
    from pacpriv.pac.engine._limit import stage_within
    from pacpriv.pac.engine._trial import TrialTimeoutError

    try:
        return stage_within(
            execution.time_limit, started, lambda: _carrier_fit(estimator, n_features, classes),
            what="fitting the estimator on the public rows of the released parameters' carrier "
                 "(before any trial)", timeout=execution.timeout)
    except TrialTimeoutError:
        raise MechanismError(
            f"{type(estimator).__name__}.fit exceeded timeout={execution.timeout} s on the "
            "public synthetic rows that build the carrier of the released parameters (before "
            "any trial); nothing was run on the data, released or charged.",
            trial_index=-1, seed={}) from None


def _carrier_fit(estimator: Any, n_features: int, classes) -> Any:
    """:func:`public_carrier`; the estimator's own exception is withheld like a trial's (its
    message may quote record values: ninth new-user pass, #517), chained as ``__cause__``."""
    try:
        return public_carrier(estimator, n_features, classes)
    except Exception as err:
        raise UserCodeError(
            f"{type(estimator).__name__}.fit raised {type(err).__qualname__} on the public "
            "synthetic rows that build the carrier of the released parameters (before any "
            f"trial). {WITHHELD_NOTE}") from err


def check_estimator_kind(estimator: Any, allowed: tuple[str, ...], where: str,
                         need: str) -> None:
    """Refuse an estimator whose declared scikit-learn type is not in ``allowed`` (an
    undeclared type passes: it is checked where it is used).

    Raises
    ------
    ValueError
        ``"<where> is a <type> (its scikit-learn estimator type); <need>"``.
    """
    kind = _estimator_type(estimator)
    if kind is not None and kind not in allowed:
        raise ValueError(f"{where} is a {kind} (its scikit-learn estimator type); {need}")


def _estimator_type(estimator: Any) -> str | None:
    """scikit-learn's estimator type ("classifier", "regressor", "clusterer", ...) or None."""
    try:
        from sklearn.utils import get_tags
    except ImportError:  # scikit-learn < 1.6
        return getattr(estimator, "_estimator_type", None)
    try:
        return get_tags(estimator).estimator_type
    except Exception:  # an estimator without scikit-learn's tags: undeclared
        return getattr(estimator, "_estimator_type", None)


def mechanism_label(estimator: Any) -> str:
    """The estimator's class name (public: what the user chose)."""
    return type(estimator).__name__


class PACPrivateClassifier(ClassifierMixin, _PACPrivate):
    """A scikit-learn classifier whose fitted model is a PAC-private release.

    ``fit(X, y)`` runs the wrapped estimator on ``n_trials`` random halves of the training
    data (Poisson, inclusion probability ½: the membership secret), calibrates Gaussian noise
    to the mutual-information budget with the PAC engine (:func:`pacpriv.run_pac`), fits the
    estimator once on a secret random half drawn from OS entropy (or ``random_state``) and
    adds the noise to what it releases. Every prediction uses only the noisy release.

    Parameters
    ----------
    estimator : sklearn classifier or None
        Template, never fitted itself (cloned for every trial). ``None``:
        ``LogisticRegression()``.
    mi_budget : float or None
        Mutual-information budget in nats, ``> 0``.
    target_accuracy : float or None
        Alternatively, the membership-inference accuracy to certify, in ``(0.5, 1)``;
        converted to a budget with prior ½ (Xiao & Devadas 2023, Thm 1). At most one of the
        two; with neither, ``target_accuracy=0.6``.
    n_trials : int, default 100
        Simulated subsets (``>= 2``; more trials give a tighter certified noise).
    release : {"parameters", "decision_function"}, default "parameters"
        What is released with noise: the fitted ``attributes`` (the predictions are those of
        the estimator with the noisy parameters written in, e.g. a linear model), or the
        scores on ``public_X`` (``predict_proba``, else ``decision_function``; a new row gets
        its nearest public row's noisy scores). Recorded in the fitted ``release_``.
    attributes : tuple of str, default ("coef_", "intercept_")
        Fitted attribute names released with ``release="parameters"``. Suits models whose
        predictions are defined for any parameter values (linear models: logistic, ridge,
        linear SVM); a noisy variance (e.g. GaussianNB's ``var_``) may turn negative, so
        release such a model's scores instead.
    public_X : array of shape (n_public, n_features) or None
        Rows you declare public (never records of the training data); required by
        ``release="decision_function"``.
    rule : str or NoiseRule, default "certified"
        The noise rule (:mod:`pacpriv.pac.noise`); ``"certified"`` meets the budget with
        probability 1−γ over the simulation.
    execution : ExecutionOptions or None
        How the trials run (``None``: one process, no progress bar).
    random_state : int or None
        Seeds the simulation and (a different child seed) the secret subset and the noise.
        ``None`` (default, what a real release must use): fresh OS entropy.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels (treated as public, like the number of features).
    estimator_ : estimator
        The carrier of the noisy release (a clone fit on public synthetic rows with the noisy
        parameters written in), or the public nearest-neighbour lookup of the noisy scores.
    release_ : str
        What was released, in words.
    mi_budget_ : float
        The budget in nats.
    noise_std_ : ndarray of shape (d,)
        Noise standard deviation per released coordinate (a statistic of the training data:
        treat it like one).
    posterior_success_bound_ : float
        Membership-inference accuracy bound of the release (prior ½).
    bound_label_ : str
        Whether that bound is certified (with 1−γ) or estimated.
    n_features_in_ : int

    Raises
    ------
    ValueError
        In ``fit``: both budgets given, a target outside ``(0.5, 1)``, an unknown ``release``,
        a ``public_X`` missing or of the wrong width, fewer than 2 classes, invalid data, an
        ``estimator`` of another scikit-learn type (a regressor in the classifier, a
        classifier in the regressor, a clusterer), or (the regressor) fewer rows than keep
        every fit's random half non-empty with probability 95 %.
    TypeError
        In ``fit``: an ``estimator`` without ``fit``.
    pacpriv.exceptions.MechanismError
        In ``fit``: the estimator's fit failed on the random half of some trial.
    pacpriv.exceptions.UserCodeError
        In ``fit``: the estimator's fit failed on the public synthetic rows of the carrier
        (``release="parameters"``), before any trial; its message is withheld (``__cause__``).

    Notes
    -----
    The threat model is PAC Privacy's membership game: the adversary may know every record
    passed to ``fit`` and tries to tell which of them are in the secret random *half* the
    release was fit on; ``posterior_success_bound_`` bounds its accuracy. So expect the
    utility of a model trained on half the data, plus noise.
    Every fit (each trial and the release) also sees one public row per class at the origin
    of the feature space: a public constant, the same for every subset, so that a random half
    that happens to miss a class still gives a model of the same shape. Its pull on the model
    is that of one record per class (centre or standardise the features).

    References
    ----------
    .. [1] H. Xiao, S. Devadas. PAC Privacy: Automatic Privacy Measurement and Control of Data
       Processing. CRYPTO 2023, arXiv:2210.03458 (Thm 1, Thm 3).

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from pacpriv import PACPrivateClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> clf = make_pipeline(StandardScaler(), PACPrivateClassifier(
    ...     LogisticRegression(C=0.1), target_accuracy=0.6, n_trials=40, random_state=0))
    >>> import warnings; warnings.simplefilter("ignore")  # few trials: a warning says so
    >>> round(clf.fit(X, y).score(X, y), 1) >= 0.5
    True
    """

    _classifier = True

    def _default_estimator(self):
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression()

    def fit(self, X, y):
        """Measure, calibrate and release (see the class docstring). Returns ``self``."""
        return self._fit(X, y)

    def decision_function(self, X):
        """Scores of the noisy release, shape ``(n,)`` (binary) or ``(n, n_classes)``."""
        if self.release == "parameters":
            return self._carrier("decision_function", X)
        return self._lookup(X)

    def predict_proba(self, X):
        """Class probabilities from the noisy release, shape ``(n, n_classes)``.

        With ``release="parameters"`` the carrier's ``predict_proba``; with
        ``"decision_function"`` the noisy probabilities clipped to ``[0, 1]`` and
        renormalised (or a softmax of noisy decision values): post-processing only.
        """
        if self.release == "parameters":
            return self._carrier("predict_proba", X)
        s = self._scores(X)
        if self.score_method_ == "predict_proba":
            p = np.clip(s, 0.0, 1.0) + 1e-12
        else:
            s = np.column_stack([-s[:, 0], s[:, 0]]) if s.shape[1] == 1 else s
            p = np.exp(s - s.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    def predict(self, X):
        """Labels from the noisy release, shape ``(n,)``."""
        if self.release == "parameters":
            return self._carrier("predict", X)
        s = self._scores(X)
        if s.shape[1] == 1:  # binary decision_function
            return self.classes_[(s[:, 0] > 0).astype(int)]
        return self.classes_[np.argmax(s, axis=1)]


class PACPrivateRegressor(RegressorMixin, _PACPrivate):
    """A scikit-learn regressor whose fitted model is a PAC-private release.

    Same parameters and fitted attributes as :class:`PACPrivateClassifier` (no
    ``classes_``); ``estimator=None`` is ``Ridge()``, and ``release="decision_function"``
    releases ``predict(public_X)``.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.linear_model import Ridge
    >>> from pacpriv import PACPrivateRegressor
    >>> X, y = load_diabetes(return_X_y=True)
    >>> import warnings; warnings.simplefilter("ignore")  # few trials: a warning says so
    >>> reg = PACPrivateRegressor(Ridge(alpha=1.0), mi_budget=0.5, n_trials=40,
    ...                           random_state=0).fit(X, y)
    >>> reg.predict(X[:2]).shape, reg.release_
    ((2,), 'parameters: coef_, intercept_ of the fitted Ridge')
    """

    def _default_estimator(self):
        from sklearn.linear_model import Ridge

        return Ridge()

    def fit(self, X, y):
        """Measure, calibrate and release (see :class:`PACPrivateClassifier`). Returns
        ``self``."""
        return self._fit(X, y)

    def predict(self, X):
        """Predictions of the noisy release, shape ``(n,)``."""
        if self.release == "parameters":
            return self._carrier("predict", X)
        return self._lookup(X)
