"""Matplotlib figures for pacpriv reports (extra ``plot``: ``pip install pacpriv[plot]``).

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot (no global
figure registry, no GUI backend: PNG output goes through Agg), so figures can be made in
worker threads and are freed with the object. :func:`figure_to_data_uri` turns one into a
``data:image/png;base64,...`` URI for a self-contained HTML report.
matplotlib is imported inside the functions: ``import pacpriv`` never imports it.

Modules: :mod:`pacpriv.plotting.pac` (spectrum, posterior curve), :mod:`pacpriv.plotting.dpsgd`
(DP-SGD accuracy vs σ, PAC vs DP-SGD bars), :mod:`pacpriv.plotting.compare` (the matched-bound
table over datasets and bounds), :mod:`pacpriv.plotting.curve` (test accuracy against
the membership bound), :mod:`pacpriv.plotting.per_record` (per-record
exposure histogram), :mod:`pacpriv.plotting._figure` (figure factory).

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy: Automatic Privacy Measurement and Control of Data
   Processing. CRYPTO 2023, arXiv:2210.03458 (Thm 1, Thm 3).
.. [2] Membership-inference accuracy bound for DP-SGD with random allocation (RA-MIA).
"""

from pacpriv.plotting._figure import figure_to_data_uri
from pacpriv.plotting.compare import TABLE_KEYS, plot_comparison_table
from pacpriv.plotting.curve import CURVE_KEYS, plot_privacy_utility_curve
from pacpriv.plotting.dpsgd import (
    COMPARISON_KEYS,
    plot_dpsgd_accuracy_vs_sigma,
    plot_pac_vs_dpsgd,
)
from pacpriv.plotting.pac import plot_posterior_curve, plot_spectrum
from pacpriv.plotting.per_record import plot_per_record_histogram

__all__ = [
    "COMPARISON_KEYS",
    "CURVE_KEYS",
    "TABLE_KEYS",
    "figure_to_data_uri",
    "plot_comparison_table",
    "plot_dpsgd_accuracy_vs_sigma",
    "plot_pac_vs_dpsgd",
    "plot_per_record_histogram",
    "plot_privacy_utility_curve",
    "plot_posterior_curve",
    "plot_spectrum",
]
