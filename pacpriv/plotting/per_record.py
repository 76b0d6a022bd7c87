"""Histogram of per-record membership exposure (informed adversary).

References
----------
.. [1] H. Xiao, S. Devadas. PAC Privacy. CRYPTO 2023, §2 (individual privacy).
"""

from __future__ import annotations

import numpy as np

from pacpriv._validation import check_array_real, check_real
from pacpriv.plotting._figure import _figure

__all__ = ["plot_per_record_histogram"]


def plot_per_record_histogram(accuracy_upper=None, *, target_accuracy: float | None = None,
                              baseline: float = 0.5, bins: int = 30,
                              histogram: dict | None = None):
    """Histogram of per-record accuracy upper bounds, with the target and the blind guess.

    Parameters
    ----------
    accuracy_upper : array_like of shape (k,), optional
        Certified per-record upper bounds in ``[baseline, 1]`` (values only, no indices).
    histogram : dict, optional
        Instead of the values: ``{"edges": (b + 1,), "counts": (b,)}`` (what a report holds:
        counts of records per bin, no per-record value).
    target_accuracy : float, optional
        Calibration target, drawn as a vertical line.
    baseline : float, default 0.5
        Blind-guess accuracy ``max(q, 1 − q)``, drawn dotted.
    bins : int, default 30
        Number of bins.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If values are outside ``[0, 1]`` or the array is empty.
    ImportError
        Without matplotlib (``pip install pacpriv[plot]``).
    """
    base = check_real(baseline, "baseline", low=0.0, high=1.0)
    fig, axes = _figure(1)
    ax = axes[0]
    if histogram is not None:
        edges = check_array_real(histogram["edges"], "histogram edges", low=0.0, high=1.0)
        counts = np.asarray(histogram["counts"], dtype=np.int64)
        if counts.size == 0 or edges.size != counts.size + 1:
            raise ValueError("`histogram` must hold b counts and b + 1 edges (b >= 1).")
        ax.stairs(counts, edges, fill=True, color="#4a7ab5")
        n = int(counts.sum())
    else:
        acc = check_array_real(accuracy_upper, "accuracy_upper", low=0.0, high=1.0).ravel()
        if acc.size == 0:
            raise ValueError("`accuracy_upper` must hold at least one value.")
        hi = max(float(acc.max()), target_accuracy or 0.0)
        ax.hist(acc, bins=np.linspace(base, min(1.0, hi + 0.02), bins + 1), color="#4a7ab5",
                edgecolor="white")
        n = int(acc.size)
    ax.axvline(base, color="grey", linestyle=":", label=f"blind guess {base:.2f}")
    if target_accuracy is not None:
        t = check_real(target_accuracy, "target_accuracy", low=0.0, high=1.0)
        ax.axvline(t, color="#c0392b", linewidth=2, label=f"target {t:.3f}")
    ax.set_xlabel("informed-adversary accuracy, certified upper bound per record")
    ax.set_ylabel("records")
    ax.set_title(f"Per-record membership exposure ({n} records)")
    ax.legend(loc="upper right")
    return fig
