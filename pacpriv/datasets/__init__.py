"""Data pools: scikit-learn's bundled datasets, CSV and NumPy files.

:func:`load_dataset` (:mod:`pacpriv.datasets.loading`) returns a frozen :class:`Dataset`;
:mod:`pacpriv.datasets.files` reads CSV and NumPy files.
"""

from pacpriv.datasets.loading import (
    BUNDLED_DATASETS,
    MIN_RECORDS,
    Dataset,
    DatasetInfo,
    load_dataset,
    parse_feature_ranges,
)

__all__ = [
    "BUNDLED_DATASETS",
    "MIN_RECORDS",
    "Dataset",
    "DatasetInfo",
    "load_dataset",
    "parse_feature_ranges",
]
