"""Release a mechanism output with calibrated Gaussian noise ([PAC] Thm 3).

``Y = f(X) + B`` with ``B ~ N(0, Σ_B)`` drawn from a :class:`~pacpriv.pac.noise.NoisePlan`.
Each call draws fresh noise; releases with independent noise compose by adding their budgets
(chain rule of mutual information; Xiao & Devadas, CRYPTO 2023, §5).

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 3.
"""

from __future__ import annotations

import numpy as np

from pacpriv.pac.noise._calibration import NoisePlan

__all__ = ["privatize"]


def privatize(value, plan: NoisePlan, *, rng=None) -> np.ndarray:
    """Add one draw of the plan's Gaussian noise to a mechanism output.

    Parameters
    ----------
    value : array_like of shape (d,)
        The mechanism's output ``f(X)`` on the secret input (real, finite).
    plan : NoisePlan
        Calibrated noise (from :func:`~pacpriv.pac.noise.calibrate_noise`).
    rng : None, int, SeedSequence or Generator, optional
        Source of the noise. ``None`` (default) draws fresh OS entropy, which is what a real
        release should use; pass a seed only for reproducible experiments.

    Returns
    -------
    ndarray of shape (d,), float64
        ``clip(value) + B`` with ``B ~ N(0, Σ_B)``; ``clip`` is the plan's release clip
        (:meth:`NoisePlan.clip`, the identity for the plug-in rules). The certified rule's
        guarantee is for the clipped mechanism (clipping is post-processing of ``f``). Whether
        the secret output was clipped depends on the secret and is not returned.

    Raises
    ------
    TypeError
        If ``plan`` is not a NoisePlan or ``value`` is not real-valued.
    ValueError
        If ``value`` does not have shape ``(plan.dim,)`` or is not finite.

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 3.

    Examples
    --------
    >>> from pacpriv.pac.noise._calibration import calibrate_variance_only
    >>> plan = calibrate_variance_only([1.0, 4.0], mi_budget=0.5)
    >>> privatize([0.0, 0.0], plan, rng=0).shape
    (2,)
    """
    if not isinstance(plan, NoisePlan):
        raise TypeError(f"`plan` must be a NoisePlan; got {type(plan).__name__}.")
    arr = np.asarray(value)
    if arr.dtype == bool or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        raise TypeError(f"`value` must hold real numbers; got dtype {arr.dtype}.")
    if arr.shape != (plan.dim,):
        raise ValueError(
            f"`value` must have shape ({plan.dim},) to match the plan; got {arr.shape}."
        )
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("`value` must be finite; found NaN or inf.")
    arr, _ = plan.clip(arr)  # the plan's release clip (certified rule); never reported
    return arr + plan.sample(rng)
