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

__all__ = ["check_noise_scale", "privatize"]


def check_noise_scale(plan: NoisePlan) -> None:
    """Refuse a plan whose noise cannot protect a release (fail closed, issue 35 F10).

    Every noise scale must be finite and ``>= 0``; a plan with no noise at all is accepted
    only where it is exact: the mechanism's simulated outputs all agreed (zero MI) -- for the
    certified rules the certificate says so (``constant``, or a clip radius 0: the clipped
    release is the constant centre), for the plug-in rules the plan's own MI bounds are
    exactly 0 (every output variance was 0). Any other zero, NaN or inf scale (an overflow or
    underflow on the way) raises before anything is released or charged.

    Raises
    ------
    CalibrationError
        Naming what is wrong with the scale (never a value of the mechanism).
    """
    from pacpriv.exceptions import CalibrationError

    std = np.asarray(plan.noise_std, dtype=np.float64)
    resid = float(plan.residual_std)
    if not (np.all(np.isfinite(std)) and np.all(std >= 0) and np.isfinite(resid)
            and resid >= 0):
        raise CalibrationError(
            f"the {plan.rule!r} plan's noise scale is NaN, infinite or negative: refusing to "
            "release (nothing was released or charged); check the mechanism's outputs and "
            "--output-bound for overflow.")
    if np.any(std > 0) or resid > 0:
        return
    cert = plan.certificate
    if cert is not None:
        exact = bool(getattr(cert, "constant", False)) or plan.clip_radius == 0.0
    else:
        exact = plan.mi_bound == 0.0 and plan.linearised_mi_bound == 0.0
    if not exact:
        raise CalibrationError(
            f"the {plan.rule!r} plan has noise scale 0 although the simulated outputs were "
            "not all equal: refusing to release (nothing was released or charged).")


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
    CalibrationError
        If the plan's noise scale is NaN, infinite, or 0 while the outputs varied
        (:func:`check_noise_scale`), before anything is drawn.

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
    check_noise_scale(plan)
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
