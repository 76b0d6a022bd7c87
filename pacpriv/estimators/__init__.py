"""scikit-learn meta-estimators with a PAC-private release.

:class:`PACPrivateClassifier` and :class:`PACPrivateRegressor` wrap any scikit-learn
estimator: ``fit`` measures it on random subsets of the training data with the PAC engine,
calibrates Gaussian noise for a membership budget and releases its parameters (or its scores
on a declared public set) with the noise; predictions use only the noisy release. They work
in ``Pipeline``, ``cross_val_score`` and ``GridSearchCV`` (``get_params``/``set_params``/
``clone``).
"""

from pacpriv.estimators._meta import PACPrivateClassifier, PACPrivateRegressor

__all__ = ["PACPrivateClassifier", "PACPrivateRegressor"]
