"""Reference black-box mechanisms for pacpriv (no pacpriv import).

Every mechanism is a callable ``f(subset, *, rng=None) -> ndarray of shape (d,)``, float64, where
``subset`` is an array ``X`` of shape ``(n, p)`` or a tuple ``(X, y)``. ``d`` depends only on the
mechanism's public configuration and ``p``, never on which records were drawn; every mechanism
handles ``n = 0`` and ``n = 1`` with a documented fallback and removes superficial randomness
(record order, label permutation, sign/rotation) before returning (see each module's docstring).

Factories (``make_*``) return small frozen dataclasses: picklable (joblib/loky) and carrying a
``to_dict()`` of their configuration. Module-level functions use a default configuration.

=====================  ==========================  ==================================
module                 factory                     default function
=====================  ==========================  ==================================
``mean``               ``make_clipped_mean``       ``clipped_mean``
``median``             ``make_clipped_median``     ``clipped_median``
``histogram``          ``make_feature_histogram``  ``feature_histogram``
                       ``make_label_histogram``
``kmeans``             ``make_kmeans``             ``kmeans_centers``
``logistic``           ``make_logistic``           ``logistic_coefficients``
``linear_svm``         ``make_linear_svm``         ``linear_svm_coefficients``
``pca``                ``make_pca``                ``pca_components``
``decision_tree``      ``make_decision_tree``      (none: needs public query points)
``mlp`` (torch)        ``make_mlp``                ``mlp_parameters``
=====================  ==========================  ==================================

Per-record certificates in O(n) a trial (a ``per_record_differences`` method, see
:mod:`pacpriv.pac.per_record`): the clipped mean, the histograms, ``stable_logistic`` and
``make_logistic(..., solver="newton")`` / ``make_linear_svm(..., solver="newton")`` (exact
minimisers with certified flipped solves), and the ``stabilise`` shard ensembles of them; the
others cost ``1 + n`` calls a trial.
"""

from .decision_tree import DecisionTreeProbabilities, make_decision_tree
from .histogram import (
    FeatureHistogram,
    LabelHistogram,
    feature_histogram,
    make_feature_histogram,
    make_label_histogram,
)
from .kmeans import KMeansCenters, kmeans_centers, make_kmeans
from .linear_svm import (
    LinearSVMCoefficients,
    LinearSVMNewton,
    linear_svm_coefficients,
    make_linear_svm,
)
from .logistic import (
    LogisticCoefficients,
    LogisticNewton,
    logistic_coefficients,
    make_logistic,
)
from .mean import ClippedMean, clipped_mean, make_clipped_mean
from .median import ClippedMedian, clipped_median, make_clipped_median
from .mlp import MLPParameters, make_mlp, mlp_parameters
from .pca import PCAComponents, make_pca, pca_components

__all__ = [
    "ClippedMean",
    "ClippedMedian",
    "DecisionTreeProbabilities",
    "FeatureHistogram",
    "KMeansCenters",
    "LabelHistogram",
    "LinearSVMCoefficients",
    "LinearSVMNewton",
    "LogisticCoefficients",
    "LogisticNewton",
    "MLPParameters",
    "PCAComponents",
    "clipped_mean",
    "clipped_median",
    "feature_histogram",
    "kmeans_centers",
    "linear_svm_coefficients",
    "logistic_coefficients",
    "make_clipped_mean",
    "make_clipped_median",
    "make_decision_tree",
    "make_feature_histogram",
    "make_kmeans",
    "make_label_histogram",
    "make_linear_svm",
    "make_logistic",
    "make_mlp",
    "make_pca",
    "mlp_parameters",
    "pca_components",
]
