"""DP-SGD and PAC-vs-DP-SGD figures (public names exported by :mod:`pacpriv.plotting`).

References
----------
.. [1] Membership-inference accuracy bound for DP-SGD with random allocation
   (RA-MIA, CWI / VU Amsterdam), chi-square closed form.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pacpriv._numbers import format_bound
from pacpriv._validation import check_int, check_real
from pacpriv.dpsgd.bounds import membership_inference_accuracy_bound
from pacpriv.dpsgd.comparators import ckp_accuracy, gdp_clt_accuracy
from pacpriv.dpsgd.exact import exact_membership_inference_accuracy
from pacpriv.plotting._figure import _figure

__all__ = ["COMPARISON_KEYS", "plot_dpsgd_accuracy_vs_sigma", "plot_pac_vs_dpsgd"]

#: Keys of one row of :func:`plot_pac_vs_dpsgd` (``method`` required, the rest may be None).
COMPARISON_KEYS = ("method", "noise", "test_accuracy", "accuracy_bound", "attack_accuracy")


def _exact_interval(sigmas: np.ndarray, steps_per_epoch: int, epochs: int, *,
                    time_budget: float = 30.0, tolerance: float = 1e-3):
    """``(sigmas_done, lower, upper)`` of the certified exact accuracy over σ.

    Array calls of :func:`exact_membership_inference_accuracy` (work shared across the grid,
    one progress bar), in chunks from the largest σ down; stops once ``time_budget`` seconds
    are spent (each evaluation has bounded time and memory).
    """
    order = np.sort(np.asarray(sigmas, dtype=float))[::-1]
    done, lower, upper = [], [], []
    start = time.perf_counter()
    for chunk in np.array_split(order, max(1, int(np.ceil(order.size / 8)))):
        if chunk.size == 0:
            continue
        res = exact_membership_inference_accuracy(
            chunk, steps_per_epoch=steps_per_epoch, epochs=epochs, tolerance=tolerance)
        done.extend(chunk.tolist())
        lower.extend(np.atleast_1d(res.lower).tolist())
        upper.extend(np.atleast_1d(res.upper).tolist())
        if time.perf_counter() - start > time_budget:
            break
    idx = np.argsort(done)
    return np.asarray(done)[idx], np.asarray(lower)[idx], np.asarray(upper)[idx]


def _comparator_curves(sigmas: np.ndarray, steps_per_epoch: int, epochs: int) -> dict:
    """``{label: accuracies}`` of the closed-form comparators (cheap), ``{}`` if unavailable.

    Both are approximations that may understate the risk (they are drawn dotted); the
    accountant-based comparators of :func:`pacpriv.dpsgd.compare_accountants` are too slow for
    a curve.
    """
    funcs = {"CKP leading term (approximation)": ckp_accuracy,
             "GDP CLT (approximation)": gdp_clt_accuracy}
    return {
        label: np.array([f(float(s), steps_per_epoch=steps_per_epoch, epochs=epochs)
                         for s in sigmas])
        for label, f in funcs.items()
    }


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
    n_exact: int = 24,
    exact: bool = True,
    comparators: bool = True,
    exact_max_bound: float = 1.0,
    exact_time_budget: float = 30.0,
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
    n_exact : int, default 24
        Log-spaced σ of the exact (certified interval) curve over the whole σ range; 0 skips
        it. Each point has bounded time and memory (certified screens pin small σ at once).
    exact_max_bound : float, default 1.0
        The exact curve is drawn only where the chi-square bound is ``<= exact_max_bound``
        (1.0: everywhere).
    exact_time_budget : float, default 30
        Seconds to spend on the exact curve, evaluated in chunks from the largest σ down;
        smaller σ are left out once it is spent.
    exact, comparators : bool, default True
        Draw the certified exact interval (:mod:`pacpriv.dpsgd.exact`) and the closed-form
        comparators of :mod:`pacpriv.dpsgd.comparators` (CKP leading term, GDP CLT: dotted,
        approximations that may understate the risk).

    Returns
    -------
    matplotlib.figure.Figure
        One axis: accuracy bound (y) against σ (x, log scale).

    Raises
    ------
    TypeError, ValueError
        On invalid arguments.

    References
    ----------
    .. [1] RA-MIA (DP-SGD with random allocation):
       ``accuracy <= ½ + ¼ sqrt((1 + (e^{1/σ²} − 1)/M)^E − 1)``; exact
       ``½ + ½ TV(P^⊗E, Q^⊗E)``.
    """

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
        # bounds rounded upward, as in every table (pacpriv._numbers.format_bound)
        label = f"σ = {format_bound(s, 4)}: chi-square {format_bound(b, 4, side='up')}"
        point = _exact_interval(np.array([s]), m, e) if exact and b <= exact_max_bound else None
        if point is not None:
            ax.plot([s], point[2], "D", color="C1", ms=6)
            label += f", exact ≤ {format_bound(float(point[2][0]), 4, side='up')}"
        ax.axvline(s, color="grey", lw=0.8)
        ax.plot([s], [b], "o", color="C3", label=label)
    ax.set_xscale("log")
    _readable_log_ticks(ax, lo, hi)
    ax.set_ylim(0.48, 1.02)
    ax.set_xlabel("noise multiplier σ")
    ax.set_ylabel("membership-inference accuracy bound")
    ax.set_title(f"Random-allocation DP-SGD, M = {m}, E = {e}")
    ax.legend(fontsize="small")
    ax.grid(True, which="major", alpha=0.3)
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
        Three panels of horizontal bars (one row per method, first on top, values printed):
        noise; test accuracy; bound and measured attack accuracy side by side.

    Raises
    ------
    TypeError, ValueError
        If ``rows`` is not a non-empty list of dicts with ``method`` and known keys only.
    """
    rows = _check_rows(rows)
    names = [str(r["method"]) for r in rows]
    y = np.arange(len(rows))
    fig, axes = _figure(3, width=11.0, height=1.6 + 0.45 * len(rows))

    def bars(ax, key, offset=0.0, height=0.8, **kw):
        vals = [r[key] for r in rows]
        keep = [i for i, v in enumerate(vals) if v is not None]
        widths = [float(vals[i]) for i in keep]
        ax.barh(y[keep] + offset, widths, height, **kw)
        for i, w in zip(keep, widths, strict=True):
            ax.annotate(f"{w:.3g}", (w, y[i] + offset), xytext=(2, 0),
                        textcoords="offset points", va="center", fontsize="x-small")

    bars(axes[0], "noise", color="C0")
    axes[0].set_title("noise")
    bars(axes[1], "test_accuracy", color="C2")
    axes[1].set_title("test accuracy")
    axes[1].set_xlim(0.0, 1.12)
    bars(axes[2], "accuracy_bound", -0.2, 0.4, color="C3", label="MIA accuracy bound")
    bars(axes[2], "attack_accuracy", 0.2, 0.4, color="C1", label="measured attack accuracy")
    axes[2].axvline(0.5, color="grey", lw=0.8)
    axes[2].set_xlim(0.0, 1.12)
    axes[2].set_title("membership inference")
    axes[2].legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.12),
                   ncol=2)
    for i, ax in enumerate(axes):
        ax.set_yticks(y, names if i == 0 else [""] * len(names), fontsize="small")
        ax.invert_yaxis()  # first row on top
        ax.grid(True, axis="x", alpha=0.3)
    return fig
