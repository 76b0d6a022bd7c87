"""The Monte-Carlo engine: run a black-box mechanism on many random subsets of a pool.

Data flow: sampler masks → :func:`simulate` (trials in parallel through joblib, one
``SeedSequence`` child per trial, checkpoints, per-trial output checks) →
:class:`SimulationResult` (the ``(n_trials, d)`` outputs). :class:`ExecutionOptions` says
*how* trials run (workers, backend, progress, checkpoint); it never changes their results.
The estimator adapters turn a scikit-learn estimator or a torch trainer into a mechanism.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy: Automatic Privacy Measurement and Control of Data
   Processing. CRYPTO 2023, arXiv:2210.03458, Algorithm 1.
"""

from pacpriv.pac.engine._adapters import EstimatorMechanism, TorchMechanism, fitted_value, sort_rows
from pacpriv.pac.engine._checkpoint import Checkpoint
from pacpriv.pac.engine._options import ExecutionOptions
from pacpriv.pac.engine._simulate import SimulationResult, simulate

__all__ = [
    # how trials run
    "ExecutionOptions",
    # the engine and its result
    "SimulationResult",
    "simulate",
    # resumable runs
    "Checkpoint",
    # estimator adapters (a fitted model as a mechanism output)
    "EstimatorMechanism",
    "TorchMechanism",
    "fitted_value",
    "sort_rows",
]
