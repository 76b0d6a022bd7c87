"""PAC Privacy figures: the output spectrum with its noise, and the posterior-success curve.

Public names are exported by :mod:`pacpriv.plotting`.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy: Automatic Privacy Measurement and Control of Data
   Processing. CRYPTO 2023, arXiv:2210.03458 (Thm 1, Thm 3).
.. [2] Membership-inference accuracy bound for DP-SGD with random allocation
   (RA-MIA, CWI / VU Amsterdam), chi-square closed form.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

import numpy as np

from pacpriv._numbers import format_bound
from pacpriv._validation import check_int, check_real
from pacpriv.pac.bounds._posterior import (
    check_membership_prior,
    pinsker_bound,
    posterior_success_rate,
)
from pacpriv.plotting._figure import _figure

__all__ = ["plot_posterior_curve", "plot_spectrum"]

# ----------------------------------------------------------------------------- PAC spectrum
#: Largest budget on the posterior curve's axis: log-scale limits beyond it overflow.
_V_PLOT_MAX = 1e200

def _spectrum_arrays(source, plan) -> dict:
    """Eigenvalues / variances and noise std from objects, a PacResult or a report dict."""
    if isinstance(source, Mapping):  # report dict from pacpriv.report.build_report
        spec, noise = source.get("spectrum", {}), source.get("noise", {})
        if "eigenvalues" not in spec or "noise_std" not in noise:
            raise ValueError(
                "report dict lacks spectrum['eigenvalues'] / noise['noise_std'] "
                "(build it with pacpriv.report.build_report)."
            )
        return {
            "rule": noise.get("rule"),
            "eigenvalues": np.asarray(spec["eigenvalues"], dtype=float),
            "variances": np.asarray(spec.get("coordinate_variances", []), dtype=float),
            "noise_std": np.asarray(noise["noise_std"], dtype=float),
            "residual_std": float(noise.get("residual_std") or 0.0),
            "coordinate": noise.get("basis") == "coordinate",
        }
    if hasattr(source, "spectrum") and hasattr(source, "plan"):  # PacResult
        source, plan = source.spectrum, source.plan if plan is None else plan
    if plan is None or not hasattr(source, "eigenvalues") or not hasattr(plan, "noise_std"):
        raise TypeError(
            "`spectrum_or_report` must be a PacResult, a report dict, or an OutputSpectrum "
            f"given with `plan` (a NoisePlan); got {type(source).__name__} and "
            f"{type(plan).__name__}."
        )
    return {
        "rule": plan.rule,
        "eigenvalues": np.asarray(source.eigenvalues, dtype=float),
        "variances": np.asarray(source.variances, dtype=float),
        "noise_std": np.asarray(plan.noise_std, dtype=float),
        "residual_std": float(plan.residual_std),
        "coordinate": plan.basis is None and not plan.isotropic,
    }


def plot_spectrum(spectrum_or_report, plan=None):
    """Eigenvalues of the output covariance and the per-direction noise variance (log scale).

    Parameters
    ----------
    spectrum_or_report : OutputSpectrum, PacResult or dict
        The estimated spectrum (then ``plan`` is required), a PAC job result, or a report
        dict from :func:`pacpriv.report.build_report` (first ≤ 200 values).
    plan : NoisePlan, optional
        The calibrated noise. For the ``"variance-only"`` rule the x axis is the coordinate
        and the signal is the coordinate variance ``diag(Σ)``; otherwise direction ``j`` is the
        ``j``-th eigenvector (isotropic noise is the same in every direction).

    Returns
    -------
    matplotlib.figure.Figure
        One axes: signal variance (``λ_j`` or ``Σ_jj``), noise variance ``s_j²`` and, if any,
        the residual noise variance in the directions outside the held eigenvectors. Zero
        values are not drawn (log scale).

    Raises
    ------
    TypeError, ValueError
        If the inputs are not one of the accepted kinds.
    ImportError
        Without matplotlib (``pip install pacpriv[plot]``).

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 3 (noise ``s_j² ∝ sqrt(λ_j)``).
    """
    a = _spectrum_arrays(spectrum_or_report, plan)
    signal = a["variances"] if a["coordinate"] else a["eigenvalues"]
    noise_var = a["noise_std"] ** 2
    fig, (ax,) = _figure()
    label = (
        r"coordinate variance $\Sigma_{jj}$"
        if a["coordinate"]
        else r"eigenvalue $\lambda_j$ of $\Sigma$"
    )
    x_sig = np.arange(1, signal.size + 1)
    pos = signal > 0
    ax.plot(x_sig[pos], signal[pos], "o-", ms=3, label=label)
    x_noise = np.arange(1, noise_var.size + 1)
    ax.plot(x_noise, noise_var, "s-", ms=3, label=r"noise variance $s_j^2$")
    if a["residual_std"] > 0:
        ax.axhline(a["residual_std"] ** 2, ls="--", color="grey",
                   label="noise variance, other directions")
    if np.any(pos) or np.any(noise_var > 0):
        # a noise variance near float64's top (a tiny MI budget) makes matplotlib's log-scale
        # margins overflow exp; the axis limit inf it clips is the right one
        with np.errstate(over="ignore"):
            ax.set_yscale("log")
    ax.set_xlabel("coordinate j" if a["coordinate"] else "direction j (descending λ)")
    ax.set_ylabel("variance (output units²)")
    ax.set_title(f"Output spectrum and noise (rule: {a['rule']})")
    ax.legend(fontsize="small")
    ax.grid(True, which="major", alpha=0.3)
    return fig


# ----------------------------------------------------------------------------- posterior
def plot_posterior_curve(mi_budget: float, *, prior: float, v_min: float | None = None,
                         v_max: float | None = None, n_points: int = 200):
    """Posterior success bound and Pinsker's bound against the MI budget ``v`` (log x).

    Parameters
    ----------
    mi_budget : float
        The chosen budget ``v > 0`` (nats), marked on the curve.
    prior : float
        Blind-guess success rate ``p0`` in ``[0.5, 1)`` (required: e.g. ``max(q, 1 − q)`` for
        inclusion probability ``q``, as ``PacResult.blind_guess_prior``).
    v_min, v_max : float, optional
        Range of the x axis in nats (default ``[min(v, 1e-4)/10, max(10 v, 2 ln(1/p0))]``).
    n_points : int, default 200
        Grid size (``>= 2``), log-spaced.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError, ValueError
        On invalid arguments (each message names the argument and range).

    References
    ----------
    .. [1] Xiao & Devadas, PAC Privacy, CRYPTO 2023, Thm 1 (KL inversion) and Cor. 1 (Pinsker).
    """

    v = check_real(mi_budget, "mi_budget", low=0.0, low_inclusive=False)
    if isinstance(prior, bool) or not isinstance(prior, numbers.Real):
        raise TypeError(f"`prior` must be a real number in [0.5, 1); got {type(prior).__name__}.")
    # [0.5, 1): a prior below ½ would draw a curve below 1 − q
    p0 = float(check_membership_prior(prior))
    n_points = check_int(n_points, "n_points", low=2)
    lo = min(v, 1e-4) / 10 if v_min is None else check_real(v_min, "v_min", low=0.0,
                                                             low_inclusive=False)
    # 10·v, capped well below the float range (a budget of 1e308 nats must not overflow)
    hi = (max(min(10 * v, _V_PLOT_MAX), -2 * math.log(p0)) if v_max is None
          else check_real(v_max, "v_max"))
    if not hi > lo:
        raise ValueError(f"`v_max` must be > `v_min`; got v_min={lo!r}, v_max={hi!r}.")
    grid = np.geomspace(lo, hi, n_points)
    fig, (ax,) = _figure()
    ax.plot(grid, posterior_success_rate(grid, prior=p0), label="posterior bound (KL, Thm 1)")
    ax.plot(grid, pinsker_bound(grid, prior=p0), "--", label="Pinsker bound (looser)")
    ax.axhline(p0, color="grey", lw=0.8, label=f"prior {p0:g}")
    p_star = posterior_success_rate(v, prior=p0)
    label = (f"chosen v = {format_bound(v, 6, side='down')}: "
             f"{format_bound(float(p_star), 4, side='up')}")
    # the marker stays inside the plotted range (the label carries the true v)
    ax.plot([min(v, grid[-1])], [p_star], "o", color="C3", ms=7, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("mutual-information budget v (nats)")
    ax.set_ylabel("posterior success rate bound")
    ax.set_ylim(min(p0, 0.5) - 0.02, 1.02)
    ax.set_title("Adversary's success bound vs MI budget")
    ax.legend(fontsize="small", loc="upper left")
    ax.grid(True, which="major", alpha=0.3)
    return fig
