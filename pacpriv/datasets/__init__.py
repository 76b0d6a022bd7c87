"""Data pools: scikit-learn's bundled datasets, CSV and NumPy files.

:func:`load_dataset` (:mod:`pacpriv.datasets.loading`) returns a frozen :class:`Dataset`;
:mod:`pacpriv.datasets.files` reads CSV and NumPy files.
"""

from pacpriv.datasets import loading
from pacpriv.datasets.loading import *  # noqa: F403  (the public names: loading.__all__)

__all__ = list(loading.__all__)
