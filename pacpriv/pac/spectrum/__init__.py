"""The output spectrum: the covariance ``Σ`` of the simulated outputs, as an eigen-decomposition.

Dense when ``d <= n_trials``, through the ``n_trials × n_trials`` Gram matrix otherwise (lazy
eigenvectors, float32 round-off charged upward); numerical resolution raises eigenvalues and
never lowers a positive variance to zero; streaming moments need ``O(d)`` memory.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 3 and Algorithm 1.
"""

from pacpriv.pac.spectrum._covariance import (
    OutputSpectrum,
    estimate_output_spectrum,
    spectrum_from_covariance,
)
from pacpriv.pac.spectrum._moments import OutputMoments, streaming_moments

__all__ = [
    "OutputMoments",
    "OutputSpectrum",
    "estimate_output_spectrum",
    "spectrum_from_covariance",
    "streaming_moments",
]
