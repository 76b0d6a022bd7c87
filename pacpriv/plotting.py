"""Matplotlib figures for pacpriv reports (extra ``plot``: ``pip install pacpriv[plot]``).

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot (no global
figure registry, no GUI backend: PNG output goes through Agg), so figures can be made in
worker threads and are freed with the object. :func:`figure_to_data_uri` turns one into a
``data:image/png;base64,...`` URI for a self-contained HTML report.
matplotlib is imported inside the functions: ``import pacpriv`` never imports it.

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy: Automatic Privacy Measurement and Control of Data
   Processing. CRYPTO 2023, arXiv:2210.03458 (Thm 1, Thm 3).
.. [2] Membership-inference accuracy bound for DP-SGD with random allocation (MATH.md §3).
"""

from __future__ import annotations

import base64
import io
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pacpriv._validation import check_int, check_real

__all__ = [
    "COMPARISON_KEYS",
    "figure_to_data_uri",
    "plot_dpsgd_accuracy_vs_sigma",
    "plot_pac_vs_dpsgd",
    "plot_posterior_curve",
    "plot_spectrum",
]

#: Keys of one row of :func:`plot_pac_vs_dpsgd` (``method`` required, the rest may be None).
COMPARISON_KEYS = ("method", "noise", "test_accuracy", "accuracy_bound", "attack_accuracy")


def _figure(n_axes: int = 1, *, width: float = 6.4, height: float = 4.0):
    """A pyplot-free Figure with ``n_axes`` side-by-side axes (lazy matplotlib import)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as err:  # pragma: no cover - exercised with a monkeypatched import
        raise ImportError(
            "pacpriv figures need matplotlib: pip install pacpriv[plot]"
        ) from err
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = [fig.add_subplot(1, n_axes, i + 1) for i in range(n_axes)]
    return fig, axes


def figure_to_data_uri(fig, *, dpi: int = 100) -> str:
    """Encode a figure as a ``data:image/png;base64,...`` URI (for ``<img src=...>``).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    dpi : int, default 100
        Resolution of the PNG (``>= 10``).

    Returns
    -------
    str
    """
    dpi = check_int(dpi, "dpi", low=10)
    if not hasattr(fig, "savefig"):
        raise TypeError(f"`fig` must be a matplotlib Figure; got {type(fig).__name__}.")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


# ----------------------------------------------------------------------------- PAC spectrum
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
        "coordinate": plan.basis is None and plan.rule != "isotropic",
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
    label = "coordinate variance Σ_jj" if a["coordinate"] else "eigenvalue λ_j of Σ"
    x_sig = np.arange(1, signal.size + 1)
    pos = signal > 0
    ax.plot(x_sig[pos], signal[pos], "o-", ms=3, label=label)
    x_noise = np.arange(1, noise_var.size + 1)
    ax.plot(x_noise, noise_var, "s-", ms=3, label="noise variance s_j²")
    if a["residual_std"] > 0:
        ax.axhline(a["residual_std"] ** 2, ls="--", color="grey",
                   label="noise variance, other directions")
    if np.any(pos) or np.any(noise_var > 0):
        ax.set_yscale("log")
    ax.set_xlabel("coordinate j" if a["coordinate"] else "direction j (descending λ)")
    ax.set_ylabel("variance (output units²)")
    ax.set_title(f"Output spectrum and noise (rule: {a['rule']})")
    ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    return fig


# ----------------------------------------------------------------------------- posterior
def plot_posterior_curve(mi_budget: float, *, prior: float = 0.5, v_min: float | None = None,
                         v_max: float | None = None, n_points: int = 200):
    """Posterior success bound and Pinsker's bound against the MI budget ``v`` (log x).

    Parameters
    ----------
    mi_budget : float
        The chosen budget ``v > 0`` (nats), marked on the curve.
    prior : float, default 0.5
        Blind-guess success rate ``p0`` in ``(0, 1)``.
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
    from pacpriv.pac.posterior import pinsker_bound, posterior_success_rate

    v = check_real(mi_budget, "mi_budget", low=0.0, low_inclusive=False)
    p0 = check_real(prior, "prior", low=0.0, high=1.0, low_inclusive=False,
                    high_inclusive=False)
    n_points = check_int(n_points, "n_points", low=2)
    lo = min(v, 1e-4) / 10 if v_min is None else check_real(v_min, "v_min", low=0.0,
                                                             low_inclusive=False)
    hi = max(10 * v, -2 * math.log(p0)) if v_max is None else check_real(v_max, "v_max")
    if not hi > lo:
        raise ValueError(f"`v_max` must be > `v_min`; got v_min={lo!r}, v_max={hi!r}.")
    grid = np.geomspace(lo, hi, n_points)
    fig, (ax,) = _figure()
    ax.plot(grid, posterior_success_rate(grid, prior=p0), label="posterior bound (KL, Thm 1)")
    ax.plot(grid, pinsker_bound(grid, prior=p0), "--", label="Pinsker bound (looser)")
    ax.axhline(p0, color="grey", lw=0.8, label=f"prior {p0:g}")
    p_star = posterior_success_rate(v, prior=p0)
    ax.plot([v], [p_star], "o", color="C3", ms=7, label=f"chosen v = {v:.4g}: {p_star:.4f}")
    ax.set_xscale("log")
    ax.set_xlabel("mutual-information budget v (nats)")
    ax.set_ylabel("posterior success rate bound")
    ax.set_ylim(min(p0, 0.5) - 0.02, 1.02)
    ax.set_title("Adversary's success bound vs MI budget")
    ax.legend(fontsize="small", loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
    return fig


# ----------------------------------------------------------------------------- DP-SGD
def _exact_interval(sigmas: np.ndarray, steps_per_epoch: int, epochs: int, *,
                    time_budget: float = 10.0, tolerance: float = 2e-3):
    """``(sigmas_done, lower, upper)`` of the certified exact accuracy, or None if unavailable.

    Evaluated from the largest σ down (the cost grows steeply as σ falls); stops once
    ``time_budget`` seconds are spent or one point took more than a fifth of it.
    """
    try:
        from pacpriv.dpsgd.exact import exact_membership_inference_accuracy
    except ImportError:
        return None
    done, lower, upper = [], [], []
    start = time.perf_counter()
    for s in sorted((float(x) for x in sigmas), reverse=True):
        t0 = time.perf_counter()
        res = exact_membership_inference_accuracy(
            s, steps_per_epoch=steps_per_epoch, epochs=epochs, tolerance=tolerance)
        done.append(s)
        lower.append(res.lower)
        upper.append(res.upper)
        now = time.perf_counter()
        if now - start > time_budget or now - t0 > time_budget / 5:
            break
    order = np.argsort(done)
    return np.asarray(done)[order], np.asarray(lower)[order], np.asarray(upper)[order]


def _comparator_curves(sigmas: np.ndarray, steps_per_epoch: int, epochs: int) -> dict:
    """``{name: accuracies}`` from pacpriv.dpsgd.comparators (cheap ones only), else ``{}``."""
    try:
        from pacpriv.dpsgd import comparators
    except ImportError:
        return {}
    func = getattr(comparators, "comparator_accuracy_curves", None)
    if func is None:
        return {}
    curves = func(sigmas, steps_per_epoch=steps_per_epoch, epochs=epochs)
    return {str(k): np.asarray(v, dtype=float) for k, v in dict(curves).items()}


def _readable_log_ticks(ax, lo: float, hi: float) -> None:
    """Plain-number major ticks (1-2-5 series) on a log x axis, no minor labels."""
    from matplotlib.ticker import NullFormatter

    ticks = [m * 10.0**k for k in range(-3, 4) for m in (1, 2, 5) if lo <= m * 10.0**k <= hi]
    if len(ticks) >= 2:
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())


def plot_dpsgd_accuracy_vs_sigma(
    *,
    steps_per_epoch: int,
    epochs: int,
    noise_multiplier: float | None = None,
    sigma_min: float = 0.3,
    sigma_max: float = 10.0,
    n_points: int = 60,
    n_exact: int = 10,
    exact: bool = True,
    comparators: bool = True,
    exact_max_bound: float = 0.75,
    exact_time_budget: float = 10.0,
):
    """Membership-inference accuracy bound vs noise multiplier σ for random-allocation DP-SGD.

    Parameters
    ----------
    steps_per_epoch, epochs : int
        ``M >= 1`` steps per epoch and ``E >= 1`` epochs.
    noise_multiplier : float, optional
        A chosen σ to mark on the curves.
    sigma_min, sigma_max : float, default 0.3, 10
        Range of σ (log x axis), ``0 < sigma_min < sigma_max``.
    n_points : int, default 60
        Points of the chi-square closed-form curve.
    n_exact : int, default 10
        Log-spaced σ of the exact (certified interval) curve, the costly one; 0 skips it.
    exact_max_bound : float, default 0.75
        The exact curve is drawn only where the chi-square bound is ``<= exact_max_bound``
        (its cost grows steeply as σ falls, where both bounds approach 1).
    exact_time_budget : float, default 10
        Seconds to spend on the exact curve, evaluated from the largest σ down; smaller σ are
        left out once it is spent.
    exact, comparators : bool, default True
        Draw the exact interval from :mod:`pacpriv.dpsgd.exact` and the comparator curves from
        :mod:`pacpriv.dpsgd.comparators` if those modules are available (skipped silently
        otherwise).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError, ValueError
        On invalid arguments.

    References
    ----------
    .. [1] MATH.md §3: ``accuracy <= ½ + ¼ sqrt((1 + (e^{1/σ²} − 1)/M)^E − 1)``; exact
       ``½ + ½ TV(P^⊗E, Q^⊗E)``.
    """
    from pacpriv.dpsgd.bounds import membership_inference_accuracy_bound

    m = check_int(steps_per_epoch, "steps_per_epoch", low=1)
    e = check_int(epochs, "epochs", low=1)
    lo = check_real(sigma_min, "sigma_min", low=0.0, low_inclusive=False)
    hi = check_real(sigma_max, "sigma_max", low=lo, low_inclusive=False)
    n_points = check_int(n_points, "n_points", low=2)
    n_exact = check_int(n_exact, "n_exact", low=0)
    exact_max_bound = check_real(exact_max_bound, "exact_max_bound", low=0.5, high=1.0)
    exact_time_budget = check_real(exact_time_budget, "exact_time_budget", low=0.0)
    sigmas = np.geomspace(lo, hi, n_points)
    fig, (ax,) = _figure()
    chi = membership_inference_accuracy_bound(sigmas, steps_per_epoch=m, epochs=e).accuracy
    ax.plot(sigmas, chi, label="chi-square closed form")
    if exact and n_exact >= 1:
        s_exact = np.geomspace(lo, hi, n_exact)
        bound_at = membership_inference_accuracy_bound(s_exact, steps_per_epoch=m,
                                                       epochs=e).accuracy
        s_exact = s_exact[bound_at <= exact_max_bound]
        interval = _exact_interval(s_exact, m, e, time_budget=exact_time_budget)
        if interval is not None and interval[0].size:
            s_done, low, up = interval
            ax.fill_between(s_done, low, up, color="C1", alpha=0.35)
            ax.plot(s_done, up, "o-", color="C1", ms=3,
                    label="exact ½ + ½ TV (certified interval)")
    if comparators:
        for i, (name, acc) in enumerate(_comparator_curves(sigmas, m, e).items()):
            ax.plot(sigmas, acc, ":", color=f"C{i + 2}", label=name)
    if noise_multiplier is not None:
        s = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_inclusive=False)
        b = membership_inference_accuracy_bound(s, steps_per_epoch=m, epochs=e).accuracy
        ax.axvline(s, color="grey", lw=0.8)
        ax.plot([s], [b], "o", color="C3", label=f"σ = {s:.4g}: chi-square {b:.4f}")
    ax.set_xscale("log")
    _readable_log_ticks(ax, lo, hi)
    ax.set_ylim(0.48, 1.02)
    ax.set_xlabel("noise multiplier σ")
    ax.set_ylabel("membership-inference accuracy bound")
    ax.set_title(f"Random-allocation DP-SGD, M = {m}, E = {e}")
    ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    return fig


# ----------------------------------------------------------------------------- comparison
def _check_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Sequence):
        raise TypeError(f"`rows` must be a list of dicts; got {type(rows).__name__}.")
    if not rows:
        raise ValueError("`rows` must hold at least one row; got an empty list.")
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping) or "method" not in row:
            raise ValueError(f"`rows[{i}]` must be a dict with a 'method' key; got {row!r}.")
        unknown = set(row) - set(COMPARISON_KEYS)
        if unknown:
            raise ValueError(f"`rows[{i}]` has unknown keys {sorted(unknown)}; "
                             f"allowed: {', '.join(COMPARISON_KEYS)}.")
        out.append({k: row.get(k) for k in COMPARISON_KEYS})
    return out


def plot_pac_vs_dpsgd(rows: Sequence[Mapping[str, Any]]):
    """Bar charts comparing methods (e.g. PAC noise vs DP-SGD) on one comparison table.

    Parameters
    ----------
    rows : list of dict
        One dict per method with keys (:data:`COMPARISON_KEYS`):

        * ``method`` (str, required): label of the bar group.
        * ``noise`` (float or None): the noise the method adds, e.g. total PAC noise std
          ``sqrt(E||B||²)`` or the DP-SGD noise multiplier σ (units differ: compare within
          a method family).
        * ``test_accuracy`` (float or None): utility, test accuracy in ``[0, 1]``.
        * ``accuracy_bound`` (float or None): membership-inference accuracy bound.
        * ``attack_accuracy`` (float or None): measured membership-attack accuracy.

        ``None`` (or a missing key) leaves that bar out.

    Returns
    -------
    matplotlib.figure.Figure
        Three panels: noise; test accuracy; bound and measured attack accuracy side by side.

    Raises
    ------
    TypeError, ValueError
        If ``rows`` is not a non-empty list of dicts with ``method`` and known keys only.
    """
    rows = _check_rows(rows)
    names = [str(r["method"]) for r in rows]
    x = np.arange(len(rows))
    fig, axes = _figure(3, width=11.0, height=3.8)

    def bars(ax, key, offset=0.0, width=0.8, **kw):
        vals = [r[key] for r in rows]
        keep = [i for i, v in enumerate(vals) if v is not None]
        return ax.bar(x[keep] + offset, [float(vals[i]) for i in keep], width, **kw)

    bars(axes[0], "noise", color="C0")
    axes[0].set_title("noise (σ or total noise std)")
    bars(axes[1], "test_accuracy", color="C2")
    axes[1].set_title("test accuracy")
    bars(axes[2], "accuracy_bound", -0.2, 0.4, color="C3", label="MIA accuracy bound")
    bars(axes[2], "attack_accuracy", 0.2, 0.4, color="C1", label="measured attack accuracy")
    axes[2].axhline(0.5, color="grey", lw=0.8)
    axes[2].set_ylim(0.0, 1.05)
    axes[2].set_title("membership inference")
    axes[2].legend(fontsize="small")
    for ax in axes:
        ax.set_xticks(x, names, rotation=20, ha="right", fontsize="small")
        ax.grid(True, axis="y", alpha=0.3)
    return fig
