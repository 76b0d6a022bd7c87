"""Release a mechanism output with calibrated Gaussian noise ([PAC] Thm 3).

``Y = f(X) + B`` with ``B ~ N(0, Σ_B)`` drawn from a :class:`~pacpriv.pac.noise.NoisePlan`.
Each call draws fresh noise; releases with independent noise compose by adding their budgets
(chain rule of mutual information; Xiao & Devadas, CRYPTO 2023, §5).

Hardened by default: without a seed, the noise is an exact discrete Gaussian on a declared
grid in the plan's noise basis, drawn from the OS CSPRNG with integer arithmetic
(:mod:`pacpriv.pac._sampling`: no floating-point porosity; the grid's MI overhead is
:func:`~pacpriv.pac._sampling.grid_overhead`, ``9.1e-7`` nats for ``10⁴`` coordinates).
With a seed, the release is reproducible, drawn by numpy in floating point, and labelled
``"seeded, not for release"`` (:func:`release`).

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, arXiv:2210.03458, Thm 3.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from pacpriv.pac._sampling import SEEDED, NoiseSource, grid_overhead, grid_release
from pacpriv.pac.noise._calibration import NoisePlan
from pacpriv.pac.noise._plan import _matvec, _rmatvec

__all__ = ["Release", "check_noise_scale", "grid_coordinates", "privatize", "release"]


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
    scale = plan.coordinate_scale
    if not (np.all(np.isfinite(std)) and np.all(std >= 0) and np.isfinite(resid)
            and resid >= 0 and (scale is None or bool(np.all(np.isfinite(scale))
                                                       and np.all(scale > 0)))):
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


@dataclass(frozen=True)
class Release:
    """One released output and how its noise was drawn (public facts only).

    Attributes
    ----------
    value : ndarray of shape (d,)
        The release.
    noise : str
        ``"OS CSPRNG (os.urandom), exact discrete Gaussian on a declared grid"``, or
        ``"seeded, not for release"``.
    grid : ndarray of shape (k,) or None
        The declared grid step of each noise direction (None for a seeded release); for a
        plan with a ``coordinate_scale`` ``s``, in the units of the output divided by ``s``
        (the release is ``s ⊙`` the grid release of ``clip(value) / s``).
    mi_overhead : float
        Nats the grid may add to the plan's MI bound (0 for a seeded release, whose accounting
        is the plan's, for an ideal Gaussian).
    """

    value: np.ndarray
    noise: str
    grid: np.ndarray | None
    mi_overhead: float


def privatize(value, plan: NoisePlan, *, rng=None) -> np.ndarray:
    """Add one draw of the plan's Gaussian noise to a mechanism output.

    Parameters
    ----------
    value : array_like of shape (d,)
        The mechanism's output ``f(X)`` on the secret input (real, finite).
    plan : NoisePlan
        Calibrated noise (from :func:`~pacpriv.pac.noise.calibrate_noise`).
    rng : None, int, SeedSequence or Generator, optional
        Source of the noise. ``None`` (default): the hardened release (OS CSPRNG, exact
        discrete Gaussian on a declared grid), which is what a real release should use; a
        seed gives a reproducible floating-point draw, for experiments only ("seeded, not for
        release").

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
    return release(value, plan, rng=rng).value


def release(value, plan: NoisePlan, *, rng=None) -> Release:
    """:func:`privatize`, with how the noise was drawn (:class:`Release`).

    Raises
    ------
    TypeError, ValueError, CalibrationError
        As :func:`privatize` (a broken noise scale is refused before anything is drawn).
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
    if rng is not None:
        return Release(arr + plan.sample(rng), SEEDED, None, 0.0)
    scale = plan.coordinate_scale
    if scale is not None:  # Σ_B = S Σ_y S: the grid release of arr / s with Σ_y, times s
        inner = dataclasses.replace(plan, coordinate_scale=None, clip_center=None,
                                    clip_radius=None)
        out = _grid_release(arr / scale, inner)
        return dataclasses.replace(out, value=out.value * scale)
    return _grid_release(arr, plan)


def grid_coordinates(plan: NoisePlan) -> int:
    """``k``, the noisy coordinates of the hardened release of ``plan`` (:func:`privatize`
    without a seed): its MI bound is the plan's plus ``grid_overhead(k)`` nats, and
    ``k <= 2 * plan.dim``."""
    std = np.asarray(plan.noise_std, dtype=np.float64)
    k = int(np.sum(std > 0))
    if plan.basis is not None and plan.n_complement > 0 and plan.residual_std > 0:
        k += plan.dim
    return k


def _grid_release(arr: np.ndarray, plan: NoisePlan) -> Release:
    """The hardened release of the (clipped) ``arr`` with ``plan``'s ``Σ_B`` (no coordinate
    scale): exact discrete Gaussians on declared grids from the OS CSPRNG."""
    src = NoiseSource(None)
    std = np.asarray(plan.noise_std, dtype=np.float64)
    if plan.basis is None:
        out, h, _ = grid_release(arr, std, src)
        return Release(out, src.label, h, grid_overhead(int(np.sum(std > 0))))
    coords = _rmatvec(plan.basis, arr)
    released, h, _ = grid_release(coords, std, src)
    out = _matvec(plan.basis, released)
    k = int(np.sum(std > 0))
    if plan.n_complement > 0:  # directions outside the basis
        rest = arr - _matvec(plan.basis, coords)
        if plan.residual_std > 0:  # isotropic residual noise there: a grid release of the
            # rest on the coordinate axes, projected onto the complement (post-processing)
            r_released, r_h, _ = grid_release(rest, np.full(plan.dim, plan.residual_std), src)
            out = out + r_released - _matvec(plan.basis, _rmatvec(plan.basis, r_released))
            h = np.concatenate([h, r_h])
            k += plan.dim
        else:  # no noise there: every world agrees (the plan's premise)
            out = out + rest
    return Release(out, src.label, h, grid_overhead(k))
