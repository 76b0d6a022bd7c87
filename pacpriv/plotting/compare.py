"""Figure of a matched-bound comparison table (:class:`pacpriv.compare.ComparisonTable`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pacpriv.plotting._figure import _figure

__all__ = ["TABLE_KEYS", "plot_comparison_table"]

#: Keys of one row of :func:`plot_comparison_table`.
TABLE_KEYS = ("dataset", "target_accuracy", "method", "family", "test_accuracy",
              "test_accuracy_std", "bound_label")
_COLORS = {"dpsgd": "C0", "pac": "C2", "none": "C7"}


def _check_table_rows(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    if not isinstance(rows, Sequence) or not rows:
        raise ValueError("`rows` must be a non-empty list of dicts.")
    for r in rows:
        if not isinstance(r, Mapping) or not {"dataset", "target_accuracy", "method",
                                              "test_accuracy"} <= set(r):
            raise ValueError("each row needs dataset, target_accuracy, method and "
                             "test_accuracy.")
        unknown = set(r) - set(TABLE_KEYS)
        if unknown:
            raise ValueError(f"unknown row keys {sorted(unknown)}; allowed: {TABLE_KEYS}.")
    return list(rows)


def plot_comparison_table(rows: Sequence[Mapping[str, Any]]):
    """Test accuracy ± sd of every method, one panel per (dataset, bound).

    Parameters
    ----------
    rows : list of dict
        Keys :data:`TABLE_KEYS` (``dataset``, ``target_accuracy``, ``method`` and
        ``test_accuracy`` required); ``family`` ("dpsgd", "pac", "none") colours the bar.

    Returns
    -------
    matplotlib.figure.Figure
        Horizontal bars (first method on top) with ± sd error bars and the value printed.

    Raises
    ------
    ValueError
        If ``rows`` is empty or a row lacks a required key or has an unknown one.
    """
    rows = _check_table_rows(rows)
    panels: dict[tuple, list] = {}
    for r in rows:
        panels.setdefault((str(r["dataset"]), float(r["target_accuracy"])), []).append(r)
    n_methods = max(len(v) for v in panels.values())
    datasets = list(dict.fromkeys(k[0] for k in panels))
    targets = sorted({k[1] for k in panels})
    fig, _ = _figure(0, width=4.6 * len(targets),
                     height=(1.0 + 0.36 * n_methods) * len(datasets))
    grid = fig.add_gridspec(len(datasets), len(targets))
    axes = []
    for (ds, a), group in panels.items():
        ax = fig.add_subplot(grid[datasets.index(ds), targets.index(a)])
        axes.append(ax)
        y = np.arange(len(group))
        acc = [float(r["test_accuracy"]) for r in group]
        err = [float(r.get("test_accuracy_std") or 0.0) for r in group]
        colors = [_COLORS.get(str(r.get("family", "none")), "C7") for r in group]
        ax.barh(y, acc, 0.7, xerr=err, color=colors, ecolor="black", capsize=2)
        for i, (v, e) in enumerate(zip(acc, err, strict=True)):
            ax.annotate(f"{v:.3f}" + (f" ± {e:.3f}" if e else ""), (v + e, y[i]),
                        xytext=(2, 0), textcoords="offset points", va="center",
                        fontsize="x-small")
        ax.set_yticks(y, [str(r["method"]) for r in group] if targets.index(a) == 0
                      else [""] * len(group), fontsize="x-small")
        ax.invert_yaxis()
        ax.set_xlim(0.0, 1.25)
        ax.set_title(f"{ds}, MIA accuracy <= {a:g}", fontsize="small")
        ax.grid(True, axis="x", alpha=0.3)
        ax.set_xlabel("test accuracy", fontsize="x-small")
    return fig
