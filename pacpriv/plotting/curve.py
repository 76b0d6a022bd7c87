"""Figure of the trade-off curve: test accuracy against the membership-inference bound."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pacpriv.plotting._figure import _figure

__all__ = ["CURVE_KEYS", "plot_privacy_utility_curve"]

#: Keys of one point of :func:`plot_privacy_utility_curve` (all required).
CURVE_KEYS = ("method", "accuracy_bound", "test_accuracy", "test_accuracy_std")
_STYLE = {"PAC, per record": ("C2", "o"), "PAC, whole subset": ("C1", "s"),
          "DP-SGD, exact sigma": ("C0", "^")}


def _checked(points: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    if not isinstance(points, Sequence) or not points:
        raise ValueError("`points` must be a non-empty list of dicts.")
    for p in points:
        if not isinstance(p, Mapping) or set(p) != set(CURVE_KEYS):
            raise ValueError(f"each point must have exactly the keys {CURVE_KEYS}.")
        values = [p[k] for k in CURVE_KEYS[1:]]
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
            raise ValueError("accuracy_bound, test_accuracy and test_accuracy_std must be "
                             "finite numbers.")
    return list(points)


def plot_privacy_utility_curve(points: Sequence[Mapping[str, Any]], *,
                               baseline: float | None = None, majority: float | None = None):
    """Test accuracy (± sd error bars) against the membership-inference bound, one line per
    method.

    Parameters
    ----------
    points : list of dict
        Keys :data:`CURVE_KEYS`: ``method`` (str; a line per method), ``accuracy_bound`` (x,
        in (½, 1]), ``test_accuracy`` (y, in [0, 1]) and ``test_accuracy_std`` (error bar,
        ≥ 0).
    baseline : float, optional
        Test accuracy of the non-private model (dashed line).
    majority : float, optional
        Test accuracy of the majority class (dotted line).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If ``points`` is empty or a point has missing, extra or non-finite values.
    """
    points = _checked(points)
    fig, (ax,) = _figure(1, width=6.4, height=4.2)
    for i, method in enumerate(dict.fromkeys(str(p["method"]) for p in points)):
        group = sorted((p for p in points if p["method"] == method),
                       key=lambda p: float(p["accuracy_bound"]))
        color, marker = _STYLE.get(method.split(" (")[0], (f"C{3 + i}", "D"))
        ax.errorbar([float(p["accuracy_bound"]) for p in group],
                    [float(p["test_accuracy"]) for p in group],
                    yerr=[float(p["test_accuracy_std"]) for p in group], color=color,
                    marker=marker, capsize=3, lw=1.2, label=method)
    if baseline is not None:
        ax.axhline(float(baseline), color="black", ls="--", lw=0.9,
                   label="non-private (no guarantee)")
    if majority is not None:
        ax.axhline(float(majority), color="grey", ls=":", lw=0.9, label="majority class")
    ax.set_xlabel("membership-inference accuracy bound (certified)")
    ax.set_ylabel("test accuracy (mean ± sd)")
    ax.set_title("Utility vs membership bound: PAC beside DP-SGD", fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="lower right")
    return fig
